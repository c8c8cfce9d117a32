/// Notices a dead peer: an unplugged cable or a stopped process sends nothing, not even a
/// TCP reset, so silence is the only sign. After `pingInterval` without a frame from the
/// peer we send a WebSocket ping (any live peer answers with a pong); after `deadAfter`
/// without one the peer is dead.
///
/// While our own app is behind, the connection stops reading (back-pressure): the peer's
/// frames then wait in TCP, so silence proves nothing and the peer is never called dead. To
/// keep the peer from calling *us* dead, a heartbeat (an unsolicited pong, RFC 6455 §5.5.3)
/// goes out at the ping interval until reading resumes.
///
/// A pure state machine: the connection calls ``heard(at:)`` for every frame received and
/// ``tick(at:)`` at ``nextTick``; times are durations on any monotonic clock.
package struct Liveness: Sendable {
    package enum Action: Hashable, Sendable {
        case wait
        case ping
        case heartbeat
        case dead(silentFor: Duration)
    }

    package let pingInterval: Duration
    package let deadAfter: Duration
    package private(set) var lastHeard: Duration
    private var lastPing: Duration?
    /// Reading is held back (by our app); the last heartbeat sent meanwhile.
    package private(set) var heldSince: Duration?
    private var lastHeartbeat: Duration?

    /// `deadAfter` must be positive; pings go out at a third of it (at least every 10 s
    /// by default, so NAT and firewall state stays warm too).
    package init(deadAfter: Duration, now: Duration) {
        self.deadAfter = deadAfter
        self.pingInterval = deadAfter / 3
        self.lastHeard = now
    }

    /// A frame (of any kind) arrived from the peer.
    package mutating func heard(at now: Duration) {
        lastHeard = max(lastHeard, now)
    }

    /// The connection stopped reading because our app is behind.
    package mutating func hold(at now: Duration) {
        guard heldSince == nil else { return }
        heldSince = now
        lastHeartbeat = nil
    }

    /// Reading resumed: the silence clock starts again now.
    package mutating func release(at now: Duration) {
        guard heldSince != nil else { return }
        heldSince = nil
        lastHeard = max(lastHeard, now)
        lastPing = nil
    }

    /// When ``tick(at:)`` has something to do next.
    package var nextTick: Duration {
        if let heldSince { return (lastHeartbeat ?? heldSince) + pingInterval }
        let quietSince = max(lastHeard, lastPing ?? lastHeard)
        return min(lastHeard + deadAfter, quietSince + pingInterval)
    }

    package mutating func tick(at now: Duration) -> Action {
        if let heldSince {
            guard now - (lastHeartbeat ?? heldSince) >= pingInterval else { return .wait }
            lastHeartbeat = now
            return .heartbeat
        }
        let silence = now - lastHeard
        if silence >= deadAfter { return .dead(silentFor: silence) }
        let quietSince = max(lastHeard, lastPing ?? lastHeard)
        guard now - quietSince >= pingInterval else { return .wait }
        lastPing = now
        return .ping
    }
}
