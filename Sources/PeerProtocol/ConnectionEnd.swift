public import NearbyBasics

/// Why a connection ended: a kind a program can switch on, the WebSocket close code when a
/// close frame said why, which side ended it, and the reason in words (what
/// `PeerConnection.closed()` prints as).
public struct ConnectionEnd: Hashable, Sendable, CustomStringConvertible {
    /// What kind of end this is. New kinds may be added; switch with a `default`.
    public typealias Kind = OpenKind<ConnectionEnd>

    public var kind: Kind
    /// The close frame's code, when there was one (either side's).
    public var closeCode: CloseCode?
    /// True when the peer ended it (its close frame, its silence, or the connection dropping);
    /// false when this side did.
    public var byPeer: Bool
    /// The reason in words, for people and logs.
    public var message: String

    public init(_ kind: Kind, _ message: String, closeCode: CloseCode? = nil, byPeer: Bool) {
        self.kind = kind
        self.message = message
        self.closeCode = closeCode
        self.byPeer = byPeer
    }

    public var description: String { message }
}

extension OpenKind where Owner == ConnectionEnd {
    /// A close handshake: the peer's close frame, or ours (``ConnectionEnd/closeCode`` says why).
    public static var closed: Self { Self("closed") }
    /// The connection dropped without a close frame (the peer's process ended, a reset).
    public static var lost: Self { Self("lost") }
    /// The peer sent nothing, not even a pong, for the dead-peer timeout.
    public static var deadPeer: Self { Self("deadPeer") }
    /// The peer broke a rule of the WebSocket protocol: a malformed frame, text that is not
    /// UTF-8, a message over the size limit.
    public static var violation: Self { Self("violation") }
    /// The peer sent requests and did not read the answers until a hard limit was passed.
    public static var overLimit: Self { Self("overLimit") }
    /// The opening failed: `initialize` (declined, incompatible, no answer) or a pairing.
    public static var openingFailed: Self { Self("openingFailed") }
    /// The connection failed below the WebSocket (TLS, an I/O error).
    public static var failed: Self { Self("failed") }
}
