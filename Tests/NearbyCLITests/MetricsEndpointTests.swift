import CoreMetrics
import Foundation
import Logging
import NIOCore
import NIOEmbedded
import NIOHTTP1
import NearbyMetrics
import Prometheus
import Testing

@testable import nearby

/// `--metrics ADDRESS:PORT` and the endpoint behind it, without a socket: the address as typed,
/// the limits of a scrape connection on a manual clock, the answers by method and path, the
/// whole pipeline on an embedded channel, and the exposition of every metric Nearby describes.
@Suite("nearby: the metrics endpoint")
struct MetricsEndpointTests {
    @Test("an IP address and a port are taken; IPv6 in brackets", arguments: [
        ("127.0.0.1:9153", "127.0.0.1:9153"), ("0.0.0.0:1", "0.0.0.0:1"), ("[::1]:9153", "[::1]:9153"),
        ("[2001:db8::5]:65535", "[2001:db8::5]:65535"),
    ])
    func addresses(_ text: String, _ shown: String) {
        #expect(MetricsAddress(text)?.description == shown)
    }

    @Test("anything else is refused", arguments: [
        "localhost:9153", "127.0.0.1", ":9153", "127.0.0.1:", "127.0.0.1:0", "127.0.0.1:65536", "::1:9153", "[::1]", "[::1]9153",
        "127.0.0.1:91a", "", "[::1]:+80", "127.0.0.1:0009153", "[127.0.0.1]:80", "1.2.3:80", "http://127.0.0.1:9153",
    ])
    func refused(_ text: String) {
        #expect(MetricsAddress(text) == nil)
    }

    @Test("a refused --metrics says what is allowed, on every command that has it", arguments: [
        ["proxy", "eth0=lan1.example.test", "--listen", "127.0.0.1", "--name-server", "dp.example.test"],
        ["registrar", "--listen", "127.0.0.1"], ["serve", "Box", "_t._tcp", "0"],
    ])
    func message(_ command: [String]) {
        let arguments = command + ["--metrics", "localhost:9153"]
        var refusal: String?
        do { _ = try Nearby.parse(arguments) } catch { refusal = Nearby.plain(Nearby.message(for: error)) }
        #expect(refusal == "--metrics localhost:9153 is not ADDRESS:PORT; \(MetricsAddress.allowed)")
        #expect((try? Nearby.parse(command + ["--metrics", "127.0.0.1:9153"])) != nil)
    }

    // MARK: A scrape connection's limits

    @Test("a request larger than the limit closes the connection; a response starts the count again")
    func size() {
        var state = ScrapeConnectionState(limits: .init(requestBytes: 100), now: .zero)
        #expect(state.received(60, now: .zero) == .keep)
        #expect(state.received(40, now: .zero) == .keep)
        state.responded(now: .seconds(1))
        #expect(state.received(100, now: .seconds(2)) == .keep)
        #expect(state.received(1, now: .seconds(2)) == .close(.tooLarge))
    }

    @Test("a request must be whole within its time from its first byte (a new connection's, from its opening); an idle one closes later")
    func time() {
        var state = ScrapeConnectionState(limits: .init(requestTime: .seconds(10), idleTime: .seconds(60)), now: .zero)
        #expect(state.check(now: .seconds(9)) == .keep)
        #expect(state.check(now: .seconds(10)) == .close(.slow), "a connection that never asks")
        state.responded(now: .seconds(5))
        #expect(state.check(now: .seconds(64)) == .keep)
        #expect(state.check(now: .seconds(65)) == .close(.idle))
        #expect(state.received(10, now: .seconds(30)) == .keep)
        #expect(state.deadline == .seconds(40), "a request's first byte starts its own time")
        #expect(state.check(now: .seconds(40)) == .close(.slow))
    }

    @Test("GET and HEAD of /metrics are answered, with or without a query; other paths are not found; other methods not allowed")
    func answers() {
        #expect(ScrapeAnswer(method: .GET, uri: "/metrics") == .metrics)
        #expect(ScrapeAnswer(method: .HEAD, uri: "/metrics") == .metrics)
        #expect(ScrapeAnswer(method: .GET, uri: "/metrics?name[]=x") == .metrics)
        #expect(ScrapeAnswer(method: .GET, uri: "/") == .notFound)
        #expect(ScrapeAnswer(method: .GET, uri: "/metrics/") == .notFound)
        #expect(ScrapeAnswer(method: .GET, uri: "http://host/metrics") == .notFound)
        #expect(ScrapeAnswer(method: .POST, uri: "/metrics") == .methodNotAllowed)
        #expect(ScrapeAnswer(method: .DELETE, uri: "/other") == .notFound)
    }

    // MARK: The pipeline

    /// The endpoint's pipeline on an embedded channel, answering with `body`.
    static func channel(limits: ScrapeConnectionState.Limits = .init(), body: String = "up 1\n") throws -> EmbeddedChannel {
        let channel = EmbeddedChannel()
        let refusals = Refusals(logger: Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() }))
        let sync = channel.pipeline.syncOperations
        try sync.addHandler(ScrapeGuard(limits: limits, refusals: refusals))
        try sync.configureHTTPServerPipeline(withPipeliningAssistance: true, withErrorHandling: true)
        try sync.addHandler(ScrapeResponder(refusals: refusals) { Array(body.utf8) })
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 9153)).wait()
        return channel
    }

    /// Everything the channel wrote, as text.
    static func written(_ channel: EmbeddedChannel) throws -> String {
        var text = ""
        while let data = try channel.readOutbound(as: IOData.self) {
            if case .byteBuffer(let buffer) = data { text += String(buffer: buffer) }
        }
        return text
    }

    @Test("a scrape gets the exposition with Prometheus' media type and its length; the connection stays open for the next")
    func scrape() throws {
        let channel = try Self.channel()
        try channel.writeInbound(ByteBuffer(string: "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"))
        let response = try Self.written(channel)
        #expect(response.hasPrefix("HTTP/1.1 200 OK\r\n"))
        #expect(response.contains("Content-Type: text/plain; version=0.0.4; charset=utf-8\r\n"))
        #expect(response.contains("Content-Length: 5\r\n"))
        #expect(response.hasSuffix("\r\n\r\nup 1\n"))
        #expect(channel.isActive)
        try channel.writeInbound(ByteBuffer(string: "HEAD /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"))
        let head = try Self.written(channel)
        #expect(head.hasPrefix("HTTP/1.1 200 OK\r\n") && head.hasSuffix("\r\n\r\n"), "HEAD: the length, no body")
        _ = try channel.finish()
    }

    @Test("another path is not found, another method not allowed (saying which are); HTTP/1.0 without keep-alive is closed after its answer")
    func refusals() throws {
        let channel = try Self.channel()
        try channel.writeInbound(ByteBuffer(string: "GET / HTTP/1.1\r\nHost: x\r\n\r\n"))
        #expect(try Self.written(channel).hasPrefix("HTTP/1.1 404 Not Found\r\n"))
        try channel.writeInbound(ByteBuffer(string: "POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nhi"))
        let post = try Self.written(channel)
        #expect(post.hasPrefix("HTTP/1.1 405 Method Not Allowed\r\n") && post.contains("Allow: GET, HEAD\r\n"))
        try channel.writeInbound(ByteBuffer(string: "GET /metrics HTTP/1.0\r\n\r\n"))
        let old = try Self.written(channel)
        #expect(old.hasPrefix("HTTP/1.0 200 OK\r\n") && old.contains("Connection: close\r\n"))
        #expect(!channel.isActive)
    }

    @Test("a request over the size limit closes the connection unanswered; so does one that is not HTTP")
    func bounded() throws {
        let large = try Self.channel(limits: .init(requestBytes: 64))
        _ = try? large.writeInbound(ByteBuffer(string: "GET /metrics HTTP/1.1\r\nHost: x\r\nX-Padding: " + String(repeating: "a", count: 100) + "\r\n\r\n"))
        #expect(try Self.written(large).isEmpty)
        #expect(!large.isActive)

        let garbage = try Self.channel()
        _ = try? garbage.writeInbound(ByteBuffer(string: "\u{16}\u{03}\u{01} not http\r\n\r\n"))
        #expect(try Self.written(garbage).hasPrefix("HTTP/1.1 400 Bad Request\r\n"))
        #expect(!garbage.isActive)
    }

    // MARK: The exposition

    @Test("every metric Nearby describes is exposed with its help line and its type, under its own name")
    func exposition() throws {
        let registry = PrometheusCollectorRegistry()
        let factory = ExpositionFactory(registry: registry, descriptions: MetricsExposition.descriptions)
        for description in MetricsExposition.descriptions.values where !description.name.hasPrefix("process_") {
            let values = description.labels.map { _ in "x" }
            switch description.kind {
            case .counter: description.counter(values: values, factory: factory).increment()
            case .gauge: description.gauge(values: values, factory: factory).record(1)
            case .histogram: description.timer(values: values, factory: factory).recordNanoseconds(1_000_000)
            }
        }
        let text = String(decoding: registry.emitToBuffer(), as: UTF8.self)
        for description in MetricsExposition.descriptions.values where !description.name.hasPrefix("process_") {
            #expect(text.contains("# HELP \(description.name) \(description.help)\n"), "\(description.name)")
            #expect(text.contains("# TYPE \(description.name) \(description.kind.rawValue)\n"), "\(description.name)")
        }
        // Buckets as described (seconds), not swift-prometheus' defaults.
        #expect(text.contains("nearby_proxy_answer_duration_seconds_bucket{le=\"0.0005\"}"))
    }

    @Test("Operations.md's table lists every metric the tool exposes, each with its type and labels, and no other")
    func documented() throws {
        let text = try DocumentationTests.text("Documentation/Operations.md")
        guard let start = text.range(of: "## Every metric") else { throw DocumentationError("Operations.md has no section Every metric") }
        let section = String(text[start.upperBound...]).components(separatedBy: "\n## ").first ?? ""
        var documented: [String: (kind: String, labels: [String])] = [:]
        for line in section.split(separator: "\n") where line.hasPrefix("| `") {
            let cells = line.split(separator: "|", omittingEmptySubsequences: false).map { $0.trimmingCharacters(in: .whitespaces) }
            guard cells.count >= 5 else { continue }
            let name = cells[1].trimmingCharacters(in: CharacterSet(charactersIn: "`"))
            // The labels are the words in backquotes; their values follow, plain.
            let labels = cells[3].split(separator: "`", omittingEmptySubsequences: false).enumerated().filter { $0.offset % 2 == 1 }.map { String($0.element) }
            documented[name] = (cells[2], labels)
        }
        let described = MetricsExposition.descriptions
        #expect(Set(documented.keys) == Set(described.keys), "documented, not exposed: \(Set(documented.keys).subtracting(described.keys).sorted()); exposed, not documented: \(Set(described.keys).subtracting(documented.keys).sorted())")
        for (name, description) in described {
            guard let row = documented[name] else { continue }
            #expect(row.kind == description.kind.rawValue, "\(name): documented a \(row.kind), is a \(description.kind.rawValue)")
            #expect(row.labels == description.labels, "\(name): documented with the labels \(row.labels), has \(description.labels)")
        }
    }
}

struct DocumentationError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

extension MetricDescription {
    /// Variadic label values, from an array (for tests that make every metric).
    fileprivate func counter(values: [String], factory: any MetricsFactory) -> CoreMetrics.Counter {
        CoreMetrics.Counter(label: name, dimensions: Array(zip(labels, values)), factory: factory)
    }

    fileprivate func gauge(values: [String], factory: any MetricsFactory) -> CoreMetrics.Gauge {
        CoreMetrics.Gauge(label: name, dimensions: Array(zip(labels, values)), factory: factory)
    }

    fileprivate func timer(values: [String], factory: any MetricsFactory) -> CoreMetrics.Timer {
        CoreMetrics.Timer(label: name, dimensions: Array(zip(labels, values)), factory: factory)
    }
}
