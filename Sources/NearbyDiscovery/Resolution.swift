import DNSWire
import MulticastDNS
import MulticastDNSCore
import NearbyBasics

/// Observations from the embedded engine: one query group per browse or resolve, whose
/// events arrive as batches (one received packet, or one look at the cache, per batch).
/// Watching a service queries its SRV and TXT, watching a host its A and AAAA; the engine
/// reports what it already holds as soon as a query starts.
actor EmbeddedObservationSource: ObservationSource {
    let engine: MulticastDNSEngine
    /// The PTR name to follow (nil for a resolve by name).
    let browsing: DomainName?
    private var group: QueryGroup?
    /// The forwarder of the query group's batches, run by ``run()``.
    private let children = ChildTasks()
    /// Engine queries per watched name and type, shared by watches on several interfaces.
    private var running: [QueryKey: (id: QueryID, users: Int)] = [:]

    private struct QueryKey: Hashable {
        var name: DomainName
        var type: RecordType
    }

    init(engine: MulticastDNSEngine, browsing: DomainName?) {
        self.engine = engine
        self.browsing = browsing
    }

    nonisolated func run() async {
        await children.run()
    }

    func start(sink: ObservationSink) async {
        let (group, batches) = await engine.openQueryGroup()
        self.group = group
        let browsing = browsing
        children.spawn {
            for await batch in batches {
                let observations = batch.compactMap { Self.observation($0, browsing: browsing) }
                if !observations.isEmpty { sink.deliver(observations) }
            }
        }
        if let browsing { await begin([QueryKey(name: browsing, type: .ptr)]) }
    }

    func watch(_ watch: DiscoveryWatch) async {
        await begin(Self.queries(watch))
    }

    func unwatch(_ watch: DiscoveryWatch) async {
        for key in Self.queries(watch) {
            guard let entry = running[key] else { continue }
            if entry.users > 1 {
                running[key] = (entry.id, entry.users - 1)
            } else {
                running[key] = nil
                await engine.stopQuery(entry.id)
            }
        }
    }

    func stop() async {
        if let group { await engine.closeQueryGroup(group) }
        children.finish()
        running = [:]
    }

    /// Starts the queries not running yet, together (their cached answers come as one batch).
    private func begin(_ keys: [QueryKey]) async {
        var fresh: [QueryKey] = []
        for key in keys {
            if let entry = running[key] { running[key] = (entry.id, entry.users + 1) } else { fresh.append(key) }
        }
        guard let group, !fresh.isEmpty else { return }
        let ids = await engine.startQueries(fresh.map { ($0.name, $0.type) }, in: group)
        for (key, id) in zip(fresh, ids) { running[key] = (id, 1) }
    }

    private static func queries(_ watch: DiscoveryWatch) -> [QueryKey] {
        watch.recordSets.map { QueryKey(name: $0.name, type: $0.type) }
    }

    /// A cache event in DNS-SD terms.
    static func observation(_ event: QueryEvent, browsing: DomainName?) -> DiscoveryObservation? {
        let (record, interface, added): (ResourceRecord, NetworkInterface, Bool) = switch event {
        case .added(let record, let interface): (record, interface, true)
        case .removed(let record, let interface): (record, interface, false)
        }
        return DiscoveryObservation.record(record.name, record.data, on: interface, added: added, browsing: browsing)
    }
}
