/// Notices a dead peer: an unplugged cable or a stopped process sends nothing, not even a
/// TCP reset, so silence is the only sign. After `pingInterval` without a frame from the
/// peer we send a WebSocket ping (any live peer answers with a pong); after `deadAfter`
/// without one the peer is dead.
///
/// A pure state machine: the connection calls ``heard(at:)`` for every frame received and
/// ``tick(at:)`` at ``nextTick``; times are durations on any monotonic clock.
struct Liveness: Sendable {
    enum Action: Hashable, Sendable {
        case wait
        case ping
        case dead(silentFor: Duration)
    }

    let pingInterval: Duration
    let deadAfter: Duration
    private(set) var lastHeard: Duration
    private var lastPing: Duration?

    /// `deadAfter` must be positive; pings go out at a third of it (at least every 10 s
    /// by default, so NAT and firewall state stays warm too).
    init(deadAfter: Duration, now: Duration) {
        self.deadAfter = deadAfter
        self.pingInterval = deadAfter / 3
        self.lastHeard = now
    }

    /// A frame (of any kind) arrived from the peer.
    mutating func heard(at now: Duration) {
        lastHeard = max(lastHeard, now)
    }

    /// When ``tick(at:)`` has something to do next.
    var nextTick: Duration {
        let quietSince = max(lastHeard, lastPing ?? lastHeard)
        return min(lastHeard + deadAfter, quietSince + pingInterval)
    }

    mutating func tick(at now: Duration) -> Action {
        let silence = now - lastHeard
        if silence >= deadAfter { return .dead(silentFor: silence) }
        let quietSince = max(lastHeard, lastPing ?? lastHeard)
        guard now - quietSince >= pingInterval else { return .wait }
        lastPing = now
        return .ping
    }
}
