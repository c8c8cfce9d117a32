public import DNSWire

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
        /// on over TCP, where addresses cannot be forged; an address that has asked over TCP is
        /// then not limited over UDP for ten minutes (a forged one never gets there). With
        /// answers of at most 1232 bytes, this bounds what forged questions can make the proxy
        /// send one victim network to about 120 kB/s at the default.
        public var rateLimit: RateLimit? = RateLimit(perSecond: 100, burst: 200)
        /// New link questions per second, over all links, and the burst (RFC 8766 §9.3: a proxy
        /// MUST limit the multicast it causes). A question that would need one more is answered
        /// SERVFAIL, and the client asks again. Questions the link already has are not limited.
        public var linkQuestionRate = RateLimit(perSecond: 50, burst: 100)
        /// The port of this proxy's DNS Push service (RFC 8765) when it offers one: then
        /// `_dns-push-tls._tcp.<zone>` has an SRV record naming the zone's first name server
        /// and this port; without it, that name has no records and clients poll.
        public var pushPort: UInt16?
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
        public var answered = 0
        public var answeredFromLink = 0
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
    public private(set) var statistics = Statistics()

    private struct Waiter {
        var request: RequestID
        var source: IPAddress
        var query: Message
        var transport: Transport
        var link: LinkIndex
    }

    private struct QuestionState {
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

    private struct Subscriber: Hashable {
        var session: SessionID
        var id: UInt16
    }

    private var subscriptions: [Subscriber: Key] = [:]

    /// A link question on one link.
    struct LinkKey: Hashable, Sendable {
        var link: LinkIndex
        var question: LinkQuestion
    }
    private typealias Key = LinkKey

    private var questions: [Key: QuestionState] = [:]
    private var unsettled: Set<Key> = []
    private var waitingCount = 0
    private var waitingBySource: [IPAddress: Int] = [:]
    /// Counts changes to what the links said; a cached answer made at another count is stale
    /// (its additional records come from other questions).
    private var linkVersion: UInt64 = 0

    private struct CachedAnswer {
        var version: UInt64
        var answers: [ResourceRecord]
        var additionals: [ResourceRecord]
    }
    private var limiter: RateLimiter?
    private var replies: ReplyCache
    private var linkBudget: TokenBucket
    private var nextSweep: Duration
    private let translations: [RecordTranslation]

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

    /// The link questions being asked now, for status and tests.
    public var linkQuestions: [(LinkIndex, LinkQuestion)] {
        questions.keys.sorted { ($0.link, $0.question.name.description, $0.question.type) < ($1.link, $1.question.name.description, $1.question.type) }
            .map { ($0.link, $0.question) }
    }

    // MARK: Questions

    /// A DNS message arrived from `source`.
    public mutating func received(
        _ bytes: [UInt8], from source: IPAddress, over transport: Transport, request: RequestID, now: Duration
    ) -> [Action] {
        if transport == .udp, var limiter {
            let verdict = limiter.admit(source, now: now)
            self.limiter = limiter
            switch verdict {
            case .admit: break
            case .drop:
                statistics.rateLimited += 1
                return [.drop(request)]
            case .slip:
                statistics.rateLimited += 1
                statistics.rateLimitedTruncated += 1
                guard let query = try? Message(decoding: bytes), !query.header.isResponse else { return [.drop(request)] }
                var reply = Self.replyHeader(to: query, code: .noError)
                reply.header.isTruncated = true
                return [.reply(request, encode(reply, limit: 512))]
            }
        }
        if transport == .udp, let kept = replies.lookUp(bytes, version: linkVersion) {
            statistics.questions += 1
            statistics.cachedReplies += 1
            for counter in kept.counted { count(counter) }
            for key in kept.asked { questions[key]?.lastAsked = now }
            return [.reply(request, [bytes[0], bytes[1]] + kept.reply)]
        }
        let before = statistics
        let query: Message
        do {
            query = try Message(decoding: bytes)
        } catch {
            // A header we can read, from a client, gets FORMERR; anything less gets nothing.
            guard bytes.count >= 12, bytes[2] & 0x80 == 0 else {
                statistics.droppedUnreadable += 1
                return [.drop(request)]
            }
            statistics.formatErrors += 1
            let header = Header(id: UInt16(bytes[0]) << 8 | UInt16(bytes[1]), flags: 0x8000 | UInt16(bytes[2] & 0x78) << 8 | 1)
            return [.reply(request, (try? Message(header: header).encoded()) ?? [])]
        }
        // Never answer an answer: two servers would echo each other forever.
        guard !query.header.isResponse else {
            statistics.droppedResponses += 1
            return [.drop(request)]
        }
        statistics.questions += 1
        if transport == .tcp, limiter != nil {
            // An address that asks over TCP is no forgery: its UDP questions go unlimited.
            limiter?.prove(source, now: now)
        }
        guard query.header.opcode == Header.queryOpcode else {
            statistics.notImplemented += 1
            return [.reply(request, encode(Self.replyHeader(to: query, code: .notImplemented), for: query, transport: transport))]
        }
        guard query.questions.count == 1, let question = query.questions.first,
            query.additionals.filter({ $0.type == .opt }).count <= 1
        else {
            statistics.formatErrors += 1
            return [.reply(request, encode(Self.replyHeader(to: query, code: .formatError), for: query, transport: transport))]
        }
        if let opt = query.optRecord, opt.ttl >> 16 & 0xFF != 0 {
            // EDNS version other than 0: BADVERS (RFC 6891 §6.1.3), with our OPT record.
            statistics.formatErrors += 1
            return [.reply(request, encode(Self.replyHeader(to: query, code: ResponseCode(16)), for: query, transport: transport))]
        }
        guard question.class == .internet || question.class == .any,
            let link = configuration.zones.firstIndex(where: { $0.contains(question.name) }).map(LinkIndex.init)
        else {
            statistics.refusedOutsideZones += 1
            return [.reply(request, encode(Self.replyHeader(to: query, code: .refused), for: query, transport: transport))]
        }
        let zone = configuration.zones[link.rawValue]
        // Zone transfers are refused: a proxy's zone is live, not a file. ANY gets RFC 8482's
        // small answer (one HINFO record) rather than everything the link holds. The other
        // meta types are not implemented.
        if question.type == Self.axfr || question.type == Self.ixfr {
            statistics.refusedTransfers += 1
            return [.reply(request, encode(Self.replyHeader(to: query, code: .refused), for: query, transport: transport))]
        }
        if question.type == .any {
            var reply = Self.replyHeader(to: query, code: .noError)
            reply.header.isAuthoritative = true
            let hinfo = HINFOData(cpu: Array("RFC8482".utf8), os: [])
            reply.answers = [ResourceRecord(name: question.name, data: .hinfo(hinfo), ttl: zone.oneShotTTL)]
            statistics.answered += 1
            return [.reply(request, encode(reply, for: query, transport: transport))]
        }
        if question.type.rawValue >= 128 || question.type == .opt || question.type == .tsig {
            statistics.notImplemented += 1
            return [.reply(request, encode(Self.replyHeader(to: query, code: .notImplemented), for: query, transport: transport))]
        }
        if let local = answerFromZone(query, question: question, zone: zone, transport: transport) {
            statistics.answered += 1
            if transport == .udp { keep(local, for: bytes, countedSince: before, asked: []) }
            return [.reply(request, local)]
        }
        guard let linkName = zone.linkName(for: question.name) else {
            // Too long to exist under local. (the zone's name is shorter than "local"): no records.
            var reply = Self.replyHeader(to: query, code: .noError)
            reply.header.isAuthoritative = true
            reply.authorities = [zone.soaRecord]
            statistics.noData += 1
            return [.reply(request, encode(reply, for: query, transport: transport))]
        }
        let key = Key(link: link, question: LinkQuestion(name: linkName, type: question.type))
        var actions: [Action] = []
        if var state = questions[key] {
            state.lastAsked = now
            if state.settled {
                questions[key] = state
                statistics.answered += 1
                let reply = answer(query, key: key, zone: zone, transport: transport)
                actions.append(.reply(request, reply))
                actions += followUps(after: key, now: now)
                if transport == .udp { keep(reply, for: bytes, countedSince: before, asked: [key] + followUpKeys(of: key)) }
                return actions
            }
            if let refusal = waitingRefusal(source, query: query, request: request, transport: transport) { return [refusal] }
            state.waiters.append(Waiter(request: request, source: source, query: query, transport: transport, link: link))
            startWaiting(source)
            questions[key] = state
            return []
        }
        if let refusal = waitingRefusal(source, query: query, request: request, transport: transport) { return [refusal] }
        guard linkBudget.take(now: now) else {
            statistics.linkQuestionsOverBudget += 1
            statistics.serverFailures += 1
            return [.reply(request, encode(Self.replyHeader(to: query, code: .serverFailure), for: query, transport: transport))]
        }
        guard let made = makeRoom(now: now) else {
            statistics.serverFailures += 1
            return [.reply(request, encode(Self.replyHeader(to: query, code: .serverFailure), for: query, transport: transport))]
        }
        actions += made
        var state = QuestionState(started: now, lastAsked: now)
        state.waiters.append(Waiter(request: request, source: source, query: query, transport: transport, link: link))
        startWaiting(source)
        questions[key] = state
        unsettled.insert(key)
        statistics.linkQuestionsStarted += 1
        actions.append(.startLinkQuestion(link, key.question))
        return actions
    }

    /// SERVFAIL when no more questions may wait: in all, or from this source.
    private mutating func waitingRefusal(_ source: IPAddress, query: Message, request: RequestID, transport: Transport) -> Action? {
        if waitingCount >= configuration.maximumWaiting {
            statistics.serverFailures += 1
        } else if waitingBySource[source, default: 0] >= configuration.maximumWaitingPerSource {
            statistics.serverFailures += 1
            statistics.waitingOverSourceLimit += 1
        } else {
            return nil
        }
        return .reply(request, encode(Self.replyHeader(to: query, code: .serverFailure), for: query, transport: transport))
    }

    private mutating func startWaiting(_ source: IPAddress) {
        waitingCount += 1
        waitingBySource[source, default: 0] += 1
    }

    private mutating func stopWaiting(_ source: IPAddress) {
        waitingCount -= 1
        let left = waitingBySource[source, default: 1] - 1
        waitingBySource[source] = left > 0 ? left : nil
    }

    /// Keeps a UDP reply for the same question asked again (``ReplyCache``), with what it
    /// counted since `before`.
    private mutating func keep(_ reply: [UInt8], for query: [UInt8], countedSince before: Statistics, asked: [Key]) {
        var counted: [ReplyCache.Counted] = []
        if statistics.answered > before.answered { counted.append(.answered) }
        if statistics.answeredFromLink > before.answeredFromLink { counted.append(.answeredFromLink) }
        if statistics.noData > before.noData { counted.append(.noData) }
        if statistics.refusedOutsideZones > before.refusedOutsideZones { counted.append(.refusedOutsideZones) }
        // A reply that truncated or suppressed something is made again each time, so that its
        // counts stay true.
        guard statistics.truncated == before.truncated, statistics.suppressed == before.suppressed else { return }
        replies.keep(reply, for: query, version: linkVersion, counted: counted, asked: asked)
    }

    private mutating func count(_ counter: ReplyCache.Counted) {
        switch counter {
        case .answered: statistics.answered += 1
        case .answeredFromLink: statistics.answeredFromLink += 1
        case .noData: statistics.noData += 1
        case .refusedOutsideZones: statistics.refusedOutsideZones += 1
        }
    }

    /// The address questions an SRV answer's targets have on the link (those that exist).
    private func followUpKeys(of key: Key) -> [Key] {
        guard key.question.type == .srv, let state = questions[key] else { return [] }
        var keys: [Key] = []
        for record in state.records.values {
            guard case .srv(let srv) = record.data else { continue }
            for type in [RecordType.a, .aaaa] {
                let follow = Key(link: key.link, question: LinkQuestion(name: srv.target, type: type))
                if questions[follow] != nil { keys.append(follow) }
            }
        }
        return keys
    }

    // MARK: The link

    /// A link question learned records, or lost them. Records of other names or types, which
    /// a querier may hand over too, are ignored.
    public mutating func linkChanged(
        _ link: LinkIndex, _ question: LinkQuestion, added: [ResourceRecord], removed: [ResourceRecord], now: Duration
    ) -> [Action] {
        let key = Key(link: link, question: question)
        guard var state = questions[key] else { return [] }
        var gone: [ResourceRecord] = []
        var came: [ResourceRecord] = []
        for record in removed {
            if let old = state.records.removeValue(forKey: RecordKey(record)) { gone.append(old) }
        }
        for record in added where record.name == question.name && record.type == question.type {
            if record.isGoodbye {
                if let old = state.records.removeValue(forKey: RecordKey(record)) { gone.append(old) }
            } else if state.records[RecordKey(record)] != nil || state.records.count < configuration.maximumRecordsPerQuestion {
                state.records[RecordKey(record)] = record
                came.append(record)
            } else {
                statistics.recordsOverLimit += 1
            }
        }
        if !added.isEmpty || !removed.isEmpty {
            linkVersion &+= 1
            state.answer = nil
        }
        if !state.settled, state.firstAnswer == nil, !state.records.isEmpty { state.firstAnswer = now }
        questions[key] = state
        var actions: [Action] = []
        if !state.subscribers.isEmpty, !(came.isEmpty && gone.isEmpty) {
            // Subscribers hear each change with the record's own TTL (RFC 8766 §5.5.1).
            let translation = translations[link.rawValue]
            var changes = translate(came, translation, cap: Self.maximumPushTTL).map(PushChange.add)
            changes += translate(gone.map { var record = $0; record.ttl = 1; return record }, translation, cap: Self.maximumPushTTL).map { .remove($0) }
            if !changes.isEmpty {
                for subscriber in state.subscribers.sorted(by: { ($0.session.rawValue, $0.id) < ($1.session.rawValue, $1.id) }) {
                    actions.append(.push(subscriber.session, changes))
                }
            }
        }
        return actions + advance(to: now)
    }

    // MARK: DNS Push

    /// Pushed records keep their own TTLs, up to the largest a PUSH can carry (RFC 8765 §6.3.1:
    /// 0x7FFFFFFF; above it the field means removal): a host on the link that announces more
    /// must not make a PUSH unsendable.
    static let maximumPushTTL: UInt32 = 0x7FFF_FFFF

    /// A DNS Push session subscribes to `question` (its SUBSCRIBE's message ID is `id`). An
    /// accepted subscription keeps its link question alive, and every change to it comes as a
    /// ``Action/push(_:_:)`` until ``unsubscribe(session:id:now:)`` or
    /// ``sessionEnded(_:now:)``.
    public mutating func subscribe(_ question: Question, session: SessionID, id: UInt16, now: Duration) -> (SubscribeResult, [Action]) {
        guard question.class == .internet,
            let link = configuration.zones.firstIndex(where: { $0.contains(question.name) }).map(LinkIndex.init)
        else {
            statistics.subscriptionsRefused += 1
            return (.refused(.notAuthoritative), [])
        }
        if question.type.rawValue >= 128 || question.type == .opt || question.type == .tsig {
            statistics.subscriptionsRefused += 1
            return (.refused(.notImplemented), [])
        }
        let zone = configuration.zones[link.rawValue]
        // Names the zone itself holds: what it holds now, and never a change.
        if let held = zoneRecords(question, zone: zone) {
            statistics.subscriptions += 1
            return (.accepted(held.map(PushChange.add)), [])
        }
        guard let linkName = zone.linkName(for: question.name) else {
            statistics.subscriptions += 1
            return (.accepted([]), [])
        }
        let key = Key(link: link, question: LinkQuestion(name: linkName, type: question.type))
        let subscriber = Subscriber(session: session, id: id)
        var actions: [Action] = []
        if questions[key] == nil {
            guard linkBudget.take(now: now) else {
                statistics.linkQuestionsOverBudget += 1
                statistics.subscriptionsRefused += 1
                return (.refused(.serverFailure), [])
            }
            guard let made = makeRoom(now: now) else {
                statistics.subscriptionsRefused += 1
                return (.refused(.serverFailure), [])
            }
            actions += made
            questions[key] = QuestionState(started: now, lastAsked: now)
            unsettled.insert(key)
            statistics.linkQuestionsStarted += 1
            actions.append(.startLinkQuestion(link, key.question))
        }
        questions[key]?.subscribers.insert(subscriber)
        questions[key]?.lastAsked = now
        subscriptions[subscriber] = key
        statistics.subscriptions += 1
        let now = translate(records(for: key), translations[link.rawValue], cap: Self.maximumPushTTL).map(PushChange.add)
        return (.accepted(now), actions)
    }

    /// A DNS Push client's RECONFIRM of `record` (a record of a zone, RFC 8765 §6.5): the same
    /// record in the link's names, for the link to ask again; nothing for a record outside the
    /// zones, one of the zone's own (apex, name servers, browse domains), or one the link never
    /// told.
    public mutating func reconfirm(_ record: ResourceRecord) -> [Action] {
        guard let index = configuration.zones.firstIndex(where: { $0.contains(record.name) }) else { return [] }
        let zone = configuration.zones[index]
        guard zoneRecords(Question(name: record.name, type: record.type), zone: zone) == nil,
            let name = zone.linkName(for: record.name)
        else { return [] }
        func onLink(_ target: DomainName) -> DomainName { zone.linkName(for: target) ?? target }
        var data = record.data
        switch record.data {
        case .ptr(let target): data = .ptr(onLink(target))
        case .srv(var srv):
            srv.target = onLink(srv.target)
            data = .srv(srv)
        default: break
        }
        let link = LinkIndex(index)
        let linkRecord = ResourceRecord(name: name, data: data, ttl: 0)
        let question = LinkQuestion(name: name, type: record.type)
        guard let state = questions[Key(link: link, question: question)], state.records.values.contains(where: { $0.data == data }) else { return [] }
        statistics.reconfirms += 1
        return [.reconfirmOnLink(link, linkRecord)]
    }

    /// A subscription ended (UNSUBSCRIBE). Its link question is then kept only while others
    /// ask, and stops after the idle lifetime.
    public mutating func unsubscribe(session: SessionID, id: UInt16, now: Duration) {
        let subscriber = Subscriber(session: session, id: id)
        guard let key = subscriptions.removeValue(forKey: subscriber) else { return }
        questions[key]?.subscribers.remove(subscriber)
        questions[key]?.lastAsked = now
    }

    /// A session ended: all its subscriptions end.
    public mutating func sessionEnded(_ session: SessionID, now: Duration) {
        for subscriber in subscriptions.keys where subscriber.session == session {
            unsubscribe(session: session, id: subscriber.id, now: now)
        }
    }

    /// `_dns-push-tls._tcp.<zone>`'s records when the proxy offers DNS Push (RFC 8765 §6.1):
    /// an SRV naming the zone's first name server and the Push port; nil for other names, and
    /// when Push is not offered (the name is then administrative, with no records).
    private func pushServiceRecords(_ question: Question, zone: ProxyZone) -> [ResourceRecord]? {
        guard let port = configuration.pushPort, let server = zone.nameServers.first,
            question.name == zone.pushServiceName
        else { return nil }
        guard question.type == .srv else { return [] }
        return [ResourceRecord(name: question.name, data: .srv(SRVData(priority: 0, weight: 0, port: port, target: server.name)), ttl: zone.oneShotTTL)]
    }

    /// The records the zone holds for a question about its own names (apex, name servers,
    /// browse domains, administrative names); nil for a name of the link.
    private func zoneRecords(_ question: Question, zone: ProxyZone) -> [ResourceRecord]? {
        let name = question.name
        if name == zone.name {
            switch question.type {
            case .soa: return [zone.soaRecord]
            case .ns: return zone.nsRecords
            default: return []
            }
        }
        if zone.nameServers.contains(where: { $0.name == name }) {
            return zone.glueRecords.filter { $0.name == name && $0.type == question.type }
        }
        if let push = pushServiceRecords(question, zone: zone) { return push }
        if let label = Self.enumerationLabel(of: name, in: zone) {
            return question.type == .ptr && ["b", "db", "lb"].contains(label) ? [ResourceRecord(name: name, data: .ptr(zone.name), ttl: zone.oneShotTTL)] : []
        }
        if Self.isAdministrative(name, in: zone) || [RecordType.soa, .ns, Self.ds].contains(question.type) { return [] }
        return nil
    }

    // MARK: Time

    /// Time has come to `now`: questions whose gathering time is over are answered, and link
    /// questions nobody asks about any more are stopped.
    public mutating func advance(to now: Duration) -> [Action] {
        var actions: [Action] = []
        let due = unsettled.filter { key in questions[key].map { deadline(of: key, $0) <= now } ?? true }
        for key in due.sorted(by: { ($0.link, $0.question.name.description, $0.question.type) < ($1.link, $1.question.name.description, $1.question.type) }) {
            guard var state = questions[key] else {
                unsettled.remove(key)
                continue
            }
            state.settled = true
            let waiters = state.waiters
            state.waiters = []
            questions[key] = state
            unsettled.remove(key)
            for waiter in waiters {
                stopWaiting(waiter.source)
                let zone = configuration.zones[waiter.link.rawValue]
                statistics.answered += 1
                actions.append(.reply(waiter.request, answer(waiter.query, key: key, zone: zone, transport: waiter.transport)))
            }
            if !waiters.isEmpty { actions += followUps(after: key, now: now) }
        }
        if now >= nextSweep {
            nextSweep = now + max(configuration.idleLifetime, .seconds(1)) / 4
            for (key, state) in questions where state.settled && state.subscribers.isEmpty && now - state.lastAsked >= configuration.idleLifetime {
                questions[key] = nil
                // Its records leave the answers (and kept replies) with it.
                linkVersion &+= 1
                statistics.linkQuestionsStopped += 1
                actions.append(.stopLinkQuestion(key.link, key.question))
            }
            limiter?.forget(before: now - .seconds(10))
        }
        return actions
    }

    private func deadline(of key: Key, _ state: QuestionState) -> Duration {
        let timeout = state.started + configuration.answerTimeout
        guard let first = state.firstAnswer else { return timeout }
        return min(timeout, first + (key.question.type == .ptr ? configuration.gatherTime : .zero))
    }

    /// Room for one more link question: the one asked about longest ago is stopped when the
    /// limit is reached. Nil when every question is still waiting for the link.
    private mutating func makeRoom(now: Duration) -> [Action]? {
        guard questions.count >= configuration.maximumLinkQuestions else { return [] }
        guard let oldest = questions.filter({ $0.value.settled && $0.value.subscribers.isEmpty }).min(by: { $0.value.lastAsked < $1.value.lastAsked }) else { return nil }
        questions[oldest.key] = nil
        linkVersion &+= 1
        statistics.linkQuestionsEvicted += 1
        statistics.linkQuestionsStopped += 1
        return [.stopLinkQuestion(oldest.key.link, oldest.key.question)]
    }

    /// After an SRV answer, the target's addresses are asked for too, so that the next
    /// question (or the next SRV answer's additional section) finds them.
    private mutating func followUps(after key: Key, now: Duration) -> [Action] {
        guard key.question.type == .srv, let state = questions[key] else { return [] }
        var actions: [Action] = []
        var targets: Set<DomainName> = []
        for record in state.records.values {
            if case .srv(let srv) = record.data, srv.target.hasSuffix(ProxyZone.linkDomain) { targets.insert(srv.target) }
        }
        for target in targets.sorted(by: { $0.description < $1.description }) {
            for type in [RecordType.a, .aaaa] {
                let follow = Key(link: key.link, question: LinkQuestion(name: target, type: type))
                if questions[follow] != nil {
                    questions[follow]?.lastAsked = now
                    continue
                }
                guard linkBudget.take(now: now), let made = makeRoom(now: now) else { return actions }
                actions += made
                // Nobody waits on it yet; a question that comes before its gathering time is
                // over waits like any first question, rather than getting "no records" from a
                // link that has not been asked long enough to answer.
                questions[follow] = QuestionState(started: now, lastAsked: now)
                unsettled.insert(follow)
                statistics.linkQuestionsStarted += 1
                actions.append(.startLinkQuestion(key.link, follow.question))
            }
        }
        return actions
    }

    // MARK: Answers

    /// The answer to a question the zone itself knows: its apex, its name servers, its browse
    /// domains. Nil when the question is for the link.
    private mutating func answerFromZone(_ query: Message, question: Question, zone: ProxyZone, transport: Transport) -> [UInt8]? {
        var reply = Self.replyHeader(to: query, code: .noError)
        reply.header.isAuthoritative = true
        let name = question.name
        if name == zone.name {
            switch question.type {
            case .soa: reply.answers = [zone.soaRecord]
            case .ns:
                reply.answers = zone.nsRecords
                reply.additionals = zone.glueRecords + reply.additionals
            default:
                reply.authorities = [zone.soaRecord]
                statistics.noData += 1
            }
            return encode(reply, for: query, transport: transport)
        }
        if zone.nameServers.contains(where: { $0.name == name }) {
            reply.answers = zone.glueRecords.filter { $0.name == name && $0.type == question.type }
            if reply.answers.isEmpty {
                reply.authorities = [zone.soaRecord]
                statistics.noData += 1
            }
            return encode(reply, for: query, transport: transport)
        }
        if let label = Self.enumerationLabel(of: name, in: zone) {
            // b/db/lb._dns-sd._udp.<zone>: browse here (RFC 6763 §11). r/dr: registration is not
            // offered, so they have no records.
            if question.type == .ptr, ["b", "db", "lb"].contains(label) {
                reply.answers = [ResourceRecord(name: name, data: .ptr(zone.name), ttl: zone.oneShotTTL)]
            } else {
                reply.authorities = [zone.soaRecord]
                statistics.noData += 1
            }
            return encode(reply, for: query, transport: transport)
        }
        if let push = pushServiceRecords(question, zone: zone) {
            reply.answers = push
            if push.isEmpty {
                reply.authorities = [zone.soaRecord]
                statistics.noData += 1
            }
            return encode(reply, for: query, transport: transport)
        }
        if Self.isAdministrative(name, in: zone) || [RecordType.soa, .ns, Self.ds].contains(question.type) {
            // RFC 8766 §6.3, §6.4: no zone cut and no updates below the apex, and no update or
            // LLQ service (Push, when offered, was answered above); said at once, never asked
            // of the link.
            reply.authorities = [zone.soaRecord]
            statistics.noData += 1
            return encode(reply, for: query, transport: transport)
        }
        return nil
    }

    static let ds = RecordType(43)
    static let axfr = RecordType(252)
    static let ixfr = RecordType(251)

    /// The service names DNS clients look up in a zone before using it for updates, long-lived
    /// queries or Push (RFC 8766 §6.4), directly under the zone: `_dns-update._udp.<zone>` and
    /// the like.
    static func isAdministrative(_ name: DomainName, in zone: ProxyZone) -> Bool {
        guard name.labelCount == zone.name.labelCount + 2 else { return false }
        let labels = name.labels.prefix(2).map { String(decoding: $0, as: UTF8.self).lowercased() }
        let services: Set = ["_dns-update", "_dns-update-tls", "_dns-llq", "_dns-llq-tls", "_dns-push-tls", "_dns-query-tls"]
        return services.contains(labels[0]) && (labels[1] == "_udp" || labels[1] == "_tcp")
    }

    /// The browse and registration domain labels of RFC 6763 §11 (`b`, `db`, `lb`, `r`, `dr`):
    /// names the zone answers itself.
    static let domainEnumerationLabels: Set<String> = ["b", "db", "lb", "r", "dr"]

    /// `b` for `b._dns-sd._udp.<zone>` (lower-cased), and so on for the other domain
    /// enumeration labels; nil for other names. `_services._dns-sd._udp.<zone>` (service type
    /// enumeration, RFC 6763 §9) is not one of them: it is an ordinary PTR question for the
    /// link, whose hosts answer it with the types they offer.
    static func enumerationLabel(of name: DomainName, in zone: ProxyZone) -> String? {
        guard name.labelCount == zone.name.labelCount + 3 else { return nil }
        let labels = name.labels.prefix(3).map { String(decoding: $0, as: UTF8.self).lowercased() }
        guard labels[1] == "_dns-sd", labels[2] == "_udp", Self.domainEnumerationLabels.contains(labels[0]) else { return nil }
        return labels[0]
    }

    /// The answer from what the link has said for `key`.
    private mutating func answer(_ query: Message, key: Key, zone: ProxyZone, transport: Transport) -> [UInt8] {
        var reply = Self.replyHeader(to: query, code: .noError)
        reply.header.isAuthoritative = true
        let cached: CachedAnswer
        if let kept = questions[key]?.answer, kept.version == linkVersion {
            cached = kept
        } else {
            let translation = translations[key.link.rawValue]
            let answers = translate(records(for: key), translation, cap: zone.oneShotTTL)
            let additionals = answers.isEmpty ? [] : translate(additionalRecords(for: key), translation, cap: zone.oneShotTTL)
            cached = CachedAnswer(version: linkVersion, answers: answers, additionals: additionals)
            questions[key]?.answer = cached
        }
        reply.answers = cached.answers
        if reply.answers.isEmpty {
            reply.authorities = [zone.soaRecord]
            statistics.noData += 1
        } else {
            statistics.answeredFromLink += 1
            reply.additionals = cached.additionals + reply.additionals
        }
        return encode(reply, for: query, transport: transport)
    }

    private func records(for key: Key) -> [ResourceRecord] {
        guard let state = questions[key] else { return [] }
        return state.records.values.sorted { Self.precedes($0, $1) }
    }

    /// An order for records of one name and type, so that answers come out the same every time:
    /// by the names in their data, then by their data's text.
    static func precedes(_ a: ResourceRecord, _ b: ResourceRecord) -> Bool {
        switch (a.data, b.data) {
        case (.ptr(let x), .ptr(let y)): x.precedes(y) || (x == y && x.description < y.description)
        case (.srv(let x), .srv(let y)):
            (x.priority, x.weight, x.port) != (y.priority, y.weight, y.port)
                ? (x.priority, x.weight, x.port) < (y.priority, y.weight, y.port) : x.target.precedes(y.target)
        case (.a(let x), .a(let y)): x.value < y.value
        case (.aaaa(let x), .aaaa(let y)): x.description < y.description
        case (.txt(let x), .txt(let y)): x.rdata.lexicographicallyPrecedes(y.rdata)
        default: a.data.sortKey < b.data.sortKey
        }
    }

    /// What a client asks next, when the link has told it already: an instance's SRV and TXT
    /// after a PTR, a host's addresses after an SRV (RFC 6763 §12).
    private func additionalRecords(for key: Key) -> [ResourceRecord] {
        var extra: [ResourceRecord] = []
        var hosts: [DomainName] = []
        for record in records(for: key) {
            switch record.data {
            case .ptr(let instance):
                for type in [RecordType.srv, .txt] {
                    let more = records(for: Key(link: key.link, question: LinkQuestion(name: instance, type: type)))
                    extra += more
                    for case .srv(let srv) in more.map(\.data) { hosts.append(srv.target) }
                }
            case .srv(let srv): hosts.append(srv.target)
            default: break
            }
        }
        for host in hosts {
            for type in [RecordType.a, .aaaa] {
                extra += records(for: Key(link: key.link, question: LinkQuestion(name: host, type: type)))
            }
        }
        return extra
    }

    private mutating func translate(_ records: [ResourceRecord], _ translation: RecordTranslation, cap: UInt32?) -> [ResourceRecord] {
        var out: [ResourceRecord] = []
        var seen: Set<RecordKey> = []
        for record in records {
            switch translation.translate(record, ttlCap: cap) {
            case .record(let translated):
                if seen.insert(RecordKey(translated)).inserted { out.append(translated) }
            case .suppressed(let why):
                statistics.suppressed[why, default: 0] += 1
            }
        }
        return out
    }

    /// A reply's skeleton: the query's ID, question and RD bit, the response code, and an OPT
    /// record when the query had one.
    static func replyHeader(to query: Message, code: ResponseCode) -> Message {
        var header = Header(id: query.header.id)
        header.isResponse = true
        header.opcode = query.header.opcode
        header.recursionDesired = query.header.recursionDesired
        // CD is copied (RFC 4035 §3.1.6), though the proxy does no DNSSEC.
        header.flags |= query.header.flags & 0x0010
        header.responseCode = UInt8(code.rawValue & 0xF)
        // The question is echoed when there is one question; a message with several gets none
        // back (it is refused or malformed anyway), so a reply never outgrows its question.
        var reply = Message(header: header, questions: code == .formatError || query.questions.count != 1 ? [] : query.questions)
        if query.optRecord != nil {
            let extended = UInt32(code.rawValue >> 4) << 24
            reply.additionals = [ResourceRecord(name: .root, data: .opt([]), ttl: extended, class: RecordClass(Message.ednsPayloadSize))]
        }
        return reply
    }

    /// The answer's size limit over `transport` for `query`: 512 bytes over UDP without
    /// EDNS(0), the client's offer with it (at most ``Configuration/maximumUDPPayload``),
    /// 65,535 over TCP.
    func sizeLimit(for query: Message, transport: Transport) -> Int {
        switch transport {
        case .tcp: return Int(UInt16.max)
        case .udp:
            guard let opt = query.optRecord else { return 512 }
            return min(max(512, Int(opt.class.rawValue)), configuration.maximumUDPPayload)
        }
    }

    private mutating func encode(_ reply: Message, for query: Message, transport: Transport) -> [UInt8] {
        encode(reply, limit: sizeLimit(for: query, transport: transport))
    }

    /// Encodes `reply` within `limit` bytes: first whole; then without the additional records
    /// (but the OPT record); then with the TC bit and no records at all, so the client asks
    /// again over TCP.
    private mutating func encode(_ reply: Message, limit: Int) -> [UInt8] {
        if let bytes = try? reply.encoded(), bytes.count <= limit { return bytes }
        var smaller = reply
        smaller.additionals = reply.additionals.filter { $0.type == .opt }
        if let bytes = try? smaller.encoded(), bytes.count <= limit { return bytes }
        statistics.truncated += 1
        smaller.answers = []
        smaller.authorities = []
        smaller.header.isTruncated = true
        if let bytes = try? smaller.encoded(), bytes.count <= limit { return bytes }
        smaller.questions = []
        smaller.additionals = []
        return (try? smaller.encoded()) ?? []
    }
}

extension RecordData {
    /// An order for records of one type, so that answers come out the same every time.
    var sortKey: String {
        switch self {
        case .a(let address): address.description
        case .aaaa(let address): address.description
        case .ptr(let name), .cname(let name), .ns(let name): name.description
        case .srv(let srv): "\(srv.priority) \(srv.weight) \(srv.port) \(srv.target)"
        case .txt(let txt): txt.rdata.map { String($0) }.joined(separator: ",")
        default: "\(self)"
        }
    }
}
