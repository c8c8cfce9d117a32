import DNSWire

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
    /// A goodbye, a cache-flush answer or failure detection set it to go in one second; it is
    /// not refreshed, reported or listed as a known answer any more.
    var doomed = false

    /// §10.1, §10.2, §10.5: the entry goes one second from `now` (or sooner, if it was to).
    mutating func expireInOneSecond(from now: Duration) {
        doomed = true
        expires = min(expires, now + MDNSTiming.flushDelay)
    }

    /// Whether it still goes into a query's known answers: more than half its TTL left (§7.1),
    /// and not on its way out.
    func isKnownAnswer(at now: Duration) -> Bool {
        !doomed && (expires - now) * 2 > .ttl(record.ttl)
    }
}

/// What entered or left the cache, for the queries that want to hear it.
enum CacheChange {
    case added(CacheKey, CacheEntry)
    case removed(CacheKey, CacheEntry)

    var key: CacheKey {
        switch self {
        case .added(let key, _), .removed(let key, _): key
        }
    }
}

/// Records learned from responses, keyed by name and type (class IN), per interface: expiry,
/// refresh (§5.2), goodbyes (§10.1), cache-flush (§10.2) and failure detection (§10.5). Time
/// comes in as arguments; what changed goes out as ``CacheChange``s.
struct RecordCache {
    private var entries: [CacheKey: [CacheEntry]] = [:] {
        didSet { deadline = DeadlineMemo() }
    }
    /// ``nextDeadline``, remembered until the entries change: it is asked after every packet,
    /// and finding it means visiting every entry (thousands, when 1,000 services are cached).
    /// A new box on each change, so that a copy of the cache never sees the other's value.
    private var deadline = DeadlineMemo()

    /// The cached lists that answer `question`: one lookup for a type, a scan only for ANY.
    func matching(_ question: Question) -> [(key: CacheKey, value: [CacheEntry])] {
        if question.type == .any { return entries.filter { question.matches($0.key) }.map { ($0.key, $0.value) } }
        let key = CacheKey(name: question.name, type: question.type)
        return entries[key].map { [(key, $0)] } ?? []
    }

    /// The entries under `key` that are not on their way out.
    func live(_ key: CacheKey) -> [CacheEntry] {
        (entries[key] ?? []).filter { !$0.doomed }
    }

    /// Whether a unique record (sent with the cache-flush bit) answers `question` on
    /// `interface` and would be listed as a known answer: then only a rival could answer.
    func holdsUniqueAnswer(to question: Question, on interface: NetworkInterface, at now: Duration) -> Bool {
        guard question.type != .any, question.type != .ptr else { return false }
        return (entries[CacheKey(name: question.name, type: question.type)] ?? []).contains {
            $0.interface == interface && $0.record.cacheFlush && $0.isKnownAnswer(at: now)
        }
    }

    /// Takes in a response's records, received on `interface` at `now`.
    mutating func insert(
        _ records: [ResourceRecord], on interface: NetworkInterface, at now: Duration, random: inout EngineRandom
    ) -> [CacheChange] {
        var changes: [CacheChange] = []
        // Cache-flush (§10.2): records of the same name and type received over a second ago
        // and not in this response go in one second.
        // Lists are changed in place (`entries[key, default: []]`): taking a list out and
        // putting it back copied it for every record of every packet.
        for record in records where record.cacheFlush && record.class == .internet {
            let key = CacheKey(name: record.name, type: record.type)
            guard let list = entries[key] else { continue }
            let stale = list.indices.filter { index in
                list[index].interface == interface && now - list[index].received > MDNSTiming.flushDelay
                    && !records.contains(where: { $0.name == record.name && $0.data == list[index].record.data })
            }
            for index in stale { entries[key, default: []][index].expireInOneSecond(from: now) }
        }
        for record in records where record.class == .internet && record.type != .opt {
            let key = CacheKey(name: record.name, type: record.type)
            if let index = entries[key]?.firstIndex(where: { $0.interface == interface && $0.record.data == record.data }) {
                if record.ttl == 0 {
                    entries[key, default: []][index].expireInOneSecond(from: now)  // goodbye (§10.1)
                } else {
                    let entry = Self.entry(record, on: interface, at: now, random: &random)
                    let changedCase = entries[key]?[index].record.name.labels != record.name.labels
                    entries[key, default: []][index] = entry
                    if changedCase { changes.append(.added(key, entry)) }
                }
            } else if record.ttl > 0 {
                let entry = Self.entry(record, on: interface, at: now, random: &random)
                entries[key, default: []].append(entry)
                changes.append(.added(key, entry))
            }
        }
        return changes
    }

    private static func entry(
        _ record: ResourceRecord, on interface: NetworkInterface, at now: Duration, random: inout EngineRandom
    ) -> CacheEntry {
        let ttl = Duration.ttl(record.ttl)
        let refreshTimes = MDNSTiming.refreshPercentages.map { percent in
            // percent % of the TTL plus up to 2 % more, drawn per refresh.
            let jitter = Double(random.next() % 2001) / 1000
            return now + ttl * ((Double(percent) + jitter) / 100)
        }
        return CacheEntry(record: record, interface: interface, received: now, expires: now + ttl, refreshTimes: refreshTimes)
    }

    /// Removes everything learned on `interface` (it went away).
    mutating func removeAll(on interface: NetworkInterface) -> [CacheChange] {
        var changes: [CacheChange] = []
        for (key, list) in entries {
            let (gone, kept) = (list.filter { $0.interface == interface }, list.filter { $0.interface != interface })
            entries[key] = kept.isEmpty ? nil : kept
            changes += gone.map { .removed(key, $0) }
        }
        return changes
    }

    /// The known answers for `question` on `interface`: records with more than half their TTL
    /// left, their TTL counted down, never with the cache-flush bit (§7.1, §10.2).
    func knownAnswers(for question: Question, on interface: NetworkInterface, at now: Duration) -> [ResourceRecord] {
        var known: [ResourceRecord] = []
        for (_, list) in matching(question) {
            for entry in list where entry.interface == interface && entry.isKnownAnswer(at: now) {
                var answer = entry.record
                answer.ttl = UInt32(max(0, (entry.expires - now).components.seconds))
                answer.cacheFlush = false
                known.append(answer)
            }
        }
        return known
    }

    /// Queries for a cached record closer together than this count once for failure detection.
    /// A flood asks thousands of times a second: each query used to add a time to every entry
    /// it covers (16 bytes, kept ten seconds), and copied the entry's whole list to do it, so a
    /// querier holding the flooded PTR fell further behind with every packet. Two queries of one
    /// querier are at least a second apart (§5.2), so §10.5 loses nothing by this.
    static let unansweredQuerySpacing: Duration = .milliseconds(100)

    /// A query (ours or another host's) asked `question` on `interface` listing `listed` as
    /// known: every cached record it covers and does not list should draw an answer (§10.5).
    mutating func noteAsked(_ question: Question, on interface: NetworkInterface, listing listed: [ResourceRecord], at now: Duration) {
        let keys: [CacheKey] = question.type == .any
            ? entries.keys.filter { question.matches($0) }
            : [CacheKey(name: question.name, type: question.type)]
        for key in keys {
            guard let count = entries[key]?.count else { continue }
            for index in 0..<count {
                // Looked at through the dictionary and changed in place: no copy of the entry
                // (and of its list of times) is held while it grows.
                guard entries[key]?[index].interface == interface,
                    let data = entries[key]?[index].record.data,
                    !listed.contains(where: { $0.name == key.name && $0.data == data })
                else { continue }
                if let last = entries[key]?[index].unansweredQueries.last, now - last < Self.unansweredQuerySpacing { continue }
                entries[key, default: []][index].unansweredQueries.append(now)
            }
        }
    }

    /// Times of unanswered queries held for failure detection, over all entries (for tests).
    var unansweredQueryMarks: Int {
        entries.values.reduce(0) { total, list in list.reduce(total) { $0 + $1.unansweredQueries.count } }
    }

    /// Expires what is due, applies failure detection (§10.5), and says which records are due
    /// for a refresh query (§5.2) among those `wanted` by a query.
    mutating func maintain(at now: Duration, wanted: (CacheKey) -> Bool) -> (removed: [CacheChange], refresh: [CacheKey]) {
        var removed: [CacheChange] = []
        var refresh: [CacheKey] = []
        for key in entries.keys.sorted(by: { $0.name.description < $1.name.description || ($0.name == $1.name && $0.type < $1.type) }) {
            guard let list = entries[key] else { continue }
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
                    removed.append(.removed(key, entry))
                    continue
                }
                if failed && !entry.doomed { entry.expireInOneSecond(from: now) }
                if !entry.doomed, let next = entry.refreshTimes.first, next <= now {
                    entry.refreshTimes.removeFirst()
                    if wanted(key) && !refresh.contains(key) { refresh.append(key) }
                }
                kept.append(entry)
            }
            entries[key] = kept.isEmpty ? nil : kept
        }
        return (removed, refresh)
    }

    /// When ``maintain(at:wanted:)`` is next needed: an expiry, a refresh, or a failure-detection
    /// decision (ten seconds after an unanswered query; by then the entry is doomed or has
    /// dropped that query, so this deadline always moves on).
    var nextDeadline: Duration? {
        if let known = deadline.value { return known }
        let earliest = earliestDeadline()
        deadline.value = .some(earliest)
        return earliest
    }

    private func earliestDeadline() -> Duration? {
        var earliest: Duration?
        for list in entries.values {
            for entry in list {
                var soonest = entry.expires
                if !entry.doomed, let refresh = entry.refreshTimes.first { soonest = min(soonest, refresh) }
                if !entry.doomed, let first = entry.unansweredQueries.first { soonest = min(soonest, first + MDNSTiming.failureWindow) }
                earliest = min(earliest ?? soonest, soonest)
            }
        }
        return earliest
    }
}

/// A value remembered by ``RecordCache`` between changes (a reference, so that a read can
/// fill it).
final class DeadlineMemo {
    var value: Duration??
}
