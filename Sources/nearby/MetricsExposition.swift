import ConnectionBroker
import CoreMetrics
import DiscoveryProxy
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif
import MulticastDNS
import NearbyBasics
import NearbyMetrics
import NetworkPlatform
import PeerConnection
import Prometheus
import SRPRegistrar

/// The one exposition of Nearby's metrics, the executable's (the libraries only record, through
/// swift-metrics' API): a Prometheus registry behind swift-metrics, each metric with the help
/// line its library gives it, and the process's own figures (CPU, memory, descriptors) under
/// the names every Prometheus client uses.
enum MetricsExposition {
    /// Every metric Nearby's libraries and this program record, by name.
    static let descriptions: [String: MetricDescription] = {
        let all =
            DiscoveryProxy.metricDescriptions + Registrar.metricDescriptions + PeerListener.metricDescriptions
            + ConnectionBroker.metricDescriptions + MulticastDNSEngine.metricDescriptions + MetricsEndpoint.metricDescriptions
            + ProcessFigures.descriptions
        return Dictionary(all.map { ($0.name, $0) }, uniquingKeysWith: { first, _ in first })
    }()

    private static let bootstrapped = Locked<PrometheusCollectorRegistry?>(nil)

    /// The registry, with swift-metrics bootstrapped to record into it (once per process; a
    /// second call returns the same registry).
    static func bootstrap() -> PrometheusCollectorRegistry {
        bootstrapped.withLockedValue { registry in
            if let registry { return registry }
            let made = PrometheusCollectorRegistry()
            MetricsSystem.bootstrap(ExpositionFactory(registry: made, descriptions: descriptions))
            ProcessFigures.shared.start(registry: made)
            registry = made
            return made
        }
    }

    /// The exposition's text now (Prometheus text format 0.0.4), the process's figures read first.
    static func render(_ registry: PrometheusCollectorRegistry) -> [UInt8] {
        ProcessFigures.shared.update()
        return registry.emitToBuffer()
    }
}

/// swift-metrics' factory over a Prometheus registry, with the help lines and histogram buckets
/// of Nearby's metric descriptions (swift-prometheus' own factory leaves the help out, which
/// `promtool check metrics` refuses, and gives every histogram the same buckets).
struct ExpositionFactory: MetricsFactory {
    let registry: PrometheusCollectorRegistry
    let descriptions: [String: MetricDescription]

    /// The name with its help line (the names are whole already: no namespace or unit added).
    private func descriptor(_ name: String) -> MetricNameDescriptor {
        MetricNameDescriptor(metricName: name, unitName: "", helpText: descriptions[name]?.help ?? "\(name), a metric Nearby does not describe.")
    }

    func makeCounter(label: String, dimensions: [(String, String)]) -> any CounterHandler {
        registry.makeCounter(descriptor: descriptor(label), labels: dimensions)
    }

    func makeFloatingPointCounter(label: String, dimensions: [(String, String)]) -> any FloatingPointCounterHandler {
        registry.makeCounter(descriptor: descriptor(label), labels: dimensions)
    }

    func makeRecorder(label: String, dimensions: [(String, String)], aggregate: Bool) -> any RecorderHandler {
        guard aggregate else { return registry.makeGauge(descriptor: descriptor(label), labels: dimensions) }
        let buckets = descriptions[label]?.buckets ?? []
        return registry.makeValueHistogram(
            descriptor: descriptor(label), labels: dimensions, buckets: buckets.isEmpty ? [1, 10, 100, 1000, 10000] : buckets)
    }

    func makeMeter(label: String, dimensions: [(String, String)]) -> any MeterHandler {
        registry.makeGauge(descriptor: descriptor(label), labels: dimensions)
    }

    func makeTimer(label: String, dimensions: [(String, String)]) -> any TimerHandler {
        let seconds = descriptions[label]?.buckets ?? []
        let buckets = (seconds.isEmpty ? [0.001, 0.01, 0.1, 1, 10] : seconds).map { Duration.nanoseconds(Int64(($0 * 1e9).rounded())) }
        return registry.makeDurationHistogram(descriptor: descriptor(label), labels: dimensions, buckets: buckets)
    }

    func destroyCounter(_ handler: any CounterHandler) {
        if let counter = handler as? Prometheus.Counter { registry.unregisterCounter(counter) }
    }

    func destroyFloatingPointCounter(_ handler: any FloatingPointCounterHandler) {
        if let counter = handler as? Prometheus.Counter { registry.unregisterCounter(counter) }
    }

    func destroyRecorder(_ handler: any RecorderHandler) {
        if let gauge = handler as? Prometheus.Gauge { registry.unregisterGauge(gauge) }
        if let histogram = handler as? ValueHistogram { registry.unregisterValueHistogram(histogram) }
    }

    func destroyMeter(_ handler: any MeterHandler) {
        if let gauge = handler as? Prometheus.Gauge { registry.unregisterGauge(gauge) }
    }

    func destroyTimer(_ handler: any TimerHandler) {
        if let histogram = handler as? DurationHistogram { registry.unregisterDurationHistogram(histogram) }
    }
}

/// The process's CPU time, memory and descriptors, read from /proc when the metrics are
/// scraped, under the names every Prometheus client library uses for them.
final class ProcessFigures: Sendable {
    static let descriptions = [
        MetricDescription("process_cpu_seconds_total", .counter, help: "CPU time the process used, user and system, in seconds."),
        MetricDescription("process_resident_memory_bytes", .gauge, help: "Memory the process holds in RAM (resident set size), in bytes."),
        MetricDescription("process_open_fds", .gauge, help: "Descriptors the process has open."),
        MetricDescription("process_max_fds", .gauge, help: "The most descriptors the process may open (ulimit -n)."),
        MetricDescription("process_start_time_seconds", .gauge, help: "When the process began to record metrics, in seconds since the Unix epoch."),
    ]

    static let shared = ProcessFigures()

    private struct Parts {
        var cpu: Prometheus.Counter
        var cpuShown: Double = 0
        var resident: Prometheus.Gauge
        var openDescriptors: Prometheus.Gauge
        var maximumDescriptors: Prometheus.Gauge
    }

    private let parts = Locked<Parts?>(nil)

    func start(registry: PrometheusCollectorRegistry) {
        func descriptor(_ name: String) -> MetricNameDescriptor {
            MetricNameDescriptor(metricName: name, unitName: "", helpText: Self.descriptions.first { $0.name == name }?.help ?? name)
        }
        let started = registry.makeGauge(descriptor: descriptor("process_start_time_seconds"))
        started.set(to: Date().timeIntervalSince1970)
        parts.withLockedValue {
            $0 = Parts(
                cpu: registry.makeCounter(descriptor: descriptor("process_cpu_seconds_total")),
                resident: registry.makeGauge(descriptor: descriptor("process_resident_memory_bytes")),
                openDescriptors: registry.makeGauge(descriptor: descriptor("process_open_fds")),
                maximumDescriptors: registry.makeGauge(descriptor: descriptor("process_max_fds")))
        }
        update()
    }

    /// Reads the figures now (those /proc does not give keep their last values).
    func update() {
        let cpu = Self.cpuSeconds()
        let resident = Self.residentBytes()
        let open = Self.openDescriptors()
        let maximum = NetworkPlatform.descriptorLimit()
        parts.withLockedValue { parts in
            guard var figures = parts else { return }
            if let cpu, cpu > figures.cpuShown {
                figures.cpu.increment(by: cpu - figures.cpuShown)
                figures.cpuShown = cpu
            }
            if let resident { figures.resident.set(to: Double(resident)) }
            if let open { figures.openDescriptors.set(to: Double(open)) }
            if let maximum { figures.maximumDescriptors.set(to: Double(maximum)) }
            parts = figures
        }
    }

    /// The fields of /proc/self/stat after the command's name (which may hold spaces), from
    /// field 3 (the state) on.
    private static func statFields() -> [Substring]? {
        guard let data = FileManager.default.contents(atPath: "/proc/self/stat"),
            let text = String(validating: Array(data), as: UTF8.self), let close = text.lastIndex(of: ")")
        else { return nil }
        return text[text.index(after: close)...].split(separator: " ")
    }

    static func cpuSeconds() -> Double? {
        // utime and stime are fields 14 and 15, in clock ticks.
        guard let fields = statFields(), fields.count > 12, let user = Double(fields[11]), let system = Double(fields[12]) else { return nil }
        let ticks = Double(sysconf(Int32(_SC_CLK_TCK)))
        return ticks > 0 ? (user + system) / ticks : nil
    }

    static func residentBytes() -> Int? {
        // rss is field 24, in pages.
        guard let fields = statFields(), fields.count > 21, let pages = Int(fields[21]) else { return nil }
        return pages * Int(sysconf(Int32(_SC_PAGESIZE)))
    }

    static func openDescriptors() -> Int? {
        // One entry per descriptor; reading the directory opens one more, which is not counted.
        guard let entries = try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd") else { return nil }
        return max(0, entries.count - 1)
    }
}
