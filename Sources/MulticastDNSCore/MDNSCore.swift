public import DNSWire

/// Identifies a registration within one engine.
public struct RegistrationID: Hashable, Sendable, CustomStringConvertible {
    public let rawValue: Int
    public var description: String { "registration \(rawValue)" }
}

/// Identifies a continuous query within one engine.
public struct QueryID: Hashable, Sendable, CustomStringConvertible {
    public let rawValue: Int
    public var description: String { "query \(rawValue)" }
}

/// What the engine tells its owner.
public enum EngineEvent: Sendable, Equatable {
    /// A registration's unique name was won (after probing); announcing has begun.
    case registered(RegistrationID, name: DomainName)
    /// A conflict made a registration give up `from` and try `to`.
    case renamed(RegistrationID, from: DomainName, to: DomainName)
    /// A registration that may not be renamed (another device's, published by an advertising
    /// proxy) met a conflict: it is given up, and nothing is published under it.
    case conflicted(RegistrationID, name: DomainName)
    /// The host name was won (`host.local.`).
    case hostNameRegistered(DomainName)
    /// A record matching a query entered the cache (or changed its data).
    case recordAdded(QueryID, ResourceRecord, NetworkInterface)
    /// A record matching a query left the cache: goodbye, expiry, flush or failure detection.
    case recordRemoved(QueryID, ResourceRecord, NetworkInterface)
}

/// The RFC 6762 engine without any I/O: messages and time go in, messages to send and events
/// come out. Deterministic for a given seed, so tests can drive whole conversations between
/// engines with a manual clock and an in-memory network.
///
/// Not thread-safe; the owner (an actor) serialises calls.
public final class MDNSCore {
    /// Time since the engine started; only moves forward through ``advance(to:)``.
    public private(set) var now: Duration = .zero
    var random: EngineRandom
    var outbox: [OutgoingMessage] = []
    var eventQueue: [EngineEvent] = []
    var scheduler = Scheduler()

    // Responder state.
    var interfaces: [NetworkInterface: [IPAddress]] = [:] {
        didSet {
            recordsEpoch += 1
            families = interfaces.mapValues { addresses in
                (addresses.contains { !$0.isIPv6 } ? [IPFamily.v4] : []) + (addresses.contains { $0.isIPv6 } ? [IPFamily.v6] : [])
            }
        }
    }
    /// The families each interface has addresses of, kept with `interfaces` (asked per packet).
    var families: [NetworkInterface: [IPFamily]] = [:]
    /// Bumped when what every record set's records depend on changes (interfaces, addresses,
    /// who owns the host name), so that cached records are made again.
    var recordsEpoch = 0
    /// Every address this machine has, on any interface: a record for our host name that names
    /// one of them comes from another responder on this very machine, not from a rival.
    var ownAddresses: Set<IPAddress> = []
    var recordSets: [Int: RecordSet] = [:]
    var hostSetID: Int?
    /// Another responder on this machine (avahi-daemon, mDNSResponder) answers for our host
    /// name with this machine's addresses: it owns the A/AAAA records, we only point SRV
    /// records at the name. One responder per host name, or they fight over it.
    public internal(set) var hostNameOwnedElsewhere = false { didSet { recordsEpoch += 1 } }
    var nextID = 1
    var conflicts = ConflictLimiter()
    /// When the probes of the sets starting now go out (see ``restartProbing(_:delay:extraDelay:)``).
    var probeTrain: Duration?
    /// When each record (name, type, data) was last multicast on each interface.
    var responses = ResponseScheduler()

    // Querier state.
    /// When we last asked for unicast replies (a QU query or the first probe).
    var lastUnicastRequest: Duration?
    /// False when another mDNS stack on this machine shares UDP port 5353: the kernel hands a
    /// unicast reply to only one of the sockets, so asking for unicast replies (QU) would lose
    /// some of them. The engine then asks for multicast replies only (RFC 6762 §15.1).
    public var unicastRepliesReachUs = true
    var queries: [Int: ContinuousQuery] = [:] {
        didSet { queriesByName = nil }
    }
    /// The ids of ``queries`` by question name, in id order: a cache change reaches the
    /// queries for its name without visiting every query (a browse of 1,000 services
    /// resolves with thousands of them). Made again after ``queries`` changes.
    private var queriesByName: [DomainName: [Int]]?

    /// The queries asking about `name`, in the order they were started.
    func queries(named name: DomainName) -> [ContinuousQuery] {
        if queriesByName == nil {
            var index: [DomainName: [Int]] = [:]
            for id in queries.keys.sorted() {
                if let query = queries[id] { index[query.question.name, default: []].append(id) }
            }
            queriesByName = index
        }
        return (queriesByName?[name] ?? []).compactMap { queries[$0] }
    }
    var cache = RecordCache()

    /// What the engine chose not to send, for logs and tests.
    public internal(set) var statistics = EngineStatistics()

    public init(hostName: String, seed: UInt64) {
        random = EngineRandom(seed: seed)
        let label = String(hostName.prefix(63))
        let set = RecordSet(id: nextID, kind: .host(label: label), name: RecordSet.hostName(label, attempt: 1))
        set.state = .dormant
        hostSetID = set.id
        recordSets[set.id] = set
        nextID += 1
    }

    /// The host name currently claimed (or being probed), e.g. `buildbox.local.`.
    public var hostName: DomainName {
        hostSetID.flatMap { recordSets[$0]?.name } ?? .root
    }

    /// Messages to send, in order, packed: what goes to the same place at the same moment
    /// shares packets (see ``OutgoingMessage/packed(_:limit:)``). Taking them empties the outbox.
    public func takeOutgoing() -> [OutgoingMessage] {
        defer { outbox.removeAll() }
        return OutgoingMessage.packed(outbox)
    }

    /// Events, in order; taking them empties the queue.
    public func takeEvents() -> [EngineEvent] {
        defer { eventQueue.removeAll() }
        return eventQueue
    }

    /// When the engine next needs ``advance(to:)``, if ever.
    public var nextDeadline: Duration? { scheduler.nextDeadline }

    /// Runs everything due up to `time`, in order.
    public func advance(to time: Duration) {
        while let (due, action) = scheduler.popDue(before: time) {
            now = max(now, due)
            perform(action)
        }
        now = max(now, time)
    }

    func perform(_ action: ScheduledAction) {
        switch action {
        case .probe(let id, let generation): probeStep(id, generation: generation)
        case .announce(let id, let generation): announceStep(id, generation: generation)
        case .respond(let key): sendPendingResponse(key)
        case .query(let id, let generation): queryStep(id, generation: generation)
        case .cacheCheck: cacheMaintenance()
        }
    }

    // MARK: Interfaces

    /// Sets the interfaces the engine runs on and their addresses.
    ///
    /// - A new interface is a link change (RFC 6762 §8): every name is probed and announced
    ///   again, and every question asked again.
    /// - New addresses on an interface we already run on (renumbering, a DHCP lease, an IPv6
    ///   address becoming usable) change only the host's address records, which are ours
    ///   already: they are announced at once with the cache-flush bit (§8.4, §10.2), after a
    ///   goodbye for each address that went (§10.1), so that neighbours drop it within a second
    ///   instead of waiting out its TTL; questions are asked again.
    /// - Records of a vanished interface are dropped from the cache.
    public func setInterfaces(_ addresses: [NetworkInterface: [IPAddress]]) {
        let old = interfaces
        let arrived = addresses.keys.contains { old[$0] == nil }
        let renumbered = addresses.keys.filter { interface in
            old[interface].map { Set($0) != Set(addresses[interface] ?? []) } ?? false
        }.sorted { $0.index < $1.index }
        let host = hostSetID.flatMap { recordSets[$0] }
        let announced = host.map { $0.isActive && !isProbing($0) } ?? false
        // The address records as neighbours know them, taken before the change.
        var before: [NetworkInterface: [ResourceRecord]] = [:]
        if let host, announced {
            for interface in renumbered { before[interface] = ownedRecords(of: host, on: interface).filter { $0.addressValue != nil } }
        }
        interfaces = addresses
        ownAddresses = Set(addresses.values.flatMap { $0 }.map(\.withoutScope))
        let gone = Set(old.keys).subtracting(addresses.keys)
        for interface in gone { announce(cache.removeAll(on: interface)) }
        if arrived {
            for set in recordSets.values where set.isActive { restartProbing(set, delay: true) }
        } else if let host, !renumbered.isEmpty, announced {
            for interface in renumbered {
                let kept = Set(ownedRecords(of: host, on: interface).compactMap(\.addressValue))
                let goodbyes = (before[interface] ?? []).filter { record in
                    guard let address = record.addressValue else { return false }
                    return !kept.contains(address)
                }.map { record in
                    var goodbye = record
                    goodbye.ttl = 0
                    return goodbye
                }
                if !goodbyes.isEmpty { sendMulticast(Message(header: .response, answers: goodbyes), on: interface) }
            }
            host.generation += 1
            host.state = .announcing(step: 0)
            scheduler.schedule(.announce(host.id, generation: host.generation), at: now)
        }
        if arrived || !renumbered.isEmpty {
            for query in queries.values { restartQuery(query) }
        }
    }

    func allocateID() -> Int {
        defer { nextID += 1 }
        return nextID
    }
}

/// Counts of what the engine held back on purpose (RFC 6762 §6, §7).
public struct EngineStatistics: Sendable, Equatable {
    /// Our queries that counted as sent because another host asked the same (§7.3).
    public var duplicateQuestionsSuppressed = 0
    /// Our pending answers dropped because another responder sent them first (§7.4).
    public var duplicateAnswersSuppressed = 0
    /// Answers left out because the querier listed them as known (§7.1).
    public var knownAnswersSuppressed = 0
    /// Multicast answers held back by the once-a-second rule and sent when it allowed (§6).
    public var multicastAnswersDeferred = 0
    /// Unicast responses not taken in: no QU question of ours asked for them in the last two
    /// seconds, or they came from off the link (§6, §11).
    public var unicastResponsesRefused = 0
    /// Our queries not sent on an interface because a unique record we hold there answers
    /// them, and we would list it as known (so only a rival could answer).
    public var answeredQueriesSkipped = 0
    /// Queries sent to reconfirm a record someone believed gone (§10.4).
    public var reconfirmQueries = 0
    public init() {}
}

/// Actions the scheduler runs. Generations let a restarted state machine drop its stale steps.
enum ScheduledAction: Hashable {
    case probe(Int, generation: Int)
    case announce(Int, generation: Int)
    case respond(PendingResponseKey)
    case query(Int, generation: Int)
    case cacheCheck
}

/// Actions ordered by due time (then by insertion), kept in a sorted array: the engine has
/// few timers at once, and popping the earliest is what it does most.
struct Scheduler {
    private var entries: [(due: Duration, sequence: Int, action: ScheduledAction)] = []
    private var sequence = 0

    var nextDeadline: Duration? { entries.first?.due }

    mutating func schedule(_ action: ScheduledAction, at due: Duration) {
        sequence += 1
        let entry = (due: due, sequence: sequence, action: action)
        let index = entries.firstIndex { $0.due > due } ?? entries.endIndex
        entries.insert(entry, at: index)
    }

    /// Schedules `action` unless the same action is already due no later than `due`.
    mutating func scheduleOnce(_ action: ScheduledAction, at due: Duration) {
        if let existing = entries.firstIndex(where: { $0.action == action }) {
            if entries[existing].due <= due { return }
            entries.remove(at: existing)
        }
        schedule(action, at: due)
    }

    mutating func popDue(before time: Duration) -> (Duration, ScheduledAction)? {
        guard let first = entries.first, first.due <= time else { return nil }
        entries.removeFirst()
        return (first.due, first.action)
    }
}
