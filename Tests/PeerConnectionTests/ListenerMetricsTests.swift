import MetricsTestKit
import NearbyMetrics
import Testing

@testable import PeerConnection

/// The listener's metrics as its admission desk publishes them at each tick: admission's counts
/// by hand, a test metrics factory, no sockets.
@Suite("listener: metrics")
struct ListenerMetricsTests {
    @Test("strangers turned away are counted once each, across the summaries' intervals; connections and the places held follow")
    func strangers() throws {
        let metrics = TestMetrics()
        var published = ListenerMetrics(factory: metrics)
        var control = AdmissionControl(settings: AdmissionSettings(maximumSettingUp: 2, maximumPerSource: 2, summaryInterval: .seconds(10)))
        for address in UInt32(1)...3 { _ = control.arrived(from: .ipv4(0xC612_0000 | address), at: .seconds(1)) }
        published.record(control, ended: nil)
        func madeRoom() -> Int64 { metrics.counterTotal(label: "nearby_listener_strangers_total", dimensions: [("reason", "made_room")]) }
        #expect(madeRoom() == 1)
        #expect(try metrics.expectCounter("nearby_listener_connections_total").totalValue == 3)
        #expect(try metrics.expectGauge("nearby_listener_setting_up").lastValue == 2)

        // The interval ends: its counts are the whole interval's, published once.
        let ended = control.endInterval(at: .seconds(11))
        #expect(ended?.madeRoom == 1)
        published.record(control, ended: ended)
        #expect(madeRoom() == 1)
        // The next interval counts from zero, and adds to the counter.
        _ = control.arrived(from: .ipv4(0xC612_0009), at: .seconds(12))
        published.record(control, ended: nil)
        #expect(madeRoom() == 2)
        let next = control.endInterval(at: .seconds(22))
        published.record(control, ended: next)
        #expect(madeRoom() == 2)
        #expect(try metrics.expectCounter("nearby_listener_connections_total").totalValue == 4)
    }

    @Test("every metric the listener makes is described, with its kind and labels, and every one described is made")
    func described() {
        let metrics = TestMetrics()
        _ = ListenerMetrics(factory: metrics)
        let made: [(name: String, kind: MetricDescription.Kind, labels: [String])] =
            metrics.counters.map { ($0.label, .counter, $0.dimensions.map(\.0)) } + metrics.recorders.map { ($0.label, .gauge, $0.dimensions.map(\.0)) }
            + metrics.timers.map { ($0.label, .histogram, $0.dimensions.map(\.0)) }
        #expect(PeerListener.metricDescriptions.problems(made: made) == [])
    }
}
