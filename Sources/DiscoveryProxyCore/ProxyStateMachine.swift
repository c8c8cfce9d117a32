public import DNSWire
import NearbyBasics

/// The discovery proxy's decisions (RFC 8766), as a pure state machine: DNS questions and what
/// the link's mDNS queriers learn go in, with the time; replies and the link questions to
/// start or stop come out. No sockets, no clock, no tasks: the shell
/// (``DiscoveryProxy``) does the I/O, and unit tests drive this directly.
///
/// How a question is answered:
/// - Outside every zone, a question is refused (REFUSED): the proxy is no resolver, and never
///   recurses.
/// - At a zone's apex it serves the SOA and NS records, and for a name server inside the zone
///   its addresses. The browse-domain names (`b`, `db`, `lb._dns-sd._udp`) under the zone
///   point at the zone itself. Service type enumeration (`_services._dns-sd._udp`) is the
///   link's, like any other name.
/// - Any other name under the zone is the link's name under `local.`: the proxy asks the link
///   for it (a continuous mDNS query it keeps while people ask), and answers with what the link
///   says, rewritten into the zone (``RecordTranslation``), TTLs capped at the zone's one-shot
///   TTL. A question the link has not been asked before waits for the first answers and a
///   short gathering time, at most ``Configuration/answerTimeout``; later ones are answered at
///   once from what the link has said.
/// - A name the link has no records for gets NOERROR with no answers and the SOA (NODATA),
///   never NXDOMAIN: the link cannot say that a name does not exist, and NXDOMAIN would also
///   deny every name under it (RFC 8020), such as a whole service type.
public struct ProxyStateMachine: Sendable {
    /// The proxy's settings.
    public struct Configuration: Sendable {
        /// The zones, one per link. A ``LinkIndex`` is an index in this list.
        public var zones: [ProxyZone]
        /// How long the first question about a name waits for the link when nothing answers.
        public var answerTimeout: Duration = .seconds(1)
        /// After the link's first answer to a new question for shared records (PTR: a browse,
        /// which several hosts answer, each after 20–120 ms), how long to gather more. A
        /// question for a host's own records (SRV, TXT, addresses: one owner, which answers
        /// them all in one message) is answered as soon as they come.
        public var gatherTime: Duration = .milliseconds(150)
        /// The same for a host's addresses (and other types but PTR, SRV and TXT): they come
        /// in one message from the embedded engine, one callback at a time from avahi.
        public var addressGatherTime: Duration = .milliseconds(20)
        /// A link question nobody has asked about for this long is stopped.
        public var idleLifetime: Duration = .seconds(60)
        /// At most this many link questions at once, over all links; the longest unasked is
        /// stopped to make room.
        public var maximumLinkQuestions = 4096
        /// At most this many DNS questions waiting for the link at once; beyond it, SERVFAIL.
        public var maximumWaiting = 4096
        /// At most this many of them from one source address, so that one client cannot take
        /// every place; beyond it, SERVFAIL for that source alone.
        public var maximumWaitingPerSource = 64
        /// At most this many records kept for one link question (a thousand services of one type
        /// fit); more are counted in ``Statistics/recordsOverLimit`` and left out.
        public var maximumRecordsPerQuestion = 4096
        /// The largest UDP answer, whatever a client offers in EDNS(0) (the DNS flag day 2020
        /// size, which avoids fragmentation).
        public var maximumUDPPayload = 1232
        /// Questions per second each source (an IPv4 /24, an IPv6 /56) may ask over UDP, and the
        /// burst; nil for no limit. Over it, questions are dropped, and every second one gets an
        /// empty truncated answer instead, so that a real client (a site's resolver, say) goes
        /// on over TCP, where addresses cannot be forged; an address that has asked over TCP then
        /// has a bucket of its own, twenty times this one, for ten minutes (a forged one never
        /// gets there). With answers of at most 1232 bytes, this bounds what forged questions
        /// can make the proxy send one victim network to about 120 kB/s at the default, and a
        /// proven address (a resolver whose address a flood forges) to about 2.5 MB/s.
        public var rateLimit: RateLimit? = RateLimit(perSecond: 100, burst: 200)
        /// New link questions per second, over all links, and the burst (RFC 8766 §9.3: a proxy
        /// MUST limit the multicast it causes). A question that would need one more is answered
        /// SERVFAIL, and the client asks again. Questions the link already has are not limited.
        public var linkQuestionRate = RateLimit(perSecond: 50, burst: 100)
        /// The port of this proxy's DNS Push service (RFC 8765) when it offers one: then
        /// `_dns-push-tls._tcp.<zone>` has an SRV record naming the zone's first name server
        /// and this port; without it, that name has no records and clients poll.
        public var pushPort: UInt16?
        /// The port of the SRP registrar (RFC 9665) that runs beside this proxy, when one does:
        /// then `_dnssd-srp._udp.<zone>` has an SRV record naming the zone's first name server
        /// and this port, which is how a requestor on another subnet finds where to register.
        public var registrarPort: UInt16?
        /// At most this many encoded UDP replies kept for questions asked again (see
        /// ``ProxyStateMachine/statistics``' `cachedReplies`); 0 keeps none.
        public var maximumCachedReplies = 4096

        public init(zones: [ProxyZone]) { self.zones = zones }
    }

    /// How a question arrived; it decides the answer's size limit.
    public enum Transport: Sendable, Hashable {
        case udp
        case tcp
    }

    /// A question's handle, given by the shell, returned with its reply.
    public struct RequestID: Hashable, Sendable, CustomStringConvertible {
        public var rawValue: UInt64
        public init(_ rawValue: UInt64) { self.rawValue = rawValue }
        public var description: String { "request \(rawValue)" }
    }

    /// A DNS Push session's handle, given by the shell.
    public struct SessionID: Hashable, Sendable, CustomStringConvertible {
        public var rawValue: UInt64
        public init(_ rawValue: UInt64) { self.rawValue = rawValue }
        public var description: String { "session \(rawValue)" }
    }

    /// The answer to a SUBSCRIBE.
    public enum SubscribeResult: Sendable, Equatable {
        /// Accepted: these are the records now (push them right after the NOERROR).
        case accepted([PushChange])
        /// Refused with this response code: NOTAUTH outside the zones, NOTIMP for a type
        /// not served, SERVFAIL over a limit.
        case refused(ResponseCode)
    }

    /// What the shell must do.
    public enum Action: Sendable, Equatable {
        /// Send these bytes back to the request's source (over its transport).
        case reply(RequestID, [UInt8])
        /// Send nothing back: the request is dropped (rate limit, a response sent to us, noise).
        case drop(RequestID)
        /// Start a continuous mDNS query on the link, and report what it learns with
        /// ``ProxyStateMachine/linkChanged(_:_:added:removed:now:)``.
        case startLinkQuestion(LinkIndex, LinkQuestion)
        /// Stop that query.
        case stopLinkQuestion(LinkIndex, LinkQuestion)
        /// Tell a DNS Push session these changes to one of its subscriptions (records already
        /// in the zone's form, with their own TTLs).
        case push(SessionID, [PushChange])
        /// Ask the link to reconfirm this record of its (RFC 6762 §10.4): a Push client
        /// believes it is gone (RFC 8765 §6.5). If its owner does not answer, the link reports
        /// it removed, and that is pushed.
        case reconfirmOnLink(LinkIndex, ResourceRecord)
    }

    /// What the proxy has done, counted. Nothing is dropped without being counted here.
    public struct Statistics: Sendable, Equatable {
        public var questions = 0
        /// Answers with NOERROR, whatever they held; ``answeredFromLink`` and ``noData`` are
        /// among them.
        public var answered = 0
        /// Answers with records the link gave.
        public var answeredFromLink = 0
        /// Answers with no records (NODATA: the zone's SOA only).
        public var noData = 0
        public var refusedOutsideZones = 0
        public var notImplemented = 0
        public var refusedTransfers = 0
        public var subscriptions = 0
        public var subscriptionsRefused = 0
        /// RECONFIRMs passed to the link.
        public var reconfirms = 0
        public var formatErrors = 0
        public var droppedUnreadable = 0
        public var droppedResponses = 0
        public var rateLimited = 0
        public var rateLimitedTruncated = 0
        public var truncated = 0
        public var serverFailures = 0
        public var linkQuestionsStarted = 0
        public var linkQuestionsStopped = 0
        public var linkQuestionsEvicted = 0
        public var linkQuestionsOverBudget = 0
        public var waitingOverSourceLimit = 0
        public var recordsOverLimit = 0
        /// UDP questions answered with a reply kept from the same question asked before.
        public var cachedReplies = 0
        public var suppressed: [RecordTranslation.Suppression: Int] = [:]
        public init() {}
    }

    public let configuration: Configuration
    public internal(set) var statistics = Statistics()

    struct Waiter {
        var request: RequestID
        var source: IPAddress
        var query: Message
        var transport: Transport
        var link: LinkIndex
    }

    struct QuestionState {
        var records: [RecordKey: ResourceRecord] = [:]
        /// The translated answer and additional records, kept until the link changes.
        var answer: CachedAnswer?
        var started: Duration
        var lastAsked: Duration
        var firstAnswer: Duration?
        var settled = false
        var waiters: [Waiter] = []
        /// DNS Push subscriptions to this question: it is kept while any is alive.
        var subscribers: Set<Subscriber> = []
    }

    struct Subscriber: Hashable {
        var session: SessionID
        var id: UInt16
    }

    var subscriptions: [Subscriber: Key] = [:]

    /// A link question on one link.
    struct LinkKey: Hashable, Sendable {
        var link: LinkIndex
        var question: LinkQuestion
    }
    typealias Key = LinkKey

    var questions: [Key: QuestionState] = [:]
    var unsettled: Set<Key> = []
    var waitingCount = 0
    var waitingBySource: [IPAddress: Int] = [:]
    /// Counts changes to what the links said; a cached answer made at another count is stale
    /// (its additional records come from other questions).
    var linkVersion: UInt64 = 0

    struct CachedAnswer {
        var version: UInt64
        var answers: [ResourceRecord]
        var additionals: [ResourceRecord]
    }
    var limiter: RateLimiter?
    var replies: ReplyCache
    var linkBudget: TokenBucket
    var nextSweep: Duration
    let translations: [RecordTranslation]

    public init(_ configuration: Configuration, now: Duration = .zero) {
        self.configuration = configuration
        translations = configuration.zones.map(RecordTranslation.init(zone:))
        limiter = configuration.rateLimit.map { RateLimiter($0) }
        replies = ReplyCache(capacity: configuration.maximumCachedReplies)
        linkBudget = TokenBucket(configuration.linkQuestionRate, now: now)
        nextSweep = now + max(configuration.idleLifetime, .seconds(1)) / 4
    }

    /// The next time ``advance(to:)`` has work: a waiting question's deadline or the sweep for
    /// idle link questions.
    public var nextDeadline: Duration {
        var next = nextSweep
        for key in unsettled {
            if let state = questions[key] { next = min(next, deadline(of: key, state)) }
        }
        return next
    }

    /// How many link questions are being asked now (``linkQuestions``' count, without sorting them).
    public var linkQuestionCount: Int { questions.count }

    /// The link questions being asked now, for status and tests.
    public var linkQuestions: [(LinkIndex, LinkQuestion)] {
        questions.keys.sorted { ($0.link, $0.question.name.description, $0.question.type) < ($1.link, $1.question.name.description, $1.question.type) }
            .map { ($0.link, $0.question) }
    }
}
