import DNSWire
import MetricsTestKit
import NearbyBasics
import NearbyMetrics
import Testing

@testable import DiscoveryProxy
@testable import DiscoveryProxyCore

/// The proxy's metrics as the answering desk publishes them, driven by hand: questions as
/// bytes, time from a manual clock, a test metrics factory. No sockets.
@Suite("discovery proxy: metrics")
struct ProxyMetricsTests {
    static let client = ProxyStateMachineTests.client

    /// A desk with its own metrics, and a reply path that goes nowhere.
    struct Desk {
        let metrics = TestMetrics()
        let clock = ManualClock()
        let desk: AnsweringDesk
        let path: ReplyPath

        init(_ change: (inout ProxyStateMachine.Configuration) -> Void = { _ in }) {
            desk = AnsweringDesk(
                ProxyStateMachineTests.machine(change), clock: clock, metrics: ProxyMetrics(factory: metrics).answering)
            // Nothing reads the replies that go this way; the test reads the desk's own return.
            let (_, continuation) = AsyncStream<[UInt8]?>.makeStream(bufferingPolicy: .bufferingNewest(16))
            path = .tcp(continuation)
        }

        @discardableResult
        func ask(_ name: DomainName, _ type: RecordType, over transport: ProxyStateMachine.Transport = .udp) -> [UInt8]? {
            received(ProxyStateMachineTests.query(name, type), over: transport)
        }

        @discardableResult
        func received(_ bytes: [UInt8], over transport: ProxyStateMachine.Transport = .udp) -> [UInt8]? {
            desk.received(bytes, from: ProxyMetricsTests.client, over: transport, path: path, now: clock.now).reply
        }

        func counter(_ name: String, _ dimensions: [(String, String)] = []) throws -> Int64 {
            try metrics.expectCounter(name, dimensions).totalValue
        }
    }

    @Test("answers, refusals and malformed questions move the counters named and labelled as documented, by what the machine counted")
    func counters() throws {
        let desk = Desk()
        desk.ask("lan1.example.test.", .soa)  // the zone's own record
        desk.ask("lan1.example.test.", .txt)  // NODATA at the apex
        desk.ask("www.example.com.", .a)  // outside every zone
        desk.ask("printer.example.org.", .aaaa)
        desk.ask("lan1.example.test.", RecordType(252))  // AXFR
        desk.received([0x12, 0x34, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0])  // a header promising a question that is not there
        let statistics = desk.desk.read(\.statistics)

        #expect(try desk.counter("nearby_proxy_queries_total", [("rcode", "NOERROR")]) == 2)
        #expect(try desk.counter("nearby_proxy_queries_total", [("rcode", "REFUSED")]) == 3)
        #expect(try desk.counter("nearby_proxy_queries_total", [("rcode", "FORMERR")]) == 1)
        #expect(try desk.counter("nearby_proxy_queries_total", [("rcode", "SERVFAIL")]) == 0)
        #expect(try desk.counter("nearby_proxy_answers_total", [("records", "zone")]) == 1)
        #expect(try desk.counter("nearby_proxy_answers_total", [("records", "none")]) == 1)
        #expect(try desk.counter("nearby_proxy_refused_total", [("reason", "outside_zones")]) == 2)
        #expect(try desk.counter("nearby_proxy_refused_total", [("reason", "zone_transfer")]) == 1)
        // Each counter is the machine's own count, published.
        #expect(Int64(statistics.answered) == (try desk.counter("nearby_proxy_queries_total", [("rcode", "NOERROR")])))
        #expect(Int64(statistics.refusedOutsideZones) == (try desk.counter("nearby_proxy_refused_total", [("reason", "outside_zones")])))
        #expect(Int64(statistics.formatErrors) == (try desk.counter("nearby_proxy_queries_total", [("rcode", "FORMERR")])))

        // Asked again: answered from a kept reply, and counted like the first.
        desk.ask("www.example.com.", .a)
        #expect(try desk.counter("nearby_proxy_refused_total", [("reason", "outside_zones")]) == 3)
        #expect(try desk.counter("nearby_proxy_cached_replies_total") == Int64(desk.desk.read(\.statistics.cachedReplies)))
    }

    @Test("a source over its rate: the questions dropped and those answered empty with TC are counted apart")
    func rateLimited() throws {
        let desk = Desk { $0.rateLimit = RateLimit(perSecond: 1, burst: 1) }
        for _ in 0..<6 { desk.ask("www.example.com.", .a) }
        let statistics = desk.desk.read(\.statistics)
        #expect(statistics.rateLimited == 5)
        let dropped = try desk.counter("nearby_proxy_rate_limited_total", [("action", "dropped")])
        let truncated = try desk.counter("nearby_proxy_rate_limited_total", [("action", "truncated")])
        #expect(dropped + truncated == 5)
        #expect(truncated == Int64(statistics.rateLimitedTruncated))
    }

    @Test("a question that waits for the link: the link questions gauge rises, and its answer time is the time it waited")
    func answerTime() throws {
        let desk = Desk()
        #expect(desk.ask("_ipp._tcp.lan1.example.test.", .ptr) == nil, "it waits for the link")
        #expect(try desk.metrics.expectGauge("nearby_proxy_link_questions").lastValue == 1)
        #expect(try desk.counter("nearby_proxy_link_questions_total", [("event", "started")]) == 1)
        desk.clock.advance(by: .milliseconds(1500))
        let now = desk.clock.now
        desk.desk.act { $0.advance(to: now) }
        let times = try desk.metrics.expectTimer("nearby_proxy_answer_duration_seconds").values
        #expect(times == [1_500_000_000], "answered once the machine gave up waiting, 1.5 s after the question came")
        #expect(try desk.counter("nearby_proxy_answers_total", [("records", "none")]) == 1)

        // One answered at once takes no time on a clock that does not move.
        desk.ask("lan1.example.test.", .soa)
        #expect(try desk.metrics.expectTimer("nearby_proxy_answer_duration_seconds").values == [1_500_000_000, 0])
    }

    @Test("every metric the proxy makes is described, with its kind and labels, and every one described is made")
    func described() {
        let metrics = TestMetrics()
        _ = ProxyMetrics(factory: metrics)
        #expect(DiscoveryProxy.metricDescriptions.problems(made: metrics.made) == [])
    }
}

extension TestMetrics {
    /// Every metric made: its name, kind and label names.
    var made: [(name: String, kind: MetricDescription.Kind, labels: [String])] {
        counters.map { ($0.label, .counter, $0.dimensions.map(\.0)) } + recorders.map { ($0.label, .gauge, $0.dimensions.map(\.0)) }
            + timers.map { ($0.label, .histogram, $0.dimensions.map(\.0)) }
    }
}
