import Logging
import NIOCore
import NIOWebSocket

/// The streams of a connection, on its event loop: the shell of a `StreamMultiplexer`. It
/// sits between ``WebSocketMessageHandler`` and ``SessionHandler``: binary messages (stream
/// frames) go to the machine, text (JSON-RPC) passes on. It owns what a pure machine cannot:
/// the app's stream objects and the promises of writes that wait for credit.
final class StreamHandler: ChannelDuplexHandler {
    typealias InboundIn = WebSocketMessage
    typealias InboundOut = String
    typealias OutboundIn = OutboundFrame
    typealias OutboundOut = OutboundFrame

    private var machine: StreamMultiplexer
    private let logger: Logger
    private var context: ChannelHandlerContext?
    private var weak: NIOLoopBound<WeakStreamHandler>?
    private var cores: [StreamID: StreamCore] = [:]
    private var writes: [StreamMultiplexer.WriteToken: EventLoopPromise<Void>] = [:]
    private var nextToken: UInt64 = 0
    private let accepted: AsyncStream<PeerStream>.Continuation
    /// The streams the peer opens, for ``PeerConnection/incomingStreams``.
    let incoming: IncomingStreams

    init(settings: StreamSettings, connecting: Bool, logger: Logger) {
        machine = StreamMultiplexer(local: settings, connecting: connecting)
        self.logger = logger
        // Bounded by the multiplexer: a peer opens at most `maximumStreams` streams at once
        // (one more is refused), each yielded once.
        let (stream, continuation) = AsyncStream<PeerStream>.makeStream()
        incoming = IncomingStreams(streams: stream)
        accepted = continuation
    }

    var statistics: StreamStatistics { machine.statistics }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        weak = NIOLoopBound(WeakStreamHandler(self), eventLoop: context.eventLoop)
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        perform(machine.connectionEnded("the connection closed"))
        self.context = nil
    }

    /// `initialize` is done; the peer announced `capabilities`.
    func negotiated(peerCapabilities capabilities: JSONValue, offeredHere: Bool) {
        perform(machine.negotiated(peerCapabilities: capabilities, offeredHere: offeredHere))
    }

    // MARK: The peer

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .text(let text):
            context.fireChannelRead(wrapInboundOut(text))
        case .binary(let bytes):
            perform(machine.receive(bytes))
        }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        context.flush()
        context.fireChannelReadComplete()
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let ended = event as? WebSocketEnded { perform(machine.connectionEnded(ended.end.message)) }
        context.fireUserInboundEventTriggered(event)
    }

    func channelInactive(context: ChannelHandlerContext) {
        perform(machine.connectionEnded("the connection closed"))
        context.fireChannelInactive()
    }

    // MARK: The app

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        context.write(data, promise: promise)
    }

    /// Opens a stream for the app.
    func open(label: String) -> Result<PeerStream, PeerConnectionError> {
        guard let weak else { return .failure(PeerConnectionError(.closed, "the connection is not open")) }
        switch machine.open(label: label) {
        case .failure(let error):
            return .failure(error)
        case .success(let (id, actions)):
            let core = StreamCore(id: id, label: label, handler: weak)
            cores[id] = core
            perform(actions)
            context?.flush()
            return .success(PeerStream(core: core))
        }
    }

    func write(_ id: StreamID, _ bytes: ByteBuffer, promise: EventLoopPromise<Void>) {
        let token = takeToken(for: promise)
        perform(machine.write(id, bytes, token: token))
        context?.flush()
    }

    func finish(_ id: StreamID, promise: EventLoopPromise<Void>) {
        let token = takeToken(for: promise)
        perform(machine.finish(id, token: token))
        context?.flush()
    }

    func reset(_ id: StreamID, code: StreamResetCode, reason: String) {
        perform(machine.reset(id, code: code, reason: reason))
        context?.flush()
    }

    func consumed(_ id: StreamID, bytes: Int) {
        let actions = machine.consumed(id, bytes: bytes)
        guard !actions.isEmpty else { return }
        perform(actions)
        context?.flush()
    }

    private func takeToken(for promise: EventLoopPromise<Void>) -> StreamMultiplexer.WriteToken {
        nextToken += 1
        let token = StreamMultiplexer.WriteToken(value: nextToken)
        writes[token] = promise
        return token
    }

    // MARK: Actions

    private func perform(_ actions: [StreamMultiplexer.Action]) {
        for action in actions {
            switch action {
            case .send(let frame):
                guard let context else { continue }
                context.write(wrapOutboundOut(.binary(frame.encoded(allocator: context.channel.allocator))), promise: nil)
            case .accepted(let id, let label):
                guard let weak else { continue }
                let core = StreamCore(id: id, label: label, handler: weak)
                cores[id] = core
                accepted.yield(PeerStream(core: core))
            case .deliver(let id, let bytes):
                cores[id]?.deliver(bytes)
            case .finished(let id):
                cores[id]?.peerFinished()
            case .ended(let id, let error):
                cores.removeValue(forKey: id)?.ended(error)
            case .writeDone(let token):
                writes.removeValue(forKey: token)?.succeed()
            case .writeFailed(let token, let error):
                writes.removeValue(forKey: token)?.fail(error)
            case .closeConnection(let code, let reason):
                logger.info("closing the connection: \(reason)")
                context?.writeAndFlush(wrapOutboundOut(.close(WebSocketErrorCode(codeNumber: Int(code.value)), reason: reason)), promise: nil)
            case .log(let level, let message):
                logger.log(level: Logger.Level(level), "\(message)")
            }
        }
        if machine.openCount < cores.count { forgetFinished() }
        if case .some = machine.endedError { accepted.finish() }
    }

    /// Lets go of the stream objects the machine no longer tracks (finished both ways): their
    /// readers keep what was delivered.
    private func forgetFinished() {
        for id in cores.keys where !machine.isTracking(id) { cores[id] = nil }
    }
}
