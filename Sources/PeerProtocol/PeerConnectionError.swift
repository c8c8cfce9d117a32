public import NearbyBasics
public import NearbyCrypto

/// Why a connection could not be made, or a request not answered, in words a person can act on.
public struct PeerConnectionError: Error, Hashable, Sendable, CustomStringConvertible {
    /// What kind of problem this is. New codes may be added; switch with a `default`.
    public typealias Code = OpenKind<PeerConnectionError>

    public var code: Code
    public var message: String
    /// With `untrusted`: every reason our trust policy gave.
    public var reasons: [TrustReason]
    /// With `untrusted`: the peer ID of the key the peer proved in TLS (its certificate's), so
    /// that a person can be told the whole ID to pin (`nearby trust pin ID`); nil when TLS did
    /// not get that far.
    public var peerID: PeerID?
    /// With `remote`: the error the peer answered with; with `invitation`: the inviter's refusal (`data.reason` its kind), when it gave one.
    public var remoteError: JSONRPCError?

    public init(_ code: Code, _ message: String, reasons: [TrustReason] = [], peerID: PeerID? = nil) {
        self.code = code
        self.message = message
        self.reasons = reasons
        self.peerID = peerID
    }

    package init(remote error: JSONRPCError) {
        self.init(.remote, "the peer answered with an error: \(error.message) (\(error.code))")
        remoteError = error
    }

    public var description: String {
        reasons.isEmpty ? message : message + ": " + reasons.map(\.message).joined(separator: "; ")
    }
}

extension OpenKind where Owner == PeerConnectionError {
    /// No TCP connection: refused, unreachable, or the name did not resolve.
    public static var unreachable: Self { Self("unreachable") }
    /// Our trust policy rejected the peer's certificate (see ``PeerConnectionError/reasons``).
    public static var untrusted: Self { Self("untrusted") }
    /// The TLS handshake failed otherwise: the peer refused our certificate, or speaks no TLS 1.3.
    public static var tls: Self { Self("tls") }
    /// The WebSocket upgrade failed (not a WebSocket server, or not on path `/`).
    public static var upgrade: Self { Self("upgrade") }
    /// `initialize` failed: declined, incompatible versions, a wrong `_meta.peer_id`, or no answer.
    public static var handshake: Self { Self("handshake") }
    /// The connection ended.
    public static var closed: Self { Self("closed") }
    /// No answer in time.
    public static var timeout: Self { Self("timeout") }
    /// The peer answered a request with a JSON-RPC error (``PeerConnectionError/remoteError``).
    public static var remote: Self { Self("remote") }
    /// The caller asked for something impossible (a bad address, a duplicate request id).
    public static var invalidInput: Self { Self("invalidInput") }
    /// Pairing failed: refused, declined by a person on either side, a reveal that does not
    /// match its commitment, or not completed in time.
    public static var pairing: Self { Self("pairing") }
    /// An invitation did not work: the inviter refused it (expired, used up, revoked, void
    /// after wrong proofs), the link has expired here, or no address of it reached the inviter.
    public static var invitation: Self { Self("invitation") }
    /// The caller's task was cancelled.
    public static var cancelled: Self { Self("cancelled") }
    /// Over a limit this side set: too many requests waiting for answers, or (with
    /// `PeerConnection.SendMode.failIfBusy`) the peer is not reading what we already sent.
    public static var busy: Self { Self("busy") }
    /// The peer does not do what was asked of it (streams, when it offered none in `initialize`).
    public static var unsupported: Self { Self("unsupported") }
    /// A stream was reset by either side; the message says which side and why.
    public static var streamReset: Self { Self("streamReset") }
}
