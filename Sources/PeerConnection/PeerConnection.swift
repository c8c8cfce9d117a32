import NearbyBasics
import NIOCore
import NIOConcurrencyHelpers
import NIOWebSocket
public import PeerTrust

/// One live, initialized connection to a peer: JSON-RPC 2.0 over a WebSocket over mutually
/// authenticated TLS 1.3. Make one with ``connect(host:port:expecting:configuration:)`` or
/// receive it from a ``PeerListener``.
///
/// Send requests with ``request(_:params:timeout:)``; read what the peer sends (requests,
/// notifications, unmatched responses) from ``incoming``, one reader at a time.
public final class PeerConnection: Sendable {
    /// Which side opened the connection.
    public enum Role: String, Sendable {
        /// We connected (we sent `initialize`).
        case connecting
        /// The peer connected to us.
        case accepting
    }

    public let role: Role
    /// What the peer said in `initialize`, with its TLS-proven peer ID.
    public let peer: PeerHello
    /// What our trust policy said about the peer's certificate; nil on an insecure connection.
    public let verdict: TrustVerdict?
    /// The chain the peer presented, leaf first (empty on an insecure connection).
    public let presentedChain: [Certificate]
    /// The peer's address and port.
    public let remoteAddress: String
    public let remotePort: Int
    /// Requests, notifications and responses nobody awaits, in arrival order. Ends when the
    /// connection does. Bounded (``PeerConnectionConfiguration/incomingLimit``): while it is
    /// full the connection stops reading and TCP holds the peer back, so read it.
    public let incoming: IncomingMessages
    /// This connection among all of this process's connections (in events and logs): tells
    /// apart two connections to the same peer, such as one the broker replaced.
    public let id: ConnectionID
    /// How long the connection took to set up (TCP, TLS, WebSocket and `initialize`).
    public let setupDuration: Duration

    /// The byte streams the peer opens (see ``openStream(label:)``); ends with the connection.
    public let incomingStreams: IncomingStreams

    let channel: any Channel
    let session: NIOLoopBound<SessionHandler>
    let streams: NIOLoopBound<StreamHandler>
    private let ended: EventLoopFuture<ConnectionEnd>
    private let requestTimeout: Duration?
    private let nextID = Locked(1)

    init(
        role: Role, peer: PeerHello, proof: PeerProof?, channel: any Channel, session: SessionHandler, streams: StreamHandler,
        requestTimeout: Duration?, setupDuration: Duration
    ) {
        self.role = role
        self.peer = peer
        verdict = proof?.verdict
        presentedChain = proof?.presented ?? []
        self.channel = channel
        self.session = NIOLoopBound(session, eventLoop: channel.eventLoop)
        self.streams = NIOLoopBound(streams, eventLoop: channel.eventLoop)
        incoming = session.incoming
        incomingStreams = streams.incoming
        id = ConnectionID.next()
        ended = session.ended.futureResult
        self.requestTimeout = requestTimeout
        self.setupDuration = setupDuration
        let address = channel.remoteAddress
        remoteAddress = displayAddress(address)
        remotePort = address?.port ?? 0
    }

    /// The peer's ID, proven by its key in the TLS handshake (nil on an insecure connection).
    public var peerID: PeerID? { peer.peerID }

    /// Sends a request and waits for its result.
    /// - Parameters:
    ///   - method: the JSON-RPC method to call.
    ///   - params: the request's params, if any.
    ///   - timeout: how long to wait (default: the configuration's `requestTimeout`).
    /// - Throws: `PeerConnectionError`: `remote` with the peer's error, `timeout`, `closed`,
    ///   `cancelled` (the peer is then sent `$/cancelRequest`).
    public func request(_ method: String, params: JSONValue? = nil, timeout: Duration? = nil) async throws(PeerConnectionError) -> JSONValue {
        let id = JSONRPCID.integer(nextID.withLockedValue { value in
            defer { value += 1 }
            return value
        })
        let limit = (timeout ?? requestTimeout).map { TimeAmount.nanoseconds(nanoseconds($0)) }
        let session = self.session
        let promise = channel.eventLoop.makePromise(of: JSONValue.self)
        do {
            return try await withTaskCancellationHandler {
                if session.eventLoop.inEventLoop {
                    session.value.request(id: id, method: method, params: params, timeout: limit, promise: promise)
                } else {
                    session.eventLoop.execute { session.value.request(id: id, method: method, params: params, timeout: limit, promise: promise) }
                }
                return try await promise.futureResult.get()
            } onCancel: {
                session.eventLoop.execute { session.value.abandon(id, PeerConnectionError(.cancelled, "the request \"\(method)\" was cancelled")) }
            }
        } catch let error as PeerConnectionError {
            throw error
        } catch {
            throw PeerConnectionError(.closed, "\(error)")
        }
    }

    /// Sends a request with Codable params and decodes its result as `Result`.
    public func request<Params: Encodable, Result: Decodable>(
        _ method: String, params: Params, returning type: Result.Type = Result.self, timeout: Duration? = nil
    ) async throws(PeerConnectionError) -> Result {
        let encoded: JSONValue
        do { encoded = try JSONValue(encoding: params) } catch {
            throw PeerConnectionError(.invalidInput, "the params of \"\(method)\" cannot be encoded as JSON: \(error)")
        }
        let result = try await request(method, params: encoded, timeout: timeout)
        do { return try result.decode(as: Result.self) } catch {
            throw PeerConnectionError(.remote, "the result of \"\(method)\" is not a \(Result.self): \(error)")
        }
    }

    /// Sends a notification (no answer comes).
    public func notify(_ method: String, params: JSONValue? = nil) async throws(PeerConnectionError) {
        try await send(text: JSONRPCMessage.notification(method: method, params: params).jsonText)
    }

    /// What a send does while the peer does not read what we already sent.
    public enum SendMode: Sendable {
        /// Wait until the message is handed to the socket (the default): a sender is held
        /// back at the peer's pace, and nothing piles up in memory.
        case wait
        /// Return as soon as the message is queued; fail at once with `busy` while the
        /// connection's write buffer is over its high-water mark (64 KiB: the peer is not
        /// reading). For a sender that would rather skip or coalesce than wait.
        case failIfBusy
    }

    /// Sends `text` as one message, as it is: for tools that relay JSON-RPC written elsewhere.
    /// Responses to requests sent this way arrive on ``incoming``. Returns once the message
    /// is handed to the socket (see ``SendMode``).
    public func send(text: String, mode: SendMode = .wait) async throws(PeerConnectionError) {
        let session = self.session
        let promise = channel.eventLoop.makePromise(of: Void.self)
        let failIfBusy = mode == .failIfBusy
        session.eventLoop.execute { session.value.sendText(text, failIfBusy: failIfBusy, promise: promise) }
        do { try await promise.futureResult.get() } catch let error as PeerConnectionError { throw error } catch {
            throw PeerConnectionError(.closed, "the connection is closed")
        }
    }

    /// Closes the connection with a WebSocket close frame (`CloseCode.normal` by default)
    /// and waits until it is closed; returns why it ended (the peer may have ended it first).
    @discardableResult
    public func close(code: CloseCode = .normal, reason: String = "") async -> ConnectionEnd {
        let session = self.session
        session.eventLoop.execute { session.value.close(code: WebSocketErrorCode(codeNumber: Int(code.value)), reason: reason) }
        return await closed()
    }

    /// Whether the peer answers a `ping` within `timeout`. A connection that stopped reading
    /// because our app is behind (for less than `deadPeerTimeout`) counts as alive: its
    /// silence is ours, not the peer's.
    package func isAlive(timeout: Duration, deadPeerTimeout: Duration) async -> Bool {
        let session = self.session
        let held = (try? await channel.eventLoop.submit { session.value.heldBackRecently(within: deadPeerTimeout) }.get()) ?? false
        if held { return true }
        do {
            _ = try await request("ping", timeout: timeout)
            return true
        } catch {
            return false
        }
    }

    /// Waits until the connection has ended; returns why (`ConnectionEnd.kind` to switch on,
    /// its description in words).
    public func closed() async -> ConnectionEnd {
        (try? await ended.get()) ?? ConnectionEnd(.lost, "the connection closed", byPeer: true)
    }

    /// Opens a byte stream to the peer, beside JSON-RPC and the other streams. The peer takes
    /// it from its ``incomingStreams``.
    /// - Parameter label: what the stream is for, for the peer to route it (up to 255 bytes of
    ///   UTF-8; longer is cut).
    /// - Throws: `PeerConnectionError`: `unsupported` (the peer offered no streams in
    ///   `initialize`, or this side offers none), `busy` (as many streams open as the peer
    ///   takes), `closed`.
    public func openStream(label: String = "") async throws(PeerConnectionError) -> PeerStream {
        let streams = self.streams
        let outcome: Result<PeerStream, PeerConnectionError>
        do {
            outcome = try await channel.eventLoop.submit { streams.value.open(label: label) }.get()
        } catch {
            throw PeerConnectionError(.closed, "the connection is closed")
        }
        return try outcome.get()
    }

    /// What this connection's streams moved and refused so far.
    public func streamStatistics() async -> StreamStatistics {
        let streams = self.streams
        return (try? await channel.eventLoop.submit { streams.value.statistics }.get()) ?? StreamStatistics()
    }

    /// What this connection has received, sent and refused so far.
    public func statistics() async -> ConnectionStatistics {
        let session = self.session
        return (try? await channel.eventLoop.submit { session.value.statistics }.get()) ?? ConnectionStatistics()
    }
}

/// A connection's number in this process, unique while it runs (1, 2, 3, …).
public struct ConnectionID: Hashable, Sendable, CustomStringConvertible {
    public let value: UInt64
    public var description: String { "\(value)" }

    package init(value: UInt64) { self.value = value }

    private static let counter = Locked<UInt64>(0)
    static func next() -> ConnectionID {
        ConnectionID(value: counter.withLockedValue { value in
            value += 1
            return value
        })
    }
}

/// An address as people write it: an IPv4 peer on a dual-stack socket without its `::ffff:`.
func displayAddress(_ address: SocketAddress?) -> String {
    guard let text = address?.ipAddress else { return "?" }
    return text.hasPrefix("::ffff:") && text.contains(".") ? String(text.dropFirst(7)) : text
}
