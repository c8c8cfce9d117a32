import CoreMetrics
package import NearbyMetrics
import SRPRegistrarCore

extension Registrar {
    /// The registrar's metrics, as Documentation/Operations.md lists them. The counters follow
    /// ``RegistrarStatistics``, the machine's own counts.
    package static let metricDescriptions: [MetricDescription] = RegistrarMetrics.Names.all
}

/// The registrar's counters, its registrations gauge and its reply-time histogram, made from the
/// metrics factory in force when the registrar is prepared (swift-metrics' global one, or a
/// task-local one in tests), and published after each call into the machine.
struct RegistrarMetrics: Sendable {
    enum Names {
        static let updates = MetricDescription(
            "nearby_registrar_updates_total", .counter, labels: ["rcode", "reason"],
            help: "SRP updates answered, by the reply's response code and why that code.")
        static let removals = MetricDescription(
            "nearby_registrar_removals_total", .counter, help: "Accepted updates that removed their records (lease 0).")
        static let linkConflicts = MetricDescription(
            "nearby_registrar_link_conflicts_total", .counter,
            help: "Registrations given up because a name was already in use on the link (the held reply became YXDOMAIN).")
        static let dropped = MetricDescription(
            "nearby_registrar_dropped_total", .counter, help: "Requests dropped without a reply: too short to answer, or responses.")
        static let expired = MetricDescription(
            "nearby_registrar_leases_expired_total", .counter, labels: ["lease"],
            help: "Leases that ran out: records withdrawn (lease), names released (key_lease).")
        static let tcpRefused = MetricDescription(
            "nearby_registrar_tcp_refused_total", .counter, help: "TCP connections closed at once: the registrar held its most at once.")
        static let registrations = MetricDescription(
            "nearby_registrar_registrations", .gauge, help: "Hosts registered, or holding their names, now.")
        static let replyTime = MetricDescription(
            "nearby_registrar_reply_duration_seconds", .histogram, buckets: [0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2, 3, 5],
            help: "Time from an update's arrival to its reply: at once for refusals, after the link accepted the names (probing, about a second) for registrations.")

        static let all = [updates, removals, linkConflicts, dropped, expired, tcpRefused, registrations, replyTime]
    }

    private var feed = CounterFeed<RegistrarStatistics>()
    private let registrations: Gauge
    private var registrationsShown = 0
    let replyTime: Timer
    let tcpRefused: Counter

    init(factory f: any MetricsFactory) {
        let updates = Names.updates
        feed.follow(updates.counter("NOERROR", "accepted", factory: f)) { $0.accepted }
        feed.follow(updates.counter("FORMERR", "malformed", factory: f)) { $0.malformed }
        feed.follow(updates.counter("REFUSED", "zone_not_served", factory: f)) { $0.zoneNotServed }
        feed.follow(updates.counter("REFUSED", "limit_reached", factory: f)) { $0.limitReached }
        feed.follow(updates.counter("REFUSED", "rate_limited", factory: f)) { $0.rateLimited }
        feed.follow(updates.counter("NOTAUTH", "bad_signature", factory: f)) { $0.badSignature }
        feed.follow(updates.counter("NOTAUTH", "wrong_peer_id", factory: f)) { $0.wrongPeerID }
        feed.follow(updates.counter("YXDOMAIN", "name_held", factory: f)) { $0.nameHeld }
        feed.follow(updates.counter("NOTIMP", "not_implemented", factory: f)) { $0.notImplemented }
        feed.follow(Names.removals.counter(factory: f)) { $0.removals }
        feed.follow(Names.linkConflicts.counter(factory: f)) { $0.linkConflicts }
        feed.follow(Names.dropped.counter(factory: f)) { $0.dropped }
        feed.follow(Names.expired.counter("lease", factory: f)) { $0.leasesExpired }
        feed.follow(Names.expired.counter("key_lease", factory: f)) { $0.keyLeasesExpired }
        registrations = Names.registrations.gauge(factory: f)
        registrations.record(0)
        replyTime = Names.replyTime.timer(factory: f)
        tcpRefused = Names.tcpRefused.counter(factory: f)
    }

    /// Publishes what the machine counted since the last call, and its registrations now.
    mutating func record(_ machine: RegistrarStateMachine) {
        feed.record(machine.statistics)
        let count = machine.registrationCount
        if count != registrationsShown {
            registrations.record(count)
            registrationsShown = count
        }
    }
}
