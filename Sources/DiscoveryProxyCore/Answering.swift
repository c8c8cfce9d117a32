// The proxy's answers (RFC 8766 §5): a question in, refusals, what the zone itself holds,
// what the link said, waiting for the link, and replies kept for questions asked again.
public import DNSWire

extension ProxyStateMachine {
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
            // An address that asks over TCP is no forgery: its UDP questions get a larger bucket.
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
            statistics.answered += 1
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
                // Kept before the follow-ups, whose room-making may change the link's version.
                if transport == .udp, let follow = followUpKeys(of: key) {
                    keep(reply, for: bytes, countedSince: before, asked: [key] + follow)
                }
                actions += followUps(after: key, now: now)
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
    mutating func waitingRefusal(_ source: IPAddress, query: Message, request: RequestID, transport: Transport) -> Action? {
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

    mutating func startWaiting(_ source: IPAddress) {
        waitingCount += 1
        waitingBySource[source, default: 0] += 1
    }

    mutating func stopWaiting(_ source: IPAddress) {
        waitingCount -= 1
        let left = waitingBySource[source, default: 1] - 1
        waitingBySource[source] = left > 0 ? left : nil
    }

    /// Keeps a UDP reply for the same question asked again (``ReplyCache``), with what it
    /// counted since `before`.
    mutating func keep(_ reply: [UInt8], for query: [UInt8], countedSince before: Statistics, asked: [Key]) {
        var counted: [ReplyCache.Counted] = []
        if statistics.answered > before.answered { counted.append(.answered) }
        if statistics.answeredFromLink > before.answeredFromLink { counted.append(.answeredFromLink) }
        if statistics.noData > before.noData { counted.append(.noData) }
        if statistics.refusedOutsideZones > before.refusedOutsideZones { counted.append(.refusedOutsideZones) }
        // A reply that was truncated is made again each time, so that its count stays true. (One
        // that left records out is kept from its second asking on: the per-question answer it
        // is made from is itself kept, and counts what it left out once.)
        guard statistics.truncated == before.truncated, statistics.suppressed == before.suppressed else { return }
        replies.keep(reply, for: query, version: linkVersion, counted: counted, asked: asked)
    }

    mutating func count(_ counter: ReplyCache.Counted) {
        switch counter {
        case .answered: statistics.answered += 1
        case .answeredFromLink: statistics.answeredFromLink += 1
        case .noData: statistics.noData += 1
        case .refusedOutsideZones: statistics.refusedOutsideZones += 1
        }
    }

    /// The address questions an SRV answer's targets have on the link, for a kept reply to
    /// count as asking them; nil when one is missing (the link budget or the room ran out when
    /// the SRV was first answered): such a reply is not kept, so that the next asking starts
    /// the missing question.
    func followUpKeys(of key: Key) -> [Key]? {
        guard key.question.type == .srv, let state = questions[key] else { return [] }
        var keys: [Key] = []
        for record in state.records.values {
            guard case .srv(let srv) = record.data, srv.target.hasSuffix(ProxyZone.linkDomain) else { continue }
            for type in [RecordType.a, .aaaa] {
                let follow = Key(link: key.link, question: LinkQuestion(name: srv.target, type: type))
                guard questions[follow] != nil else { return nil }
                keys.append(follow)
            }
        }
        return keys
    }

    // MARK: Answers

    /// The answer to a question the zone itself knows: its apex, its name servers, its browse
    /// domains. Nil when the question is for the link.
    mutating func answerFromZone(_ query: Message, question: Question, zone: ProxyZone, transport: Transport) -> [UInt8]? {
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
        if let push = pushServiceRecords(question, zone: zone) ?? registrarServiceRecords(question, zone: zone) {
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
    mutating func answer(_ query: Message, key: Key, zone: ProxyZone, transport: Transport) -> [UInt8] {
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

    func records(for key: Key) -> [ResourceRecord] {
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
    func additionalRecords(for key: Key) -> [ResourceRecord] {
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

    mutating func translate(_ records: [ResourceRecord], _ translation: RecordTranslation, cap: UInt32?) -> [ResourceRecord] {
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
}
