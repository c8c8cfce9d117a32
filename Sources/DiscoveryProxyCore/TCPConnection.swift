// Plain DNS over TCP (RFC 1035 §4.2.2, RFC 7766): who may connect, and when one connection ends.
// Pure values: the shell owns the sockets and asks these.
public import DNSWire

/// Connections open at once, in all and from each address.
public struct ConnectionCount: Sendable {
    private var open = 0
    private var bySource: [IPAddress: Int] = [:]

    public init() {}

    /// Connections open now.
    public var count: Int { open }

    /// Counts a new connection from `source` if it stays within `most` in all and `fromOne`
    /// from that address; false (nothing counted) when it would not.
    public mutating func admit(_ source: IPAddress, most: Int, fromOne: Int) -> Bool {
        guard open < most, bySource[source, default: 0] < fromOne else { return false }
        open += 1
        bySource[source, default: 0] += 1
        return true
    }

    public mutating func closed(_ source: IPAddress) {
        guard let held = bySource[source] else { return }
        open -= 1
        bySource[source] = held > 1 ? held - 1 : nil
    }
}

/// One DNS-over-TCP connection's life, as a pure value: questions asked, answers written, the
/// peer's end of stream and the time go in; whether the connection goes on comes out. The
/// connection ends when it has asked nothing for the idle time with nothing in flight (RFC 7766
/// §6.2.3), when it has more questions in flight than allowed (a client that asks without
/// reading: its answers would pile up in the proxy), and after the peer's end of stream once
/// every question it asked is answered, or the drain time is over.
public struct TCPConnectionState: Sendable {
    public struct Limits: Sendable {
        public var idleTimeout: Duration
        public var maximumInFlight: Int
        /// How long answers still in flight are waited for after the peer's end of stream.
        public var drainTime: Duration
        public init(idleTimeout: Duration, maximumInFlight: Int, drainTime: Duration) {
            self.idleTimeout = idleTimeout
            self.maximumInFlight = maximumInFlight
            self.drainTime = drainTime
        }
    }

    /// Whether the connection goes on.
    public enum Verdict: Sendable, Equatable {
        case keep
        case close(Reason)
    }

    public enum Reason: Sendable, Equatable {
        /// Nothing asked for the idle time.
        case idle
        /// More questions in flight than allowed.
        case overfull
        /// The peer is done and has every answer.
        case drained
        /// The peer is done, and its last answers did not come within the drain time.
        case drainTimedOut
    }

    public let limits: Limits
    private var lastQuestion: Duration
    /// Questions asked and not yet answered.
    public private(set) var inFlight = 0
    /// When the peer ended its stream, the end of the drain time.
    private var drainDeadline: Duration?

    public init(_ limits: Limits, now: Duration) {
        self.limits = limits
        lastQuestion = now
    }

    /// A whole question arrived.
    public mutating func asked(now: Duration) -> Verdict {
        lastQuestion = now
        inFlight += 1
        return inFlight > limits.maximumInFlight ? .close(.overfull) : .keep
    }

    /// A question's answer was written (or it has none).
    public mutating func answered() -> Verdict {
        inFlight = max(0, inFlight - 1)
        return drainDeadline != nil && inFlight == 0 ? .close(.drained) : .keep
    }

    /// The peer ended its stream (it asks nothing more): the connection ends once the answers
    /// in flight are written, or at the drain time.
    public mutating func peerFinished(now: Duration) -> Verdict {
        guard inFlight > 0 else { return .close(.drained) }
        drainDeadline = now + limits.drainTime
        return .keep
    }

    /// The next time ``advance(to:)`` may close the connection; nil while answers are in flight
    /// and the peer still asks (an answer, not the time, comes next).
    public var nextDeadline: Duration? {
        if let drainDeadline { return drainDeadline }
        return inFlight == 0 ? lastQuestion + limits.idleTimeout : nil
    }

    public func advance(to now: Duration) -> Verdict {
        if let drainDeadline { return now >= drainDeadline ? .close(.drainTimedOut) : .keep }
        return inFlight == 0 && now >= lastQuestion + limits.idleTimeout ? .close(.idle) : .keep
    }
}
