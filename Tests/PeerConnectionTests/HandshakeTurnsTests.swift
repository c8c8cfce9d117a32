import Testing

@testable import PeerConnection

/// Whose TLS handshake runs now, driven by hand: hellos, ends and time are the test's.
@Suite("handshake turns: strangers share a few handshakes, refused sources wait, proven sources never do")
struct HandshakeTurnsTests {
    static func source(_ last: UInt8, _ third: UInt8 = 1) -> AdmissionSource { AdmissionSource(addressBytes: [198, 18, third, last]) }
    static let pinned = source(3)
    static func settings(_ limit: Int = 2, penalty: Duration = .seconds(1), longest: Duration = .seconds(30)) -> AdmissionSettings {
        AdmissionSettings(maximumStrangerHandshakes: limit, refusalPenalty: penalty, maximumRefusalPenalty: longest)
    }

    /// An attack under way: keys refused, as fast as they come, at `now`, from sources seen
    /// nowhere else (198.18.X.0-19, X from `firstID`: one /24 for each 10,000).
    static func press(_ turns: inout HandshakeTurns, at now: Duration, firstID: AdmissionControl.ID = 10_000) {
        let third = UInt8(truncatingIfNeeded: 9 + firstID / 10_000)
        for index in 0..<HandshakeTurns.pressureRefusals {
            let id = firstID + AdmissionControl.ID(index)
            #expect(turns.hello(id, from: source(UInt8(index), third), at: now) == .now)
            turns.ended(id, .refused, at: now)
        }
        #expect(turns.isPressed(at: now))
    }

    @Test("strangers share the limit: the next waits, and takes the first turn that frees, first come first served")
    func sharedLimit() {
        var turns = HandshakeTurns(settings: Self.settings(2))
        #expect(turns.hello(1, from: Self.source(50), at: .zero) == .now)
        #expect(turns.hello(2, from: Self.source(51), at: .zero) == .now)
        #expect(turns.hello(3, from: Self.source(52), at: .milliseconds(1)) == .wait)
        #expect(turns.hello(4, from: Self.source(53), at: .milliseconds(2)) == .wait)
        #expect(turns.granted(at: .milliseconds(3)).isEmpty, "nothing ended: no turn is free")
        turns.ended(1, .other, at: .milliseconds(4))
        #expect(turns.granted(at: .milliseconds(4)) == [3])
        turns.forget(2)  // closed while under way
        #expect(turns.granted(at: .milliseconds(5)) == [4])
        #expect(turns.strangersUnderWay == 2)
        #expect(turns.waitingCount == 0)
        let counts = turns.takeCounts()
        #expect(counts.waited == 2 && counts.penalties == 0)
        #expect(turns.takeCounts().waited == 0, "taken")
    }

    @Test("a source that presented a trusted key never waits, however many strangers wait")
    func provenNeverWaits() {
        var turns = HandshakeTurns(settings: Self.settings(1))
        #expect(turns.hello(1, from: Self.pinned, at: .zero) == .now)
        turns.ended(1, .trusted, at: .milliseconds(10))
        #expect(turns.isProven(Self.pinned, at: .seconds(1)))
        #expect(turns.hello(2, from: Self.source(50), at: .seconds(1)) == .now)
        for id in 3..<100 { #expect(turns.hello(AdmissionControl.ID(id), from: Self.source(UInt8(id), 2), at: .seconds(1)) == .wait) }
        #expect(turns.hello(100, from: Self.pinned, at: .seconds(2)) == .now, "the pinned peer goes past 97 waiting strangers")
        #expect(turns.strangersUnderWay == 1, "and does not take a stranger's turn")
        turns.ended(100, .trusted, at: .seconds(2))
        #expect(turns.granted(at: .seconds(2)).isEmpty)
        // Good standing lasts an hour from the last trusted key.
        #expect(turns.isProven(Self.pinned, at: .seconds(2) + HandshakeTurns.provenStanding - .milliseconds(1)))
        #expect(!turns.isProven(Self.pinned, at: .seconds(2) + HandshakeTurns.provenStanding))
    }

    @Test("a refused key makes its source wait, even with turns free: 1 s, then twice as long for each refusal in a row, at most the maximum")
    func refusalPenalty() {
        var turns = HandshakeTurns(settings: Self.settings(8, penalty: .seconds(1), longest: .seconds(4)))
        Self.press(&turns, at: .zero)
        let stranger = Self.source(50)
        var now: Duration = .zero
        var penaltyEnds: Duration = .zero
        for (strike, penalty) in [(1, 1), (2, 2), (3, 4), (4, 4), (5, 4)] {
            let id = AdmissionControl.ID(strike)
            if strike == 1 {
                #expect(turns.hello(id, from: stranger, at: now) == .now)
            } else {
                #expect(turns.hello(id, from: stranger, at: now) == .wait)
                #expect(turns.granted(at: penaltyEnds - .milliseconds(1)).isEmpty)
                #expect(turns.granted(at: penaltyEnds) == [id])
                now = penaltyEnds
            }
            Self.press(&turns, at: now, firstID: 10_000 * AdmissionControl.ID(strike + 1))  // the attack goes on
            turns.ended(id, .refused, at: now)
            penaltyEnds = now + .seconds(penalty)
            #expect(HandshakeTurns.penalty(strikes: strike, settings: turns.settings) == .seconds(penalty))
            #expect(turns.isPenalized(stranger, at: penaltyEnds - .milliseconds(1)))
            #expect(!turns.isPenalized(stranger, at: penaltyEnds))
        }
        // Quiet for longer than the penalty and the maximum: forgotten, the next refusal starts again at 1 s.
        now = penaltyEnds + .seconds(4)
        Self.press(&turns, at: now, firstID: 90_000)
        #expect(turns.hello(100, from: stranger, at: now) == .now)
        turns.ended(100, .refused, at: now)
        #expect(turns.isPenalized(stranger, at: now + .milliseconds(999)))
        #expect(!turns.isPenalized(stranger, at: now + .seconds(1)))
    }

    @Test("a penalized source waits behind strangers that came after it; after its penalty it takes the next free turn in order")
    func penalizedGoLast() {
        var turns = HandshakeTurns(settings: Self.settings(1))
        Self.press(&turns, at: .zero)
        let refused = Self.source(50)
        #expect(turns.hello(1, from: refused, at: .zero) == .now)
        turns.ended(1, .refused, at: .zero)
        #expect(turns.hello(2, from: refused, at: .milliseconds(10)) == .wait)
        #expect(turns.hello(3, from: Self.source(60), at: .milliseconds(20)) == .now, "a turn is free and the only one waiting is penalized")
        #expect(turns.hello(4, from: Self.source(61), at: .milliseconds(30)) == .wait)
        turns.ended(3, .other, at: .milliseconds(40))
        #expect(turns.granted(at: .milliseconds(40)) == [4], "the newer stranger goes before the penalized one")
        turns.ended(4, .other, at: .seconds(2))
        #expect(turns.granted(at: .seconds(2)) == [2], "its penalty is over")
    }

    @Test("a stranger that proves a trusted key while another connection of its source waits lets that one go at once")
    func provenMeanwhile() {
        var turns = HandshakeTurns(settings: Self.settings(2))
        #expect(turns.hello(1, from: Self.source(50), at: .zero) == .now)
        #expect(turns.hello(2, from: Self.pinned, at: .zero) == .now)  // not proven yet: a stranger's turn
        #expect(turns.hello(3, from: Self.source(51), at: .zero) == .wait)
        #expect(turns.hello(4, from: Self.pinned, at: .milliseconds(1)) == .wait)
        turns.ended(2, .trusted, at: .milliseconds(5))
        #expect(turns.granted(at: .milliseconds(5)) == [4, 3], "the proven source at once, then the freed turn to the next stranger")
        #expect(turns.strangersUnderWay == 2)
    }

    @Test("a refused key from a source in good standing (a NAT shared with a pinned peer) does not make the source wait")
    func provenKeepsStanding() {
        var turns = HandshakeTurns(settings: Self.settings(1))
        #expect(turns.hello(1, from: Self.pinned, at: .zero) == .now)
        turns.ended(1, .trusted, at: .zero)
        Self.press(&turns, at: .seconds(1))
        #expect(turns.hello(2, from: Self.pinned, at: .seconds(1)) == .now)
        turns.ended(2, .refused, at: .seconds(1))
        #expect(!turns.isPenalized(Self.pinned, at: .seconds(1)))
        #expect(turns.hello(3, from: Self.pinned, at: .seconds(1)) == .now)
    }

    @Test("refused keys slower than an attack (a person retrying, a test) and loopback sources: no penalty")
    func noPenaltyWithoutPressure() {
        var turns = HandshakeTurns(settings: Self.settings(1))
        let person = Self.source(50)
        for index in 0..<(HandshakeTurns.pressureRefusals - 1) {
            let id = AdmissionControl.ID(index)
            #expect(turns.hello(id, from: person, at: .seconds(index)) == .now)
            turns.ended(id, .refused, at: .seconds(index))
            #expect(!turns.isPenalized(person, at: .seconds(index)))
        }
        // 20 within 10 s: an attack.
        for index in 0..<HandshakeTurns.pressureRefusals {
            let id = AdmissionControl.ID(100 + index)
            _ = turns.hello(id, from: Self.source(UInt8(index), 9), at: .seconds(30))
            turns.ended(id, .refused, at: .seconds(30))
        }
        #expect(turns.isPressed(at: .seconds(30)))
        #expect(!turns.isPenalized(Self.source(18, 9), at: .seconds(30)), "refused before the 20th within 10 s")
        #expect(turns.isPenalized(Self.source(19, 9), at: .seconds(30)))
        let local = AdmissionSource(addressBytes: [127, 0, 0, 1])
        let localV6 = AdmissionSource(addressBytes: Array(repeating: 0, count: 15) + [1])
        #expect(local.isLoopback && localV6.isLoopback && !person.isLoopback)
        #expect(turns.hello(200, from: local, at: .seconds(30)) == .now)
        turns.ended(200, .refused, at: .seconds(30))
        #expect(!turns.isPenalized(local, at: .seconds(30)))
        #expect(!turns.isPressed(at: .seconds(40)), "10 s without a refusal: calm again")
    }

    @Test("ends told twice, ends of ids never seen, a hello told twice: nothing changes")
    func unknownIDs() {
        var turns = HandshakeTurns(settings: Self.settings(1))
        turns.ended(7, .refused, at: .zero)
        turns.forget(8)
        #expect(turns.hello(1, from: Self.source(50), at: .zero) == .now)
        #expect(turns.hello(1, from: Self.source(50), at: .zero) == .now)
        #expect(turns.strangersUnderWay == 1)
        turns.ended(1, .other, at: .zero)
        turns.ended(1, .refused, at: .zero)
        #expect(!turns.isPenalized(Self.source(50), at: .zero), "the second end was of nothing under way")
        // A connection closed while it waited was never judged: no penalty for its source.
        #expect(turns.hello(2, from: Self.source(51), at: .zero) == .now)
        #expect(turns.hello(3, from: Self.source(52), at: .zero) == .wait)
        turns.ended(3, .refused, at: .zero)
        #expect(!turns.isPenalized(Self.source(52), at: .zero))
        #expect(turns.waitingCount == 0)
    }

    @Test("refusals from more addresses than it remembers: memory stays bounded, good standing is never forgotten")
    func boundedMemory() {
        var turns = HandshakeTurns(settings: Self.settings(1_000_000))
        Self.press(&turns, at: .zero)
        #expect(turns.hello(0, from: Self.pinned, at: .zero) == .now)
        turns.ended(0, .trusted, at: .zero)
        var id: AdmissionControl.ID = 1
        for third in 0..<40 {
            for last in 0...255 {
                let source = Self.source(UInt8(last), UInt8(100 + third))
                #expect(turns.hello(id, from: source, at: .seconds(1)) == .now)
                turns.ended(id, .refused, at: .seconds(1))
                id += 1
            }
        }
        #expect(turns.rememberedCount <= HandshakeTurns.rememberedSources)
        #expect(turns.isProven(Self.pinned, at: .seconds(1)))
    }
}

/// The turns inside admission: the listener's view.
@Suite("admission with handshake turns")
struct AdmissionTurnsTests {
    static let settings = AdmissionSettings(maximumSettingUp: 4, maximumPerSource: 4, maximumStrangerHandshakes: 1)

    @Test("a connection waiting for its turn that is closed to make room frees its place in the queue; waits and penalties are summed up")
    func waitingMakesRoom() {
        var control = AdmissionControl(settings: Self.settings)
        let first = control.arrived(from: HandshakeTurnsTests.source(50), at: .zero).id
        #expect(control.helloArrived(first, at: .zero) == .now)
        #expect(control.stage(of: first) == .hello)
        let second = control.arrived(from: HandshakeTurnsTests.source(51), at: .zero).id
        #expect(control.helloArrived(second, at: .zero) == .wait)
        #expect(control.stage(of: second) == .hello)
        #expect(control.waitingForTurn == 1)
        // Two silent ones fill the places; then newcomers push out the silent ones, then the
        // oldest with a hello: the first (under way), then the waiting one.
        _ = control.arrived(from: HandshakeTurnsTests.source(52), at: .seconds(1))
        _ = control.arrived(from: HandshakeTurnsTests.source(53), at: .seconds(1))
        for index in 0..<4 { _ = control.arrived(from: HandshakeTurnsTests.source(UInt8(60 + index)), at: .seconds(2)) }
        #expect(control.stage(of: first) == nil && control.stage(of: second) == nil)
        #expect(control.waitingForTurn == 0)
        #expect(control.strangerHandshakes == 0)
        #expect(control.ended(first, failed: true) == .count)
        let summary = control.summary(at: .seconds(10))
        #expect(summary?.waitedTurn == 1)
        #expect(summary?.text.contains("1 waited their turn for a TLS handshake") == true)
    }

    @Test("a refused key: the source's next hello waits for the penalty, then the turn is granted; the summary counts it")
    func refusedThenGranted() {
        var control = AdmissionControl(settings: Self.settings)
        // An attack: keys refused one after another, from 20 sources.
        for index in 0..<HandshakeTurns.pressureRefusals {
            let id = control.arrived(from: HandshakeTurnsTests.source(UInt8(index), 9), at: .zero).id
            #expect(control.helloArrived(id, at: .zero) == .now)
            control.handshakeEnded(id, .refused, at: .zero)
            control.ended(id, failed: true)
        }
        let stranger = HandshakeTurnsTests.source(50)
        let first = control.arrived(from: stranger, at: .zero).id
        #expect(control.helloArrived(first, at: .zero) == .now)
        control.handshakeEnded(first, .refused, at: .milliseconds(5))
        #expect(control.ended(first, failed: true) == .count, "under pressure (a penalty): only counted")
        let second = control.arrived(from: stranger, at: .milliseconds(10)).id
        #expect(control.helloArrived(second, at: .milliseconds(10)) == .wait)
        #expect(control.turnsGranted(at: .milliseconds(500)).isEmpty)
        #expect(control.turnsGranted(at: .milliseconds(1005)) == [second])
        // The pinned peer proves its key: its source never waits again.
        let peer = control.arrived(from: HandshakeTurnsTests.pinned, at: .seconds(2)).id
        #expect(control.helloArrived(peer, at: .seconds(2)) == .wait, "not proven yet, and the only turn is taken")
        control.handshakeEnded(second, .refused, at: .seconds(2))
        #expect(control.turnsGranted(at: .seconds(2)) == [peer])
        control.progressed(peer, to: .proven)
        control.handshakeEnded(peer, .trusted, at: .seconds(2))
        #expect(control.isProven(HandshakeTurnsTests.pinned, at: .seconds(3)))
        let summary = control.summary(at: .seconds(10))
        #expect(summary?.penalized == 3, "the attack's 20th refusal (the first 19 were not yet an attack), then the stranger's two")
        #expect(summary?.waitedTurn == 2)
    }

    @Test("settings: the new limits are checked")
    func problems() {
        #expect(AdmissionSettings(maximumStrangerHandshakes: 0).problem != nil)
        #expect(AdmissionSettings(refusalPenalty: .seconds(-1)).problem != nil)
        #expect(AdmissionSettings(refusalPenalty: .seconds(5), maximumRefusalPenalty: .seconds(1)).problem != nil)
        #expect(AdmissionSettings(refusalPenalty: .zero, maximumRefusalPenalty: .zero).problem == nil)
        #expect(AdmissionSettings().problem == nil)
    }

    @Test("a stranger's turn lasts at most 3 s: eight stalled handshakes from one address cannot keep the next stranger out, and one address holds at most two turns")
    func stalledTurns() {
        var turns = HandshakeTurns(settings: HandshakeTurnsTests.settings(8))
        let staller = HandshakeTurnsTests.source(60)
        // One address sends eight ClientHellos and then nothing: two turns, six wait.
        for id in 1...8 as ClosedRange<AdmissionControl.ID> {
            _ = turns.hello(id, from: staller, at: .zero)
        }
        #expect(turns.strangersUnderWay == 2 && turns.waitingCount == 6)
        // Another stranger (a pairing, say) goes at once: the shared limit still has room.
        #expect(turns.hello(20, from: HandshakeTurnsTests.source(61), at: .milliseconds(5)) == .now)
        turns.ended(20, .other, at: .milliseconds(40))
        // Nothing is overdue before 3 s; at 3 s the two stalled turns are taken back, and the
        // staller's next two take them, held to the same limit.
        #expect(turns.overdue(at: .milliseconds(2999)).isEmpty)
        #expect(turns.overdue(at: .seconds(3)) == [1, 2])
        #expect(turns.granted(at: .seconds(3)) == [3, 4])
        #expect(turns.stalled == 2)
        #expect(turns.overdue(at: .seconds(6)) == [3, 4])
    }

}
