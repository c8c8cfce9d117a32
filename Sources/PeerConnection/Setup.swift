import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOSSL
import NIOWebSocket
import PeerTrust

/// What set-up hands over once the WebSocket is open: the session (its handshake about to run)
/// and what TLS proved.
///
/// Unchecked: it is made on the connection's event loop and read only in callbacks that run there.
struct OpenedChannel: @unchecked Sendable {
    let session: SessionHandler
    let streams: StreamHandler
    let proof: PeerProof?
}

/// Builds one connection's pipeline, on either side: TLS (unless insecure), the HTTP upgrade
/// to a WebSocket on path `/`, then ``WebSocketMessageHandler`` and ``SessionHandler``.
enum Setup {
    struct Side: Sendable {
        var role: PeerConnection.Role
        var configuration: PeerConnectionConfiguration
        var tls: NIOSSLContext?
        var expected: PeerID?
        var requireTrust: Bool
        /// Accepting side: builds the app's decision for one connection from what TLS proved.
        var decide: (@Sendable (PeerProof?, SocketAddress?) -> SessionHandler.Decide?)?
        /// Connecting side: the Host header.
        var host: String
        /// Pairing: started by this side, or offered to peers that ask.
        var pairing: PairingSetup? = nil
        /// Invitations: one used by this side, or taken from peers that come with one.
        var invitation: InvitationSetup? = nil
    }

    static func configure(_ channel: any Channel, side: Side) throws -> EventLoopFuture<OpenedChannel> {
        let eventLoop = channel.eventLoop
        let opened = eventLoop.makePromise(of: OpenedChannel.self)
        let proof = side.tls == nil ? nil : PeerProof()
        let pipeline = channel.pipeline.syncOperations
        let configuration = side.configuration
        if side.role == .accepting {
            // A round-trip probe is answered before TLS (see ``Probe``).
            try pipeline.addHandler(ProbeResponder())
        }
        if let tls = side.tls, let proof {
            let bound = NIOLoopBound(proof, eventLoop: eventLoop)
            let verify = TLS.verifier(
                configuration: configuration, role: side.role == .connecting ? .connecting : .accepting, expected: side.expected,
                requireTrust: side.requireTrust, proof: bound)
            if side.role == .connecting {
                try pipeline.addHandler(NIOSSLClientHandler(context: tls, serverHostname: nil, customVerificationCallback: verify))
            } else {
                try pipeline.addHandler(NIOSSLServerHandler(context: tls, customVerificationCallback: verify))
            }
        }
        let watcher = SetupWatcher(opened: opened, proof: proof, timeout: configuration.setupTimeout, logger: configuration.logger)
        try pipeline.addHandler(watcher)

        let limit = configuration.maximumMessageSize
        let boundProof = proof.map { NIOLoopBound($0, eventLoop: eventLoop) }
        @Sendable func openSession(_ channel: any Channel) -> EventLoopFuture<Void> {
            channel.eventLoop.makeCompletedFuture {
                let proof = boundProof?.value
                var offersPairing = false
                if case .offer? = side.pairing?.side { offersPairing = true }
                var offersInvitations = false
                if case .offer? = side.invitation?.side { offersInvitations = true }
                let handshake = Handshake(
                    role: side.role == .connecting ? .connecting : .accepting, local: configuration.local(), remotePeerID: proof?.peerID,
                    initializeTimeout: configuration.initializeTimeout, invitationTimeout: configuration.invitationTimeout,
                    offersPairing: offersPairing, offersInvitations: offersInvitations, admissionWaitLimit: configuration.admissionWaitLimit)
                let leaf = proof?.presented.first
                let session = SessionHandler(
                    handshake: handshake, decide: side.decide?(proof, channel.remoteAddress), eventLoop: channel.eventLoop,
                    logger: configuration.logger, pairing: side.pairing,
                    remoteName: leaf.map { $0.commonName.isEmpty ? $0.subject : $0.commonName } ?? "",
                    remoteAddress: displayAddress(channel.remoteAddress), methods: configuration.methods,
                    waitingForAdmission: configuration.waitingForAdmission, incomingLimit: configuration.incomingLimit,
                    maximumPendingRequests: configuration.maximumPendingRequests, invitation: side.invitation,
                    peerTrusted: proof?.verdict?.isTrusted == true)
                let messages = WebSocketMessageHandler(
                    masksFrames: side.role == .connecting, maximumMessageSize: limit, deadPeerTimeout: configuration.deadPeerTimeout,
                    logger: configuration.logger)
                let streams = StreamHandler(
                    settings: configuration.offeredStreams ?? StreamSettings(), connecting: side.role == .connecting, logger: configuration.logger)
                let sync = channel.pipeline.syncOperations
                try WebSocketFrameWriter.replaceEncoder(in: sync)
                try sync.addHandler(messages)
                try sync.addHandler(streams)
                try sync.addHandler(session)
                // Streams start once both sides offered them in initialize (the promise's
                // callbacks run at once on the loop, before the next frame is read).
                let boundStreams = NIOLoopBound(streams, eventLoop: channel.eventLoop)
                let offered = configuration.offeredStreams != nil
                session.established.futureResult.whenSuccess { opening in
                    guard case .initialized(let hello) = opening else { return }
                    boundStreams.value.negotiated(peerCapabilities: hello.capabilities, offeredHere: offered)
                }
                opened.succeed(OpenedChannel(session: session, streams: streams, proof: proof))
            }
        }

        switch side.role {
        case .connecting:
            let requester = UpgradeRequester(host: side.host)
            let upgrader = NIOWebSocketClientUpgrader(maxFrameSize: limit, automaticErrorHandling: true) { channel, _ in
                channel.pipeline.removeHandler(requester).flatMap { openSession(channel) }
            }
            try pipeline.addHTTPClientHandlers(withClientUpgrade: (upgraders: [upgrader], completionHandler: { _ in }))
            try pipeline.addHandler(requester)
        case .accepting:
            let refuser = NotAWebSocket()
            let upgrader = NIOWebSocketServerUpgrader(
                maxFrameSize: limit, automaticErrorHandling: true,
                shouldUpgrade: { channel, head in
                    channel.eventLoop.makeSucceededFuture(head.uri == "/" || head.uri.hasPrefix("/?") ? HTTPHeaders() : nil)
                },
                upgradePipelineHandler: { channel, _ in
                    channel.pipeline.removeHandler(refuser).flatMap { openSession(channel) }
                })
            try pipeline.configureHTTPServerPipeline(withServerUpgrade: (upgraders: [upgrader], completionHandler: { _ in }))
            try pipeline.addHandler(refuser)
        }
        return opened.futureResult
    }

    /// Turns a failure during set-up into words: our own trust verdict first, then what TLS said.
    static func describe(_ error: any Error, proof: PeerProof?) -> PeerConnectionError {
        if let refusal = proof?.refusal { return refusal }
        if let error = error as? PeerConnectionError { return error }
        let text = "\(error)"
        if text.contains("EOF during handshake") {
            // A dialer that gave up (the loser of a happy-eyeballs race, a client that changed
            // its mind) or a peer that refused without saying why: nobody was refused here.
            return PeerConnectionError(.closed, "the peer closed the connection during the TLS handshake")
        }
        if error is NIOSSLError || text.contains("SSL") || text.contains("TLS") {
            // BoringSSL's reason is the upper-case word after "OPENSSL_internal:".
            let reason = text.split(separator: "OPENSSL_internal:", omittingEmptySubsequences: false).dropFirst().first
                .map { String($0.prefix(while: { $0.isUppercase || $0.isNumber || $0 == "_" }).lowercased().map { $0 == "_" ? " " : $0 }) }
            let detail = reason.map { "BoringSSL: \($0)" } ?? text
            if text.contains("VERSION") || text.contains("UNSUPPORTED_PROTOCOL") {
                return PeerConnectionError(.tls, "the peer does not speak TLS 1.3 (\(detail))")
            }
            if text.contains("ALERT") {
                return PeerConnectionError(.tls, "the peer refused the TLS handshake; it may not trust our certificate (\(detail))")
            }
            return PeerConnectionError(.tls, "the TLS handshake failed (\(detail))")
        }
        if let failure = SocketErrors.setupFailure(error) { return failure }
        if error is NIOHTTPClientUpgradeError || error is HTTPParserError {
            return PeerConnectionError(.upgrade, "the peer is not a WebSocket server on path / (\(text))")
        }
        return PeerConnectionError(.closed, text)
    }
}

/// Fails set-up with the first error, an early close or the set-up timeout; then only passes
/// everything on.
final class SetupWatcher: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = NIOAny
    let opened: EventLoopPromise<OpenedChannel>
    let proof: PeerProof?
    let timeout: Duration
    let logger: Logger
    private var done = false
    private var timer: Scheduled<Void>?

    init(opened: EventLoopPromise<OpenedChannel>, proof: PeerProof?, timeout: Duration, logger: Logger) {
        self.opened = opened
        self.proof = proof
        self.timeout = timeout
        self.logger = logger
    }

    func handlerAdded(context: ChannelHandlerContext) {
        let channel = context.channel
        let opened = self.opened
        let timeout = self.timeout
        timer = context.eventLoop.scheduleTask(in: .nanoseconds(nanoseconds(timeout))) {
            opened.fail(PeerConnectionError(.timeout, "no TLS and WebSocket set-up within \(secondsText(timeout))"))
            channel.close(promise: nil)
        }
        let watcher = NIOLoopBound(self, eventLoop: context.eventLoop)
        let pipeline = context.pipeline
        opened.futureResult.whenComplete { outcome in
            watcher.value.timer?.cancel()
            watcher.value.done = true
            // Once the session runs, every message would pass through here for nothing.
            if case .success = outcome { pipeline.syncOperations.removeHandler(watcher.value, promise: nil) }
        }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        context.fireChannelRead(data)
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if !done, event is ProbeAnswered {
            done = true
            opened.fail(ProbeAnswered())
        }
        context.fireUserInboundEventTriggered(event)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        if !done {
            opened.fail(Setup.describe(error, proof: proof))
            context.close(promise: nil)
        }
        context.fireErrorCaught(error)
    }

    func channelInactive(context: ChannelHandlerContext) {
        if !done {
            opened.fail(Setup.describe(PeerConnectionError(.closed, "the peer closed the connection during set-up"), proof: proof))
        }
        context.fireChannelInactive()
    }
}

/// Connecting side: asks for the WebSocket (`GET /` with the upgrade headers the upgrader adds).
final class UpgradeRequester: ChannelInboundHandler, RemovableChannelHandler, Sendable {
    typealias InboundIn = HTTPClientResponsePart
    typealias OutboundOut = HTTPClientRequestPart
    let host: String

    init(host: String) { self.host = host }

    func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive { request(context: context) }
    }

    func channelActive(context: ChannelHandlerContext) {
        request(context: context)
        context.fireChannelActive()
    }

    private func request(context: ChannelHandlerContext) {
        var headers = HTTPHeaders()
        // No Content-Length: a GET has no body, and some servers (Python's websockets) refuse one.
        headers.add(name: "Host", value: host)
        context.write(wrapOutboundOut(.head(HTTPRequestHead(version: .http1_1, method: .GET, uri: "/", headers: headers))), promise: nil)
        context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        // A response that is not the upgrade: the upgrade handler has already failed set-up.
        context.close(promise: nil)
    }
}

/// Accepting side: anything but a WebSocket upgrade on `/` gets a short HTTP answer and a close.
final class NotAWebSocket: ChannelInboundHandler, RemovableChannelHandler, Sendable {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard case .head(let head) = unwrapInboundIn(data) else { return }
        let (status, body): (HTTPResponseStatus, String) =
            head.uri == "/"
            ? (.upgradeRequired, "this is a WebSocket endpoint: connect with a WebSocket client (JSON-RPC 2.0 over wss://)\n")
            : (.notFound, "the WebSocket endpoint is at path /\n")
        var headers = HTTPHeaders()
        headers.add(name: "Content-Length", value: String(body.utf8.count))
        headers.add(name: "Connection", value: "close")
        if status == .upgradeRequired { headers.add(name: "Upgrade", value: "websocket") }
        context.write(wrapOutboundOut(.head(HTTPResponseHead(version: head.version, status: status, headers: headers))), promise: nil)
        context.write(wrapOutboundOut(.body(.byteBuffer(context.channel.allocator.buffer(string: body)))), promise: nil)
        let channel = context.channel
        context.writeAndFlush(wrapOutboundOut(.end(nil))).whenComplete { _ in channel.close(promise: nil) }
    }
}
