import PeerConnection
import PeerTrust
import Testing

@testable import ConnectionBroker

/// The peer's state, step by step: each transition the machine makes, named, including those
/// that were implicit when the state was a handful of flags.
@Suite("broker: a peer's state, transition by transition")
struct PeerStateTests {
    typealias Machine = BrokerStateMachine
    typealias Link = BrokerStateMachine.Link
    let small = BrokerStateMachineTests.small
    let large = BrokerStateMachineTests.large
    let rules = BrokerStateMachineTests()

    func state(_ machine: Machine, _ peer: PeerID) -> Machine.PeerState? { machine.peers[peer]?.state }

    @Test("the larger side: idle, waiting for the invitation, dialing, connected")
    func largerSide() {
        var local = rules.broker(large)
        _ = local.handle(.announced(rules.announcement(small)), at: .zero)
        #expect(state(local, small) == .waiting(until: .seconds(3), .fallback))
        _ = local.advance(to: .seconds(3))
        #expect(state(local, small) == .dialing)
        _ = local.handle(.dialSucceeded(small, 1), at: .seconds(4))
        #expect(state(local, small) == .connected(Link(id: 1, initiator: large), dialing: false))
        #expect(local.nextDeadline == nil)
    }

    @Test("a connection accepted while our dial is under way: connected, still dialing; the dial's connection is then probed against it")
    func acceptedWhileDialing() {
        var local = rules.broker(small)
        _ = local.handle(.announced(rules.announcement(large)), at: .zero)
        #expect(state(local, large) == .dialing)
        _ = local.handle(.accepted(large, 1), at: .milliseconds(5))
        #expect(state(local, large) == .connected(Link(id: 1, initiator: large), dialing: true))
        #expect(local.handle(.dialSucceeded(large, 2), at: .milliseconds(6)) == [.probe(1)])
        #expect(state(local, large) == .probing(live: Link(id: 1, initiator: large), contender: Link(id: 2, initiator: small), dialing: false))
        // Alive, but ours is the smaller's: ours is kept on both sides.
        _ = local.handle(.probed(1, alive: true), at: .milliseconds(7))
        #expect(state(local, large) == .connected(Link(id: 2, initiator: small), dialing: false))
    }

    @Test("a failed dial while connected leaves the connection alone and plans nothing")
    func failedWhileConnected() {
        var local = rules.broker(small)
        _ = local.handle(.announced(rules.announcement(large)), at: .zero)
        _ = local.handle(.accepted(large, 1), at: .zero)
        let failed = local.handle(.dialFailed(large, reason: "reset"), at: .seconds(1))
        #expect(rules.reports(failed) == [.dialFailed(large, reason: "reset", retryAt: nil)])
        #expect(state(local, large) == .connected(Link(id: 1, initiator: large), dialing: false))
    }

    @Test("the connection ends while our dial is under way: that dial is the redial, no second one starts")
    func closedWhileDialing() {
        var local = rules.broker(small)
        _ = local.handle(.announced(rules.announcement(large)), at: .zero)
        _ = local.handle(.accepted(large, 1), at: .zero)
        _ = local.handle(.closed(1, reason: .words("reset")), at: .seconds(1))
        #expect(state(local, large) == .dialing)
        #expect(local.nextDeadline == nil)
        #expect(local.advance(to: .seconds(100)).isEmpty)
        #expect(local.handle(.networkChanged, at: .seconds(100)).isEmpty)
        // It fails: now the backoff, from its first step.
        let failed = local.handle(.dialFailed(large, reason: "refused"), at: .seconds(100))
        guard case .waiting(let due, .backoff)? = state(local, large) else { Issue.record("\(String(describing: state(local, large)))"); return }
        #expect(due >= .seconds(101) && due <= .milliseconds(101_200))
        #expect(rules.reports(failed) == [.dialFailed(large, reason: "refused", retryAt: due)])
    }

    @Test("probing: the newcomer closing first leaves the old connection as it was")
    func contenderCloses() {
        var local = rules.broker(small)
        _ = local.handle(.announced(rules.announcement(large)), at: .zero)
        _ = local.handle(.dialSucceeded(large, 1), at: .zero)
        _ = local.handle(.accepted(large, 2), at: .seconds(1))
        #expect(local.handle(.closed(2, reason: .words("gone")), at: .seconds(1)).isEmpty)
        #expect(state(local, large) == .connected(Link(id: 1, initiator: small), dialing: false))
        // The probe's answer then concerns nothing.
        #expect(local.handle(.probed(1, alive: false), at: .seconds(3)).isEmpty)
        #expect(local.connection(to: large) == 1)
    }

    @Test("probing: a third connection competes with the newcomer, not with the one probed")
    func thirdConnection() {
        var local = rules.broker(large)
        _ = local.handle(.accepted(small, 1), at: .zero)
        _ = local.handle(.dialSucceeded(small, 2), at: .seconds(1))
        // 3 is the smaller's: it beats 2 (ours), and 1 is still being probed.
        #expect(rules.closeReasons(local.handle(.accepted(small, 3), at: .seconds(1))) == [2: .duplicate])
        #expect(state(local, small) == .probing(live: Link(id: 1, initiator: small), contender: Link(id: 3, initiator: small), dialing: false))
    }

    @Test("a goodbye cancels a planned dial, not one under way; when that fails, nothing is planned")
    func goodbye() {
        var local = rules.broker(large)
        _ = local.handle(.announced(rules.announcement(small, name: "A")), at: .zero)
        _ = local.handle(.withdrawn(name: "A"), at: .seconds(1))
        #expect(state(local, small) == .idle)
        #expect(local.nextDeadline == nil)
        // Asked for, dialing, then gone: the failure plans no retry (nowhere to dial).
        _ = local.handle(.announced(rules.announcement(small, name: "A")), at: .seconds(2))
        _ = local.handle(.requested(small), at: .seconds(2))
        #expect(state(local, small) == .dialing)
        _ = local.handle(.withdrawn(name: "A"), at: .seconds(3))
        #expect(state(local, small) == .dialing)
        #expect(rules.reports(local.handle(.dialFailed(small, reason: "no route"), at: .seconds(4))) == [.dialFailed(small, reason: "no route", retryAt: nil)])
        #expect(state(local, small) == .idle)
        #expect(local.nextDeadline == nil)
        // Announced again: dialed at once.
        #expect(rules.dials(local.handle(.announced(rules.announcement(small, name: "A")), at: .seconds(5))) == [small])
    }

    @Test("a goodbye reaches every peer announced under that name")
    func goodbyeByName() {
        var local = rules.broker(BrokerStateMachineTests.middle)
        // The same instance name, a new peer ID (a reinstall): both are known.
        _ = local.handle(.announced(rules.announcement(small, name: "Box")), at: .zero)
        _ = local.handle(.announced(rules.announcement(large, name: "Box")), at: .zero)
        _ = local.handle(.withdrawn(name: "Box"), at: .seconds(1))
        #expect(local.peers.values.allSatisfy { $0.announcement == nil })
    }

    @Test("the cool-down is a state: a redial due during it waits for its end instead of coming due again at once")
    func coolDownWaits() {
        var local = rules.broker(small)
        var now = Duration.zero
        _ = local.handle(.announced(rules.announcement(large)), at: now)
        for _ in 0..<4 {
            _ = local.handle(.dialFailed(large, reason: "refused"), at: now)
            now = local.nextDeadline ?? now
            _ = local.advance(to: now)
        }
        guard case .waiting(let end, .coolDown)? = state(local, large) else { Issue.record("\(String(describing: state(local, large)))"); return }
        #expect(end == now + .seconds(300))
        // The peer dials us meanwhile, and drops: our redial falls due within the cool-down.
        _ = local.handle(.accepted(large, 1), at: now + .seconds(10))
        _ = local.handle(.closed(1, reason: .words("crashed")), at: now + .seconds(11))
        guard let due = local.nextDeadline else { Issue.record("no redial planned"); return }
        #expect(due < end)
        #expect(local.advance(to: due).isEmpty)
        // Not due again at once (a shell's timer would spin): due at the cool-down's end.
        #expect(state(local, large) == .waiting(until: end, .coolDown))
        #expect(rules.dials(local.advance(to: end)) == [large])
    }

    @Test("redials: a fresh dial is free; a redial counts; the limit starts a cool-down, during which none is admitted")
    func admission() {
        var redials = Machine.Redials(nextIsFresh: true)
        let window = Duration.seconds(120)
        func admit(_ at: Duration) -> Duration? { redials.admit(at: at, limit: 2, window: window, coolDown: .seconds(300)) }
        #expect(admit(.zero) == nil)
        #expect(redials.times.isEmpty)
        #expect(admit(.seconds(1)) == nil)
        #expect(admit(.seconds(2)) == nil)
        #expect(redials.times == [.seconds(1), .seconds(2)])
        #expect(admit(.seconds(3)) == .seconds(303))
        #expect(redials.coolingDown(at: .seconds(302)) && !redials.coolingDown(at: .seconds(303)))
        #expect(admit(.seconds(100)) == .seconds(303))
        // After it: admitted again, and redials older than the window are forgotten.
        #expect(admit(.seconds(303)) == nil)
        #expect(admit(.seconds(500)) == nil)
        #expect(redials.times == [.seconds(500)])
    }
}
