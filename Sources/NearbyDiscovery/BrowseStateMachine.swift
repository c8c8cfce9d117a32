import DNSWire
import NearbyBasics

/// What a backend saw, in DNS-SD terms: both backends speak this to ``BrowseStateMachine``.
///
/// The embedded engine reports cache records (PTR, SRV, TXT, A, AAAA); the system backend
/// reports dns_sd browse, resolve and record-query callbacks. Avahi reports some things once
/// per IP protocol, so additions and removals are counted: a thing is present while it has
/// been added more often than removed.
enum DiscoveryObservation: Sendable, Equatable {
    /// An instance of the browsed type exists on an interface (PTR record, dns_sd browse).
    case instanceAdded(DomainName, NetworkInterface)
    case instanceRemoved(DomainName, NetworkInterface)
    /// An instance's SRV record: its host and port.
    case srvAdded(DomainName, NetworkInterface, SRVData)
    case srvRemoved(DomainName, NetworkInterface, SRVData)
    /// An instance's TXT record.
    case txtAdded(DomainName, NetworkInterface, TXTData)
    case txtRemoved(DomainName, NetworkInterface, TXTData)
    /// An address of a host (A or AAAA record).
    case addressAdded(DomainName, NetworkInterface, IPAddress)
    case addressRemoved(DomainName, NetworkInterface, IPAddress)
    /// The backend lost sight of the network (the daemon went away): everything it said
    /// before is void until ``restored``.
    case interrupted(DiscoveryError)
    /// The backend sees the network again and starts reporting afresh.
    case restored
}

/// What an observation is about, for a reader that falls behind: the newest observation of
/// each thing waits (see ``DiscoveryObservation/buffer()``). The link's interruptions and
/// restorations are one thing: the newest says how the link is now.
enum ObservationKey: Hashable, Sendable {
    case instance(DomainName, NetworkInterface)
    case srv(DomainName, NetworkInterface, SRVData)
    case txt(DomainName, NetworkInterface, TXTData)
    case address(DomainName, NetworkInterface, IPAddress)
    case link
}

extension DiscoveryObservation {
    var key: ObservationKey {
        switch self {
        case .instanceAdded(let name, let interface), .instanceRemoved(let name, let interface): .instance(name, interface)
        case .srvAdded(let name, let interface, let srv), .srvRemoved(let name, let interface, let srv): .srv(name, interface, srv)
        case .txtAdded(let name, let interface, let txt), .txtRemoved(let name, let interface, let txt): .txt(name, interface, txt)
        case .addressAdded(let name, let interface, let address), .addressRemoved(let name, let interface, let address):
            .address(name, interface, address)
        case .interrupted, .restored: .link
        }
    }

    private var isAddition: Bool {
        switch self {
        case .instanceAdded, .srvAdded, .txtAdded, .addressAdded: true
        default: false
        }
    }

    private var isRemoval: Bool {
        switch self {
        case .instanceRemoved, .srvRemoved, .txtRemoved, .addressRemoved: true
        default: false
        }
    }

    /// Between a source and the driver that reads it: batches as the source delivers them,
    /// and for a driver that falls behind, the newest observation of each thing (an addition
    /// and a removal it has not read cancel out). Bounded by the things the source observes,
    /// which the engine's own bounded streams and caches bound.
    static func buffer() -> LatestPerKeyBatchBuffer<DiscoveryObservation, ObservationKey> {
        LatestPerKeyBatchBuffer(
            key: \.key,
            merge: { waiting, newer in
                if waiting.isAddition, newer.isRemoval { return nil }
                return newer
            })
    }
}

/// A thing the state machine wants followed: an instance's SRV and TXT, or a host's addresses.
/// A nil interface means "any" (a resolve by name, before an answer says where it lives).
enum DiscoveryWatch: Hashable, Sendable {
    case service(DomainName, NetworkInterface?)
    case host(DomainName, NetworkInterface?)

    /// The record sets that following it takes: SRV and TXT of a service, A and AAAA of a host.
    var recordSets: [(name: DomainName, type: RecordType)] {
        switch self {
        case .service(let name, _): [(name, .srv), (name, .txt)]
        case .host(let name, _): [(name, .a), (name, .aaaa)]
        }
    }
}

extension DiscoveryObservation {
    /// What a record's arrival (or departure) on `interface` means to a browse of `browsing`
    /// (a PTR name; nil when only services and hosts are watched); nil for records it does
    /// not follow. Link-local IPv6 addresses get the interface as their scope.
    static func record(_ name: DomainName, _ data: RecordData, on interface: NetworkInterface, added: Bool, browsing: DomainName?)
        -> DiscoveryObservation?
    {
        switch data {
        case .ptr(let target) where name == browsing:
            // A PTR that names no service instance is no service (and not ours to report).
            guard (try? ServiceInstanceName(domainName: target)) != nil else { return nil }
            return added ? .instanceAdded(target, interface) : .instanceRemoved(target, interface)
        case .srv(let srv):
            return added ? .srvAdded(name, interface, srv) : .srvRemoved(name, interface, srv)
        case .txt(let txt):
            return added ? .txtAdded(name, interface, txt) : .txtRemoved(name, interface, txt)
        case .a(let v4):
            return added ? .addressAdded(name, interface, .v4(v4)) : .addressRemoved(name, interface, .v4(v4))
        case .aaaa(let v6):
            // Unicast DNS has no interface (index 0): no scope to give.
            let address = IPAddress.v6(v6, scope: v6.isLinkLocal && interface.index != 0 ? interface.index : nil)
            return added ? .addressAdded(name, interface, address) : .addressRemoved(name, interface, address)
        default:
            return nil
        }
    }
}

/// Browsing and resolving as a pure state machine: observations and time in; watches to start
/// or stop and events to report out. No threads, no sleeping, no I/O: the shell around it
/// (``DiscoveryDriver``) performs the actions and feeds it.
///
/// Every report is computed from what the machine holds at that moment, never from the order
/// in which records arrived: a service is resolved when its SRV, its TXT and at least one
/// address of the SRV's host are present on the interface it was found on, however and
/// whenever each got there (additional records before the question was asked, PTR first or
/// last, records cached by an earlier query, a record that expires and comes back).
struct BrowseStateMachine {
    enum Mode: Equatable {
        /// Follow every instance of the type; resolve each when `resolve` is set.
        case browse(resolve: Bool)
        /// Resolve one instance by name, on whichever interface answers.
        case resolve(DomainName)
    }

    enum Action: Equatable, Sendable {
        case watch(DiscoveryWatch)
        case unwatch(DiscoveryWatch)
        case report(BrowseEvent)
    }

    /// One instance on one interface (nil: any, for a resolve by name).
    struct InstanceKey: Hashable {
        var name: DomainName
        var interface: NetworkInterface?
    }

    let type: ServiceType
    let mode: Mode
    /// How long a changed resolution waits for more of the same answer before it is reported
    /// (unless it already has an address of each family: see ``isWhole(_:)``). Zero reports at
    /// the end of each batch of observations (the embedded engine delivers a packet's records as
    /// one batch); the system backend's callbacks come one by one.
    let settleTime: Duration
    /// Whether a resolution with an address of each family is reported without waiting for the
    /// settle window (``isWhole(_:)``): right for the embedded engine, whose batches are whole
    /// packets, where only a responder splitting the two families sends more; not for a daemon's
    /// callbacks, which bring one address at a time (a link-local IPv6 before the routable one).
    let wholeAtOnce: Bool
    /// After ``DiscoveryObservation/restored``, how long a service seen before has to
    /// reappear before it is reported lost.
    let reappearGrace: Duration

    private(set) var now: Duration = .zero
    private var sequence = 0
    private var instances: [InstanceKey: Tally<Int>] = [:]
    private var srv: [InstanceKey: Tally<SRVData>] = [:]
    private var txt: [InstanceKey: Tally<TXTData>] = [:]
    private var addresses: [InstanceKey: Tally<IPAddress>] = [:]
    private var watching: Set<DiscoveryWatch> = []
    /// What was last reported per instance: nil inside means "found, not resolved".
    private var reported: [InstanceKey: ResolvedService?] = [:]
    private var settleDeadline: Duration?
    private var interrupted = false
    /// Services reported before an interruption that have not been seen since.
    private var stale: Set<InstanceKey> = []
    private var graceDeadline: Duration?
    /// Instances whose report may have changed since the last reconcile (with many services
    /// on the link, looking at all of them for every batch made browsing quadratic), and
    /// those changed but waiting for the settle window. `allDirty`: look at every one.
    private var dirty: Set<InstanceKey> = []
    private var allDirty = true
    private var waiting: Set<InstanceKey> = []
    /// The watches each instance needs (its SRV and TXT; its host's addresses once its SRV is
    /// known), and how many instances need each watch: a batch recomputes only the instances
    /// it touched (``watchDirty``), so that browsing 1,000 services is not quadratic.
    private var needs: [InstanceKey: Set<DiscoveryWatch>] = [:]
    private var needed: [DiscoveryWatch: Int] = [:]
    /// Instances whose needs may have changed since they were last computed.
    private var watchDirty: Set<InstanceKey> = []
    /// Instance labels by full name, parsed once ("Build Box" of `Build\032Box._http._tcp.local.`):
    /// reports are made often, and parsing a name checks its service type as text.
    private var instanceLabels: [DomainName: String] = [:]
    /// The instances whose SRV (latest) names each host, for a change of the host's addresses.
    private var placedOn: [DomainName: Set<InstanceKey>] = [:]

    init(type: ServiceType, mode: Mode, settleTime: Duration = .zero, wholeAtOnce: Bool = false, reappearGrace: Duration = .seconds(3)) {
        self.type = type
        self.mode = mode
        self.settleTime = settleTime
        self.wholeAtOnce = wholeAtOnce
        self.reappearGrace = reappearGrace
    }

    /// When ``advance(to:)`` is next needed, if ever.
    var nextDeadline: Duration? {
        [settleDeadline, graceDeadline].compactMap { $0 }.min()
    }

    /// The actions to begin with (the watches a resolve by name needs).
    mutating func start(at time: Duration) -> [Action] {
        now = max(now, time)
        return reconcile(settled: false)
    }

    /// Takes in a batch of observations made at `time`.
    mutating func handle(_ observations: [DiscoveryObservation], at time: Duration) -> [Action] {
        now = max(now, time)
        var actions: [Action] = []
        for observation in observations { actions += apply(observation) }
        // The settle window opens with the first observation of an answer, not when the
        // resolution is complete: the rest of one answer comes within the window.
        if settleTime > .zero && settleDeadline == nil && !observations.isEmpty { settleDeadline = now + settleTime }
        return actions + reconcile(settled: settleTime == .zero)
    }

    /// Lets time pass: settled resolutions are reported, services that did not reappear after
    /// a restoration are reported lost.
    mutating func advance(to time: Duration) -> [Action] {
        now = max(now, time)
        var actions: [Action] = []
        if let deadline = graceDeadline, deadline <= now {
            graceDeadline = nil
            for key in stale.sorted(by: Self.order) where instances[key] == nil && reported[key] != nil {
                reported[key] = nil
                actions.append(.report(.lost(service(key))))
            }
            stale = []
        }
        var settled = false
        if let deadline = settleDeadline, deadline <= now {
            settleDeadline = nil
            settled = true
        }
        return actions + reconcile(settled: settled)
    }

    // MARK: Observations

    private mutating func apply(_ observation: DiscoveryObservation) -> [Action] {
        sequence += 1
        // While interrupted nothing the backend says counts, until it says it is back.
        if interrupted {
            switch observation {
            case .interrupted, .restored: break
            default: return []
            }
        }
        switch observation {
        case .instanceAdded(let name, let interface):
            guard case .browse = mode else { return [] }
            let key = InstanceKey(name: name, interface: interface)
            if instanceLabels[name] == nil, let parsed = try? ServiceInstanceName(domainName: name) {
                // Names of instances long gone are dropped now and then (amortised: rarely).
                if instanceLabels.count >= 2 * (instances.count + reported.count) + 64 {
                    let live = Set(instances.keys.map(\.name)).union(reported.keys.map(\.name))
                    instanceLabels = instanceLabels.filter { live.contains($0.key) }
                }
                instanceLabels[name] = parsed.instance
            }
            instances[key, default: Tally()].add(0, sequence: sequence)
            stale.remove(key)
            mark(key)
        case .instanceRemoved(let name, let interface):
            let key = InstanceKey(name: name, interface: interface)
            if instances[key]?.remove(0) == true { instances[key] = nil }
            mark(key)
        case .srvAdded(let name, let interface, let data):
            let sequence = sequence
            changeSRV(InstanceKey(name: name, interface: interface)) { Self.change(&$0, name, interface, adding: data, sequence: sequence) }
        case .srvRemoved(let name, let interface, let data):
            changeSRV(InstanceKey(name: name, interface: interface)) { Self.change(&$0, name, interface, removing: data) }
        case .txtAdded(let name, let interface, let data): Self.change(&txt, name, interface, adding: data, sequence: sequence)
        case .txtRemoved(let name, let interface, let data): Self.change(&txt, name, interface, removing: data)
        case .addressAdded(let host, let interface, let address):
            let key = InstanceKey(name: host, interface: interface)
            let known = addresses[key]?.contains(address) == true
            addresses[key, default: Tally()].add(address, sequence: sequence)
            // The same address again (over the other IP family, or refreshed) changes no
            // report: marking every service on the host for it made large browses quadratic.
            if !known { markHost(host) }
        case .addressRemoved(let host, let interface, let address):
            let key = InstanceKey(name: host, interface: interface)
            addresses[key]?.remove(address)
            if addresses[key]?.contains(address) != true { markHost(host) }
        case .interrupted(let error):
            // What the backend said is void; what was reported stays reported until the
            // grace after restoration has passed without it coming back.
            let wasInterrupted = interrupted
            interrupted = true
            graceDeadline = nil
            if case .browse = mode { stale.formUnion(reported.keys) }
            instances = [:]
            srv = [:]
            placedOn = [:]
            txt = [:]
            addresses = [:]
            allDirty = true
            return wasInterrupted ? [] : [.report(.interrupted(error))]
        case .restored:
            guard interrupted else { return [] }
            interrupted = false
            allDirty = true
            graceDeadline = now + reappearGrace
            return [.report(.restored)]
        }
        switch observation {
        case .srvAdded(let name, let interface, _), .srvRemoved(let name, let interface, _),
            .txtAdded(let name, let interface, _), .txtRemoved(let name, let interface, _):
            markService(name, interface)
        default:
            break
        }
        return []
    }

    /// Changes the SRV table under `key` and keeps ``placedOn`` in step with its latest target.
    private mutating func changeSRV(_ key: InstanceKey, _ change: (inout [InstanceKey: Tally<SRVData>]) -> Void) {
        let before = srv[key]?.latest?.target
        change(&srv)
        let after = srv[key]?.latest?.target
        guard before != after else { return }
        if let before {
            placedOn[before]?.remove(key)
            if placedOn[before]?.isEmpty == true { placedOn[before] = nil }
        }
        if let after { placedOn[after, default: []].insert(key) }
    }

    /// Adds or removes one of an instance's SRV or TXT values.
    private static func change<Value: Hashable>(
        _ table: inout [InstanceKey: Tally<Value>], _ name: DomainName, _ interface: NetworkInterface?,
        adding added: Value? = nil, removing removed: Value? = nil, sequence: Int = 0
    ) {
        let key = InstanceKey(name: name, interface: interface)
        if let added { table[key, default: Tally()].add(added, sequence: sequence) }
        if let removed { table[key]?.remove(removed) }
    }

    /// An instance's SRV or TXT changed: its report may change, under its own interface or
    /// any interface.
    private mutating func markService(_ name: DomainName, _ interface: NetworkInterface?) {
        mark(InstanceKey(name: name, interface: interface))
        if interface != nil { mark(InstanceKey(name: name, interface: nil)) }
    }

    /// `key`'s report, and what it needs watched, may have changed.
    private mutating func mark(_ key: InstanceKey) {
        dirty.insert(key)
        watchDirty.insert(key)
    }

    /// A host's addresses changed: so may the report of every instance whose SRV names it.
    private mutating func markHost(_ host: DomainName) {
        for key in placedOn[host] ?? [] {
            markService(key.name, key.interface)
        }
    }

    // MARK: Computing what to watch and what to report

    /// Brings the watches in line with what is known, then reports what changed: lost at once,
    /// found or updated when `settled` (else a settle deadline is set).
    private mutating func reconcile(settled: Bool) -> [Action] {
        var actions: [Action] = []
        let (stop, start) = updateWatches()
        for watch in stop {
            actions.append(.unwatch(watch))
            watching.remove(watch)
            // Stopping a watch forgets what it taught; starting it again teaches it afresh.
            switch watch {
            case .service(let name, let interface):
                for key in srv.keys where key.name == name && (interface == nil || key.interface == interface) { changeSRV(key) { $0[key] = nil } }
                for key in txt.keys where key.name == name && (interface == nil || key.interface == interface) { txt[key] = nil }
                markService(name, interface)
            case .host(let name, let interface):
                markHost(name)
                for key in addresses.keys where key.name == name && (interface == nil || key.interface == interface) {
                    addresses[key] = nil
                }
            }
        }
        for watch in start {
            actions.append(.watch(watch))
            watching.insert(watch)
        }

        // Only the instances something happened to (or all, after an interruption).
        // Instances already waiting for the settle window are looked at again when a batch
        // touches them or when it ends: looking at all of them for every batch of a burst was
        // quadratic again.
        let changed: [InstanceKey]
        if allDirty {
            changed = Array(Set(reported.keys).union(instances.keys).union(presentKeys()).union(waiting)).sorted(by: Self.order)
        } else if settled {
            changed = dirty.union(waiting).sorted(by: Self.order)
        } else {
            // Waiting ones this batch touched are looked at (one may be whole now); the others
            // only when the window ends.
            changed = dirty.sorted(by: Self.order)
        }
        if settled || allDirty { waiting = [] }
        allDirty = false
        dirty = []
        for key in changed where reported[key] != nil && instances[key] == nil && !stale.contains(key) {
            if case .browse = mode {
                reported[key] = nil
                actions.append(.report(.lost(service(key))))
            }
        }
        var pending = !waiting.isEmpty
        for key in changed where isPresent(key) {
            let resolving = mode != .browse(resolve: false)
            let current = resolving ? resolution(key) : nil
            if resolving && current == nil { continue }
            if let last = reported[key], last == current { continue }
            // Nothing more to wait for: the resolution has an address of each family (the rest
            // of the answer, when a responder splits IPv4 and IPv6, has come).
            guard settled || (wholeAtOnce && Self.isWhole(current)) else {
                pending = true
                waiting.insert(key)
                continue
            }
            let event: BrowseEvent = reported[key] == nil
                ? .found(current?.service ?? service(key), current)
                : .updated(current?.service ?? service(key), current)
            reported[key] = .some(current)
            actions.append(.report(event))
        }
        if pending && settleDeadline == nil { settleDeadline = now + settleTime }
        if !pending && settled { settleDeadline = nil }
        return actions
    }

    /// Whether `key` is one to report on.
    private func isPresent(_ key: InstanceKey) -> Bool {
        switch mode {
        case .browse: instances[key] != nil
        case .resolve(let name): key.name == name && key.interface == nil
        }
    }

    /// The instances to report on: those present (browse), or the one asked for (resolve).
    private func presentKeys() -> [InstanceKey] {
        switch mode {
        case .browse: instances.keys.sorted(by: Self.order)
        case .resolve(let name): [InstanceKey(name: name, interface: nil)]
        }
    }

    /// Recomputes the needs of the instances touched since last time (all of them after an
    /// interruption), and returns the watches to stop and to start, each in a fixed order.
    private mutating func updateWatches() -> (stop: [DiscoveryWatch], start: [DiscoveryWatch]) {
        if interrupted {
            needs = [:]
            needed = [:]
            watchDirty = []
            return (watching.sorted(by: Self.order), [])
        }
        let keys: Set<InstanceKey> = allDirty ? Set(needs.keys).union(instances.keys).union(presentKeys()).union(watchDirty) : watchDirty
        watchDirty = []
        var touched: Set<DiscoveryWatch> = []
        for key in keys {
            let now = needs(of: key)
            let before = needs[key] ?? []
            guard now != before else { continue }
            for watch in before.subtracting(now) {
                needed[watch, default: 0] -= 1
                if needed[watch] == 0 { needed[watch] = nil }
                touched.insert(watch)
            }
            for watch in now.subtracting(before) {
                needed[watch, default: 0] += 1
                touched.insert(watch)
            }
            needs[key] = now.isEmpty ? nil : now
        }
        // A watch still held although nothing needs it (a stray left by an interruption).
        if allDirty { touched.formUnion(watching) }
        let stop = touched.filter { needed[$0] == nil && watching.contains($0) }.sorted(by: Self.order)
        let start = touched.filter { needed[$0] != nil && !watching.contains($0) }.sorted(by: Self.order)
        return (stop, start)
    }

    /// What `key` needs watched: its SRV and TXT while it is followed, and the addresses of
    /// the host its SRV names.
    private func needs(of key: InstanceKey) -> Set<DiscoveryWatch> {
        switch mode {
        case .browse(resolve: false):
            return []
        case .browse(resolve: true):
            guard instances[key] != nil else { return [] }
        case .resolve(let name):
            guard key.name == name, key.interface == nil else { return [] }
        }
        var wanted: Set<DiscoveryWatch> = [.service(key.name, key.interface)]
        if let (interface, data) = location(key) { wanted.insert(.host(data.target, interface)) }
        return wanted
    }

    /// The SRV that places `key`, with the interface it came on: the latest one present there,
    /// or for "any interface" the one that arrived first among the interfaces that have one.
    private func location(_ key: InstanceKey) -> (NetworkInterface, SRVData)? {
        if let interface = key.interface {
            return srv[key]?.latest.map { (interface, $0) }
        }
        let candidates = srv.compactMap { entry -> (Int, NetworkInterface, SRVData)? in
            guard entry.key.name == key.name, let interface = entry.key.interface,
                let data = entry.value.latest, let first = entry.value.firstSequence else { return nil }
            return (first, interface, data)
        }
        return candidates.min { $0.0 < $1.0 }.map { ($0.1, $0.2) }
    }

    /// For each service being resolved but not resolved yet, what it still lacks, in words
    /// (for `nearby browse --verbose`: why a service does not resolve).
    func unresolved() -> [(service: DiscoveredService, waitingFor: String)] {
        guard mode != .browse(resolve: false), !interrupted else { return [] }
        return presentKeys().compactMap { key in
            guard resolution(key) == nil else { return nil }
            guard let (interface, data) = location(key) else { return (service(key), "its SRV record (host and port)") }
            var lacking: [String] = []
            if txt[InstanceKey(name: key.name, interface: interface)]?.latest == nil { lacking.append("its TXT record") }
            if addresses[InstanceKey(name: data.target, interface: interface)]?.present.isEmpty ?? true {
                lacking.append("an address (A/AAAA) of \(data.target) on \(interface.name)")
            }
            return (service(key), lacking.joined(separator: " and "))
        }
    }

    /// The resolution `key` has now, computed from what is held: nil until its SRV, its TXT and
    /// an address of its host are all present.
    /// Whether a resolution has an IPv4 and an IPv6 address: all a responder that sends the two
    /// families in separate packets has to say, so it need not wait for the settle window.
    static func isWhole(_ resolved: ResolvedService?) -> Bool {
        guard let addresses = resolved?.addresses else { return false }
        return addresses.contains(where: \.isIPv6) && addresses.contains(where: { !$0.isIPv6 })
    }

    func resolution(_ key: InstanceKey) -> ResolvedService? {
        guard let (interface, data) = location(key),
            let info = txt[InstanceKey(name: key.name, interface: interface)]?.latest,
            let known = addresses[InstanceKey(name: data.target, interface: interface)]?.present, !known.isEmpty
        else { return nil }
        var found = service(key)
        found.interface = interface
        return ResolvedService(
            service: found, host: data.target, port: data.port,
            addresses: known.filter { !$0.isIPv6 } + known.filter(\.isIPv6), info: DiscoveryInfo(info))
    }

    private func service(_ key: InstanceKey) -> DiscoveredService {
        let name = instanceLabels[key.name] ?? (try? ServiceInstanceName(domainName: key.name).instance) ?? key.name.description
        return DiscoveredService(name: name, type: type, interface: key.interface ?? NetworkInterface(index: 0, name: ""))
    }

    // Orders for actions and reports that do not depend on hashing. They run for every batch
    // of observations, over every instance present: they compare names as bytes, never as
    // text (building names' descriptions made 1,000 instances take 40 s to browse).
    private static func order(_ a: InstanceKey, _ b: InstanceKey) -> Bool {
        if a.name != b.name { return a.name.precedes(b.name) }
        return (a.interface?.index ?? 0) < (b.interface?.index ?? 0)
    }

    private static func order(_ a: DiscoveryWatch, _ b: DiscoveryWatch) -> Bool {
        func rank(_ watch: DiscoveryWatch) -> (Int, DomainName, Int) {
            switch watch {
            case .service(let name, let interface): (0, name, interface?.index ?? 0)
            case .host(let name, let interface): (1, name, interface?.index ?? 0)
            }
        }
        let (kindA, nameA, indexA) = rank(a)
        let (kindB, nameB, indexB) = rank(b)
        if kindA != kindB { return kindA < kindB }
        if nameA != nameB { return nameA.precedes(nameB) }
        return indexA < indexB
    }
}

/// Values with how often each was added and not yet removed, remembering arrival order.
struct Tally<Value: Hashable> {
    private var counts: [Value: Int] = [:]
    /// Values present, by the sequence number of their first addition.
    private var firstSeen: [Value: Int] = [:]
    /// Values present, by the sequence number of their latest addition.
    private var lastSeen: [Value: Int] = [:]

    mutating func add(_ value: Value, sequence: Int) {
        counts[value, default: 0] += 1
        if firstSeen[value] == nil { firstSeen[value] = sequence }
        lastSeen[value] = sequence
    }

    /// Removes one addition of `value`; true when nothing is left at all.
    @discardableResult
    mutating func remove(_ value: Value) -> Bool {
        if let count = counts[value] {
            if count > 1 {
                counts[value] = count - 1
            } else {
                counts[value] = nil
                firstSeen[value] = nil
                lastSeen[value] = nil
            }
        }
        return counts.isEmpty
    }

    func contains(_ value: Value) -> Bool { counts[value] != nil }

    /// The value added most recently among those present.
    var latest: Value? { lastSeen.max { $0.value < $1.value }?.key }
    /// When the earliest value present first arrived.
    var firstSequence: Int? { firstSeen.values.min() }
    /// The values present, in the order they first arrived.
    var present: [Value] { firstSeen.sorted { $0.value < $1.value }.map(\.key) }
}
