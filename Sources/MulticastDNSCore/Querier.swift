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

struct CacheKey: Hashable {
    var name: DomainName
    var type: RecordType
}

/// A cached record as received on one interface.
struct CacheEntry {
    var record: ResourceRecord
    var interface: NetworkInterface
    var received: Duration
    var expires: Duration
    /// When to ask again to keep it fresh: 80, 85, 90 and 95 % of the TTL plus 0–2 % (§5.2).
    var refreshTimes: [Duration]
    /// Queries seen for it that went unanswered, for failure detection (§10.5).
    var unansweredQueries: [Duration] = []
    /// A goodbye or a cache-flush answer set it to go in one second; it is not refreshed.
    var doomed = false

}

/// Records learned from responses, keyed by name and type (class IN).
struct RecordCache {
    var entries: [CacheKey: [CacheEntry]] = [:]

    /// The cached lists that answer `question`: one lookup for a type, a scan only for ANY.
    func matching(_ question: Question) -> [(key: CacheKey, value: [CacheEntry])] {
        if question.type == .any { return entries.filter { question.matches($0.key) }.map { ($0.key, $0.value) } }
        let key = CacheKey(name: question.name, type: question.type)
        return entries[key].map { [(key, $0)] } ?? []
    }

    /// Removes everything learned on `interface` (it went away), telling the queries.
    mutating func removeAll(on interface: NetworkInterface, now: Duration, core: MDNSCore) {
        for (key, list) in entries {
            let (gone, kept) = (list.filter { $0.interface == interface }, list.filter { $0.interface != interface })
            entries[key] = kept.isEmpty ? nil : kept
            for entry in gone { core.announceRemoval(entry, key: key) }
        }
    }
}

extension MDNSCore {
    // MARK: Queries

    /// Starts a continuous query. Records already cached are reported at once; the first
    /// query goes out immediately (an explicit request, not a network event: see DESIGN).
    public func startQuery(name: DomainName, type: RecordType) -> QueryID {
        let query = ContinuousQuery(id: allocateID(), question: Question(name: name, type: type))
        queries[query.id] = query
        for (key, list) in cache.matching(query.question) {
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
        sendQuery(question)
        scheduleNext(query)
    }

    /// The next query of `query` after its interval, which then doubles (§5.2).
    private func scheduleNext(_ query: ContinuousQuery) {
        query.nextDue = now + query.interval
        scheduler.schedule(.query(query.id, generation: query.generation), at: query.nextDue)
        query.interval = min(query.interval * 2, MDNSTiming.queryMaximumInterval)
    }

    /// Whether a cached entry still goes into a query's known answers: more than half its TTL
    /// left (§7.1), and not on its way out.
    func isKnownAnswer(_ entry: CacheEntry) -> Bool {
        !entry.doomed && (entry.expires - now) * 2 > .ttl(entry.record.ttl)
    }

    /// The known answers this querier would list for `question` on `interface`.
    func knownAnswers(for question: Question, on interface: NetworkInterface) -> [ResourceRecord] {
        var known: [ResourceRecord] = []
        for (key, list) in cache.matching(question) {
            for entry in list where entry.interface == interface && isKnownAnswer(entry) {
                var answer = entry.record
                answer.ttl = UInt32(max(0, (entry.expires - now).components.seconds))
                answer.cacheFlush = false  // §10.2: never set in a known answer
                known.append(answer)
            }
        }
        return known
    }

    /// §7.3 duplicate question suppression: another host multicast a QM question we are about
    /// to ask (in the second half of our wait), listing no known answer we would not list
    /// ourselves; its answers reach us too, so our own query counts as sent.
    func suppressDuplicateQuestions(_ received: ReceivedMessage) {
        let message = received.message
        guard received.destinationIsMulticast, !message.header.isTruncated else { return }
        for question in message.questions where !question.unicastResponse {
            for query in queries.values.sorted(by: { $0.id < $1.id })
            where query.question.name == question.name && query.question.type == question.type
                && query.interval > MDNSTiming.queryInitialInterval
                && (query.nextDue - now) * 4 <= query.interval {
                let ours = knownAnswers(for: query.question, on: received.interface)
                let theirs = message.answers.filter { question.matches(CacheKey(name: $0.name, type: $0.type)) }
                let covered = theirs.allSatisfy { their in ours.contains { $0.name == their.name && $0.data == their.data } }
                guard covered else { continue }
                query.generation += 1
                scheduleNext(query)
                duplicateQuestionsSuppressed += 1
            }
        }
    }

    /// Multicasts `question` on every interface with the known answers cached there (those with
    /// more than half their TTL left, §7.1).
    func sendQuery(_ question: Question) {
        for interface in sortedInterfaces {
            let known = knownAnswers(for: question, on: interface)
            for (key, list) in cache.matching(question) {
                for index in list.indices where list[index].interface == interface && !isKnownAnswer(list[index]) {
                    // Asking for it without listing it: a query it should answer (§10.5).
                    cache.entries[key]?[index].unansweredQueries.append(now)
                }
            }
            sendMulticast(Message(questions: [question], answers: known), on: interface)
        }
        if question.unicastResponse { lastUnicastRequest = now }
        scheduleCacheCheck()
    }

    /// Another host's query: cached records it should have drawn an answer for (§10.5).
    func noteQuery(_ received: ReceivedMessage) {
        for question in received.message.questions {
            for (key, list) in cache.matching(question) {
                for index in list.indices where list[index].interface == received.interface {
                    let listed = received.message.answers.contains { $0.name == key.name && $0.data == list[index].record.data }
                    if !listed { cache.entries[key]?[index].unansweredQueries.append(now) }
                }
            }
        }
        scheduleCacheCheck()
    }

    // MARK: Cache

    func cacheResponse(_ received: ReceivedMessage) {
        let interface = received.interface
        let records = received.message.answers + received.message.additionals
        // Cache-flush (§10.2): records of the same name and type received over a second ago
        // and not in this response go in one second.
        for record in records where record.cacheFlush && record.class == .internet {
            let key = CacheKey(name: record.name, type: record.type)
            guard var list = cache.entries[key] else { continue }
            for index in list.indices where list[index].interface == interface
                && now - list[index].received > MDNSTiming.flushDelay
                && !records.contains(where: { $0.name == record.name && $0.data == list[index].record.data }) {
                list[index].doomed = true
                list[index].expires = min(list[index].expires, now + MDNSTiming.flushDelay)
            }
            cache.entries[key] = list
        }
        for record in records where record.class == .internet && record.type != .opt {
            let key = CacheKey(name: record.name, type: record.type)
            var list = cache.entries[key] ?? []
            if let index = list.firstIndex(where: { $0.interface == interface && $0.record.data == record.data }) {
                if record.ttl == 0 {
                    // Goodbye (§10.1): delete in one second.
                    list[index].doomed = true
                    list[index].expires = min(list[index].expires, now + MDNSTiming.flushDelay)
                } else {
                    let changedCase = list[index].record.name.labels != record.name.labels
                    list[index] = newEntry(record, on: interface)
                    if changedCase { announceAddition(list[index], key: key) }
                }
            } else if record.ttl > 0 {
                let entry = newEntry(record, on: interface)
                list.append(entry)
                announceAddition(entry, key: key)
            }
            cache.entries[key] = list.isEmpty ? nil : list
        }
        scheduleCacheCheck()
    }

    private func newEntry(_ record: ResourceRecord, on interface: NetworkInterface) -> CacheEntry {
        let ttl = Duration.ttl(record.ttl)
        let refreshTimes = MDNSTiming.refreshPercentages.map { percent in
            // percent % of the TTL plus up to 2 % more, drawn per refresh.
            let jitter = Double(random.next() % 2001) / 1000
            return now + ttl * ((Double(percent) + jitter) / 100)
        }
        return CacheEntry(record: record, interface: interface, received: now, expires: now + ttl, refreshTimes: refreshTimes)
    }

    func announceAddition(_ entry: CacheEntry, key: CacheKey) {
        for query in queries.values.sorted(by: { $0.id < $1.id }) where query.wants(key) {
            eventQueue.append(.recordAdded(QueryID(rawValue: query.id), entry.record, entry.interface))
        }
    }

    func announceRemoval(_ entry: CacheEntry, key: CacheKey) {
        for query in queries.values.sorted(by: { $0.id < $1.id }) where query.wants(key) {
            eventQueue.append(.recordRemoved(QueryID(rawValue: query.id), entry.record, entry.interface))
        }
    }

    /// Expires records, sends refresh queries, and applies failure detection.
    func cacheMaintenance() {
        var refresh: [Question] = []
        for key in cache.entries.keys.sorted(by: { $0.name.description < $1.name.description || ($0.name == $1.name && $0.type < $1.type) }) {
            guard var list = cache.entries[key] else { continue }
            var kept: [CacheEntry] = []
            for var entry in list {
                entry.unansweredQueries.removeAll { now - $0 > MDNSTiming.failureWindow }
                if entry.unansweredQueries.count < MDNSTiming.failureQueryCount,
                    let first = entry.unansweredQueries.first, now - first >= MDNSTiming.failureWindow {
                    entry.unansweredQueries.removeFirst()
                }
                // Two or more queries it should have answered, and still no answer ten
                // seconds after the first of them.
                let failed = entry.unansweredQueries.count >= MDNSTiming.failureQueryCount
                    && now - (entry.unansweredQueries.first ?? now) >= MDNSTiming.failureWindow
                if entry.expires <= now {
                    announceRemoval(entry, key: key)
                    continue
                }
                if failed && !entry.doomed {
                    // Two queries went unanswered (§10.5): treat it like a goodbye.
                    entry.doomed = true
                    entry.expires = min(entry.expires, now + MDNSTiming.flushDelay)
                }
                if !entry.doomed, let next = entry.refreshTimes.first, next <= now {
                    entry.refreshTimes.removeFirst()
                    let wanted = queries.values.contains { $0.wants(key) }
                    let question = Question(name: key.name, type: key.type)
                    if wanted && !refresh.contains(question) { refresh.append(question) }
                }
                kept.append(entry)
            }
            list = kept
            cache.entries[key] = list.isEmpty ? nil : list
        }
        for question in refresh { sendQuery(question) }
        scheduleCacheCheck()
    }

    func scheduleCacheCheck() {
        var earliest: Duration?
        for list in cache.entries.values {
            for entry in list {
                var candidates = [entry.expires]
                if !entry.doomed, let refresh = entry.refreshTimes.first { candidates.append(refresh) }
                // Failure detection decides ten seconds after the first unanswered query;
                // by then the entry is either doomed or has dropped that query, so this
                // deadline always moves on.
                if !entry.doomed, let first = entry.unansweredQueries.first {
                    candidates.append(first + MDNSTiming.failureWindow)
                }
                if let soonest = candidates.min() { earliest = min(earliest ?? soonest, soonest) }
            }
        }
        if let earliest { scheduler.scheduleOnce(.cacheCheck, at: max(earliest, now)) }
    }

    /// The records cached for `name` and `type`, with the interface each came on.
    public func cachedRecords(name: DomainName, type: RecordType) -> [(ResourceRecord, NetworkInterface)] {
        (cache.entries[CacheKey(name: name, type: type)] ?? []).filter { !$0.doomed }.map { ($0.record, $0.interface) }
    }
}
