public import DNSWire

/// One continuous query (RFC 6762 §5.2): asked at once, then again after 1 s, 2 s, 4 s, …
final class ContinuousQuery {
    let id: Int
    let question: Question
    var generation = 0
    var interval = MDNSTiming.queryInitialInterval
    /// When the next query is due.
    var nextDue: Duration = .zero

    init(id: Int, question: Question) {
        self.id = id
        self.question = question
    }

    func wants(_ key: CacheKey) -> Bool { question.matches(key) }
}

extension Question {
    /// Whether cached records under `key` answer this question (name, and type or ANY).
    func matches(_ key: CacheKey) -> Bool {
        name == key.name && (type == .any || type == key.type)
    }
}

extension MDNSCore {
    // MARK: Queries

    /// Starts a continuous query. Records already cached are reported at once; the first
    /// query goes out immediately (an explicit request, not a network event: see DESIGN).
    public func startQuery(name: DomainName, type: RecordType) -> QueryID {
        let query = ContinuousQuery(id: allocateID(), question: Question(name: name, type: type))
        queries[query.id] = query
        for (_, list) in cache.matching(query.question) {
            for entry in list where !entry.doomed {
                eventQueue.append(.recordAdded(QueryID(rawValue: query.id), entry.record, entry.interface))
            }
        }
        query.nextDue = now
        scheduler.schedule(.query(query.id, generation: query.generation), at: now)
        return QueryID(rawValue: query.id)
    }

    /// Stops a continuous query.
    public func stopQuery(_ id: QueryID) {
        queries[id.rawValue] = nil
    }

    /// After a network change: ask again soon, with the §5.2 start delay (many queriers may
    /// have been set off by the same event).
    func restartQuery(_ query: ContinuousQuery) {
        query.generation += 1
        query.interval = MDNSTiming.queryInitialInterval
        query.nextDue = now + random.duration(in: MDNSTiming.queryStartDelay)
        scheduler.schedule(.query(query.id, generation: query.generation), at: query.nextDue)
    }

    func queryStep(_ id: Int, generation: Int) {
        guard let query = queries[id], query.generation == generation else { return }
        // The first query of a new question asks for unicast replies (QU, RFC 6762 §5.4):
        // responders answer it at once, and to us alone.
        var question = query.question
        question.unicastResponse = query.interval == MDNSTiming.queryInitialInterval && unicastRepliesReachUs
        sendQuery(question, unlessAnswered: true)
        scheduleNext(query)
    }

    /// The next query of `query` after its interval, which then doubles (§5.2).
    private func scheduleNext(_ query: ContinuousQuery) {
        query.nextDue = now + query.interval
        scheduler.schedule(.query(query.id, generation: query.generation), at: query.nextDue)
        query.interval = min(query.interval * 2, MDNSTiming.queryMaximumInterval)
    }

    /// The known answers this querier would list for `question` on `interface` (§7.1).
    func knownAnswers(for question: Question, on interface: NetworkInterface) -> [ResourceRecord] {
        cache.knownAnswers(for: question, on: interface, at: now)
    }

    /// §7.3 duplicate question suppression: another host multicast a QM question we are about
    /// to ask (in the second half of our wait), listing no known answer we would not list
    /// ourselves; its answers reach us too, so our own query counts as sent.
    func suppressDuplicateQuestions(_ received: ReceivedMessage) {
        let message = received.message
        guard received.destinationIsMulticast, !message.header.isTruncated, !queries.isEmpty else { return }
        for question in message.questions where !question.unicastResponse {
            for query in queries(named: question.name)
            where query.question.type == question.type
                && query.interval > MDNSTiming.queryInitialInterval
                && (query.nextDue - now) * 4 <= query.interval {
                let ours = knownAnswers(for: query.question, on: received.interface)
                let theirs = message.answers.filter { question.matches(CacheKey(name: $0.name, type: $0.type)) }
                let covered = theirs.allSatisfy { their in ours.contains { $0.name == their.name && $0.data == their.data } }
                guard covered else { continue }
                query.generation += 1
                scheduleNext(query)
                statistics.duplicateQuestionsSuppressed += 1
            }
        }
    }

    /// Multicasts `question` on every interface with the known answers cached there (those with
    /// more than half their TTL left, §7.1).
    func sendQuery(_ question: Question, unlessAnswered: Bool = false) {
        for interface in sortedInterfaces {
            let known = knownAnswers(for: question, on: interface)
            // A unique record (cache-flush) that we would list as known has no other answer
            // to draw: its owner announces any change, and refreshing it is the cache's job
            // (at 80 % of its TTL). Asking would cost a packet for a certain silence; with
            // 1,000 services resolved that was thousands of packets a second.
            if unlessAnswered, cache.holdsUniqueAnswer(to: question, on: interface, at: now) {
                statistics.answeredQueriesSkipped += 1
                continue
            }
            // Asking for what we hold without listing it: a query it should answer (§10.5).
            cache.noteAsked(question, on: interface, listing: known, at: now)
            sendMulticast(Message(questions: [question], answers: known), on: interface)
        }
        if question.unicastResponse { lastUnicastRequest = now }
        scheduleCacheCheck()
    }

    /// Asks to reconfirm a cached record that someone believes is gone (RFC 6762 §10.4): one
    /// query for its name and type, multicast on every interface, that does not list it as a
    /// known answer, so that its owner must answer. Asked twice, a second or more apart, with
    /// no answer, failure detection (§10.5) flushes it ten seconds after the first, and the
    /// queries that hold it are told it went. An answer keeps it.
    public func reconfirm(_ record: ResourceRecord) {
        let question = Question(name: record.name, type: record.type)
        for interface in sortedInterfaces {
            let known = knownAnswers(for: question, on: interface).filter { $0.data != record.data }
            cache.noteAsked(question, on: interface, listing: known, at: now)
            sendMulticast(Message(questions: [question], answers: known), on: interface)
        }
        statistics.reconfirmQueries += 1
        scheduleCacheCheck()
    }

    /// Another host's query: cached records it should have drawn an answer for (§10.5).
    func noteQuery(_ received: ReceivedMessage) {
        for question in received.message.questions {
            cache.noteAsked(question, on: received.interface, listing: received.message.answers, at: now)
        }
        scheduleCacheCheck()
    }

    // MARK: Cache

    func cacheResponse(_ received: ReceivedMessage) {
        let records = received.message.answers + received.message.additionals
        announce(cache.insert(records, on: received.interface, at: now, random: &random))
        scheduleCacheCheck()
    }

    /// Tells the queries that want them what entered or left the cache.
    func announce(_ changes: [CacheChange]) {
        for change in changes {
            for query in queries(named: change.key.name) where query.wants(change.key) {
                let id = QueryID(rawValue: query.id)
                switch change {
                case .added(_, let entry): eventQueue.append(.recordAdded(id, entry.record, entry.interface))
                case .removed(_, let entry): eventQueue.append(.recordRemoved(id, entry.record, entry.interface))
                }
            }
        }
    }

    /// Expires records, applies failure detection, and sends the refresh queries due.
    func cacheMaintenance() {
        let (removed, refresh) = cache.maintain(at: now) { key in queries.values.contains { $0.wants(key) } }
        announce(removed)
        for key in refresh { sendQuery(Question(name: key.name, type: key.type)) }
        scheduleCacheCheck()
    }

    func scheduleCacheCheck() {
        if let due = cache.nextDeadline { scheduler.scheduleOnce(.cacheCheck, at: max(due, now)) }
    }

    /// The records cached for `name` and `type`, with the interface each came on.
    public func cachedRecords(name: DomainName, type: RecordType) -> [(ResourceRecord, NetworkInterface)] {
        cache.live(CacheKey(name: name, type: type)).map { ($0.record, $0.interface) }
    }
}
