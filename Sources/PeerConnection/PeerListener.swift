import NIOCore
import NIOConcurrencyHelpers
import NIOPosix
import NIOSSL
public import PeerTrust

/// Accepts connections from peers: TLS judged by the configuration's trust policy, then
/// `initialize`, then an ``AcceptPolicy`` decision. Each connection that gets through
/// arrives on ``events`` as `.connected`; each one refused, with the reason, as `.rejected`.
public final class PeerListener: Sendable {
    /// Which authenticated peers get in.
    public enum AcceptPolicy: Sendable {
        /// Peers the trust policy trusts; others are refused in the TLS handshake.
        case trusted
        /// Any peer that proves its key in TLS, trusted or not (see ``PeerConnection/verdict``).
        case all
        /// The app decides for each peer it has not admitted before (an ``Invitation``);
        /// undecided by ``Invitation/answerBy`` (the configuration's `invitationTimeout`), it is
        /// declined. The peer is told that someone decides, and by when, so it waits that long.
        /// Peers the trust policy trusts (pinned, paired) get in without a question, and so does
        /// a peer the app admitted earlier while this listener runs (the same peer ID). The task
        /// that runs the closure is cancelled when the peer goes away first.
        case ask(@Sendable (Invitation) async -> Bool)
    }

    /// A peer that has proven its key and sent `initialize`, waiting to be let in.
    public struct Invitation: Sendable {
        public let peer: PeerHello
        /// What the trust policy says about it (nil on an insecure listener).
        public let verdict: TrustVerdict?
        public let address: String
        public let port: Int
        /// The decision is due by then; after it the peer is declined and an answer counts for nothing.
        public let answerBy: ContinuousClock.Instant
        /// The name to show: the one it gave in `initialize`, else its certificate's.
        public var displayName: String {
            if let name = peer.displayName, !name.isEmpty { return name }
            if case .trusted(let trusted)? = verdict { return trusted.displayName }
            return peer.peerID?.short ?? "unknown peer"
        }
        public var isTrusted: Bool { verdict?.isTrusted ?? false }
    }

    /// A connection that did not get through, and why.
    public struct Rejection: Sendable {
        public let address: String
        public let port: Int
        /// The key the peer proved, when TLS got that far.
        public let peerID: PeerID?
        public let error: PeerConnectionError
    }

    /// Pairing for peers that are not trusted yet (see ``PeerConnection/pair(host:port:expecting:configuration:store:timeout:confirm:)``).
    /// With it, untrusted peers get through the TLS handshake, but may only pair (or, under
    /// `.ask`, be invited); under `.trusted` their `initialize` is refused.
    public struct PairingOffer: Sendable {
        /// Where paired peers are pinned.
        public var store: TrustStore
        /// Asks the person whether the other device shows the same code; true pins (once the
        /// other side said yes too).
        public var confirm: @Sendable (PairingRequest) async -> Bool
        /// A pairing must be done within this, people included.
        public var timeout: Duration = .seconds(60)
        /// Failed pairings (declined, wrong reveal, timed out) allowed within ``failureWindow``;
        /// beyond that, pairing is refused until the oldest failure is older than the window.
        public var maximumFailures = 5
        public var failureWindow: Duration = .seconds(600)

        public init(store: TrustStore, confirm: @escaping @Sendable (PairingRequest) async -> Bool) {
            self.store = store
            self.confirm = confirm
        }
    }

    public enum Event: Sendable {
        case connected(PeerConnection)
        case rejected(Rejection)
        /// A peer paired with us: both people confirmed the code, and it is pinned.
        case paired(PairingResult)
    }

    /// The port listened on (the one the system chose when 0 was asked for).
    public let port: Int
    public let events: AsyncStream<Event>
    private let channel: any Channel
    private let continuation: AsyncStream<Event>.Continuation
    private let live = NIOLockedValueBox<[ObjectIdentifier: PeerConnection]>([:])

    private init(channel: any Channel, events: AsyncStream<Event>, continuation: AsyncStream<Event>.Continuation) {
        self.channel = channel
        self.events = events
        self.continuation = continuation
        port = channel.localAddress?.port ?? 0
    }

    /// Starts listening on `host` (default: every address, IPv6 and IPv4) and `port` (0: any free one).
    public static func listen(
        host: String = "::", port: Int, configuration: PeerConnectionConfiguration, accept: AcceptPolicy = .trusted,
        pairing: PairingOffer? = nil
    ) async throws(PeerConnectionError) -> PeerListener {
        guard (0...65535).contains(port) else { throw PeerConnectionError(.invalidInput, "port \(port) is out of range; use 0-65535") }
        let tls = try TLS.context(for: configuration, server: true)
        let (events, continuation) = AsyncStream.makeStream(of: Event.self)
        let decide: @Sendable (PeerProof?, SocketAddress?) -> SessionHandler.Decide?
        switch accept {
        case .trusted where pairing != nil:
            // Untrusted peers got through TLS to pair; initializing is for trusted ones only.
            decide = { proof, _ in
                proof?.verdict?.isTrusted == true
                    ? nil : { @Sendable _ in .refuse("this peer admits only peers it trusts; pair with it first (nearby pair --host H --port P)") }
            }
        case .trusted, .all:
            decide = { _, _ in nil }
        case .ask(let ask):
            // Peers admitted by the app while this listener runs: not asked again.
            let admitted = NIOLockedValueBox<Set<PeerID>>([])
            decide = { proof, address in
                let verdict = proof?.verdict
                return { hello in
                    if verdict?.isTrusted == true { return .admit }
                    if let peerID = hello.peerID, admitted.withLockedValue({ $0.contains(peerID) }) { return .admit }
                    return .ask { hello, answerBy in
                        let invitation = Invitation(
                            peer: hello, verdict: verdict, address: displayAddress(address), port: address?.port ?? 0, answerBy: answerBy)
                        let accepted = await ask(invitation)
                        if accepted, !Task.isCancelled, let peerID = hello.peerID { admitted.withLockedValue { _ = $0.insert(peerID) } }
                        return accepted
                    }
                }
            }
        }
        let requireTrust: Bool = if case .trusted = accept, pairing == nil { true } else { false }
        var side = Setup.Side(
            role: .accepting, configuration: configuration, tls: tls, expected: nil, requireTrust: requireTrust, decide: decide, host: "")
        if let pairing {
            let limiter = PairingLimiter(maximumFailures: pairing.maximumFailures, window: pairing.failureWindow)
            side.pairing = PairingSetup(
                side: .offer(NIOLockedValueBox(limiter)), store: pairing.store, confirm: pairing.confirm, timeout: pairing.timeout)
        }
        let setupSide = side
        let liveBox = NIOLockedValueBox<PeerListener?>(nil)
        let bootstrap = ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .serverChannelOption(.backlog, value: 1024)
            .childChannelOption(.tcpOption(.tcp_nodelay), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    let start = ContinuousClock.now
                    let opened = try Setup.configure(channel, side: setupSide)
                    let address = channel.remoteAddress
                    opened.whenComplete { outcome in
                        switch outcome {
                        case .failure(let error) where error is ProbeAnswered:
                            break  // a round-trip probe, answered: nobody to report
                        case .failure(let error):
                            let proof = try? channel.pipeline.syncOperations.handler(type: SetupWatcher.self).proof
                            continuation.yield(.rejected(Rejection(
                                address: displayAddress(address), port: address?.port ?? 0, peerID: proof?.peerID,
                                error: error as? PeerConnectionError ?? PeerConnectionError(.closed, "\(error)"))))
                        case .success(let open):
                            open.session.established.futureResult.whenComplete { outcome in
                                switch outcome {
                                case .failure(let error):
                                    var refusal = error as? PeerConnectionError ?? PeerConnectionError(.handshake, "\(error)")
                                    if refusal.code == .handshake, pairing != nil, case .trusted = accept,
                                        case .rejected(let reasons)? = open.proof?.verdict
                                    {
                                        refusal = PeerConnectionError(.untrusted, "the peer is not trusted; it may pair first", reasons: reasons)
                                    }
                                    continuation.yield(.rejected(Rejection(
                                        address: displayAddress(address), port: address?.port ?? 0, peerID: open.proof?.peerID, error: refusal)))
                                case .success(.paired(let result)):
                                    continuation.yield(.paired(result))
                                case .success(.initialized(let hello)):
                                    let connection = PeerConnection(
                                        role: .accepting, peer: hello, proof: open.proof, channel: channel, session: open.session,
                                        requestTimeout: configuration.requestTimeout, setupDuration: ContinuousClock.now - start)
                                    liveBox.withLockedValue { $0 }?.track(connection)
                                    continuation.yield(.connected(connection))
                                }
                            }
                        }
                    }
                }
            }
        do {
            let channel = try await bootstrap.bind(host: host, port: port).get()
            let listener = PeerListener(channel: channel, events: events, continuation: continuation)
            liveBox.withLockedValue { $0 = listener }
            return listener
        } catch {
            configuration.logger.debug("listening on \(host) port \(port) failed: \(error)")
            throw SocketErrors.listenFailure(error, host: host, port: port)
        }
    }

    private func track(_ connection: PeerConnection) {
        let key = ObjectIdentifier(connection)
        live.withLockedValue { $0[key] = connection }
        connection.channel.closeFuture.whenComplete { [live] _ in live.withLockedValue { _ = $0.removeValue(forKey: key) } }
    }

    /// The connections that are open now.
    public var connections: [PeerConnection] { live.withLockedValue { Array($0.values) } }

    /// Stops accepting, closes every open connection with 1001 ("going away") and waits for them.
    public func close() async {
        try? await channel.close()
        await withTaskGroup(of: Void.self) { group in
            for connection in connections {
                group.addTask { await connection.close(code: 1001, reason: "the server is shutting down") }
            }
        }
        continuation.finish()
    }
}
