import PeerTrust
import Testing

@testable import ConnectionBroker

/// The early decision of `connect --nearest`, on a manual clock: times are what the broker's
/// clock would read, in milliseconds since browsing began.
@Suite("broker: the nearest peer decided as soon as it is certain")
struct NearestRaceTests {
    static let a = BrokerStateMachineTests.small
    static let b = BrokerStateMachineTests.middle
    static let c = BrokerStateMachineTests.large
    static let v4 = PeerAddress("198.18.1.2")!
    static let v6 = PeerAddress("fe80::2%lan0")!

    static func ms(_ value: Double) -> Duration { .microseconds(Int64((value * 1000).rounded())) }

    /// A race whose answers are due at 130 ms (gathering ends the best RTT and the patience
    /// later) and whose caller gives up at 10 s.
    static func race() -> NearestRace { NearestRace(answersDue: ms(130), deadline: .seconds(10)) }

    /// `peer` joins at `time` with one address, dials it and asks 0.1 ms later.
    static func join(_ race: inout NearestRace, _ peer: PeerID, _ name: String, at time: Double, address: PeerAddress = v4) {
        race.handle(.joined(peer, name: name, addresses: 1), at: ms(time))
        race.handle(.progress(peer, .dialing(address)), at: ms(time))
        race.handle(.progress(peer, .asked(address)), at: ms(time + 0.1))
    }

    @Test("a rival 20 ms farther that has not answered by the end of gathering is not waited for")
    func delayedRival() {
        var race = Self.race()
        Self.join(&race, Self.c, "near", at: 40)
        Self.join(&race, Self.a, "far", at: 60)
        race.handle(.measured(Self.c, rtt: Self.ms(0.3), address: "198.18.1.2"), at: Self.ms(41))
        // Gathering is not over: a nearer peer may still be announced.
        #expect(race.verdict(at: Self.ms(100)) == .wait(until: Self.ms(135.3)))
        guard case .decided(let nearest, let candidates) = race.verdict(at: Self.ms(135.3)) else {
            Issue.record("no verdict at the end of gathering")
            return
        }
        #expect(nearest?.peerID == Self.c)
        #expect(candidates.map(\.name) == ["near", "far"])
        #expect(candidates[1].rtt == nil)
        // It was given the best RTT plus the patience (5 ms): its answer can only come later.
        #expect(candidates[1].rttExceeds == Self.ms(5.3))
    }

    @Test("a rival announced late is given the best RTT plus the patience after its question, and no longer")
    func lateRival() {
        var race = Self.race()
        Self.join(&race, Self.c, "near", at: 40)
        race.handle(.measured(Self.c, rtt: Self.ms(0.3), address: nil), at: Self.ms(41))
        Self.join(&race, Self.b, "late", at: 133)
        // Asked at 133.1: certain once 5.3 ms have passed without an answer, strictly.
        #expect(race.verdict(at: Self.ms(135.3)) == .wait(until: Self.ms(138.4) + .microseconds(1)))
        #expect(race.verdict(at: Self.ms(138.4)) == .wait(until: Self.ms(138.4) + .microseconds(1)))
        guard case .decided(let nearest, _) = race.verdict(at: Self.ms(138.401)) else {
            Issue.record("no verdict once the late rival ran out of time")
            return
        }
        #expect(nearest?.peerID == Self.c)
    }

    @Test("a rival still within the patience is waited for, and the tie rule still applies: the smaller ID wins")
    func tieWithinPatience() {
        var race = Self.race()
        Self.join(&race, Self.c, "c", at: 130)
        Self.join(&race, Self.a, "a", at: 131)
        race.handle(.measured(Self.c, rtt: Self.ms(0.3), address: nil), at: Self.ms(131))
        // a's first answer is slow (the peer setting up its end of the connection): asked at
        // 131.1, it has until 136.4 before it counts as farther.
        #expect(race.verdict(at: Self.ms(135.5)) == .wait(until: Self.ms(136.4) + .microseconds(1)))
        // Its three samples end at 0.4 ms: within 1 ms of c's, a tie that the smaller ID wins.
        race.handle(.measured(Self.a, rtt: Self.ms(0.4), address: nil), at: Self.ms(135.6))
        guard case .decided(let nearest, let ranked) = race.verdict(at: Self.ms(135.6)) else {
            Issue.record("no verdict")
            return
        }
        #expect(nearest?.peerID == Self.a)
        #expect(ranked.map(\.name) == ["a", "c"])
        #expect(ranked.allSatisfy { $0.rttExceeds == nil })
    }

    @Test("every address of a rival must have had its chance: a second address 30 ms later is waited for")
    func secondAddress() {
        var race = Self.race()
        Self.join(&race, Self.c, "near", at: 40)
        race.handle(.measured(Self.c, rtt: Self.ms(0.3), address: nil), at: Self.ms(41))
        race.handle(.joined(Self.a, name: "two addresses", addresses: 2), at: Self.ms(133))
        race.handle(.progress(Self.a, .dialing(Self.v6)), at: Self.ms(133))
        race.handle(.progress(Self.a, .asked(Self.v6)), at: Self.ms(133.1))
        // The IPv4 address is dialed only 30 ms after the IPv6 one: until then it could answer first.
        #expect(race.verdict(at: Self.ms(140)) == .wait(until: .seconds(10)))
        race.handle(.progress(Self.a, .dialing(Self.v4)), at: Self.ms(163))
        // Still connecting: a SYN unanswered for longer than the bound is a path at least that long.
        #expect(race.verdict(at: Self.ms(164)) == .wait(until: Self.ms(168.3) + .microseconds(1)))
        guard case .decided(let nearest, let candidates) = race.verdict(at: Self.ms(168.4)) else {
            Issue.record("no verdict")
            return
        }
        #expect(nearest?.peerID == Self.c)
        #expect(candidates.last?.rttExceeds == Self.ms(5.3))
    }

    @Test("an address that gave up counts as having had its chance")
    func silentAddress() {
        var race = Self.race()
        Self.join(&race, Self.c, "near", at: 40)
        race.handle(.measured(Self.c, rtt: Self.ms(0.3), address: nil), at: Self.ms(41))
        race.handle(.joined(Self.a, name: "refused", addresses: 2), at: Self.ms(100))
        race.handle(.progress(Self.a, .dialing(Self.v6)), at: Self.ms(100))
        race.handle(.progress(Self.a, .silent(Self.v6)), at: Self.ms(100.2))
        race.handle(.progress(Self.a, .dialing(Self.v4)), at: Self.ms(130))
        race.handle(.progress(Self.a, .asked(Self.v4)), at: Self.ms(130.1))
        guard case .decided(let nearest, _) = race.verdict(at: Self.ms(175)) else {
            Issue.record("no verdict")
            return
        }
        #expect(nearest?.peerID == Self.c)
    }

    @Test("a candidate still waiting for a free probe slot (not dialed yet) keeps the verdict open")
    func notYetDialed() {
        var race = Self.race()
        Self.join(&race, Self.c, "near", at: 40)
        race.handle(.measured(Self.c, rtt: Self.ms(0.3), address: nil), at: Self.ms(41))
        race.handle(.joined(Self.a, name: "queued", addresses: 1), at: Self.ms(100))
        #expect(race.verdict(at: Self.ms(500)) == .wait(until: .seconds(10)))
    }

    @Test("ten candidates all measured while gathering: the verdict comes at the end of gathering, by the usual rule")
    func tenCandidates() {
        var race = Self.race()
        var peers: [PeerID] = []
        for index in 0..<10 {
            let peer = BrokerStateMachineTests.id(UInt8(0x20 + index))
            peers.append(peer)
            Self.join(&race, peer, "peer \(index)", at: Double(20 + index * 10))
            race.handle(.measured(peer, rtt: Self.ms(Double(9 - index) * 3 + 0.5), address: nil), at: Self.ms(Double(21 + index * 10)))
        }
        // The best RTT is 0.5 ms: gathering ends 5.5 ms after the answers were due.
        #expect(race.verdict(at: Self.ms(135)) == .wait(until: Self.ms(135.5)))
        guard case .decided(let nearest, let candidates) = race.verdict(at: Self.ms(135.5)) else {
            Issue.record("no verdict")
            return
        }
        #expect(nearest?.peerID == peers[9])
        #expect(candidates.count == 10)
        #expect(candidates.map(\.rtt) == (0..<10).map { Self.ms(Double($0) * 3 + 0.5) })
    }

    @Test("a candidate announced after gathering ended does not join; events about strangers change nothing")
    func afterGathering() {
        var race = Self.race()
        Self.join(&race, Self.c, "near", at: 40)
        // Nothing measured yet: gathering ends 50 ms after the answers were due.
        Self.join(&race, Self.a, "too late", at: 180)
        race.handle(.measured(Self.b, rtt: Self.ms(0.01), address: nil), at: Self.ms(50))
        race.handle(.measured(Self.c, rtt: Self.ms(2), address: nil), at: Self.ms(50))
        #expect(!race.contains(Self.a))
        #expect(race.verdict(at: Self.ms(176)) == .decided(MeasuredPeer(peerID: Self.c, name: "near", rtt: Self.ms(2)), [
            MeasuredPeer(peerID: Self.c, name: "near", rtt: Self.ms(2))
        ]))
    }

    @Test("nobody answers: no verdict until the deadline, then none chosen and nobody marked farther")
    func nobodyAnswers() {
        var race = NearestRace(answersDue: Self.ms(130), deadline: Self.ms(2000))
        Self.join(&race, Self.c, "silent", at: 40)
        #expect(race.verdict(at: Self.ms(1000)) == .wait(until: Self.ms(2000)))
        #expect(race.verdict(at: Self.ms(2000)) == .decided(nil, [MeasuredPeer(peerID: Self.c, name: "silent", rtt: nil)]))
        // A measurement that ended without an answer, before the deadline: decided at once.
        var ended = Self.race()
        Self.join(&ended, Self.c, "unreachable", at: 40)
        ended.handle(.measured(Self.c, rtt: nil, address: nil), at: Self.ms(100))
        #expect(ended.verdict(at: Self.ms(175)) == .wait(until: Self.ms(180)))
        #expect(ended.verdict(at: Self.ms(180)) == .decided(nil, [MeasuredPeer(peerID: Self.c, name: "unreachable", rtt: nil)]))
    }

    @Test("candidates measured beyond the bound rank after those that answered, nearest first")
    func ranking() {
        let ranked = Nearest.ranked([
            MeasuredPeer(peerID: Self.a, name: "unanswered", rtt: nil),
            MeasuredPeer(peerID: Self.b, name: "beyond", rtt: nil, rttExceeds: Self.ms(5.3)),
            MeasuredPeer(peerID: Self.c, name: "near", rtt: Self.ms(0.3)),
        ])
        #expect(ranked.map(\.name) == ["near", "beyond", "unanswered"])
    }

    @Test("gathering ends once a nearer peer's answer can no longer arrive: the answers' due time plus the link's round trip as measured")
    func gatheringFollowsTheLink() {
        // On a LAN (best RTT 0.3 ms): 5.3 ms past the due time; a peer announced before then joins.
        var lan = Self.race()
        #expect(lan.gatheringEnds == Self.ms(180))
        Self.join(&lan, Self.c, "near", at: 20)
        lan.handle(.measured(Self.c, rtt: Self.ms(0.3), address: nil), at: Self.ms(21))
        #expect(lan.gatheringEnds == Self.ms(135.3))
        Self.join(&lan, Self.a, "late but in time", at: 135.2)
        #expect(lan.contains(Self.a))
        #expect(!lan.isGathering(at: Self.ms(135.3)))
        // Over a slow link (best RTT 40 ms; the patience, 5 ms, exceeds its tie margin): an answer
        // up to 45 ms late could still come from a peer as near, so gathering lasts that long.
        var slow = Self.race()
        Self.join(&slow, Self.c, "across a tunnel", at: 60)
        slow.handle(.measured(Self.c, rtt: Self.ms(40), address: nil), at: Self.ms(100))
        #expect(slow.gatheringEnds == Self.ms(175))
        #expect(slow.verdict(at: Self.ms(150)) == .wait(until: Self.ms(175)))
        // Never past the caller's deadline.
        let short = NearestRace(answersDue: Self.ms(130), deadline: Self.ms(100))
        #expect(short.gatheringEnds == Self.ms(100))
    }
}
