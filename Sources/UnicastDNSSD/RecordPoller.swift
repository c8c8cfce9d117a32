package import DNSWire

/// Watching record sets in unicast DNS, where nothing is pushed: each watched name and type is
/// asked again when the TTLs of its answer say it may have changed (at 80 % of the smallest TTL,
/// RFC 6762 §5.2's figure; a negative answer after its SOA minimum, RFC 2308), and what changed
/// between two answers comes out as additions and removals. A record whose server stops
/// answering is removed when its TTL runs out. "List" watches (a browse's PTR set, which
/// changes whenever someone registers) are asked at least every ``Settings/listInterval``, and
/// every second for their first ten seconds.
///
/// A watch can also be fed by DNS Push (RFC 8765): after ``pushStarted(_:at:)`` it is asked
/// nothing, the records pushed stay until pushed away, and those known only from polling run
/// out at their TTL unless a push confirms them; after ``pushEnded(_:at:)`` it is asked again at
/// once.
///
/// A pure state machine: answers and time in, questions and changes out. The shell asks the
/// questions (as many at once as it likes) and feeds back each answer or failure.
package struct RecordPoller {
    package struct Settings: Equatable, Sendable {
        /// Never ask one question more often than this.
        package var minimumInterval: Duration = .seconds(1)
        /// Ask at least this often, whatever the TTL (a DNS TTL may be a day).
        package var maximumInterval: Duration = .seconds(3600)
        /// Ask list watches at least this often.
        package var listInterval: Duration = .seconds(5)
        /// For this long after a list watch begins, ask it every ``listWarmUpInterval``: two
        /// peers that start together (a broker's mesh) see each other within about a second,
        /// as on the link, instead of one of them waiting out a whole ``listInterval``.
        package var listWarmUp: Duration = .seconds(10)
        package var listWarmUpInterval: Duration = .seconds(1)
        /// After a failure, ask again after this, doubling up to ``maximumRetry``.
        package var retry: Duration = .seconds(2)
        package var maximumRetry: Duration = .seconds(30)
        /// When Push stops feeding a watch, the records it pushed are kept this long for the
        /// first answer to confirm them (or the watch's server to fail).
        package var pushFallbackLifetime: Duration = .seconds(30)

        package init() {}
    }

    package struct Key: Hashable, Sendable, CustomStringConvertible {
        package var name: DomainName
        package var type: RecordType
        package init(_ name: DomainName, _ type: RecordType) {
            self.name = name
            self.type = type
        }
        package var description: String { "\(name) \(type)" }
    }

    package enum Action: Equatable, Sendable {
        case query(Key)
        case added(Key, RecordData)
        case removed(Key, RecordData)
    }

    private struct Watch {
        var isList: Bool
        var since: Duration
        /// Each record's data and when it expires.
        var records: [RecordData: Duration] = [:]
        var nextQuery: Duration?
        var inFlight = false
        var retry: Duration
        /// Fed by DNS Push: never asked.
        var pushed = false
        /// The question in flight was asked before Push began: its answer is old news, and is
        /// not taken (when Push ends before it comes, the question is asked again).
        var staleInFlight = false
        /// When this watch next needs ``advance(to:)``: its next question, or its first expiry.
        var due: Duration? {
            let expiry = records.values.min()
            guard !inFlight, let nextQuery else { return expiry }
            return expiry.map { min($0, nextQuery) } ?? nextQuery
        }
    }

    package let settings: Settings
    private var watches: [Key: Watch] = [:]
    /// Every watch's due time, earliest first; an entry is current while its time is still the
    /// watch's due time (older ones are skipped), so a browse of thousands of services finds
    /// what is due without looking at each of them.
    private var agenda = Agenda()

    package init(settings: Settings = Settings()) {
        self.settings = settings
    }

    /// When ``advance(to:)`` is next needed.
    package var nextDeadline: Duration? { agenda.earliest }

    /// Puts `key`'s due time on the agenda after a change, and drops stale entries from its top.
    private mutating func reschedule(_ key: Key) {
        if let due = watches[key]?.due { agenda.insert(due, key) }
        agenda.dropStale { time, key in watches[key]?.due != time }
    }

    package var watchCount: Int { watches.count }

    /// What is watched.
    package var watchedKeys: [Key] { Array(watches.keys) }

    /// A record pushed lives until it is pushed away: its expiry is beyond any run.
    static let pushedExpiry: Duration = .seconds(Int64(1) << 40)

    /// DNS Push feeds `key` from now on: it is asked nothing more (an answer on its way is
    /// ignored), and what polling knew runs out at its TTL unless a push confirms it.
    package mutating func pushStarted(_ key: Key, at now: Duration) {
        guard var watch = watches[key] else { return }
        watch.pushed = true
        watch.nextQuery = nil
        watch.staleInFlight = watch.inFlight
        watches[key] = watch
        reschedule(key)
    }

    /// Records of `key` that a push added or removed (`removeAll`: every record went first).
    package mutating func pushed(_ key: Key, added: [RecordData], removed: [RecordData], removeAll: Bool, at now: Duration) -> [Action] {
        guard var watch = watches[key], watch.pushed else { return [] }
        var actions: [Action] = []
        let gone = Set(removeAll ? Array(watch.records.keys) : removed).subtracting(added)
        for data in gone.sorted(by: Self.order) where watch.records.removeValue(forKey: data) != nil {
            actions.append(.removed(key, data))
        }
        for data in added {
            if watch.records[data] == nil { actions.append(.added(key, data)) }
            watch.records[data] = Self.pushedExpiry
        }
        watches[key] = watch
        reschedule(key)
        return actions
    }

    /// DNS Push no longer feeds `key` (the session ended, or the server refused): it is asked
    /// at once, and pushed records are kept for ``Settings/pushFallbackLifetime`` while the
    /// answer comes.
    package mutating func pushEnded(_ key: Key, at now: Duration) -> [Action] {
        guard var watch = watches[key], watch.pushed else { return [] }
        watch.pushed = false
        for (data, expiry) in watch.records where expiry == Self.pushedExpiry {
            watch.records[data] = now + settings.pushFallbackLifetime
        }
        var actions: [Action] = []
        if !watch.inFlight {
            watch.inFlight = true
            watch.nextQuery = nil
            actions.append(.query(key))
        }
        // Else the question in flight is from before Push began: when its answer comes it is
        // set aside and the question asked again.
        watches[key] = watch
        reschedule(key)
        return actions
    }

    /// Starts watching (asks at once). Watching what is already watched changes nothing.
    package mutating func watch(_ key: Key, isList: Bool = false, at now: Duration) -> [Action] {
        guard watches[key] == nil else { return [] }
        watches[key] = Watch(isList: isList, since: now, nextQuery: nil, inFlight: true, retry: settings.retry)
        reschedule(key)
        return [.query(key)]
    }

    /// Stops watching; nothing is reported for what it held.
    package mutating func unwatch(_ key: Key) {
        watches[key] = nil
        reschedule(key)
    }

    /// The answer to `key`'s question.
    package mutating func answered(_ key: Key, with message: Message, at now: Duration) -> [Action] {
        guard var watch = watches[key] else { return [] }
        watch.inFlight = false
        watch.retry = settings.retry
        if watch.pushed || watch.staleInFlight {
            // Push tells what changed; an answer asked for before it began is old news. If
            // Push has ended meanwhile, the question is asked again.
            var actions: [Action] = []
            if !watch.pushed {
                watch.inFlight = true
                watch.nextQuery = nil
                actions.append(.query(key))
            }
            watch.staleInFlight = false
            watches[key] = watch
            reschedule(key)
            return actions
        }
        var fresh: [RecordData: Duration] = [:]
        var smallestTTL: UInt32?
        if message.responseCode == .noError {
            for record in Self.records(answering: key, in: message.answers) {
                fresh[record.data] = now + .seconds(Int64(record.ttl))
                smallestTTL = min(smallestTTL ?? record.ttl, record.ttl)
            }
        }
        var actions: [Action] = []
        for data in watch.records.keys.sorted(by: Self.order) where fresh[data] == nil {
            actions.append(.removed(key, data))
        }
        for data in fresh.keys.sorted(by: Self.order) where watch.records[data] == nil {
            actions.append(.added(key, data))
        }
        watch.records = fresh
        let wait: Duration
        if let smallestTTL {
            wait = .milliseconds(Int64(smallestTTL) * 800)
        } else {
            // A negative answer: cached for the SOA's minimum (and at most the SOA's own TTL).
            let soa = message.authorities.first { $0.type == .soa }
            if let soa, case .soa(let data) = soa.data {
                wait = .seconds(Int64(min(data.minimum, soa.ttl)))
            } else {
                wait = watch.isList ? settings.listInterval : settings.maximumRetry
            }
        }
        var interval = min(max(wait, settings.minimumInterval), settings.maximumInterval)
        if watch.isList {
            interval = min(interval, now - watch.since < settings.listWarmUp ? settings.listWarmUpInterval : settings.listInterval)
        }
        watch.nextQuery = now + interval
        watches[key] = watch
        reschedule(key)
        return actions
    }

    /// `key`'s question got no answer (no server reachable).
    package mutating func failed(_ key: Key, at now: Duration) -> [Action] {
        guard var watch = watches[key] else { return [] }
        watch.inFlight = false
        watch.staleInFlight = false
        guard !watch.pushed else {
            watches[key] = watch
            reschedule(key)
            return []
        }
        watch.nextQuery = now + watch.retry
        watch.retry = min(watch.retry * 2, settings.maximumRetry)
        watches[key] = watch
        reschedule(key)
        return []
    }

    /// Lets time pass: questions that are due, records that expired.
    package mutating func advance(to now: Duration) -> [Action] {
        var due: Set<Key> = []
        while let (time, key) = agenda.popFirst(through: now) {
            if watches[key]?.due == time { due.insert(key) }
        }
        var actions: [Action] = []
        for key in due.sorted(by: { $0.description < $1.description }) {
            guard var watch = watches[key] else { continue }
            for (data, expiry) in watch.records.sorted(by: { Self.order($0.key, $1.key) }) where expiry <= now {
                watch.records[data] = nil
                actions.append(.removed(key, data))
            }
            if !watch.inFlight, let next = watch.nextQuery, next <= now {
                watch.inFlight = true
                watch.nextQuery = nil
                actions.append(.query(key))
            }
            watches[key] = watch
            reschedule(key)
        }
        agenda.dropStale { time, key in watches[key]?.due != time }
        return actions
    }

    /// The records of an answer that answer `key`, following CNAMEs within the answer.
    static func records(answering key: Key, in answers: [ResourceRecord]) -> [ResourceRecord] {
        var name = key.name
        var hops = 0
        while hops < 8 {
            let direct = answers.filter { $0.name == name && $0.type == key.type && $0.class == .internet }
            if !direct.isEmpty || key.type == .cname { return direct }
            guard let alias = answers.first(where: { $0.name == name && $0.type == .cname }), case .cname(let target) = alias.data
            else { return [] }
            name = target
            hops += 1
        }
        return []
    }

    /// A stable order for reports: by wire form.
    private static func order(_ lhs: RecordData, _ rhs: RecordData) -> Bool {
        let left = (try? lhs.uncompressedBytes()) ?? []
        let right = (try? rhs.uncompressedBytes()) ?? []
        return left.lexicographicallyPrecedes(right)
    }
}

/// Due times, earliest first: a binary min-heap of (time, key). Entries are never updated in
/// place; a newer one is added and the old one is recognised as stale when it comes up.
private struct Agenda {
    private var heap: [(time: Duration, key: RecordPoller.Key)] = []

    var earliest: Duration? { heap.first?.time }

    mutating func insert(_ time: Duration, _ key: RecordPoller.Key) {
        heap.append((time, key))
        var child = heap.count - 1
        while child > 0 {
            let parent = (child - 1) / 2
            guard heap[child].time < heap[parent].time else { break }
            heap.swapAt(child, parent)
            child = parent
        }
    }

    /// Removes and returns the earliest entry if it is due by `now`.
    mutating func popFirst(through now: Duration) -> (Duration, RecordPoller.Key)? {
        guard let first = heap.first, first.time <= now else { return nil }
        removeFirst()
        return first
    }

    /// Removes entries from the top while `isStale` says so.
    mutating func dropStale(_ isStale: (Duration, RecordPoller.Key) -> Bool) {
        while let first = heap.first, isStale(first.time, first.key) { removeFirst() }
    }

    private mutating func removeFirst() {
        heap.swapAt(0, heap.count - 1)
        heap.removeLast()
        var parent = 0
        while true {
            let left = 2 * parent + 1
            let right = left + 1
            var smallest = parent
            if left < heap.count, heap[left].time < heap[smallest].time { smallest = left }
            if right < heap.count, heap[right].time < heap[smallest].time { smallest = right }
            guard smallest != parent else { return }
            heap.swapAt(parent, smallest)
            parent = smallest
        }
    }
}
