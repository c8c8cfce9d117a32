import NearbyBasics
import NIOCore
import NIOPosix

/// The round-trip probe: before TLS, a listener answers a fixed line (as often as it is
/// asked, on one connection), so that a peer's distance can be measured for one TCP handshake
/// and a few bytes per sample, with no crypto on either side. The time from the question to the answer crosses the peer's application, as
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
    private var answered = 0
    /// Samples answered on one connection at most (then it is closed).
    static let maximumSamples = 16
    /// A probe connection is closed this long after its first question, answered or not.
    static let lingerLimit: TimeAmount = .seconds(2)

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var buffer = unwrapInboundIn(data)
        if var earlier = held {
            earlier.writeBuffer(&buffer)
            buffer = earlier
            held = nil
        }
        while buffer.readableBytes > 0 {
            let start = buffer.readableBytesView
            guard Probe.question.starts(with: start.prefix(Probe.question.count)) else {
                guard answered == 0 else {
                    // Something else after probes: this connection was only ever a probe.
                    context.close(promise: nil)
                    return
                }
                // Not a probe (a TLS record begins with 0x16): everything goes on, and so do we.
                context.fireChannelRead(wrapInboundOut(buffer))
                context.pipeline.syncOperations.removeHandler(context: context, promise: nil)
                return
            }
            guard start.count >= Probe.question.count else {
                held = buffer
                return
            }
            buffer.moveReaderIndex(forwardBy: Probe.question.count)
            if answered == 0 {
                context.fireUserInboundEventTriggered(ProbeAnswered())
                // Set-up's time-out no longer applies: a prober that stays silent is closed after
                // a while, so that nobody can hold connections open by asking once.
                // The timer is cancelled when the channel closes first: it holds the channel (and its
                // TLS state) until it fires, which under thousands of probes is memory for nothing.
                let channel = context.channel
                let linger = context.eventLoop.scheduleTask(in: Self.lingerLimit) { channel.close(promise: nil) }
                channel.closeFuture.whenComplete { _ in linger.cancel() }
            }
            answered += 1
            context.writeAndFlush(wrapOutboundOut(context.channel.allocator.buffer(bytes: Probe.answer)), promise: nil)
            if answered >= Self.maximumSamples {
                context.close(promise: nil)
                return
            }
        }
    }
}

extension PeerConnection {
    /// Measures the round-trip time to a listener at `host:port`: one TCP connection, then
    /// `samples` questions one after another; the fastest answer counts (noise only ever adds to
    /// a sample). A peer that does not speak the probe (a server that is not Nearby's) still
    /// reacts to the first question, with a TLS alert or a close; that reaction is timed the same
    /// way. Returns nil when nothing answers within `timeout`, or at once when the task is
    /// cancelled. `asked`, when given, is called as the first question goes out (on the
    /// connection's event loop: it must not block).
    public static func measureRoundTrip(
        host: String, port: Int, samples: Int = 3, timeout: Duration = .seconds(2), asked: (@Sendable () -> Void)? = nil
    ) async -> Duration? {
        guard (1...65535).contains(port), !Task.isCancelled, let address = try? literalAddress(host, port: port) else { return nil }
        let done = Locked<(promise: EventLoopPromise<Duration?>, channel: any Channel)?>(nil)
        let bootstrap = ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .channelOption(.tcpOption(.tcp_nodelay), value: 1)
            .connectTimeout(.nanoseconds(nanoseconds(timeout)))
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    let promise = channel.eventLoop.makePromise(of: Duration?.self)
                    done.withLockedValue { $0 = (promise, channel) }
                    try channel.pipeline.syncOperations.addHandler(
                        ProbeAsker(
                            answered: promise, samples: max(1, min(samples, ProbeResponder.maximumSamples)), timeout: timeout, asked: asked))
                }
            }
        // Cancelling closes the channel, connecting or connected: the asker then finishes with
        // what it has (nothing, if no answer came yet).
        return await withTaskCancellationHandler {
            let channel: any Channel
            do { channel = try await bootstrap.connect(to: address).get() } catch {
                // The initializer may have run (and made the promise) before the connect failed.
                done.withLockedValue { $0 }?.promise.succeed(nil)
                return nil
            }
            defer { channel.close(promise: nil) }
            guard let promise = done.withLockedValue({ $0 })?.promise else { return nil }
            if Task.isCancelled { channel.close(promise: nil) }
            return (try? await promise.futureResult.get()) ?? nil
        } onCancel: {
            done.withLockedValue { $0 }?.channel.pipeline.fireUserInboundEventTriggered(ProbeCancelled())
        }
    }
}

/// Sent to the asker when its caller was cancelled: the question in flight is no sample.
struct ProbeCancelled: Sendable {}

/// Connecting side: asks `samples` times, one question after each answer, and keeps the
/// fastest; a peer that closes or answers otherwise ends the measurement with what it has.
final class ProbeAsker: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer
    let answered: EventLoopPromise<Duration?>
    let samples: Int
    let timeout: Duration
    let asked: (@Sendable () -> Void)?
    private var askedAt: NIODeadline?
    private var fastest: Duration?
    private var received = 0
    private var pending: [UInt8] = []
    private var timer: Scheduled<Void>?

    init(answered: EventLoopPromise<Duration?>, samples: Int, timeout: Duration, asked: (@Sendable () -> Void)? = nil) {
        self.answered = answered
        self.samples = samples
        self.timeout = timeout
        self.asked = asked
    }

    func channelActive(context: ChannelHandlerContext) {
        let answered = self.answered
        timer = context.eventLoop.scheduleTask(in: .nanoseconds(nanoseconds(timeout))) { answered.succeed(nil) }
        ask(context)
        asked?()
        context.fireChannelActive()
    }

    private func ask(_ context: ChannelHandlerContext) {
        askedAt = .now()
        context.writeAndFlush(wrapOutboundOut(context.channel.allocator.buffer(bytes: Probe.question)), promise: nil)
    }

    /// A reaction to the question in flight: counts as one sample.
    private func sample() {
        guard let askedAt else { return }
        self.askedAt = nil
        let rtt = Duration.nanoseconds(Int64((NIODeadline.now() - askedAt).nanoseconds))
        fastest = min(fastest ?? rtt, rtt)
        received += 1
    }

    private func finish() {
        timer?.cancel()
        answered.succeed(fastest)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var buffer = unwrapInboundIn(data)
        pending += buffer.readBytes(length: buffer.readableBytes) ?? []
        guard Probe.answer.starts(with: pending.prefix(Probe.answer.count)) else {
            // Not a Nearby peer: its reaction was the one sample it gives.
            sample()
            finish()
            context.close(promise: nil)
            return
        }
        while pending.count >= Probe.answer.count, Array(pending.prefix(Probe.answer.count)) == Probe.answer {
            pending.removeFirst(Probe.answer.count)
            sample()
        }
        if received >= samples {
            finish()
            context.close(promise: nil)
        } else if askedAt == nil {
            ask(context)
        }
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        guard event is ProbeCancelled else { return context.fireUserInboundEventTriggered(event) }
        askedAt = nil
        finish()
        context.close(promise: nil)
    }

    func channelInactive(context: ChannelHandlerContext) {
        sample()
        finish()
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        sample()
        finish()
        context.close(promise: nil)
    }
}
