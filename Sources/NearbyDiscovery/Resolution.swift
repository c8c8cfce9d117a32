import DNSWire
import MulticastDNS

/// Keeps one service instance resolved: SRV and TXT of the instance, A and AAAA of its host,
/// each through a continuous query, and reports every complete picture that differs from the
/// last. Ends when its task is cancelled.
struct ServiceWatcher {
    let engine: MulticastDNSEngine
    let service: DiscoveredService

    private enum Input {
        case event(RecordType, QueryEvent)
        /// Records of one response arrive as separate events; report once they have settled.
        case settle
    }

    /// How long to let records of the same response arrive before reporting.
    static let settleTime: Duration = .milliseconds(30)

    func run(onChange: @Sendable (ResolvedService) async -> Void) async {
        let instance = service.instanceName
        let (inputs, continuation) = AsyncStream<Input>.makeStream()
        var forwarders: [Task<Void, Never>] = []
        var queryIDs: [QueryID] = []
        func watch(_ name: DomainName, _ type: RecordType) async {
            let (id, events) = await engine.query(name: name, type: type)
            queryIDs.append(id)
            forwarders.append(Task {
                for await event in events { continuation.yield(.event(type, event)) }
            })
        }
        await watch(instance, .srv)
        await watch(instance, .txt)

        var srv: SRVData?
        var txt: TXTData?
        var addresses: [IPAddress] = []
        var watchedHost: DomainName?
        var last: ResolvedService?
        var settling: Task<Void, Never>?
        var seenOn: NetworkInterface?
        for await input in inputs {
            if Task.isCancelled { break }
            guard case .event(let type, let event) = input else {
                settling = nil
                guard let srv, let txt, !addresses.isEmpty else { continue }
                let ordered = addresses.filter { !$0.isIPv6 } + addresses.filter(\.isIPv6)
                var found = service
                // A resolve by name learns the interface from the answer.
                if found.interface.index == 0, let seenOn { found.interface = seenOn }
                let resolved = ResolvedService(
                    service: found, host: srv.target, port: srv.port, addresses: ordered, info: DiscoveryInfo(txt))
                if resolved != last {
                    last = resolved
                    await onChange(resolved)
                }
                continue
            }
            switch (type, event) {
            case (.srv, .added(let record, let interface)):
                if case .srv(let data) = record.data {
                    srv = data
                    seenOn = interface
                }
            case (.srv, .removed(let record, _)):
                if case .srv(let data) = record.data, data == srv { srv = nil }
            case (.txt, .added(let record, _)):
                if case .txt(let data) = record.data { txt = data }
            case (.txt, .removed(let record, _)):
                if case .txt(let data) = record.data, data == txt { txt = nil }
            case (.a, .added(let record, _)), (.aaaa, .added(let record, _)):
                if let address = address(of: record, on: event.interface), !addresses.contains(address) {
                    addresses.append(address)
                }
            case (.a, .removed(let record, _)), (.aaaa, .removed(let record, _)):
                if let address = address(of: record, on: event.interface) { addresses.removeAll { $0 == address } }
            default:
                break
            }
            if let target = srv?.target, target != watchedHost {
                watchedHost = target
                addresses = []
                await watch(target, .a)
                await watch(target, .aaaa)
            }
            if settling == nil {
                settling = Task {
                    try? await Task.sleep(for: Self.settleTime)
                    continuation.yield(.settle)
                }
            }
        }
        settling?.cancel()
        for task in forwarders { task.cancel() }
        for id in queryIDs { await engine.stopQuery(id) }
    }

    private func address(of record: ResourceRecord, on interface: NetworkInterface) -> IPAddress? {
        switch record.data {
        case .a(let v4): .v4(v4)
        case .aaaa(let v6): .v6(v6, scope: v6.isLinkLocal ? interface.index : nil)
        default: nil
        }
    }
}

extension QueryEvent {
    var interface: NetworkInterface {
        switch self {
        case .added(_, let interface), .removed(_, let interface): interface
        }
    }
}

/// One-shot resolution with a deadline.
struct Resolver {
    let engine: MulticastDNSEngine
    let instance: DomainName
    let type: ServiceType

    func resolve(timeout: Duration) async -> ResolvedService? {
        let name = (try? ServiceInstanceName(domainName: instance).instance) ?? ""
        // The interface (index 0: unknown yet) is filled in by the SRV record that answers.
        let service = DiscoveredService(name: name, type: type, interface: NetworkInterface(index: 0, name: ""))
        return await firstResolution(within: timeout) { [engine] report in
            await ServiceWatcher(engine: engine, service: service).run { resolved in report(resolved) }
        }
    }
}

/// Runs a watcher until it reports a resolved service, or until `timeout` has passed (nil).
func firstResolution(
    within timeout: Duration, _ watch: @escaping @Sendable (@escaping @Sendable (ResolvedService) -> Void) async -> Void
) async -> ResolvedService? {
    let (results, continuation) = AsyncStream<ResolvedService?>.makeStream()
    let watcher = Task { await watch { resolved in continuation.yield(resolved) } }
    let timer = Task {
        try? await Task.sleep(for: timeout)
        continuation.yield(nil)
    }
    var result: ResolvedService?
    for await value in results {
        result = value
        break
    }
    watcher.cancel()
    timer.cancel()
    continuation.finish()
    return result
}

/// Turns PTR records of a type into found / updated / lost events, resolving when asked.
struct Browser {
    let engine: MulticastDNSEngine
    let type: ServiceType
    let resolve: Bool
    let continuation: AsyncStream<BrowseEvent>.Continuation

    private enum Input: Sendable {
        case ptr(QueryEvent)
        case resolved(DiscoveredService, ResolvedService)
    }

    func run() async {
        let (inputs, inputContinuation) = AsyncStream<Input>.makeStream()
        let (queryID, events) = await engine.query(name: type.domainName, type: .ptr)
        let forwarder = Task {
            for await event in events { inputContinuation.yield(.ptr(event)) }
        }
        var watchers: [DiscoveredService: Task<Void, Never>] = [:]
        var reported: Set<DiscoveredService> = []
        for await input in inputs {
            if Task.isCancelled { break }
            switch input {
            case .ptr(.added(let record, let interface)):
                guard case .ptr(let target) = record.data, let instance = try? ServiceInstanceName(domainName: target) else { continue }
                let service = DiscoveredService(name: instance.instance, type: type, interface: interface)
                guard watchers[service] == nil, !reported.contains(service) || !resolve else { continue }
                if resolve {
                    watchers[service] = Task { [engine] in
                        await ServiceWatcher(engine: engine, service: service).run { resolved in
                            inputContinuation.yield(.resolved(service, resolved))
                        }
                    }
                } else if reported.insert(service).inserted {
                    continuation.yield(.found(service, nil))
                }
            case .ptr(.removed(let record, let interface)):
                guard case .ptr(let target) = record.data, let instance = try? ServiceInstanceName(domainName: target) else { continue }
                let service = DiscoveredService(name: instance.instance, type: type, interface: interface)
                watchers.removeValue(forKey: service)?.cancel()
                if reported.remove(service) != nil { continuation.yield(.lost(service)) }
            case .resolved(let service, let resolved):
                guard watchers[service] != nil else { continue }
                if reported.insert(service).inserted {
                    continuation.yield(.found(service, resolved))
                } else {
                    continuation.yield(.updated(service, resolved))
                }
            }
        }
        forwarder.cancel()
        for task in watchers.values { task.cancel() }
        await engine.stopQuery(queryID)
    }
}
