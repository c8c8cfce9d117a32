import CoreMetrics
package import NearbyMetrics

extension PeerListener {
    /// The listener's metrics, as Documentation/Operations.md lists them: strangers turned away
    /// (the counts behind ``StrangerSummary``), connections, sessions, set-up times.
    package static let metricDescriptions: [MetricDescription] = ListenerMetrics.Names.all
}

/// A listener's counters, made from the metrics factory in force when it starts listening
/// (swift-metrics' global one, or a task-local one in tests). The admission desk publishes its
/// counts four times a second, when it looks at its deadlines; the listener counts sessions
/// and their set-up times as they are made.
struct ListenerMetrics: Sendable {
    enum Names {
        static let connections = MetricDescription(
            "nearby_listener_connections_total", .counter, help: "TCP connections accepted by the listener, before anything is proven.")
        static let strangers = MetricDescription(
            "nearby_listener_strangers_total", .counter, labels: ["reason"],
            help: "Connections turned away before they proved a key: closed to make room, over their source's share, refused (every place held by a proven peer), no ClientHello in time, failed set-up.")
        static let handshakeWaits = MetricDescription(
            "nearby_listener_handshake_waits_total", .counter, help: "Strangers' TLS handshakes that waited for their turn.")
        static let penalties = MetricDescription(
            "nearby_listener_key_penalties_total", .counter, help: "Refused keys that made their source wait before its next handshake.")
        static let settingUp = MetricDescription(
            "nearby_listener_setting_up", .gauge, help: "Connections setting up now (accepted, not yet proven or turned away).")
        static let sessions = MetricDescription(
            "nearby_listener_sessions_total", .counter, help: "Connections that became sessions: proven, trusted or admitted, initialized.")
        static let setupTime = MetricDescription(
            "nearby_listener_setup_duration_seconds", .histogram, buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
            help: "Time from accepting a connection to its session: TLS, WebSocket and initialize (and a person's answer with --accept ask).")

        static let all = [connections, strangers, handshakeWaits, penalties, settingUp, sessions, setupTime]
    }

    /// Fed from the current interval's counts; restarted with each interval.
    private var strangers = CounterFeed<StrangerSummary>()
    private var arrivals = CounterFeed<UInt64>()
    private let settingUp: Gauge
    let sessions: Counter
    let setupTime: Timer

    init(factory f: any MetricsFactory) {
        strangers.follow(Names.strangers.counter("made_room", factory: f)) { $0.madeRoom }
        strangers.follow(Names.strangers.counter("over_source_share", factory: f)) { $0.overSourceShare }
        strangers.follow(Names.strangers.counter("refused", factory: f)) { $0.refused }
        strangers.follow(Names.strangers.counter("no_hello", factory: f)) { $0.noHello }
        strangers.follow(Names.strangers.counter("failed_setup", factory: f)) { $0.failedUnreported + $0.reported }
        strangers.follow(Names.handshakeWaits.counter(factory: f)) { $0.waitedTurn }
        strangers.follow(Names.penalties.counter(factory: f)) { $0.penalized }
        arrivals.follow(Names.connections.counter(factory: f)) { Int(truncatingIfNeeded: $0) }
        settingUp = Names.settingUp.gauge(factory: f)
        settingUp.record(0)
        sessions = Names.sessions.counter(factory: f)
        setupTime = Names.setupTime.timer(factory: f)
    }

    /// Publishes what admission counted since the last call: `ended`, the interval that just
    /// ended (its counts are then the whole interval's, and the next start from zero); `control`
    /// as it is after that interval ended.
    mutating func record(_ control: AdmissionControl, ended: StrangerSummary?) {
        if let ended {
            strangers.record(ended)
            strangers.restart()
        }
        strangers.record(control.countedSoFar)
        arrivals.record(control.arrivals)
        settingUp.record(control.settingUp)
    }
}
