import Logging
import NIOCore
import NIOWebSocket

/// What the layers above the WebSocket write: a text message (JSON-RPC), a binary one (a
/// stream frame), or the end of the connection.
enum OutboundFrame: Sendable {
    case text(String)
    case binary(ByteBuffer)
    case close(WebSocketErrorCode, reason: String)
}

/// A whole message from the peer: text (JSON-RPC) or binary (a stream frame).
enum WebSocketMessage: Sendable, Hashable {
    case text(String)
    case binary(ByteBuffer)
}

/// Sent up the pipeline once, when the WebSocket is about to end, with why.
struct WebSocketEnded: Sendable {
    var end: ConnectionEnd

    init(_ kind: ConnectionEnd.Kind, code: WebSocketErrorCode?, reason: String, byPeer: Bool) {
        end = ConnectionEnd(kind, reason, closeCode: code.map { CloseCode(UInt16(webSocketErrorCode: $0)) }, byPeer: byPeer)
    }
}

/// Sent down the pipeline by the session when it stops reading because its app is behind, and
/// when it reads again: the liveness check then neither calls the peer dead nor lets the peer
/// think we are (see `Liveness`).
enum ReadGate: Sendable {
    case held
    case released
}

/// Turns WebSocket frames into whole text messages and back (RFC 6455): reassembles fragments
/// up to `maximumMessageSize` (over it: close 1009), answers pings, runs the close handshake,
/// and pings a quiet peer so a dead one is noticed within `deadPeerTimeout` (`Liveness`).
/// Text messages carry JSON-RPC, binary ones stream frames (``StreamHandler`` takes them).
final class WebSocketMessageHandler: ChannelDuplexHandler {
    typealias InboundIn = WebSocketFrame
    typealias InboundOut = WebSocketMessage
    typealias OutboundIn = OutboundFrame
    typealias OutboundOut = WebSocketFrame

    /// A client masks every frame it sends (RFC 6455 §5.3); a server never does.
    let masksFrames: Bool
    let maximumMessageSize: Int
    let deadPeerTimeout: Duration
    /// How long to wait for the peer's close frame after sending ours.
    let closeTimeout: TimeAmount
    let logger: Logger

    private var liveness: Liveness?
    private var tickTask: Scheduled<Void>?
    private var partial: ByteBuffer?
    /// Whether the message being reassembled is binary.
    private var partialIsBinary = false
    private var closeSent = false
    private var ended = false

    init(masksFrames: Bool, maximumMessageSize: Int, deadPeerTimeout: Duration, closeTimeout: TimeAmount = .seconds(2), logger: Logger) {
        self.masksFrames = masksFrames
        self.maximumMessageSize = maximumMessageSize
        self.deadPeerTimeout = deadPeerTimeout
        self.closeTimeout = closeTimeout
        self.logger = logger
    }

    func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive { startLiveness(context: context) }
    }

    func channelActive(context: ChannelHandlerContext) {
        startLiveness(context: context)
        context.fireChannelActive()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        tickTask?.cancel()
    }

    private func startLiveness(context: ChannelHandlerContext) {
        guard liveness == nil, deadPeerTimeout > .zero else { return }
        liveness = Liveness(deadAfter: deadPeerTimeout, now: uptime(context))
        scheduleTick(context: context)
    }

    private func scheduleTick(context: ChannelHandlerContext) {
        guard let liveness else { return }
        tickTask?.cancel()
        let due = NIODeadline.uptimeNanoseconds(UInt64(clamping: nanoseconds(liveness.nextTick)))
        let loopBound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        tickTask = context.eventLoop.scheduleTask(deadline: due) {
            let (handler, context) = loopBound.value
            handler.tick(context: context)
        }
    }

    private func tick(context: ChannelHandlerContext) {
        guard var state = liveness, !ended else { return }
        let action = state.tick(at: uptime(context))
        liveness = state
        switch action {
        case .wait:
            break
        case .ping:
            logger.trace("pinging a quiet peer")
            write(context: context, opcode: .ping, data: context.channel.allocator.buffer(capacity: 0), promise: nil)
            context.flush()
        case .heartbeat:
            logger.trace("our app is behind and reading is held: telling the peer we are alive")
            write(context: context, opcode: .pong, data: context.channel.allocator.buffer(capacity: 0), promise: nil)
            context.flush()
        case .dead(let silence):
            end(context: context, WebSocketEnded(.deadPeer, code: nil, reason: "the peer sent nothing for \(secondsText(silence)) (dead peer: unplugged, stopped or unreachable)", byPeer: true))
            context.close(promise: nil)
            return
        }
        scheduleTick(context: context)
    }

    // MARK: Inbound

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = unwrapInboundIn(data)
        if var state = liveness {
            state.heard(at: uptime(context))
            liveness = state
        }
        switch frame.opcode {
        case .ping:
            guard !closeSent else { return }
            // A peer that pings and never reads the pongs must not grow our write buffer: while
            // earlier writes wait, this ping goes unanswered (RFC 6455 §5.5.3 lets an endpoint
            // answer only the latest ping).
            guard context.channel.isWritable else {
                logger.trace("a ping left unanswered: the peer is not reading what we sent")
                return
            }
            write(context: context, opcode: .pong, data: frame.payload, promise: nil)
            context.flush()
        case .pong:
            break
        case .connectionClose:
            receivedClose(context: context, frame: frame)
        case .text, .binary:
            guard partial == nil else { return protocolError(context: context, "a new message began before the last one ended") }
            partialIsBinary = frame.opcode == .binary
            receivedData(context: context, frame: frame)
        case .continuation:
            guard partial != nil else { return protocolError(context: context, "a continuation frame without a message to continue") }
            receivedData(context: context, frame: frame)
        default:
            protocolError(context: context, "unknown opcode \(frame.opcode)")
        }
    }

    private func receivedData(context: ChannelHandlerContext, frame: WebSocketFrame) {
        var data = frame.payload
        let size = (partial?.readableBytes ?? 0) + data.readableBytes
        guard size <= maximumMessageSize else {
            partial = nil
            return fail(context: context, .messageTooLarge, "a message of more than \(maximumMessageSize) bytes (the limit)")
        }
        if frame.fin && partial == nil {
            return deliver(context: context, data)
        }
        if partial == nil { partial = context.channel.allocator.buffer(capacity: size) }
        partial?.writeBuffer(&data)
        if frame.fin, let whole = partial {
            partial = nil
            deliver(context: context, whole)
        }
    }

    private func deliver(context: ChannelHandlerContext, _ buffer: ByteBuffer) {
        guard !closeSent else { return }
        if partialIsBinary { return context.fireChannelRead(wrapInboundOut(.binary(buffer))) }
        guard let text = try? buffer.getUTF8ValidatedString(at: buffer.readerIndex, length: buffer.readableBytes) else {
            return fail(context: context, .dataInconsistentWithMessage, "a text message that is not valid UTF-8")
        }
        context.fireChannelRead(wrapInboundOut(.text(text)))
    }

    private func receivedClose(context: ChannelHandlerContext, frame: WebSocketFrame) {
        var data = frame.payload
        let code = data.readWebSocketErrorCode()
        let reason = data.readString(length: data.readableBytes) ?? ""
        if closeSent {
            // Our close answered: the handshake is complete.
            context.close(promise: nil)
            return
        }
        let words = code.map { "the peer closed the connection (\(describe($0))\(reason.isEmpty ? "" : ": \(reason)"))" } ?? "the peer closed the connection"
        end(context: context, WebSocketEnded(.closed, code: code, reason: words, byPeer: true))
        closeSent = true
        var echo = context.channel.allocator.buffer(capacity: 2)
        if let code { echo.write(webSocketErrorCode: code) }
        write(context: context, opcode: .connectionClose, data: echo, promise: nil)
        context.flush()
        context.close(promise: nil)
    }

    private func protocolError(context: ChannelHandlerContext, _ why: String) {
        fail(context: context, .protocolError, why)
    }

    /// The peer broke a rule: say which, close with `code`.
    private func fail(context: ChannelHandlerContext, _ code: WebSocketErrorCode, _ why: String) {
        logger.info("closing the connection: \(why)")
        sendClose(context: context, .violation, code: code, reason: why, byPeer: false)
    }

    func channelInactive(context: ChannelHandlerContext) {
        tickTask?.cancel()
        end(context: context, WebSocketEnded(.lost, code: nil, reason: "the connection was lost before a close frame arrived", byPeer: true))
        context.fireChannelInactive()
    }

    private func end(context: ChannelHandlerContext, _ event: WebSocketEnded) {
        guard !ended else { return }
        ended = true
        context.fireUserInboundEventTriggered(event)
    }

    // MARK: Outbound

    func triggerUserOutboundEvent(context: ChannelHandlerContext, event: Any, promise: EventLoopPromise<Void>?) {
        guard let gate = event as? ReadGate else {
            return context.triggerUserOutboundEvent(event, promise: promise)
        }
        if var state = liveness, !ended {
            switch gate {
            case .held: state.hold(at: uptime(context))
            case .released: state.release(at: uptime(context))
            }
            liveness = state
            scheduleTick(context: context)
        }
        promise?.succeed()
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        switch unwrapOutboundIn(data) {
        case .text(let text):
            guard !closeSent else {
                promise?.fail(ChannelError.outputClosed)
                return
            }
            write(context: context, opcode: .text, data: context.channel.allocator.buffer(string: text), promise: promise)
        case .binary(let data):
            guard !closeSent else {
                promise?.fail(ChannelError.outputClosed)
                return
            }
            write(context: context, opcode: .binary, data: data, promise: promise)
        case .close(let code, let reason):
            sendClose(context: context, .closed, code: code, reason: reason, byPeer: false)
            promise?.succeed()
        }
    }

    private func sendClose(context: ChannelHandlerContext, _ kind: ConnectionEnd.Kind, code: WebSocketErrorCode, reason: String, byPeer: Bool) {
        guard !closeSent else { return }
        closeSent = true
        end(context: context, WebSocketEnded(kind, code: code, reason: reason, byPeer: byPeer))
        var data = context.channel.allocator.buffer(capacity: 2 + reason.utf8.count)
        data.write(webSocketErrorCode: code)
        // A close frame's payload is at most 125 bytes (RFC 6455 §5.5).
        data.writeString(String(decoding: reason.utf8.prefix(123), as: UTF8.self))
        write(context: context, opcode: .connectionClose, data: data, promise: nil)
        context.flush()
        // Cancelled when the channel closes first, so it does not hold the channel until it fires.
        let channel = context.channel
        let timeout = context.eventLoop.scheduleTask(in: closeTimeout) { channel.close(promise: nil) }
        channel.closeFuture.whenComplete { _ in timeout.cancel() }
    }

    private func write(context: ChannelHandlerContext, opcode: WebSocketOpcode, data: ByteBuffer, promise: EventLoopPromise<Void>?) {
        let frame = WebSocketFrame(fin: true, opcode: opcode, maskKey: masksFrames ? .random() : nil, data: data)
        context.write(wrapOutboundOut(frame), promise: promise)
    }
}

private func describe(_ code: WebSocketErrorCode) -> String {
    switch code {
    case .normalClosure: "1000, normal"
    case .goingAway: "1001, going away"
    case .protocolError: "1002, protocol error"
    case .unacceptableData: "1003, unacceptable data"
    case .dataInconsistentWithMessage: "1007, invalid data"
    case .policyViolation: "1008, policy violation"
    case .messageTooLarge: "1009, message too large"
    case .unexpectedServerError: "1011, server error"
    default: "code \(UInt16(webSocketErrorCode: code))"
    }
}

/// The event loop's clock as a duration (an EmbeddedEventLoop's clock is moved by hand in tests).
func uptime(_ context: ChannelHandlerContext) -> Duration {
    .nanoseconds(context.eventLoop.now.uptimeNanoseconds)
}

