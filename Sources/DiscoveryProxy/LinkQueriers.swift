import DNSWire
import DiscoveryProxyCore
import Logging
import MulticastDNS
import MulticastDNSCore
import NearbyBasics
import NetworkPlatform
import SystemDNSSD

/// What a link querier learned: a record that came or went, on an interface.
struct LinkReport: Sendable {
    var interface: String
    var record: ResourceRecord
    var added: Bool

    /// What a report is about: one record (name, type and data) on one interface.
    struct Key: Hashable, Sendable {
        var interface: String
        var name: DomainName
        var data: RecordData
    }

    var key: Key { Key(interface: interface, name: record.name, data: record.data) }

    /// The reports the proxy has not read yet, bounded: the newest per record and interface,
    /// read as one batch (a record that came and went reads as gone; nothing is lost, only
    /// superseded), so memory follows the records the link has shown, not how far behind the
    /// proxy is.
    static func buffer() -> LatestPerKeyBatchBuffer<LinkReport, Key> { LatestPerKeyBatchBuffer(key: \.key) }
}

/// The link side of the proxy: continuous mDNS questions whose answers come back as reports.
/// Two kinds: Nearby's own engine, and the host's daemon (avahi) through dns_sd.
protocol LinkQuerier: Sendable {
    /// Everything the querier learns, in batches, in order.
    var reports: EventStream<[LinkReport]> { get }
    /// The querier's work (children of the caller's task group), until ``shutdown()``.
    func run() async
    /// Starts continuous questions; what is already known comes as a report soon after.
    func start(_ questions: [LinkQuestion]) async
    func stop(_ question: LinkQuestion) async
    /// What is known now for a question on one interface (for a second link asking it).
    func known(_ question: LinkQuestion, interface: String) async -> [ResourceRecord]
    /// One query to reconfirm a record someone believes is gone (RFC 6762 §10.4); asked twice
    /// a second apart and unanswered, the record is reported removed about ten seconds later.
    func reconfirm(_ record: ResourceRecord) async
    func shutdown() async
}

/// Nearby's own mDNS engine, on the links' interfaces only.
actor EmbeddedLinkQuerier: LinkQuerier {
    let engine: MulticastDNSEngine
    private let group: QueryGroup
    nonisolated let reports: EventStream<[LinkReport]>
    private let events: EventStream<[QueryEvent]>
    private let continuation: EventStream<[LinkReport]>.Source
    private var ids: [LinkQuestion: QueryID] = [:]

    static func prepare(interfaces: [String], logger: Logger) async throws(ProxyError) -> EmbeddedLinkQuerier {
        do {
            try MulticastDNSEngine.checkInterfaces(interfaces)
        } catch {
            throw ProxyError(.linkUnavailable, "\(error)")
        }
        let engine: MulticastDNSEngine
        do {
            engine = try await MulticastDNSEngine.prepare(interfaces: interfaces, logger: logger)
        } catch {
            throw ProxyError(.linkUnavailable, "cannot start mDNS on \(interfaces.joined(separator: ", ")): \(error)")
        }
        let (group, events) = await engine.openQueryGroup()
        return EmbeddedLinkQuerier(engine: engine, group: group, events: events)
    }

    private init(engine: MulticastDNSEngine, group: QueryGroup, events: EventStream<[QueryEvent]>) {
        self.engine = engine
        self.group = group
        self.events = events
        (reports, continuation) = EventStream<[LinkReport]>.makeStream(buffer: LinkReport.buffer())
    }

    func run() async {
        let (engine, events, continuation) = (engine, events, continuation)
        await withDiscardingTaskGroup { group in
            group.addTask { await engine.run() }
            group.addTask {
                for await batch in events {
                    continuation.yield(batch.map { event in
                        switch event {
                        case .added(let record, let interface): LinkReport(interface: interface.name, record: record, added: true)
                        case .removed(let record, let interface): LinkReport(interface: interface.name, record: record, added: false)
                        }
                    })
                }
                continuation.finish()
            }
        }
    }

    func start(_ questions: [LinkQuestion]) async {
        let started = await engine.startQueries(questions.map { (name: $0.name, type: $0.type) }, in: group)
        for (question, id) in zip(questions, started) { ids[question] = id }
    }

    func stop(_ question: LinkQuestion) async {
        if let id = ids.removeValue(forKey: question) { await engine.stopQuery(id) }
    }

    func known(_ question: LinkQuestion, interface: String) async -> [ResourceRecord] {
        await engine.cached(name: question.name, type: question.type).filter { $0.1.name == interface }.map(\.0)
    }

    func reconfirm(_ record: ResourceRecord) async {
        await engine.reconfirm(record)
    }

    func shutdown() async {
        await engine.closeQueryGroup(group)
        await engine.shutdown()
        continuation.finish()
    }
}

/// The host's mDNS daemon (avahi-daemon on Linux) through dns_sd: one `DNSServiceQueryRecord`
/// per question and link interface, so that the daemon asks on those interfaces only.
actor SystemLinkQuerier: LinkQuerier {
    nonisolated let reports: EventStream<[LinkReport]>
    private let continuation: EventStream<[LinkReport]>.Source
    /// The daemon's operations to read, one per question and interface as ``start(_:)`` makes
    /// them. Not bounded by a count: it holds at most the operations alive, which the machine's
    /// link-question limit bounds (each is read as soon as ``run()`` takes it).
    private let watch: AsyncStream<(LinkQuestion, DNSSDOperation<DNSSDQueryEvent>)>
    private let watchQueue: AsyncStream<(LinkQuestion, DNSSDOperation<DNSSDQueryEvent>)>.Continuation
    private var operations: [LinkQuestion: [DNSSDOperation<DNSSDQueryEvent>]] = [:]
    private let interfaceIndices: [UInt32]
    /// What each question's operation has reported and not taken back, per interface.
    private var known: [LinkQuestion: [String: Set<ResourceRecord>]] = [:]
    private let logger: Logger

    static func prepare(interfaces: [String], logger: Logger) async throws(ProxyError) -> SystemLinkQuerier {
        var indices: [UInt32] = []
        for name in interfaces {
            guard let index = NetworkPlatform.interfaceIndex(named: name) else {
                throw ProxyError(.linkUnavailable, "there is no interface \(name) on this host")
            }
            indices.append(UInt32(index))
        }
        do {
            try await DNSSD.checkDaemon()
        } catch {
            throw ProxyError(.linkUnavailable, "the system's mDNS daemon does not answer (\(error)); start avahi-daemon, or use --backend embedded")
        }
        return SystemLinkQuerier(interfaces: indices, logger: logger)
    }

    private init(interfaces: [UInt32], logger: Logger) {
        self.logger = logger
        interfaceIndices = interfaces
        (reports, continuation) = EventStream<[LinkReport]>.makeStream(buffer: LinkReport.buffer())
        // Bounded by the live operations: one entry per link question started.
        (watch, watchQueue) = AsyncStream<(LinkQuestion, DNSSDOperation<DNSSDQueryEvent>)>.makeStream()
    }

    func run() async {
        let watch = watch
        await withDiscardingTaskGroup { group in
            for await (question, operation) in watch {
                group.addTask { [weak self] in
                    for await event in operation.events {
                        await self?.handle(event, for: question)
                    }
                }
            }
        }
    }

    private func handle(_ event: DNSSDQueryEvent, for question: LinkQuestion) {
        let (item, added): (DNSSDRecord, Bool)
        switch event {
        case .added(let record, _): (item, added) = (record, true)
        case .removed(let record, _): (item, added) = (record, false)
        case .failed(let error):
            logger.warning("the daemon's query for \(question) failed: \(error)")
            return
        }
        guard operations[question] != nil, let record = Self.record(item, question: question) else {
            logger.debug("the daemon's record for \(question) was not usable: type \(item.type), \(item.rdata.count) bytes")
            return
        }
        let interface = NetworkPlatform.interfaceName(index: Int(item.interfaceIndex))
        if added {
            known[question, default: [:]][interface, default: []].insert(record)
        } else {
            known[question]?[interface]?.remove(record)
        }
        continuation.yield([LinkReport(interface: interface, record: record, added: added)])
    }

    /// The daemon hands over a record's data uncompressed; it is read by the codec's hardened
    /// reader, like every record from the network.
    static func record(_ item: DNSSDRecord, question: LinkQuestion) -> ResourceRecord? {
        guard let data = try? RecordData(type: RecordType(item.type), rdata: item.rdata) else { return nil }
        // Avahi's dns_sd library reports every TTL as 0; a record that goes is reported as
        // removed, not by its TTL. A TTL of 0 is taken as unknown: RFC 6762 §10's defaults.
        let ttl = item.ttl != 0 ? item.ttl : [RecordType.srv, .a, .aaaa].contains(data.type) ? 120 : 4500
        return ResourceRecord(name: question.name, data: data, ttl: ttl)
    }

    func start(_ questions: [LinkQuestion]) async {
        for question in questions where operations[question] == nil {
            operations[question] = []
            for index in interfaceIndices {
                do {
                    let operation = try await DNSSD.queryRecord(name: question.name.description, type: question.type.rawValue, interfaceIndex: index)
                    // Stopped while the daemon was being asked: give it up at once.
                    guard operations[question] != nil else {
                        operation.cancel()
                        break
                    }
                    operations[question]?.append(operation)
                    watchQueue.yield((question, operation))
                } catch {
                    logger.warning("the daemon refused a query for \(question): \(error)")
                }
            }
        }
    }

    func stop(_ question: LinkQuestion) async {
        for operation in operations.removeValue(forKey: question) ?? [] { operation.cancel() }
        known[question] = nil
    }

    func known(_ question: LinkQuestion, interface: String) async -> [ResourceRecord] {
        Array(known[question]?[interface] ?? [])
    }

    /// avahi's dns_sd answers DNSServiceReconfirmRecord with "unsupported": the daemon's own
    /// failure detection is left to notice.
    func reconfirm(_ record: ResourceRecord) async {}

    func shutdown() async {
        for operation in operations.values.joined() { operation.cancel() }
        operations = [:]
        watchQueue.finish()
        continuation.finish()
    }
}
