import MetricsTestKit
import NearbyMetrics
import Testing

@testable import MulticastDNS

/// The embedded mDNS engine's metrics as it publishes them with its counters' log: its counts
/// by hand, a test metrics factory.
@Suite("mDNS engine: metrics")
struct EngineMetricsTests {
    @Test("datagrams received, sent and dropped, and what the engine held back, move the counters named and labelled as documented")
    func counters() throws {
        let metrics = TestMetrics()
        var published = EngineMetrics(factory: metrics)
        var counts = MulticastDNSEngine.Statistics()
        counts.datagramsHandled = 10
        counts.datagramsSent = 4
        counts.undecodable = 2
        counts.droppedByKernel = 1
        counts.engine.knownAnswersSuppressed = 3
        published.record(counts)
        counts.datagramsHandled = 12
        published.record(counts)
        #expect(try metrics.expectCounter("nearby_mdns_datagrams_received_total").totalValue == 12)
        #expect(try metrics.expectCounter("nearby_mdns_datagrams_sent_total").totalValue == 4)
        #expect(try metrics.expectCounter("nearby_mdns_dropped_total", [("reason", "undecodable")]).totalValue == 2)
        #expect(try metrics.expectCounter("nearby_mdns_dropped_total", [("reason", "kernel_buffer")]).totalValue == 1)
        #expect(try metrics.expectCounter("nearby_mdns_suppressed_total", [("reason", "known_answer")]).totalValue == 3)
    }

    @Test("every metric the engine makes is described, with its kind and labels, and every one described is made")
    func described() {
        let metrics = TestMetrics()
        _ = EngineMetrics(factory: metrics)
        let made: [(name: String, kind: MetricDescription.Kind, labels: [String])] =
            metrics.counters.map { ($0.label, .counter, $0.dimensions.map(\.0)) } + metrics.recorders.map { ($0.label, .gauge, $0.dimensions.map(\.0)) }
            + metrics.timers.map { ($0.label, .histogram, $0.dimensions.map(\.0)) }
        #expect(MulticastDNSEngine.metricDescriptions.problems(made: made) == [])
    }
}
