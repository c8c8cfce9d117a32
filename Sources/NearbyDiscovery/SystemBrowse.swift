import DNSWire
import Logging
import NearbyBasics
import NetworkPlatform
import SystemDNSSD

/// The interface with this index, named as the kernel names it.
func networkInterface(index: UInt32) -> NetworkInterface {
    NetworkInterface(index: Int(index), name: NetworkPlatform.interfaceName(index: Int(index)))
}

/// Observations from the system daemon through dns_sd. A browse is `DNSServiceBrowse`;
/// watching a service is `DNSServiceResolve` (host, port, TXT, interface) plus a TXT record
/// query for later TXT changes; watching a host is A and AAAA record queries (Avahi's library
/// has no `DNSServiceGetAddrInfo`). When the browse fails or ends (the daemon went away) it
/// says ``DiscoveryObservation/interrupted(_:)`` and opens a new browse every
/// ``SystemBackend/retryInterval`` until one succeeds: ``DiscoveryObservation/restored``.
actor SystemObservationSource: ObservationSource {
    /// The type browsed (nil for a host look-up).
    let type: ServiceType?
    /// The interface the backend is limited to; nil for all.
    let interface: NetworkInterface?
    /// Browse the type (false: a resolve by name).
    let browses: Bool
    private var sink: ObservationSink?
    private var browse: DNSSDOperation<DNSSDBrowseEvent>?
    /// A retry loop runs (the browse failed or ended, and has not been opened again).
    private var retrying = false
    private var stopped = false
    private var operations: [DiscoveryWatch: [@Sendable () -> Void]] = [:]
    /// The forwarders of the daemon's answers and the retry loop, run by ``run()``.
    private let children = ChildTasks()

    let logger: Logger

    init(type: ServiceType?, interface: NetworkInterface?, browses: Bool, logger: Logger = NearbyDiscovery.silentLogger) {
        self.type = type
        self.interface = interface
        self.browses = browses
        self.logger = logger
    }

    /// Runs a dns_sd call; a failure is logged (the daemon said no) and gives nil.
    private func attempt<Event>(_ what: String, _ call: () async throws -> DNSSDOperation<Event>) async -> DNSSDOperation<Event>? {
        do {
            return try await call()
        } catch {
            logger.warning("\(what): \(error)")
            return nil
        }
    }

    private var interfaceIndex: UInt32 { UInt32(interface?.index ?? 0) }

    nonisolated func run() async {
        await children.run()
    }

    func start(sink: ObservationSink) async {
        self.sink = sink
        guard browses else { return }
        if let error = await openBrowse() {
            sink.deliver([.interrupted(DiscoveryError(error))])
            startRetrying()
        }
    }

    /// Opens the dns_sd browse; its end (the daemon went away) starts the retries.
    private func openBrowse() async -> DNSSDError? {
        guard let sink, let type else { return nil }
        do {
            let operation = try await DNSSD.browse(type: type.dnssdType(), domain: type.domain.description, interfaceIndex: interfaceIndex)
            browse = operation
            let type = type.baseType
            let fixed = interface
            children.spawn { [weak self] in
                for await event in operation.events {
                    switch event {
                    case .added(let instance, _), .removed(let instance, _):
                        guard let name = try? ServiceInstanceName(instance.name, type: type).domainName else { continue }
                        let on = fixed ?? networkInterface(index: instance.interfaceIndex)
                        if case .added = event { sink.deliver([.instanceAdded(name, on)]) } else { sink.deliver([.instanceRemoved(name, on)]) }
                    case .failed(let error):
                        sink.deliver([.interrupted(DiscoveryError(error))])
                    }
                }
                await self?.browseEnded(operation)
            }
            return nil
        } catch {
            return error
        }
    }

    private func browseEnded(_ operation: DNSSDOperation<DNSSDBrowseEvent>) {
        guard browse === operation else { return }
        browse = nil
        sink?.deliver([.interrupted(DiscoveryError(.daemonNotRunning, "the DNS-SD daemon ended the browse"))])
        startRetrying()
    }

    private func startRetrying() {
        guard !retrying, !stopped else { return }
        retrying = true
        children.spawn { [weak self] in
            while !Task.isCancelled {
                try? await Task.sleep(for: SystemBackend.retryInterval)
                guard !Task.isCancelled, let self else { return }
                if await self.retryBrowse() { return }
            }
        }
    }

    /// One attempt to browse again; true once it worked.
    private func retryBrowse() async -> Bool {
        guard !stopped else { return true }
        guard browse == nil, await openBrowse() == nil else { return browse != nil }
        retrying = false
        sink?.deliver([.restored])
        return true
    }

    func watch(_ watch: DiscoveryWatch) async {
        switch watch {
        case .service(let name, let on):
            guard let instance = try? ServiceInstanceName(domainName: name) else { return }
            let base = instance.type.baseType
            let index = UInt32(on?.index ?? interface?.index ?? 0)
            if let resolver = await attempt("cannot resolve \(name)", {
                try await DNSSD.resolve(name: instance.instance, type: base.description, domain: base.domain.description, interfaceIndex: index)
            }) {
                follow(watch, resolver) { (previous: Resolved?, event: DNSSDResolveEvent) -> (Resolved?, [DiscoveryObservation]) in
                    // Each answer replaces the last one: say what left and what came.
                    guard case .resolved(let resolution) = event,
                        let host = try? DomainName(parsing: resolution.host)
                    else { return (previous, []) }
                    let at = resolution.interfaceIndex != 0 ? networkInterface(index: resolution.interfaceIndex)
                        : (on ?? NetworkInterface(index: 0, name: ""))
                    let now = Resolved(interface: at, srv: SRVData(port: resolution.port, target: host), txt: TXTData(rdata: resolution.txt) ?? .empty)
                    var observations: [DiscoveryObservation] = []
                    if let previous {
                        if previous.srv != now.srv || previous.interface != now.interface {
                            observations.append(.srvRemoved(name, previous.interface, previous.srv))
                        }
                        if previous.txt != now.txt || previous.interface != now.interface {
                            observations.append(.txtRemoved(name, previous.interface, previous.txt))
                        }
                    }
                    if previous?.srv != now.srv || previous?.interface != now.interface {
                        observations.append(.srvAdded(name, now.interface, now.srv))
                    }
                    if previous?.txt != now.txt || previous?.interface != now.interface {
                        observations.append(.txtAdded(name, now.interface, now.txt))
                    }
                    return (now, observations)
                }
            }
            if let txtQuery = await attempt("cannot follow the TXT record of \(name)", {
                try await DNSSD.queryRecord(name: name.description, type: DNSSD.typeTXT, interfaceIndex: index)
            }) {
                follow(watch, txtQuery) { (_: Int?, event) in
                    switch event {
                    case .added(let record, _):
                        (nil, TXTData(rdata: record.rdata).map { [.txtAdded(name, Self.interface(of: record, or: on), $0)] } ?? [])
                    case .removed(let record, _):
                        (nil, TXTData(rdata: record.rdata).map { [.txtRemoved(name, Self.interface(of: record, or: on), $0)] } ?? [])
                    case .failed: (nil, [])
                    }
                }
            }
        case .host(let host, let on):
            let index = UInt32(on?.index ?? interface?.index ?? 0)
            for recordType in [DNSSD.typeA, DNSSD.typeAAAA] {
                guard let query = await attempt("cannot ask for the addresses of \(host)", {
                    try await DNSSD.queryRecord(name: host.description, type: recordType, interfaceIndex: index)
                }) else { continue }
                follow(watch, query) { (_: Int?, event) in
                    switch event {
                    case .added(let record, _):
                        let at = Self.interface(of: record, or: on)
                        return (nil, Self.address(of: record, on: at).map { [.addressAdded(host, at, $0)] } ?? [])
                    case .removed(let record, _):
                        let at = Self.interface(of: record, or: on)
                        return (nil, Self.address(of: record, on: at).map { [.addressRemoved(host, at, $0)] } ?? [])
                    case .failed:
                        return (nil, [])
                    }
                }
            }
        }
    }

    func unwatch(_ watch: DiscoveryWatch) async {
        for cancel in operations.removeValue(forKey: watch) ?? [] { cancel() }
    }

    func stop() async {
        stopped = true
        children.finish()
        browse?.cancel()
        browse = nil
        for watch in Array(operations.keys) { await unwatch(watch) }
    }

    private struct Resolved: Sendable {
        var interface: NetworkInterface
        var srv: SRVData
        var txt: TXTData
    }

    /// Forwards an operation's events as observations, through a fold that may keep state.
    private func follow<Event: Sendable, State: Sendable>(
        _ watch: DiscoveryWatch, _ operation: DNSSDOperation<Event>,
        _ translate: @escaping @Sendable (State?, Event) -> (State?, [DiscoveryObservation])
    ) {
        guard let sink else { return }
        operations[watch, default: []].append { operation.cancel() }
        // Cancelling the operation (unwatch, stop) ends its events, and with them this child.
        children.spawn {
            var state: State?
            for await event in operation.events {
                let (next, observations) = translate(state, event)
                state = next
                if !observations.isEmpty { sink.deliver(observations) }
            }
        }
    }

    private static func interface(of record: DNSSDRecord, or fallback: NetworkInterface?) -> NetworkInterface {
        record.interfaceIndex != 0 ? networkInterface(index: record.interfaceIndex) : (fallback ?? NetworkInterface(index: 0, name: ""))
    }

    private static func address(of record: DNSSDRecord, on interface: NetworkInterface) -> IPAddress? {
        switch (record.type, record.rdata.count) {
        case (DNSSD.typeA, 4), (DNSSD.typeAAAA, 16):
            return IPAddress(bytes: record.rdata, linkScope: interface.index)
        default:
            return nil  // malformed data from the daemon is ignored, never trusted
        }
    }
}
