#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import DNSWire
import MulticastDNS
import SystemDNSSD

/// The interface with this index, named as the kernel names it.
func networkInterface(index: UInt32) -> NetworkInterface {
    var buffer = [CChar](repeating: 0, count: Int(IF_NAMESIZE) + 1)
    let name = if_indextoname(index, &buffer) != nil
        ? String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self) : ""
    return NetworkInterface(index: Int(index), name: name)
}

/// Keeps one service resolved through the daemon: `DNSServiceResolve` for host, port, TXT and
/// interface; a TXT record query for later TXT changes; A and AAAA record queries on the host
/// for its addresses (Avahi's library has no `DNSServiceGetAddrInfo`). Reports every complete
/// picture that differs from the last; ends when cancelled or when the daemon fails.
struct SystemServiceWatcher {
    let service: DiscoveredService

    private enum Input: Sendable {
        case resolution(DNSSDResolution)
        case txt(DNSSDQueryEvent)
        case address(DNSSDQueryEvent, generation: Int)
        case failed
        case settle
    }

    func run(onChange: @Sendable (ResolvedService) async -> Void) async {
        let (inputs, input) = AsyncStream<Input>.makeStream()
        var operations: [@Sendable () -> Void] = []
        var forwarders: [Task<Void, Never>] = []
        func follow<Event: Sendable>(_ operation: DNSSDOperation<Event>, _ wrap: @escaping @Sendable (Event) -> Input) {
            operations.append { operation.cancel() }
            forwarders.append(Task {
                for await event in operation.events { input.yield(wrap(event)) }
            })
        }
        defer {
            for cancel in operations { cancel() }
            for task in forwarders { task.cancel() }
        }
        let base = service.type.baseType
        let interfaceIndex = UInt32(service.interface.index)
        guard let resolver = try? await DNSSD.resolve(
            name: service.name, type: base.description, domain: base.domain.description, interfaceIndex: interfaceIndex)
        else { return }
        follow(resolver) { event in
            if case .resolved(let resolution) = event { return .resolution(resolution) }
            return .failed
        }
        if let instance = try? ServiceInstanceName(service.name, type: base),
            let txtQuery = try? await DNSSD.queryRecord(
                name: instance.domainName.description, type: DNSSD.typeTXT, interfaceIndex: interfaceIndex)
        {
            follow(txtQuery) { .txt($0) }
        }

        var host: String?
        var port: UInt16 = 0
        var txt: [UInt8]?
        var seenOn = service.interface
        // Each address counts once per report: Avahi reports a record once per IP protocol.
        var addresses: [IPAddress: Int] = [:]
        var order: [IPAddress] = []
        var generation = 0
        var addressQueries: [@Sendable () -> Void] = []
        var last: ResolvedService?
        var settling: Task<Void, Never>?
        for await event in inputs {
            if Task.isCancelled { break }
            switch event {
            case .failed:
                settling?.cancel()
                for cancel in addressQueries { cancel() }
                return
            case .settle:
                settling = nil
                guard let host, let txt, let target = try? DomainName(parsing: host) else { continue }
                let present = order.filter { addresses[$0, default: 0] > 0 }
                guard !present.isEmpty else { continue }
                var found = service
                if found.interface.index == 0 { found.interface = seenOn }
                let resolved = ResolvedService(
                    service: found, host: target, port: port,
                    addresses: present.filter { !$0.isIPv6 } + present.filter(\.isIPv6), info: DiscoveryInfo(rdata: txt))
                if resolved != last {
                    last = resolved
                    await onChange(resolved)
                }
                continue
            case .resolution(let resolution):
                port = resolution.port
                txt = resolution.txt
                if resolution.interfaceIndex != 0 { seenOn = networkInterface(index: resolution.interfaceIndex) }
                if resolution.host != host {
                    host = resolution.host
                    for cancel in addressQueries { cancel() }
                    addressQueries = []
                    addresses = [:]
                    order = []
                    generation += 1
                    for type in [DNSSD.typeA, DNSSD.typeAAAA] {
                        guard let query = try? await DNSSD.queryRecord(
                            name: resolution.host, type: type, interfaceIndex: resolution.interfaceIndex)
                        else { continue }
                        let current = generation
                        addressQueries.append { query.cancel() }
                        forwarders.append(Task {
                            for await event in query.events { input.yield(.address(event, generation: current)) }
                        })
                    }
                }
            case .txt(.added(let record, _)):
                txt = record.rdata
            case .txt(.removed(let record, _)):
                if record.rdata == txt { txt = nil }
            case .txt(.failed):
                break
            case .address(let event, let current):
                guard current == generation else { continue }
                switch event {
                case .added(let record, _):
                    if let address = address(of: record, interface: seenOn) {
                        if addresses[address] == nil { order.append(address) }
                        addresses[address, default: 0] += 1
                    }
                case .removed(let record, _):
                    if let address = address(of: record, interface: seenOn), let count = addresses[address] {
                        addresses[address] = max(0, count - 1)
                    }
                case .failed:
                    break
                }
            }
            if settling == nil {
                settling = Task {
                    try? await Task.sleep(for: ServiceWatcher.settleTime)
                    input.yield(.settle)
                }
            }
        }
        settling?.cancel()
        for cancel in addressQueries { cancel() }
    }

    private func address(of record: DNSSDRecord, interface: NetworkInterface) -> IPAddress? {
        switch (record.type, record.rdata.count) {
        case (DNSSD.typeA, 4):
            let b = record.rdata
            return .v4(IPv4Address(b[0], b[1], b[2], b[3]))
        case (DNSSD.typeAAAA, 16):
            guard let v6 = IPv6Address(bytes: record.rdata) else { return nil }
            return .v6(v6, scope: v6.isLinkLocal ? interface.index : nil)
        default:
            return nil  // malformed data from the daemon is ignored, never trusted
        }
    }
}

/// Turns a dns_sd browse into found / updated / lost events, resolving when asked, and rides
/// out daemon restarts: ``BrowseEvent/interrupted(_:)`` when the daemon goes, a new browse
/// every second until it is back, ``BrowseEvent/restored`` then, and `lost` for the services
/// that did not come back within ``SystemBackend/reappearGrace``.
struct SystemBrowser {
    let type: ServiceType
    let interface: NetworkInterface?
    let resolve: Bool
    let continuation: AsyncStream<BrowseEvent>.Continuation

    private enum Input: Sendable {
        case browse(DNSSDBrowseEvent)
        case ended
        case resolved(DiscoveredService, ResolvedService)
        case retry
        case graceOver(Int)
    }

    func run() async {
        let (inputs, input) = AsyncStream<Input>.makeStream()
        var operation: DNSSDOperation<DNSSDBrowseEvent>?
        var forwarder: Task<Void, Never>?
        var retrier: Task<Void, Never>?
        var graceTimer: Task<Void, Never>?
        var interrupted = false
        var restoration = 0
        // Avahi reports an instance once per IP protocol: count the reports, act on the first
        // and the last.
        var counts: [DiscoveredService: Int] = [:]
        var watchers: [DiscoveredService: Task<Void, Never>] = [:]
        var reported: Set<DiscoveredService> = []
        var lastResolved: [DiscoveredService: ResolvedService] = [:]
        var stale: Set<DiscoveredService> = []

        func open() async -> DNSSDError? {
            do {
                let browse = try await DNSSD.browse(
                    type: type.dnssdType(), domain: type.domain.description, interfaceIndex: UInt32(interface?.index ?? 0))
                operation = browse
                forwarder = Task {
                    for await event in browse.events { input.yield(.browse(event)) }
                    input.yield(.ended)
                }
                return nil
            } catch {
                return error
            }
        }
        func startRetrying() {
            guard retrier == nil else { return }
            retrier = Task {
                while !Task.isCancelled {
                    try? await Task.sleep(for: SystemBackend.retryInterval)
                    input.yield(.retry)
                }
            }
        }
        defer {
            operation?.cancel()
            forwarder?.cancel()
            retrier?.cancel()
            graceTimer?.cancel()
            for task in watchers.values { task.cancel() }
        }

        if let error = await open() {
            interrupted = true
            continuation.yield(.interrupted(DiscoveryError(error.description)))
            startRetrying()
        }
        for await event in inputs {
            if Task.isCancelled { break }
            switch event {
            case .browse(.added(let instance, _)):
                let service = DiscoveredService(
                    name: instance.name, type: type, interface: interface ?? networkInterface(index: instance.interfaceIndex))
                counts[service, default: 0] += 1
                guard counts[service] == 1 else { continue }
                stale.remove(service)
                if resolve {
                    watchers[service] = Task {
                        await SystemServiceWatcher(service: service).run { resolved in input.yield(.resolved(service, resolved)) }
                    }
                } else if reported.insert(service).inserted {
                    continuation.yield(.found(service, nil))
                }
            case .browse(.removed(let instance, _)):
                let service = DiscoveredService(
                    name: instance.name, type: type, interface: interface ?? networkInterface(index: instance.interfaceIndex))
                guard let count = counts[service] else { continue }
                if count > 1 {
                    counts[service] = count - 1
                    continue
                }
                counts[service] = nil
                watchers.removeValue(forKey: service)?.cancel()
                lastResolved[service] = nil
                if reported.remove(service) != nil { continuation.yield(.lost(service)) }
            case .browse(.failed(let error)):
                if !interrupted {
                    interrupted = true
                    continuation.yield(.interrupted(DiscoveryError(error.description)))
                }
            case .ended:
                operation = nil
                forwarder = nil
                for task in watchers.values { task.cancel() }
                watchers = [:]
                counts = [:]
                if !interrupted {
                    interrupted = true
                    continuation.yield(.interrupted(DiscoveryError("the DNS-SD daemon ended the browse")))
                }
                startRetrying()
            case .retry:
                guard operation == nil, await open() == nil else { continue }
                retrier?.cancel()
                retrier = nil
                interrupted = false
                continuation.yield(.restored)
                // Whatever was seen before must show up again, or it is gone.
                stale = reported
                restoration += 1
                let current = restoration
                graceTimer?.cancel()
                graceTimer = Task {
                    try? await Task.sleep(for: SystemBackend.reappearGrace)
                    input.yield(.graceOver(current))
                }
            case .graceOver(let current):
                guard current == restoration else { continue }
                for service in stale where counts[service] == nil {
                    reported.remove(service)
                    lastResolved[service] = nil
                    continuation.yield(.lost(service))
                }
                stale = []
            case .resolved(let service, let resolved):
                guard watchers[service] != nil else { continue }
                if reported.insert(service).inserted {
                    continuation.yield(.found(service, resolved))
                } else if lastResolved[service] != resolved {
                    continuation.yield(.updated(service, resolved))
                }
                lastResolved[service] = resolved
            }
        }
    }
}
