import PeerConnection
import PeerTrust
import Testing

@testable import ConnectionBroker

/// The broker's rules, one test each, driven by hand: events and a clock in, actions out.
@Suite("broker: who dials, one connection per peer, probe and replace, reconnects")
struct BrokerStateMachineTests {
    static func id(_ byte: UInt8) -> PeerID { PeerID(bytes: [UInt8](repeating: byte, count: 32))! }
    static let small = id(0x10)
    static let middle = id(0x50)
    static let large = id(0x90)

    func broker(_ local: PeerID, autoInvite: Bool = true, version: String = "0.2.2") -> BrokerStateMachine {
        BrokerStateMachine(
            configuration: .init(localID: local, protocolVersion: ProtocolVersion(version) ?? ProtocolVersion(major: 0), autoInvite: autoInvite),
            seed: 7)
    }

    func announcement(_ peer: PeerID?, name: String = "Peer", version: String? = "0.2.2", address: String = "198.18.1.2") -> PeerAnnouncement {
        PeerAnnouncement(name: name, peerID: peer?.description, protocolVersion: version, addresses: PeerAddress(address).map { [$0] } ?? [], port: 9099)
    }

    func dials(_ actions: [BrokerStateMachine.Action]) -> [PeerID] {
        actions.compactMap { if case .dial(let peer, _, _) = $0 { peer } else { nil } }
    }

    /// The closes among `actions`, with the reason as the peer reads it.
    func closes(_ actions: [BrokerStateMachine.Action]) -> [BrokerStateMachine.ConnectionID: String] {
        closeReasons(actions).mapValues(\.description)
    }

    func closeReasons(_ actions: [BrokerStateMachine.Action]) -> [BrokerStateMachine.ConnectionID: BrokerStateMachine.CloseReason] {
        var closed: [BrokerStateMachine.ConnectionID: BrokerStateMachine.CloseReason] = [:]
        for case .close(let id, let reason) in actions { closed[id] = reason }
        return closed
    }

    func reports(_ actions: [BrokerStateMachine.Action]) -> [BrokerStateMachine.Report] {
        actions.compactMap { if case .report(let report) = $0 { report } else { nil } }
    }

    // MARK: Who invites

    @Test("the smaller peer ID dials at once; the larger waits 3 s, then dials only if nothing came")
    func tiebreak() {
        var smaller = broker(Self.small)
        var larger = broker(Self.large)
        #expect(dials(smaller.handle(.announced(announcement(Self.large)), at: .zero)) == [Self.large])
        #expect(dials(larger.handle(.announced(announcement(Self.small)), at: .zero)).isEmpty)
        #expect(larger.nextDeadline == .seconds(3))
        #expect(larger.advance(to: .milliseconds(2999)).isEmpty)
        #expect(dials(larger.advance(to: .seconds(3))) == [Self.small])
    }

    @Test("the larger side does not dial when the smaller's connection arrives within the 3 s")
    func invitationArrives() {
        var larger = broker(Self.large)
        _ = larger.handle(.announced(announcement(Self.small)), at: .zero)
        let actions = larger.handle(.accepted(Self.small, 1), at: .milliseconds(40))
        #expect(reports(actions) == [.connected(Self.small, 1, initiator: Self.small)])
        #expect(larger.advance(to: .seconds(10)).isEmpty)
        #expect(larger.nextDeadline == nil)
    }

    @Test("without auto-invite nothing is dialed until the app asks; asked, the tiebreak does not apply")
    func onRequest() {
        var larger = broker(Self.large, autoInvite: false)
        #expect(larger.handle(.announced(announcement(Self.small)), at: .zero).isEmpty)
        #expect(larger.advance(to: .seconds(10)).isEmpty)
        #expect(dials(larger.handle(.requested(Self.small), at: .seconds(10))) == [Self.small])
    }

    // MARK: Skipped before dialing

    @Test("no valid id, our own id, no or an incompatible pv: skipped with the reason, once, never dialed")
    func skipped() {
        var local = broker(Self.small)
        let cases: [(PeerAnnouncement, String)] = [
            (announcement(nil, name: "No ID"), "no valid id"),
            (PeerAnnouncement(name: "Bad ID", peerID: "not-a-peer-id", protocolVersion: "0.2.2", addresses: [], port: 1), "no valid id"),
            (announcement(Self.small, name: "Me"), "own announcement"),
            (announcement(Self.large, name: "No PV", version: nil), "no valid pv"),
            (announcement(Self.large, name: "Old", version: "0.3.0"), "0.3.0 is not compatible with ours, 0.2.2"),
        ]
        for (announced, words) in cases {
            let actions = local.handle(.announced(announced), at: .zero)
            #expect(dials(actions).isEmpty)
            guard case .skipped(let name, let reason)? = reports(actions).first else { Issue.record("not skipped: \(announced)"); continue }
            #expect(name == announced.name && reason.contains(words), "\(reason)")
            // The same again is not reported twice.
            #expect(local.handle(.announced(announced), at: .seconds(1)).isEmpty)
        }
        // A compatible patch version is fine.
        #expect(dials(local.handle(.announced(announcement(Self.large, name: "Patch", version: "0.2.9")), at: .zero)) == [Self.large])
    }

    @Test("one compatibility verdict: the peer named, or the kind of incompatibility, in the words a skip reports")
    func compatibilityVerdict() {
        let local = broker(Self.small)
        typealias Verdict = Result<PeerID, BrokerStateMachine.Incompatibility>
        let cases: [(PeerAnnouncement, Verdict)] = [
            (announcement(Self.large), .success(Self.large)),
            (announcement(Self.large, version: "0.2.9"), .success(Self.large)),
            (announcement(nil), .failure(.noPeerID)),
            (PeerAnnouncement(name: "Bad ID", peerID: "not-a-peer-id", protocolVersion: "0.2.2", addresses: [], port: 1), .failure(.noPeerID)),
            (announcement(Self.small), .failure(.ownAnnouncement)),
            (announcement(Self.large, version: nil), .failure(.noProtocolVersion)),
            (announcement(Self.large, version: "two"), .failure(.noProtocolVersion)),
            (announcement(Self.large, version: "0.3.0"),
             .failure(.incompatibleVersion(ProtocolVersion(major: 0, minor: 3), ours: ProtocolVersion(major: 0, minor: 2, patch: 2)))),
        ]
        for (announced, expected) in cases {
            #expect(local.compatibility(of: announced) == expected, "\(announced)")
            // The skip the machine reports says the same, in the same words.
            var fresh = broker(Self.small)
            let skip = reports(fresh.handle(.announced(announced), at: .zero)).first
            switch expected {
            case .success: #expect(skip == nil)
            case .failure(let why): #expect(skip == .skipped(name: announced.name, reason: why.description))
            }
        }
    }

    // MARK: One connection per peer

    @Test("crossing dials: both sides keep the connection the smaller ID initiated, close the other as duplicate")
    func crossingDials() {
        // Each side sees both connections, in opposite orders.
        var smaller = broker(Self.small)
        var larger = broker(Self.large)
        _ = smaller.handle(.requested(Self.large), at: .zero)
        _ = smaller.handle(.announced(announcement(Self.large)), at: .zero)
        _ = larger.handle(.requested(Self.small), at: .zero)
        _ = larger.handle(.announced(announcement(Self.small)), at: .zero)
        // Connection 1 is the smaller's dial, connection 2 the larger's.
        _ = smaller.handle(.accepted(Self.large, 2), at: .milliseconds(5))
        let smallerProbe = smaller.handle(.dialSucceeded(Self.large, 1), at: .milliseconds(6))
        #expect(smallerProbe == [.probe(2)])
        let smallerDecision = smaller.handle(.probed(2, alive: true), at: .milliseconds(7))
        #expect(closes(smallerDecision) == [2: "duplicate"])
        #expect(smaller.connection(to: Self.large) == 1)

        _ = larger.handle(.dialSucceeded(Self.small, 2), at: .milliseconds(5))
        let largerProbe = larger.handle(.accepted(Self.small, 1), at: .milliseconds(6))
        #expect(largerProbe == [.probe(2)])
        let largerDecision = larger.handle(.probed(2, alive: true), at: .milliseconds(7))
        #expect(closes(largerDecision) == [2: "duplicate"])
        #expect(larger.connection(to: Self.small) == 1)
        #expect(reports(largerDecision).contains(.connected(Self.small, 1, initiator: Self.small)))
        // Never zero: the kept connection is the same on both sides.
    }

    @Test("an inbound connection from a peer believed connected probes the old one; dead, the new one replaces it at once")
    func probeAndReplace() {
        var local = broker(Self.small)
        _ = local.handle(.announced(announcement(Self.large)), at: .zero)
        _ = local.handle(.dialSucceeded(Self.large, 1), at: .zero)
        // The peer restarted; its new process dials us after its 3 s (we still believe in connection 1).
        let probe = local.handle(.accepted(Self.large, 2), at: .seconds(60))
        #expect(probe == [.probe(1)])
        let replaced = local.handle(.probed(1, alive: false), at: .seconds(62))
        #expect(closes(replaced)[1]?.contains("did not answer a ping within 2") == true)
        #expect(reports(replaced).contains(.connected(Self.large, 2, initiator: Self.large)))
        #expect(local.connection(to: Self.large) == 2)
    }

    @Test("alive old connection from the same initiator: the new one is the duplicate; a close of the old hands over at once")
    func sameInitiator() {
        var local = broker(Self.large)
        _ = local.handle(.accepted(Self.small, 1), at: .zero)
        _ = local.handle(.accepted(Self.small, 2), at: .seconds(1))
        #expect(closes(local.handle(.probed(1, alive: true), at: .seconds(1))) == [2: "duplicate"])
        _ = local.handle(.accepted(Self.small, 3), at: .seconds(5))
        // Connection 1 closes while 3 waits on the probe: 3 takes over without waiting.
        let handover = local.handle(.closed(1, reason: .words("reset")), at: .seconds(5))
        #expect(reports(handover) == [.disconnected(Self.small, 1, reason: .words("reset")), .connected(Self.small, 3, initiator: Self.small)])
        #expect(local.handle(.probed(1, alive: false), at: .seconds(6)).isEmpty)
    }

    @Test("closes say their kind: a duplicate, or a replacement after an unanswered probe (with the probe timeout in its words)")
    func closeReasons() {
        var local = broker(Self.small)
        _ = local.handle(.announced(announcement(Self.large)), at: .zero)
        _ = local.handle(.dialSucceeded(Self.large, 1), at: .zero)
        // Alive, and connection 1 is the smaller's: the newcomer is the duplicate.
        _ = local.handle(.accepted(Self.large, 2), at: .seconds(1))
        #expect(closeReasons(local.handle(.probed(1, alive: true), at: .seconds(1))) == [2: .duplicate])
        // Dead: replaced, which is counted apart from duplicates.
        _ = local.handle(.accepted(Self.large, 3), at: .seconds(2))
        let replaced = local.handle(.probed(1, alive: false), at: .seconds(4))
        #expect(closeReasons(replaced) == [1: .replaced(probeTimeout: .seconds(2))])
        #expect(reports(replaced).first == .disconnected(Self.large, 1, reason: BrokerStateMachine.CloseReason.replaced(probeTimeout: .seconds(2)).end))
        if case .disconnected(_, _, let end)? = reports(replaced).first { #expect(end.kind == .replaced && !end.byPeer && end.closeCode == .normal) }
        #expect(BrokerStateMachine.CloseReason.duplicate.description == "duplicate")
        #expect(BrokerStateMachine.CloseReason.replaced(probeTimeout: .seconds(2)).description.contains("did not answer a ping within 2"))
    }

    @Test("a request for a connected peer dials nothing (the app gets the existing connection)")
    func requestWhenConnected() {
        var local = broker(Self.small)
        _ = local.handle(.announced(announcement(Self.large)), at: .zero)
        _ = local.handle(.dialSucceeded(Self.large, 1), at: .zero)
        #expect(local.handle(.requested(Self.large), at: .seconds(1)).isEmpty)
        #expect(local.connection(to: Self.large) == 1)
    }

    // MARK: Reconnects

    @Test("a dropped connection is redialed after a jittered backoff (1 s, then 2 s …), or at once when the peer is found again")
    func backoff() {
        var local = broker(Self.small)
        _ = local.handle(.announced(announcement(Self.large)), at: .zero)
        _ = local.handle(.dialSucceeded(Self.large, 1), at: .zero)
        _ = local.handle(.closed(1, reason: .words("reset")), at: .seconds(10))
        let due = local.nextDeadline ?? .zero
        #expect(due >= .seconds(11) && due <= .milliseconds(11_200), "\(due)")
        #expect(local.advance(to: due - .milliseconds(1)).isEmpty)
        #expect(dials(local.advance(to: due)) == [Self.large])
        let failed = local.handle(.dialFailed(Self.large, reason: "refused"), at: due)
        guard case .dialFailed(_, _, let retry?)? = reports(failed).first else { Issue.record("no retry: \(failed)"); return }
        #expect(retry - due >= .seconds(2) && retry - due <= .milliseconds(2400), "\(retry - due)")
        // Found again (a restart re-announces it, here on a new address): at once.
        #expect(dials(local.handle(.announced(announcement(Self.large, address: "198.18.1.9")), at: due + .milliseconds(100))) == [Self.large])
    }

    @Test("a refusal tells whoever waits at once, and is still retried on the backoff; other failures only retry")
    func refusalIsFinal() {
        for code in [PeerConnectionError.Code.untrusted, .tls, .upgrade, .handshake] {
            var local = broker(Self.small)
            _ = local.handle(.announced(announcement(Self.large)), at: .zero)
            let failed = reports(local.handle(.dialFailed(Self.large, reason: "no", code: code), at: .zero))
            #expect(failed.count == 2 && failed.last == .refused(Self.large, reason: "no"), "\(code)")
            guard case .dialFailed(_, _, let retry?)? = failed.first else { Issue.record("no retry after \(code)"); continue }
            #expect(retry >= .seconds(1))
        }
        for code in [PeerConnectionError.Code.unreachable, .timeout, .closed] {
            var local = broker(Self.small)
            _ = local.handle(.announced(announcement(Self.large)), at: .zero)
            let failed = reports(local.handle(.dialFailed(Self.large, reason: "no", code: code), at: .zero))
            #expect(failed.count == 1, "\(code)")
            #expect(!BrokerStateMachine.isRefusal(code))
        }
    }

    @Test("the backoff doubles up to 60 s")
    func backoffCap() {
        var local = broker(Self.small)
        _ = local.handle(.announced(announcement(Self.large)), at: .zero)
        var now = Duration.zero
        var gaps: [Duration] = []
        for _ in 0..<9 {
            let failed = local.handle(.dialFailed(Self.large, reason: "refused"), at: now)
            guard case .dialFailed(_, _, let retry?)? = reports(failed).first else { break }
            gaps.append(retry - now)
            now = retry
            _ = local.advance(to: now)
        }
        #expect(gaps.count == 9)
        #expect(gaps.last.map { $0 >= .seconds(60) && $0 <= .seconds(72) } == true, "\(gaps)")
        #expect(gaps.first.map { $0 >= .seconds(1) && $0 < .seconds(2) } == true, "\(gaps)")
    }

    @Test("a goodbye stops redialing")
    func goodbyeStops() {
        var local = broker(Self.small)
        _ = local.handle(.announced(announcement(Self.large, name: "Build Box")), at: .zero)
        _ = local.handle(.dialSucceeded(Self.large, 1), at: .zero)
        _ = local.handle(.withdrawn(name: "Build Box"), at: .seconds(1))
        _ = local.handle(.closed(1, reason: .words("going away")), at: .seconds(1))
        #expect(local.nextDeadline == nil)
        #expect(local.advance(to: .seconds(600)).isEmpty)
    }

    @Test("a crash-looping peer: at most 3 redials in 2 minutes, then 5 minutes without any, even when it is announced again")
    func stormLimit() {
        var local = broker(Self.small)
        var now = Duration.zero
        var dialed: [Duration] = []
        _ = local.handle(.announced(announcement(Self.large)), at: now)
        dialed.append(now)
        var connection: BrokerStateMachine.ConnectionID = 0
        // Each restart: connected, crashed a second later, announced again.
        for _ in 0..<10 {
            connection += 1
            _ = local.handle(.dialSucceeded(Self.large, connection), at: now)
            now += .seconds(1)
            _ = local.handle(.closed(connection, reason: .words("crashed")), at: now)
            now += .milliseconds(500)
            let again = local.handle(.announced(announcement(Self.large, address: "198.18.1.\(connection + 10)")), at: now)
            var made = dials(again)
            if made.isEmpty, let due = local.nextDeadline, due <= now + .seconds(70) {
                now = due
                made = dials(local.advance(to: now))
            }
            guard !made.isEmpty else { break }
            dialed.append(now)
        }
        // The first dial plus 3 redials, then a cool-down.
        #expect(dialed.count == 4, "\(dialed)")
        let cooldown = local.nextDeadline ?? .zero
        #expect(cooldown >= now + .seconds(299), "\(cooldown) vs \(now)")
        #expect(local.handle(.announced(announcement(Self.large, address: "198.18.1.200")), at: now + .seconds(10)).isEmpty)
        #expect(dials(local.advance(to: cooldown)) == [Self.large])
    }

    @Test("retries after failed dials count too: the first dial, 3 retries, then a 5-minute cool-down")
    func failuresCount() {
        var local = broker(Self.small)
        var now = Duration.zero
        var made = dials(local.handle(.announced(announcement(Self.large)), at: now)).count
        for _ in 0..<6 {
            _ = local.handle(.dialFailed(Self.large, reason: "refused"), at: now)
            guard let due = local.nextDeadline else { break }
            now = due
            let attempt = dials(local.advance(to: now))
            if attempt.isEmpty { break }
            made += attempt.count
        }
        #expect(made == 4)
        #expect((local.nextDeadline ?? .zero) >= now + .seconds(299))
        // After a goodbye and a fresh announcement, the first dial is not a redial (but the cool-down holds).
        _ = local.handle(.withdrawn(name: "Peer"), at: now)
        #expect(dials(local.handle(.announced(announcement(Self.large)), at: now + .seconds(1))).isEmpty)
    }

    @Test("a peer found again during a cool-down is dialed when it ends, as the first dial after the announcement")
    func foundDuringCoolDown() {
        var local = broker(Self.small)
        var now = Duration.zero
        _ = local.handle(.announced(announcement(Self.large)), at: now)
        for _ in 0..<4 {
            _ = local.handle(.dialFailed(Self.large, reason: "refused"), at: now)
            now = local.nextDeadline ?? now
            _ = local.advance(to: now)
        }
        let end = local.nextDeadline ?? .zero
        #expect(end == now + .seconds(300))
        _ = local.handle(.withdrawn(name: "Peer"), at: now + .seconds(5))
        #expect(local.nextDeadline == nil)
        #expect(local.handle(.announced(announcement(Self.large)), at: now + .seconds(6)).isEmpty)
        #expect(local.nextDeadline == end)
        #expect(dials(local.advance(to: end)) == [Self.large])
        // Fresh, so not counted: three redials are allowed again before the next cool-down.
        #expect(local.peers[Self.large]?.redials.times.isEmpty == true)
    }

    @Test("the larger side redials after a drop only after the backoff and the 3 s the smaller gets first")
    func largerRedials() {
        var local = broker(Self.large)
        _ = local.handle(.accepted(Self.small, 1), at: .zero)
        _ = local.handle(.announced(announcement(Self.small)), at: .zero)
        _ = local.handle(.closed(1, reason: .words("reset")), at: .seconds(10))
        let due = local.nextDeadline ?? .zero
        #expect(due >= .seconds(14) && due <= .milliseconds(14_200), "\(due)")
    }

    @Test("a network change redials at once the disconnected peers that are ours to dial")
    func networkChange() {
        var local = broker(Self.middle)
        _ = local.handle(.announced(announcement(Self.large, name: "Larger")), at: .zero)
        _ = local.handle(.announced(announcement(Self.small, name: "Smaller")), at: .zero)
        _ = local.handle(.dialFailed(Self.large, reason: "no route"), at: .zero)
        let actions = local.handle(.networkChanged, at: .seconds(1))
        #expect(dials(actions) == [Self.large])
        #expect(local.nextDeadline == .seconds(4))
    }

    @Test("without auto-invite, a network change redials only the peers the app asked for")
    func networkChangeOnRequest() {
        var local = broker(Self.middle, autoInvite: false)
        _ = local.handle(.announced(announcement(Self.large, name: "Larger")), at: .zero)
        _ = local.handle(.announced(announcement(Self.small, name: "Smaller")), at: .zero)
        #expect(local.handle(.networkChanged, at: .seconds(1)).isEmpty)
        #expect(local.nextDeadline == nil)
        _ = local.handle(.requested(Self.small), at: .seconds(2))
        _ = local.handle(.dialFailed(Self.small, reason: "no route"), at: .seconds(2))
        #expect(dials(local.handle(.networkChanged, at: .seconds(3))) == [Self.small])
    }

    @Test("jitter is random but reproducible: one seed, one schedule")
    func reproducible() {
        func schedule(_ seed: UInt64) -> Duration? {
            var local = BrokerStateMachine(configuration: .init(localID: Self.small, protocolVersion: ProtocolVersion(major: 0, minor: 2), autoInvite: true), seed: seed)
            _ = local.handle(.announced(announcement(Self.large)), at: .zero)
            _ = local.handle(.dialFailed(Self.large, reason: "x"), at: .zero)
            return local.nextDeadline
        }
        #expect(schedule(1) == schedule(1))
        #expect(schedule(1) != schedule(2))
    }
}

@Suite("broker: the nearest peer and the dial plan")
struct NearestTests {
    static let a = BrokerStateMachineTests.small
    static let b = BrokerStateMachineTests.middle
    static let c = BrokerStateMachineTests.large

    @Test("the lowest RTT wins; a peer 20 ms farther is never picked")
    func lowest() {
        let picked = Nearest.pick([
            MeasuredPeer(peerID: Self.a, name: "a", rtt: .milliseconds(21)),
            MeasuredPeer(peerID: Self.c, name: "c", rtt: .microseconds(400)),
            MeasuredPeer(peerID: Self.b, name: "b", rtt: .milliseconds(20)),
        ])
        #expect(picked?.peerID == Self.c)
    }

    @Test("within 1 ms (at small RTTs) or 10 % (at large ones) it is a tie, and the smaller peer ID wins")
    func ties() {
        #expect(Nearest.pick([
            MeasuredPeer(peerID: Self.c, name: "c", rtt: .microseconds(300)),
            MeasuredPeer(peerID: Self.a, name: "a", rtt: .microseconds(1250)),
        ])?.peerID == Self.a)
        #expect(Nearest.pick([
            MeasuredPeer(peerID: Self.c, name: "c", rtt: .microseconds(300)),
            MeasuredPeer(peerID: Self.a, name: "a", rtt: .microseconds(1350)),
        ])?.peerID == Self.c)
        #expect(Nearest.pick([
            MeasuredPeer(peerID: Self.c, name: "c", rtt: .milliseconds(50)),
            MeasuredPeer(peerID: Self.a, name: "a", rtt: .milliseconds(54)),
        ])?.peerID == Self.a)
        #expect(Nearest.pick([
            MeasuredPeer(peerID: Self.c, name: "c", rtt: .milliseconds(50)),
            MeasuredPeer(peerID: Self.a, name: "a", rtt: .milliseconds(56)),
        ])?.peerID == Self.c)
    }

    @Test("answers are due the answer window after browsing began; a first answer after the window keeps it open 100 ms more; never after the deadline")
    func gathering() {
        let start = Duration.seconds(1000)  // any time of the broker's clock
        let window = Duration.milliseconds(130)
        // A fresh browse: a first answer 12 ms in (python-zeroconf answers QU at once) does not
        // cut short the wait for a responder that delays 120 ms.
        #expect(Nearest.answersDue(browseStarted: start, firstAnswer: start + .milliseconds(12), window: window, deadline: start + .seconds(10))
            == start + window)
        // A first answer late in the window does not lengthen it: the other responders heard
        // the same question, and their answers are due by the window's end all the same.
        #expect(Nearest.answersDue(browseStarted: start, firstAnswer: start + .milliseconds(120), window: window, deadline: start + .seconds(10))
            == start + window)
        // A first answer after the window (a slow link) keeps gathering open 100 ms past it.
        #expect(Nearest.answersDue(browseStarted: start, firstAnswer: start + .milliseconds(150), window: window, deadline: start + .seconds(10))
            == start + .milliseconds(250))
        // A browse that began long ago: 100 ms from the first answer.
        let later = start + .seconds(30)
        #expect(Nearest.answersDue(browseStarted: start, firstAnswer: later, window: window, deadline: later + .seconds(10))
            == later + .milliseconds(100))
        // The caller's deadline wins over both.
        #expect(Nearest.answersDue(browseStarted: start, firstAnswer: start + .milliseconds(20), window: window, deadline: start + .milliseconds(60))
            == start + .milliseconds(60))
    }

    @Test("peers that did not answer are never picked, and rank last")
    func unanswered() {
        let candidates = [
            MeasuredPeer(peerID: Self.a, name: "a", rtt: nil),
            MeasuredPeer(peerID: Self.c, name: "c", rtt: .milliseconds(30)),
            MeasuredPeer(peerID: Self.b, name: "b", rtt: .milliseconds(2)),
        ]
        #expect(Nearest.pick(candidates)?.peerID == Self.b)
        #expect(Nearest.ranked(candidates).map(\.name) == ["b", "c", "a"])
        #expect(Nearest.pick([MeasuredPeer(peerID: Self.a, name: "a", rtt: nil)]) == nil)
    }

    @Test("happy eyeballs: IPv6 first, families alternating, 30 ms apart, duplicates once")
    func dialPlan() {
        let plan = DialPlan.schedule(["198.18.1.2", "fe80::1%lan0", "198.18.1.2", "10.0.0.2", "fd00::2"].compactMap(PeerAddress.init))
        #expect(plan.map(\.address.description) == ["fe80::1%lan0", "198.18.1.2", "fd00::2", "10.0.0.2"])
        #expect(plan.map(\.after) == [.zero, .milliseconds(30), .milliseconds(60), .milliseconds(90)])
    }
}

extension ConnectionEnd {
    /// A connection's end as these tests write it: lost, in these words.
    static func words(_ text: String) -> ConnectionEnd { ConnectionEnd(.lost, text, byPeer: true) }
}
