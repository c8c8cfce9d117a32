import CoreMetrics
package import NearbyMetrics

extension ConnectionBroker {
    /// The broker's metrics, as Documentation/Operations.md lists them. The counters follow
    /// ``BrokerStatistics``; a broker that listens also has the listener's (`PeerListener`).
    package static let metricDescriptions: [MetricDescription] = BrokerMetrics.Names.all
}

/// The broker's counters, its connections gauge and its dial-time histogram, made from the
/// metrics factory in force when the broker is made (swift-metrics' global one, or a task-local
/// one in tests), and published after each step of its loop.
struct BrokerMetrics: Sendable {
    enum Names {
        static let dials = MetricDescription(
            "nearby_broker_dials_total", .counter, labels: ["result"], help: "Dials to peers that ended: a connection, or a failure.")
        static let accepted = MetricDescription(
            "nearby_broker_accepted_total", .counter, help: "Connections peers opened to this broker, authenticated and initialized.")
        static let closed = MetricDescription(
            "nearby_broker_closed_total", .counter, labels: ["reason"],
            help: "Connections the broker closed for another to the same peer: duplicates (crossing dials), or replaced (the old one did not answer a ping).")
        static let skipped = MetricDescription(
            "nearby_broker_skipped_total", .counter, help: "Announced instances not dialed: no valid TXT id, or an incompatible protocol version.")
        static let connections = MetricDescription(
            "nearby_broker_connections", .gauge, help: "Peers connected now (one connection each).")
        static let dialTime = MetricDescription(
            "nearby_broker_dial_duration_seconds", .histogram, labels: ["result"],
            buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
            help: "Time to connect to a peer: a dial from its first address to an initialized connection, or to its failure.")

        static let all = [dials, accepted, closed, skipped, connections, dialTime]
    }

    private var feed = CounterFeed<BrokerStatistics>()
    private let connections: Gauge
    private var connectionsShown = 0
    let dialSucceeded: Timer
    let dialFailed: Timer

    init(factory f: any MetricsFactory) {
        feed.follow(Names.dials.counter("succeeded", factory: f)) { $0.dialsSucceeded }
        feed.follow(Names.dials.counter("failed", factory: f)) { $0.dialsFailed }
        feed.follow(Names.accepted.counter(factory: f)) { $0.accepted }
        feed.follow(Names.closed.counter("duplicate", factory: f)) { $0.duplicatesClosed }
        feed.follow(Names.closed.counter("replaced", factory: f)) { $0.replaced }
        feed.follow(Names.skipped.counter(factory: f)) { $0.skipped }
        connections = Names.connections.gauge(factory: f)
        connections.record(0)
        dialSucceeded = Names.dialTime.timer("succeeded", factory: f)
        dialFailed = Names.dialTime.timer("failed", factory: f)
    }

    /// Publishes what the broker counted since the last call, and its connections now.
    mutating func record(_ statistics: BrokerStatistics, connections count: Int) {
        feed.record(statistics)
        if count != connectionsShown {
            connections.record(count)
            connectionsShown = count
        }
    }
}
