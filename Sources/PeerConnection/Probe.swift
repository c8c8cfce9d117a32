import NIOConcurrencyHelpers
import NIOCore
import NIOPosix

/// The round-trip probe: before TLS, a listener answers one fixed line and closes, so that a
/// peer's distance can be measured for one TCP handshake and a few bytes, with no crypto on
/// either side. The time from the question to the answer crosses the peer's application, as
/// real data does (a TCP handshake alone is answered by the kernel, and would not see a slow
/// peer or a relay in between). Anything that does not begin with the question goes on to TLS.
enum Probe {
    static let question: [UInt8] = Array("NEARBY-PROBE 1\n".utf8)
    static let answer: [UInt8] = Array("NEARBY-PROBE 1 OK\n".utf8)
}

/// Sent up the pipeline (and failing set-up with it) when a connection was only a probe: it is
/// neither a peer nor a refusal, and the listener reports nothing.
struct ProbeAnswered: Error {}

/// Accepting side, first in the pipeline: answers a probe, or steps aside for TLS.
final class ProbeResponder: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer
    typealias OutboundOut = ByteBuffer
    private var held: ByteBuffer?

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var buffer = unwrapInboundIn(data)
        if var earlier = held {
            earlier.writeBuffer(&buffer)
            buffer = earlier
            held = nil
        }
        let start = buffer.readableBytesView
        guard Probe.question.starts(with: start.prefix(Probe.question.count)) else {
            // Not a probe (a TLS record begins with 0x16): everything goes on, and so do we.
            context.fireChannelRead(wrapInboundOut(buffer))
            context.pipeline.syncOperations.removeHandler(context: context, promise: nil)
            return
        }
        guard start.count >= Probe.question.count else {
            held = buffer
            return
        }
        let channel = context.channel
        context.fireUserInboundEventTriggered(ProbeAnswered())
        context.writeAndFlush(wrapOutboundOut(context.channel.allocator.buffer(bytes: Probe.answer))).whenComplete { _ in
            channel.close(promise: nil)
        }
    }
}

extension PeerConnection {
    /// Measures the round-trip time to a listener at `host:port` with one probe: a TCP
    /// connection, a question, its answer. A peer that does not speak the probe (a server that is
    /// not Nearby's) still reacts to it, with a TLS alert or a close; that reaction is timed the
    /// same way. Returns nil when nothing answers within `timeout`.
    public static func measureRoundTrip(host: String, port: Int, timeout: Duration = .seconds(2)) async -> Duration? {
        guard (1...65535).contains(port), let address = try? literalAddress(host, port: port) else { return nil }
        let done = NIOLockedValueBox<EventLoopPromise<Duration?>?>(nil)
        let bootstrap = ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .channelOption(.tcpOption(.tcp_nodelay), value: 1)
            .connectTimeout(.nanoseconds(nanoseconds(timeout)))
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    let promise = channel.eventLoop.makePromise(of: Duration?.self)
                    done.withLockedValue { $0 = promise }
                    try channel.pipeline.syncOperations.addHandler(ProbeAsker(answered: promise, timeout: timeout))
                }
            }
        let channel: any Channel
        do { channel = try await bootstrap.connect(to: address).get() } catch {
            // The initializer may have run (and made the promise) before the connect failed.
            done.withLockedValue { $0 }?.succeed(nil)
            return nil
        }
        defer { channel.close(promise: nil) }
        guard let promise = done.withLockedValue({ $0 }) else { return nil }
        return (try? await promise.futureResult.get()) ?? nil
    }
}

/// Connecting side: asks once the connection is up, and times the first reaction.
final class ProbeAsker: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer
    let answered: EventLoopPromise<Duration?>
    let timeout: Duration
    private var askedAt: NIODeadline?
    private var timer: Scheduled<Void>?

    init(answered: EventLoopPromise<Duration?>, timeout: Duration) {
        self.answered = answered
        self.timeout = timeout
    }

    func channelActive(context: ChannelHandlerContext) {
        let answered = self.answered
        timer = context.eventLoop.scheduleTask(in: .nanoseconds(nanoseconds(timeout))) { answered.succeed(nil) }
        askedAt = .now()
        context.writeAndFlush(wrapOutboundOut(context.channel.allocator.buffer(bytes: Probe.question)), promise: nil)
        context.fireChannelActive()
    }

    private func reacted() {
        timer?.cancel()
        guard let askedAt else { return answered.succeed(nil) }
        answered.succeed(.nanoseconds(Int64((NIODeadline.now() - askedAt).nanoseconds)))
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) { reacted() }
    func channelInactive(context: ChannelHandlerContext) {
        reacted()
        context.fireChannelInactive()
    }
    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        reacted()
        context.close(promise: nil)
    }
}
