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
    /// connection does.
    public let incoming: AsyncStream<IncomingMessage>
    /// How long the connection took to set up (TCP, TLS, WebSocket and `initialize`).
    public let setupDuration: Duration

    let channel: any Channel
    let session: NIOLoopBound<SessionHandler>
    private let ended: EventLoopFuture<String>
    private let requestTimeout: Duration?
    private let nextID = NIOLockedValueBox(1)

    init(
        role: Role, peer: PeerHello, proof: PeerProof?, channel: any Channel, session: SessionHandler, requestTimeout: Duration?,
        setupDuration: Duration
    ) {
        self.role = role
        self.peer = peer
        verdict = proof?.verdict
        presentedChain = proof?.presented ?? []
        self.channel = channel
        self.session = NIOLoopBound(session, eventLoop: channel.eventLoop)
        incoming = session.incoming
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
    /// - Throws: ``PeerConnectionError``: `remote` with the peer's error, `timeout`, `closed`,
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

    /// Sends `text` as one message, as it is: for tools that relay JSON-RPC written elsewhere.
    /// Responses to requests sent this way arrive on ``incoming``.
    public func send(text: String) async throws(PeerConnectionError) {
        let session = self.session
        let promise = channel.eventLoop.makePromise(of: Void.self)
        session.eventLoop.execute { session.value.sendText(text, promise: promise) }
        do { try await promise.futureResult.get() } catch let error as PeerConnectionError { throw error } catch {
            throw PeerConnectionError(.closed, "the connection is closed")
        }
    }

    /// Closes the connection with a WebSocket close frame (1000 by default) and waits until
    /// it is closed; returns the reason it ended with.
    @discardableResult
    public func close(code: UInt16 = 1000, reason: String = "") async -> String {
        let session = self.session
        session.eventLoop.execute { session.value.close(code: WebSocketErrorCode(codeNumber: Int(code)), reason: reason) }
        return await closed()
    }

    /// Waits until the connection has ended; returns why, in words.
    public func closed() async -> String {
        (try? await ended.get()) ?? "closed"
    }

    /// What this connection has received, sent and refused so far.
    public func statistics() async -> ConnectionStatistics {
        let session = self.session
        return (try? await channel.eventLoop.submit { session.value.statistics }.get()) ?? ConnectionStatistics()
    }
}

/// An address as people write it: an IPv4 peer on a dual-stack socket without its `::ffff:`.
func displayAddress(_ address: SocketAddress?) -> String {
    guard let text = address?.ipAddress else { return "?" }
    return text.hasPrefix("::ffff:") && text.contains(".") ? String(text.dropFirst(7)) : text
}
