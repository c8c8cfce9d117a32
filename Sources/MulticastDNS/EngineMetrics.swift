import CoreMetrics
import MulticastDNSCore
package import NearbyMetrics

extension MulticastDNSEngine {
    /// The engine's metrics, as Documentation/Operations.md lists them. The counters follow
    /// ``MulticastDNSEngine/Statistics`` (``MulticastDNSEngine/counters``).
    package static let metricDescriptions: [MetricDescription] = EngineMetrics.Names.all
}

/// The embedded mDNS engine's counters, made from the metrics factory in force when the engine
/// is prepared (swift-metrics' global one, or a task-local one in tests), and published every
/// two seconds, with the counters' log lines: a flood of datagrams costs nothing more per
/// datagram. Several engines in one process add to the same counters.
struct EngineMetrics: Sendable {
    enum Names {
        static let received = MetricDescription(
            "nearby_mdns_datagrams_received_total", .counter, help: "mDNS datagrams received on the interfaces the engine runs on.")
        static let sent = MetricDescription("nearby_mdns_datagrams_sent_total", .counter, help: "mDNS datagrams sent.")
        static let dropped = MetricDescription(
            "nearby_mdns_dropped_total", .counter, labels: ["reason"],
            help: "Datagrams dropped: undecodable, the engine behind (inbox full), unreadable (over 9000 bytes, no interface), the kernel's socket buffer full.")
        static let socketErrors = MetricDescription(
            "nearby_mdns_socket_errors_total", .counter, labels: ["operation"], help: "Reads and sends on the mDNS sockets that failed.")
        static let heldBack = MetricDescription(
            "nearby_mdns_suppressed_total", .counter, labels: ["reason"],
            help: "Queries and answers held back on purpose (RFC 6762 §7): another host asked or answered the same, known answers, queries our own records answer.")
        static let deferred = MetricDescription(
            "nearby_mdns_answers_deferred_total", .counter, help: "Multicast answers delayed by the once-a-second rule (RFC 6762 §6).")
        static let unicastRefused = MetricDescription(
            "nearby_mdns_unicast_responses_refused_total", .counter,
            help: "Unicast responses not taken in: not asked for in the last two seconds, or from off the link.")
        static let reconfirms = MetricDescription(
            "nearby_mdns_reconfirm_queries_total", .counter, help: "Queries sent to reconfirm a record someone believed gone (RFC 6762 §10.4).")

        static let all = [received, sent, dropped, socketErrors, heldBack, deferred, unicastRefused, reconfirms]
    }

    private var feed = CounterFeed<MulticastDNSEngine.Statistics>()

    init(factory f: any MetricsFactory) {
        feed.follow(Names.received.counter(factory: f)) { $0.datagramsHandled }
        feed.follow(Names.sent.counter(factory: f)) { $0.datagramsSent }
        feed.follow(Names.dropped.counter("undecodable", factory: f)) { $0.undecodable }
        feed.follow(Names.dropped.counter("engine_busy", factory: f)) { $0.droppedWhileBusy }
        feed.follow(Names.dropped.counter("unreadable", factory: f)) { $0.unreadable }
        feed.follow(Names.dropped.counter("kernel_buffer", factory: f)) { $0.droppedByKernel }
        feed.follow(Names.socketErrors.counter("read", factory: f)) { $0.readFailures }
        feed.follow(Names.socketErrors.counter("send", factory: f)) { $0.sendFailures }
        feed.follow(Names.heldBack.counter("duplicate_question", factory: f)) { $0.engine.duplicateQuestionsSuppressed }
        feed.follow(Names.heldBack.counter("duplicate_answer", factory: f)) { $0.engine.duplicateAnswersSuppressed }
        feed.follow(Names.heldBack.counter("known_answer", factory: f)) { $0.engine.knownAnswersSuppressed }
        feed.follow(Names.heldBack.counter("answered_query", factory: f)) { $0.engine.answeredQueriesSkipped }
        feed.follow(Names.deferred.counter(factory: f)) { $0.engine.multicastAnswersDeferred }
        feed.follow(Names.unicastRefused.counter(factory: f)) { $0.engine.unicastResponsesRefused }
        feed.follow(Names.reconfirms.counter(factory: f)) { $0.engine.reconfirmQueries }
    }

    /// Publishes what the engine counted since the last call.
    mutating func record(_ counters: MulticastDNSEngine.Statistics) {
        feed.record(counters)
    }
}
