import DNSWire
import MetricsTestKit
import NearbyMetrics
import SRPRegistrarCore
import Testing

@testable import SRPRegistrar

/// The registrar's metrics as it publishes them after each call into its machine: requests as
/// bytes, a test metrics factory, no sockets.
@Suite("SRP registrar: metrics")
struct RegistrarMetricsTests {
    static let source = IPAddress.v4(IPv4Address("198.18.0.9")!)

    @Test("refusals and drops move the counters named and labelled as documented, each the machine's own count")
    func counters() throws {
        let metrics = TestMetrics()
        var published = RegistrarMetrics(factory: metrics)
        var machine = RegistrarStateMachine(configuration: RegistrarConfiguration(verifier: SIG0Verifier { _, _, _ in false }))
        func send(_ bytes: [UInt8]) {
            _ = machine.handle(bytes, from: Self.source, now: .zero)
            published.record(machine)
        }
        send([1, 2, 3])  // too short to answer
        send(try Message(header: Header(id: 7), questions: [Question(name: "default.service.arpa.", type: .soa)]).encoded())  // a query
        var update = Header(id: 8)
        update.opcode = Header.updateOpcode
        send(try Message(header: update, questions: [Question(name: "example.com.", type: .soa)]).encoded())  // a zone not served

        let statistics = machine.statistics
        #expect(statistics.dropped == 1 && statistics.notImplemented == 1 && statistics.refused == 2)
        #expect(try metrics.expectCounter("nearby_registrar_dropped_total").totalValue == 1)
        #expect(try metrics.expectCounter("nearby_registrar_updates_total", [("rcode", "NOTIMP"), ("reason", "not_implemented")]).totalValue == 1)
        #expect(metrics.counterTotal(label: "nearby_registrar_updates_total") == 2)
        #expect(metrics.counterTotal(label: "nearby_registrar_updates_total", dimensions: [("rcode", "NOERROR")]) == 0)
        let refusedReasons: [(String, Int)] = [
            ("zone_not_served", statistics.zoneNotServed), ("malformed", statistics.malformed), ("bad_signature", statistics.badSignature),
        ]
        for (reason, count) in refusedReasons {
            #expect(metrics.counterTotal(label: "nearby_registrar_updates_total", dimensions: [("reason", reason)]) == Int64(count), "\(reason)")
        }
        #expect(try metrics.expectGauge("nearby_registrar_registrations").lastValue == 0)
    }

    @Test("every metric the registrar makes is described, with its kind and labels, and every one described is made")
    func described() {
        let metrics = TestMetrics()
        _ = RegistrarMetrics(factory: metrics)
        let made: [(name: String, kind: MetricDescription.Kind, labels: [String])] =
            metrics.counters.map { ($0.label, .counter, $0.dimensions.map(\.0)) } + metrics.recorders.map { ($0.label, .gauge, $0.dimensions.map(\.0)) }
            + metrics.timers.map { ($0.label, .histogram, $0.dimensions.map(\.0)) }
        #expect(Registrar.metricDescriptions.problems(made: made) == [])
    }
}
