/// A WebSocket close code (RFC 6455 §7.4): why a side ends a connection. An integer literal
/// is one (`close(code: 4000)` for an application's own code, 4000-4999).
public struct CloseCode: Hashable, Sendable, ExpressibleByIntegerLiteral, CustomStringConvertible {
    public let value: UInt16

    public init(_ value: UInt16) { self.value = value }
    public init(integerLiteral value: UInt16) { self.value = value }

    /// 1000: done, nothing wrong.
    public static let normal = CloseCode(1000)
    /// 1001: this side is going away (shutting down, leaving).
    public static let goingAway = CloseCode(1001)
    /// 1002: the peer broke the WebSocket protocol.
    public static let protocolError = CloseCode(1002)
    /// 1003: data of a kind this side does not take (binary frames here).
    public static let unacceptableData = CloseCode(1003)
    /// 1008: the peer broke this side's rules (a failed handshake or pairing).
    public static let policyViolation = CloseCode(1008)
    /// 1009: a message over the size limit.
    public static let messageTooLarge = CloseCode(1009)
    /// 1011: this side failed.
    public static let serverError = CloseCode(1011)

    public var description: String { "\(value)" }
}
