import CoreMetrics
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif
import Logging
import NIOCore
import NIOHTTP1
import NIOPosix
import NearbyBasics
import NearbyMetrics
import Prometheus
import ServiceLifecycle

/// The metrics endpoint: Prometheus' text format over HTTP/1.1 on one address, `GET /metrics`
/// (and HEAD), 404 for any other path, 405 for any other method. Small and bounded: at most
/// ``maximumConnections`` connections, each request whole within 10 s of its first byte and at
/// most 8 KiB, a connection idle for 60 s closed. What it turns away is counted
/// (`nearby_metrics_http_refused_total`) and logged, at most once a minute.
final class MetricsEndpoint: Service, Sendable {
    static let metricDescriptions = [
        MetricDescription(
            "nearby_metrics_http_refused_total", .counter, labels: ["reason"],
            help: "Connections to the metrics endpoint closed: over the limit on connections, a request too large, too slow or malformed, idle.")
    ]

    /// Connections served at once; one more is closed at once. A Prometheus server keeps one.
    static let maximumConnections = 8

    /// The address and port listened on (the port the system chose, if 0 was asked for).
    let address: String
    private let channel: any Channel

    private init(channel: any Channel, address: String) {
        self.channel = channel
        self.address = address
    }

    /// Listens on `address`, serving `registry`'s exposition.
    /// - Throws: `RuntimeFailure` when the address cannot be listened on.
    static func start(at address: MetricsAddress, registry: PrometheusCollectorRegistry, logger: Logger) async throws -> MetricsEndpoint {
        let refusals = Refusals(logger: logger)
        let slots = Locked(0)
        let limits = ScrapeConnectionState.Limits()
        let bootstrap = ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.backlog, value: 16)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    let admitted = slots.withLockedValue { open in
                        guard open < maximumConnections else { return false }
                        open += 1
                        return true
                    }
                    guard admitted else {
                        refusals.count(.connections)
                        throw TooManyConnections()
                    }
                    channel.closeFuture.whenComplete { _ in slots.withLockedValue { $0 -= 1 } }
                    let sync = channel.pipeline.syncOperations
                    try sync.addHandler(ScrapeGuard(limits: limits, refusals: refusals))
                    try sync.configureHTTPServerPipeline(withPipeliningAssistance: true, withErrorHandling: true)
                    try sync.addHandler(ScrapeResponder(refusals: refusals) { MetricsExposition.render(registry) })
                }
            }
        do {
            // A literal address, never put through name resolution.
            let channel = try await bootstrap.bind(to: try SocketAddress(ipAddress: "\(address.address)", port: address.port)).get()
            let shown = MetricsAddress(address: address.address, port: channel.localAddress?.port ?? address.port).description
            logger.info("metrics for Prometheus at http://\(shown)/metrics")
            return MetricsEndpoint(channel: channel, address: shown)
        } catch {
            logger.debug("listening for metrics on \(address) failed: \(error)")
            let why: String
            switch (error as? IOError)?.errnoCode {
            case EADDRINUSE?: why = "port \(address.port) is in use there"
            case EADDRNOTAVAIL?: why = "\(address.address) is not an address of this host"
            case EACCES?: why = "ports below 1024 need root (or CAP_NET_BIND_SERVICE)"
            default: why = "the system refused the socket (\(error))"
            }
            throw RuntimeFailure("cannot serve metrics on \(address): \(why)")
        }
    }

    /// Says where the metrics are: a status line, or with `json` a `metrics` event.
    func announce(json: Bool) {
        if json {
            printLine(JSONText.object([("event", .string("metrics")), ("address", .string(address)), ("path", .string("/metrics"))]))
        } else {
            status("Metrics for Prometheus at http://\(address)/metrics")
        }
    }

    /// Until the service group shuts down: then the endpoint closes.
    func run() async throws {
        try? await gracefulShutdown()
        await close()
    }

    /// Stops listening (connections being served end with their response).
    func close() async {
        try? await channel.close()
    }

    private struct TooManyConnections: Error {}
}

/// What the endpoint turned away: counted, and logged at most once a minute with the counts
/// since the last line.
final class Refusals: Sendable {
    enum Reason: String, CaseIterable, Sendable {
        /// Over ``MetricsEndpoint/maximumConnections``.
        case connections
        /// A request over its size limit.
        case tooLarge = "too_large"
        /// A request not whole in time.
        case slow
        /// Not HTTP the decoder could read.
        case malformed
        /// No request for too long between requests.
        case idle

        /// For the log.
        var phrase: String {
            switch self {
            case .connections: "over the limit of \(MetricsEndpoint.maximumConnections) connections"
            case .tooLarge: "with a request over 8 KiB"
            case .slow: "with a request not whole within 10 s"
            case .malformed: "with a request that was not HTTP"
            case .idle: "idle"
            }
        }
    }

    private let counters: [Reason: CoreMetrics.Counter]
    private let logger: Logger
    private let pending = Locked((counts: [Reason: Int](), lastLog: ContinuousClock.Instant?.none))

    init(logger: Logger) {
        self.logger = logger
        let description = MetricsEndpoint.metricDescriptions[0]
        counters = Dictionary(uniqueKeysWithValues: Reason.allCases.map { ($0, description.counter($0.rawValue, factory: MetricsSystem.factory)) })
    }

    func count(_ reason: Reason) {
        counters[reason]?.increment()
        // Idle connections closing is the ordinary end of a scraper's connection: counted, not logged.
        guard reason != .idle else { return }
        let now = ContinuousClock.now
        let line: String? = pending.withLockedValue { state in
            state.counts[reason, default: 0] += 1
            if let last = state.lastLog, now - last < .seconds(60) { return nil }
            state.lastLog = now
            defer { state.counts = [:] }
            return state.counts.sorted { $0.key.rawValue < $1.key.rawValue }.map { "\($0.value) \($0.key.phrase)" }.joined(separator: ", ")
        }
        if let line { logger.notice("the metrics endpoint closed connections: \(line) (nearby_metrics_http_refused_total counts them all)") }
    }
}

/// One scrape connection's limits, without I/O: a request must come whole within
/// ``Limits/requestTime`` of its first byte (a new connection's first request, of the
/// connection's opening) and hold at most ``Limits/requestBytes`` bytes (a request is counted
/// from its first byte to the response); between requests a connection may stay idle for
/// ``Limits/idleTime``. Times are durations since any fixed origin.
struct ScrapeConnectionState: Sendable {
    struct Limits: Sendable, Equatable {
        var requestBytes = 8 * 1024
        var requestTime: Duration = .seconds(10)
        var idleTime: Duration = .seconds(60)
    }

    enum Verdict: Sendable, Equatable {
        case keep
        case close(Refusals.Reason)
    }

    let limits: Limits
    /// When the connection is closed unless something happens first.
    private(set) var deadline: Duration
    private var requestBytes = 0
    /// From a request's first byte (or the connection's opening) to its response.
    private var requestUnderWay = true

    init(limits: Limits = Limits(), now: Duration) {
        self.limits = limits
        deadline = now + limits.requestTime
    }

    /// `count` bytes came.
    mutating func received(_ count: Int, now: Duration) -> Verdict {
        if !requestUnderWay {
            requestUnderWay = true
            requestBytes = 0
            deadline = now + limits.requestTime
        }
        requestBytes += count
        return requestBytes > limits.requestBytes ? .close(.tooLarge) : .keep
    }

    /// A response is being written: the request is over, the idle time begins.
    mutating func responded(now: Duration) {
        requestUnderWay = false
        requestBytes = 0
        deadline = now + limits.idleTime
    }

    /// Whether the connection may stay open at `now`.
    func check(now: Duration) -> Verdict {
        now < deadline ? .keep : .close(requestUnderWay ? .slow : .idle)
    }
}

/// First in a scrape connection's pipeline: counts the bytes of each request and keeps the
/// connection's one deadline (``ScrapeConnectionState``), closing it when a limit is met.
final class ScrapeGuard: ChannelDuplexHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer
    typealias OutboundIn = IOData
    typealias OutboundOut = IOData

    private var state: ScrapeConnectionState
    private let refusals: Refusals
    private var timer: (task: Scheduled<Void>, at: Duration)?
    private var closed = false

    init(limits: ScrapeConnectionState.Limits, refusals: Refusals) {
        state = ScrapeConnectionState(limits: limits, now: Self.now)
        self.refusals = refusals
    }

    private static var now: Duration { .nanoseconds(Int64(truncatingIfNeeded: NIODeadline.now().uptimeNanoseconds)) }

    func handlerAdded(context: ChannelHandlerContext) {
        arm(context: context)
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        timer?.task.cancel()
        timer = nil
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !closed else { return }
        let bytes = unwrapInboundIn(data).readableBytes
        if case .close(let reason) = state.received(bytes, now: Self.now) { return close(context: context, reason) }
        arm(context: context)
        context.fireChannelRead(data)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        state.responded(now: Self.now)
        arm(context: context)
        context.write(data, promise: promise)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        context.fireErrorCaught(error)
    }

    /// Keeps one timer, at the state's deadline (moved earlier when the deadline is).
    private func arm(context: ChannelHandlerContext) {
        let deadline = state.deadline
        if let timer, timer.at <= deadline { return }
        timer?.task.cancel()
        let delay = deadline - Self.now
        let loopBound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        let task = context.eventLoop.scheduleTask(in: .nanoseconds(max(0, Int64(delay / .nanoseconds(1))))) {
            let (handler, context) = loopBound.value
            handler.timer = nil
            handler.fired(context: context)
        }
        timer = (task, deadline)
    }

    private func fired(context: ChannelHandlerContext) {
        guard !closed else { return }
        if case .close(let reason) = state.check(now: Self.now) { return close(context: context, reason) }
        arm(context: context)
    }

    private func close(context: ChannelHandlerContext, _ reason: Refusals.Reason) {
        closed = true
        timer?.task.cancel()
        timer = nil
        refusals.count(reason)
        context.close(promise: nil)
    }
}

/// What a scrape request gets, by its method and path alone.
enum ScrapeAnswer: Equatable, Sendable {
    case metrics
    case notFound
    case methodNotAllowed

    /// `GET /metrics` and `HEAD /metrics` (any query string ignored) are answered; other paths
    /// are not found; other methods on /metrics are not allowed.
    init(method: HTTPMethod, uri: String) {
        let path = uri.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false).first.map(String.init) ?? uri
        guard path == "/metrics" else {
            self = .notFound
            return
        }
        self = method == .GET || method == .HEAD ? .metrics : .methodNotAllowed
    }

    var status: HTTPResponseStatus {
        switch self {
        case .metrics: .ok
        case .notFound: .notFound
        case .methodNotAllowed: .methodNotAllowed
        }
    }
}

/// Answers each request once it is whole; a request's body (a scrape has none) is read and
/// ignored, within the guard's limit.
final class ScrapeResponder: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    /// The exposition's media type (Prometheus text format 0.0.4).
    static let contentType = "text/plain; version=0.0.4; charset=utf-8"

    private let render: @Sendable () -> [UInt8]
    private let refusals: Refusals
    private var head: HTTPRequestHead?

    init(refusals: Refusals, render: @escaping @Sendable () -> [UInt8]) {
        self.refusals = refusals
        self.render = render
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head): self.head = head
        case .body: break
        case .end:
            guard let head else { return }
            self.head = nil
            respond(to: head, context: context)
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        // The protocol error handler has answered 400 and closes the connection.
        if error is HTTPParserError { refusals.count(.malformed) }
        context.close(promise: nil)
    }

    private func respond(to head: HTTPRequestHead, context: ChannelHandlerContext) {
        let answer = ScrapeAnswer(method: head.method, uri: head.uri)
        var headers = HTTPHeaders()
        let body: [UInt8]
        switch answer {
        case .metrics:
            body = render()
            headers.add(name: "Content-Type", value: Self.contentType)
        case .notFound:
            body = Array("Not found: the metrics are at /metrics.\n".utf8)
            headers.add(name: "Content-Type", value: "text/plain; charset=utf-8")
        case .methodNotAllowed:
            body = Array("Only GET and HEAD are allowed here.\n".utf8)
            headers.add(name: "Content-Type", value: "text/plain; charset=utf-8")
            headers.add(name: "Allow", value: "GET, HEAD")
        }
        headers.add(name: "Content-Length", value: "\(body.count)")
        let keepAlive = head.isKeepAlive
        if !keepAlive { headers.add(name: "Connection", value: "close") }
        context.write(wrapOutboundOut(.head(HTTPResponseHead(version: head.version, status: answer.status, headers: headers))), promise: nil)
        if head.method != .HEAD, !body.isEmpty {
            context.write(wrapOutboundOut(.body(.byteBuffer(context.channel.allocator.buffer(bytes: body)))), promise: nil)
        }
        let channel = context.channel
        context.writeAndFlush(wrapOutboundOut(.end(nil))).whenComplete { _ in
            if !keepAlive { channel.close(promise: nil) }
        }
    }
}
