import CoreMetrics
import DiscoveryProxyCore
package import NearbyMetrics

extension DiscoveryProxy {
    /// The proxy's metrics, as Documentation/Operations.md lists them. Every counter follows a
    /// count the machines or the shell keep anyway (``ProxyStateMachine/Statistics``,
    /// ``DiscoveryProxy/ShellStatistics``).
    package static let metricDescriptions: [MetricDescription] = ProxyMetrics.Names.all
}

/// The proxy's counters, gauges and answer-time histogram, made from the metrics factory in
/// force when the proxy is prepared (swift-metrics' global one, or a task-local one in tests).
/// Each part of the shell publishes what it counts: the desk the answering machine's
/// statistics, TCP its connections, DNS Push its sessions.
struct ProxyMetrics: Sendable {
    enum Names {
        static let queries = MetricDescription(
            "nearby_proxy_queries_total", .counter, labels: ["rcode"], help: "DNS questions answered, by the answer's response code.")
        static let answers = MetricDescription(
            "nearby_proxy_answers_total", .counter, labels: ["records"],
            help: "NOERROR answers by what they held: records of the zone itself, records from the link, none (NODATA).")
        static let refused = MetricDescription(
            "nearby_proxy_refused_total", .counter, labels: ["reason"], help: "REFUSED answers: names outside every zone, zone transfers.")
        static let rateLimited = MetricDescription(
            "nearby_proxy_rate_limited_total", .counter, labels: ["action"],
            help: "UDP questions over their source network's rate: dropped, or answered empty with TC set.")
        static let dropped = MetricDescription(
            "nearby_proxy_dropped_total", .counter, labels: ["reason"],
            help: "Messages dropped without an answer: unreadable, responses (never answered), UDP replies over the socket's backlog.")
        static let truncated = MetricDescription(
            "nearby_proxy_truncated_total", .counter, help: "Answers too large for the client's buffer, sent with TC set.")
        static let cachedReplies = MetricDescription(
            "nearby_proxy_cached_replies_total", .counter, help: "UDP questions answered with a reply kept from the same question asked before.")
        static let limits = MetricDescription(
            "nearby_proxy_limits_total", .counter, labels: ["limit"],
            help: "Times a limit was met: the link question budget, questions waiting from one source, records kept per question.")
        static let linkQuestionEvents = MetricDescription(
            "nearby_proxy_link_questions_total", .counter, labels: ["event"],
            help: "Continuous mDNS questions on the links: started, stopped, and stopped early to make room.")
        static let linkQuestions = MetricDescription(
            "nearby_proxy_link_questions", .gauge, help: "Continuous mDNS questions being asked on the links now.")
        static let suppressed = MetricDescription(
            "nearby_proxy_suppressed_records_total", .counter, labels: ["reason"],
            help: "Link records left out of answers and pushes: link-local addresses, NSEC, goodbyes, names outside the link, meta types.")
        static let reconfirms = MetricDescription(
            "nearby_proxy_reconfirms_total", .counter, help: "Records a DNS Push client believed gone, asked again on the link (RFC 8765 RECONFIRM).")
        static let subscriptions = MetricDescription(
            "nearby_proxy_push_subscriptions_total", .counter, labels: ["result"], help: "DNS Push subscriptions, accepted or refused.")
        static let pushSessions = MetricDescription(
            "nearby_proxy_push_sessions_total", .counter, labels: ["result"],
            help: "DNS Push sessions (TLS connections), accepted or refused over a limit.")
        static let pushSessionsOverfull = MetricDescription(
            "nearby_proxy_push_sessions_overfull_total", .counter, help: "DNS Push sessions aborted because their client left too many bytes unread.")
        static let pushSessionsOpen = MetricDescription(
            "nearby_proxy_push_sessions", .gauge, help: "DNS Push sessions open now.")
        static let tcpConnections = MetricDescription(
            "nearby_proxy_tcp_connections_total", .counter, labels: ["result"],
            help: "DNS over TCP connections, accepted or refused over a limit.")
        static let tcpClosed = MetricDescription(
            "nearby_proxy_tcp_closed_total", .counter, labels: ["reason"],
            help: "DNS over TCP connections the proxy closed: idle too long, or too many questions in flight.")
        static let tcpOpen = MetricDescription("nearby_proxy_tcp_connections", .gauge, help: "DNS over TCP connections open now.")
        static let answerTime = MetricDescription(
            "nearby_proxy_answer_duration_seconds", .histogram,
            buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5],
            help: "Time from a question's arrival to its answer (at once from the zone or the cache; up to about a second when it waits for the link).")

        static let all = [
            queries, answers, refused, rateLimited, dropped, truncated, cachedReplies, limits, linkQuestionEvents, linkQuestions, suppressed, reconfirms,
            subscriptions, pushSessions, pushSessionsOverfull, pushSessionsOpen, tcpConnections, tcpClosed, tcpOpen, answerTime,
        ]
    }

    /// What the desk publishes: the answering machine's statistics, the link questions asked
    /// now, answer times, UDP replies dropped. This runs for every question, under the desk's
    /// lock, so it is written out field by field: each counter gets what its statistic grew by
    /// since the last reading (a ``CounterFeed`` calls a closure per counter, which cost about
    /// 1 µs a question here, as much as answering it three times from a kept reply).
    struct Answering: Sendable {
        private var last = ProxyStateMachine.Statistics()
        private let queries: (noError: Counter, refused: Counter, notImplemented: Counter, formatError: Counter, serverFailure: Counter)
        private let answers: (zone: Counter, link: Counter, none: Counter)
        private let refused: (outsideZones: Counter, transfer: Counter)
        private let rateLimited: (dropped: Counter, truncated: Counter)
        private let dropped: (unreadable: Counter, response: Counter)
        private let truncated: Counter
        private let cachedReplies: Counter
        private let limits: (linkBudget: Counter, sourceWaiting: Counter, records: Counter)
        private let linkQuestionEvents: (started: Counter, stopped: Counter, evicted: Counter)
        private let suppressed: [(RecordTranslation.Suppression, Counter)]
        private let reconfirms: Counter
        private let subscriptions: (accepted: Counter, refused: Counter)
        let linkQuestions: Gauge
        private var linkQuestionsShown = 0
        let answerTime: Timer
        let udpBacklogDropped: Counter

        init(factory f: any MetricsFactory) {
            let q = Names.queries
            queries = (q.counter("NOERROR", factory: f), q.counter("REFUSED", factory: f), q.counter("NOTIMP", factory: f),
                // BADVERS (an EDNS version other than 0) is counted with FORMERR.
                q.counter("FORMERR", factory: f), q.counter("SERVFAIL", factory: f))
            answers = (Names.answers.counter("zone", factory: f), Names.answers.counter("link", factory: f), Names.answers.counter("none", factory: f))
            refused = (Names.refused.counter("outside_zones", factory: f), Names.refused.counter("zone_transfer", factory: f))
            rateLimited = (Names.rateLimited.counter("dropped", factory: f), Names.rateLimited.counter("truncated", factory: f))
            dropped = (Names.dropped.counter("unreadable", factory: f), Names.dropped.counter("response", factory: f))
            udpBacklogDropped = Names.dropped.counter("udp_backlog", factory: f)
            truncated = Names.truncated.counter(factory: f)
            cachedReplies = Names.cachedReplies.counter(factory: f)
            limits = (Names.limits.counter("link_budget", factory: f), Names.limits.counter("source_waiting", factory: f), Names.limits.counter("records", factory: f))
            linkQuestionEvents = (
                Names.linkQuestionEvents.counter("started", factory: f), Names.linkQuestionEvents.counter("stopped", factory: f),
                Names.linkQuestionEvents.counter("evicted", factory: f)
            )
            suppressed = RecordTranslation.Suppression.allCases.map { ($0, Names.suppressed.counter(ProxyMetrics.label($0), factory: f)) }
            reconfirms = Names.reconfirms.counter(factory: f)
            subscriptions = (Names.subscriptions.counter("accepted", factory: f), Names.subscriptions.counter("refused", factory: f))
            linkQuestions = Names.linkQuestions.gauge(factory: f)
            answerTime = Names.answerTime.timer(factory: f)
        }

        /// Publishes what the machine counted since the last call, and the link questions asked now.
        mutating func record(_ now: ProxyStateMachine.Statistics, linkQuestions asked: Int) {
            let was = last
            queries.noError.add(now.answered, since: was.answered)
            queries.refused.add(now.refusedOutsideZones + now.refusedTransfers, since: was.refusedOutsideZones + was.refusedTransfers)
            queries.notImplemented.add(now.notImplemented, since: was.notImplemented)
            queries.formatError.add(now.formatErrors, since: was.formatErrors)
            queries.serverFailure.add(now.serverFailures, since: was.serverFailures)
            answers.zone.add(now.answered - now.answeredFromLink - now.noData, since: was.answered - was.answeredFromLink - was.noData)
            answers.link.add(now.answeredFromLink, since: was.answeredFromLink)
            answers.none.add(now.noData, since: was.noData)
            refused.outsideZones.add(now.refusedOutsideZones, since: was.refusedOutsideZones)
            refused.transfer.add(now.refusedTransfers, since: was.refusedTransfers)
            rateLimited.dropped.add(now.rateLimited - now.rateLimitedTruncated, since: was.rateLimited - was.rateLimitedTruncated)
            rateLimited.truncated.add(now.rateLimitedTruncated, since: was.rateLimitedTruncated)
            dropped.unreadable.add(now.droppedUnreadable, since: was.droppedUnreadable)
            dropped.response.add(now.droppedResponses, since: was.droppedResponses)
            truncated.add(now.truncated, since: was.truncated)
            cachedReplies.add(now.cachedReplies, since: was.cachedReplies)
            limits.linkBudget.add(now.linkQuestionsOverBudget, since: was.linkQuestionsOverBudget)
            limits.sourceWaiting.add(now.waitingOverSourceLimit, since: was.waitingOverSourceLimit)
            limits.records.add(now.recordsOverLimit, since: was.recordsOverLimit)
            linkQuestionEvents.started.add(now.linkQuestionsStarted, since: was.linkQuestionsStarted)
            linkQuestionEvents.stopped.add(now.linkQuestionsStopped, since: was.linkQuestionsStopped)
            linkQuestionEvents.evicted.add(now.linkQuestionsEvicted, since: was.linkQuestionsEvicted)
            if now.suppressed != was.suppressed {
                for (reason, counter) in suppressed { counter.add(now.suppressed[reason] ?? 0, since: was.suppressed[reason] ?? 0) }
            }
            reconfirms.add(now.reconfirms, since: was.reconfirms)
            subscriptions.accepted.add(now.subscriptions, since: was.subscriptions)
            subscriptions.refused.add(now.subscriptionsRefused, since: was.subscriptionsRefused)
            last = now
            if asked != linkQuestionsShown {
                linkQuestions.record(asked)
                linkQuestionsShown = asked
            }
        }
    }

    /// What TCP publishes: its connections.
    struct TCP: Sendable {
        var feed = CounterFeed<TCPAnswering.Statistics>()
        let open: Gauge

        mutating func record(_ statistics: TCPAnswering.Statistics, open count: Int) {
            feed.record(statistics)
            open.record(count)
        }
    }

    /// What DNS Push publishes: its sessions.
    struct Push: Sendable {
        var feed = CounterFeed<PushSessionTable.Statistics>()
        let open: Gauge
        var openShown = 0

        mutating func record(_ table: PushSessionTable) {
            feed.record(table.statistics)
            let live = table.liveSessions
            if live != openShown {
                open.record(live)
                openShown = live
            }
        }
    }

    var answering: Answering
    var tcp: TCP
    var push: Push

    init(factory: any MetricsFactory) {
        let f = factory
        answering = Answering(factory: f)

        var tcpFeed = CounterFeed<TCPAnswering.Statistics>()
        tcpFeed.follow(Names.tcpConnections.counter("accepted", factory: f)) { $0.connections }
        tcpFeed.follow(Names.tcpConnections.counter("refused", factory: f)) { $0.refused }
        tcpFeed.follow(Names.tcpClosed.counter("idle", factory: f)) { $0.idleClosed }
        tcpFeed.follow(Names.tcpClosed.counter("overfull", factory: f)) { $0.overfull }
        tcp = TCP(feed: tcpFeed, open: Names.tcpOpen.gauge(factory: f))

        var pushFeed = CounterFeed<PushSessionTable.Statistics>()
        pushFeed.follow(Names.pushSessions.counter("accepted", factory: f)) { $0.sessions }
        pushFeed.follow(Names.pushSessions.counter("refused", factory: f)) { $0.refused }
        pushFeed.follow(Names.pushSessionsOverfull.counter(factory: f)) { $0.overfull }
        push = Push(feed: pushFeed, open: Names.pushSessionsOpen.gauge(factory: f))
        // Levels start at zero, so that a scrape shows them before the first change.
        answering.linkQuestions.record(0)
        tcp.open.record(0)
        push.open.record(0)
    }

    /// A suppression's label: its name in snake case.
    static func label(_ reason: RecordTranslation.Suppression) -> String {
        switch reason {
        case .linkLocalAddress: "link_local_address"
        case .nsec: "nsec"
        case .goodbye: "goodbye"
        case .outsideLink: "outside_link"
        case .metaType: "meta_type"
        }
    }
}
