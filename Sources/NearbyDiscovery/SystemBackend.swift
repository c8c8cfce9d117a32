public import DNSWire
public import NearbyBasics
public import Logging
import NetworkPlatform
import SystemDNSSD

/// DNS-SD through the system's daemon (avahi-daemon on Linux, over its dns_sd compatibility
/// library): the daemon owns mDNS for the whole host, so several programs share one responder,
/// one cache and one host name.
///
/// When the daemon goes away, advertisements and browses report it (``AdvertisementEvent/interrupted(_:)``,
/// ``BrowseEvent/interrupted(_:)``) and come back by themselves once it returns: they try again
/// every ``retryInterval``.
public struct SystemBackend: DiscoveryBackend {
    /// The interface to work on; nil for all.
    let interface: NetworkInterface?
    let live: LiveAdvertisements
    let logger: Logger

    /// How often a lost operation is tried again while the daemon is away.
    public static let retryInterval: Duration = .seconds(1)
    /// How long after the daemon returns a browse waits for a service to reappear before
    /// reporting it lost.
    public static let reappearGrace: Duration = .seconds(3)

    /// True when a DNS-SD daemon answers (checked without sending anything onto the network).
    public static func daemonAnswers() async -> Bool {
        do {
            try await DNSSD.checkDaemon()
            return true
        } catch {
            return false
        }
    }

    /// Connects to the daemon.
    /// - Parameters:
    ///   - interfaces: nil for all interfaces, or one interface name.
    ///   - logger: where the backend says what it does; silent by default.
    /// - Throws: ``DiscoveryError`` naming what to start when no daemon answers, or what is wrong
    ///   with `interfaces`.
    public static func start(interfaces: [String]? = nil, logger: Logger = NearbyDiscovery.silentLogger) async throws -> SystemBackend {
        var chosen: NetworkInterface?
        if let interfaces, !interfaces.isEmpty {
            guard interfaces.count == 1 else {
                throw DiscoveryError(.invalidInput, "the system backend works on all interfaces or on one; got \(interfaces.count) (\(interfaces.joined(separator: ", ")))")
            }
            guard let index = NetworkPlatform.interfaceIndex(named: interfaces[0]) else {
                throw DiscoveryError(.invalidInput, "no network interface named \"\(interfaces[0])\"")
            }
            chosen = NetworkInterface(index: index, name: interfaces[0])
        }
        do {
            try await DNSSD.checkDaemon()
        } catch {
            throw DiscoveryError(error)
        }
        return SystemBackend(interface: chosen, live: LiveAdvertisements(), logger: logger)
    }

    var interfaceIndex: UInt32 { UInt32(interface?.index ?? 0) }

    public func hostName() async -> DomainName {
        // dns_sd has no call for the daemon's host name; the daemon normally uses the machine's.
        (try? DomainName(labels: [NetworkPlatform.hostLabel() ?? "localhost", "local"])) ?? .root
    }

    public func advertise(_ registration: ServiceRegistration) async throws -> Advertisement {
        if registration.ttl != nil {
            throw DiscoveryError(.unsupported, "the system backend cannot set TTLs (the daemon chooses them); use the embedded backend for a TTL")
        }
        let advertiser = SystemAdvertiser(registration: registration, interfaceIndex: interfaceIndex)
        let name: String
        do {
            name = try await advertiser.start()
        } catch {
            throw DiscoveryError(error, context: "cannot advertise \"\(registration.instance)\"")
        }
        await live.add(advertiser)
        return Advertisement(
            name: name, requestedName: registration.instance, type: registration.type, port: registration.port,
            events: advertiser.events,
            update: { info in await advertiser.update(info) },
            cancel: { [live] in
                await advertiser.cancel()
                await live.remove(advertiser)
            })
    }

    /// dns_sd reports a response's parts through separate callbacks: let them gather this long
    /// before a changed resolution is reported.
    static let settleTime: Duration = .milliseconds(30)

    public func browse(_ type: ServiceType, resolve: Bool) -> EventStream<BrowseEvent> {
        DiscoveryDriver.browse(
            type, resolve: resolve, settleTime: Self.settleTime,
            source: SystemObservationSource(type: type, interface: interface, browses: true, logger: logger), logger: logger)
    }

    public func resolve(_ instance: ServiceInstanceName, timeout: Duration) async -> ResolvedService? {
        await DiscoveryDriver.resolve(
            instance, timeout: timeout, settleTime: Self.settleTime,
            source: SystemObservationSource(type: instance.type, interface: interface, browses: false, logger: logger), logger: logger)
    }

    public func addresses(of host: DomainName, timeout: Duration) async -> [IPAddress] {
        await DiscoveryDriver.addresses(
            of: host, timeout: timeout, settleTime: Self.settleTime,
            source: SystemObservationSource(type: nil, interface: interface, browses: false, logger: logger), logger: logger)
    }

    public func serviceTypes() -> EventStream<ServiceType> {
        // The producer sets up the query before the first element and cancels it when the
        // consumer stops listening.
        EventStream(buffer: ServiceType.eachOnce) { [interfaceIndex] types in
            guard let query = try? await DNSSD.queryRecord(
                name: ServiceType.enumerationName().description, type: DNSSD.typePTR, interfaceIndex: interfaceIndex)
            else { return }
            var seen: Set<ServiceType> = []
            for await event in query.events {
                guard case .added(let record, _) = event, let target = try? DomainName(wire: record.rdata),
                    let type = try? ServiceType(domainName: target), seen.insert(type).inserted
                else { continue }
                if !types.yield(type) { break }
            }
            query.cancel()
        }
    }

    public func shutdown() async {
        await live.cancelAll()
    }
}

/// The advertisements a ``SystemBackend`` has live, withdrawn together by `shutdown()`.
actor LiveAdvertisements {
    private var advertisers: [ObjectIdentifier: SystemAdvertiser] = [:]

    func add(_ advertiser: SystemAdvertiser) { advertisers[ObjectIdentifier(advertiser)] = advertiser }
    func remove(_ advertiser: SystemAdvertiser) { advertisers[ObjectIdentifier(advertiser)] = nil }

    func cancelAll() async {
        let all = advertisers.values
        advertisers = [:]
        for advertiser in all { await advertiser.cancel() }
    }
}

extension ServiceType {
    /// The type as dns_sd takes it: `_app._tcp`, with subtypes after commas (`_app._tcp,_sub`).
    func dnssdType(subtypes: [String] = []) -> String {
        ([baseType.description] + subtypes + (subtype.map { [$0] } ?? [])).joined(separator: ",")
    }
}

/// One registration with the daemon, kept alive across daemon restarts.
actor SystemAdvertiser {
    let registration: ServiceRegistration
    let interfaceIndex: UInt32
    nonisolated let events: AsyncStream<AdvertisementEvent>
    private let continuation: AsyncStream<AdvertisementEvent>.Continuation
    /// The name last won (asked for again after a daemon restart).
    private var name: String
    private var txt: [UInt8]
    private var operation: DNSSDOperation<DNSSDRegisterEvent>?
    private var supervisor: Task<Void, Never>?
    private var cancelled = false

    init(registration: ServiceRegistration, interfaceIndex: UInt32) {
        self.registration = registration
        self.interfaceIndex = interfaceIndex
        self.name = registration.instance
        self.txt = registration.txt.rdata
        (events, continuation) = AsyncStream<AdvertisementEvent>.makeStream(bufferingPolicy: .bufferingNewest(8))
    }

    /// Registers and returns the name won; then keeps watching in the background.
    func start() async throws(DNSSDError) -> String {
        // One outcome, yielded once.
        let (outcomes, outcome) = AsyncStream<Result<String, DNSSDError>>.makeStream(bufferingPolicy: .bufferingNewest(1))
        // A task of its own: it lives as long as the advertisement (registering again after
        // every daemon restart), which is returned to a caller with no task group to run it in;
        // cancel() ends it.
        supervisor = Task { await self.supervise(firstOutcome: outcome) }
        for await result in outcomes { return try result.get() }
        throw DNSSDError(code: -65537, operation: "DNSServiceRegister")
    }

    /// Registers, reports what the daemon says, and registers again (under the name last won)
    /// whenever the daemon goes away, until cancelled. The first attempt's outcome goes to
    /// `firstOutcome`; if it fails, the supervisor ends there.
    private func supervise(firstOutcome: AsyncStream<Result<String, DNSSDError>>.Continuation) async {
        var first: AsyncStream<Result<String, DNSSDError>>.Continuation? = firstOutcome
        func reportFirst(_ result: Result<String, DNSSDError>) {
            first?.yield(result)
            first?.finish()
            first = nil
        }
        // Ending without an outcome (cancelled first) must not leave start() waiting.
        defer { first?.finish() }
        while !cancelled {
            do {
                let operation = try await DNSSD.register(
                    name: name, type: registration.type.dnssdType(subtypes: registration.subtypes), port: registration.port,
                    txt: txt, interfaceIndex: interfaceIndex)
                self.operation = operation
                var registered = false
                for await event in operation.events {
                    switch event {
                    case .registered(let won, _, _) where first != nil:
                        name = won
                        registered = true
                        reportFirst(.success(won))
                    case .registered(let won, _, _) where !registered:
                        name = won
                        registered = true
                        continuation.yield(.restored(won))
                    case .registered(let won, _, _):
                        if won != name {
                            name = won
                            continuation.yield(.renamed(won))
                        }
                    case .failed(let error):
                        if first != nil { return reportFirst(.failure(error)) }
                        if registered && !cancelled { continuation.yield(.interrupted(DiscoveryError(error))) }
                    }
                }
                self.operation = nil
            } catch {
                if first != nil { return reportFirst(.failure(error)) }
            }
            // The daemon went away: try again until it is back.
            if cancelled || Task.isCancelled { return }
            try? await Task.sleep(for: SystemBackend.retryInterval)
        }
    }

    func update(_ info: DiscoveryInfo) async {
        txt = info.rdata
        if let operation { try? await DNSSD.updateTXT(operation, txt: txt) }
    }

    func cancel() async {
        cancelled = true
        supervisor?.cancel()
        await operation?.cancelAndWait()
        operation = nil
        continuation.finish()
    }
}
