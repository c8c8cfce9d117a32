public import DNSWire
public import Logging
public import NearbyBasics
public import UnicastDNSSD

/// How discovery reaches domains other than `local.` (DNS-SD over unicast DNS, RFC 6763 §11).
public struct WideAreaSettings: Sendable {
    /// The DNS servers to ask; nil: the system's (`/etc/resolv.conf`).
    public var servers: [DNSServer]?
    /// Where registrations go; nil: `servers.first` when servers are given, else the zone's
    /// primary (`_dns-update._udp` SRV, else the SOA's MNAME).
    public var updateServer: DNSServer?
    /// The TSIG key registrations are signed with (nil: unsigned, which servers normally refuse).
    public var key: TSIGKey?
    /// The host label registrations put in the domain (default: this machine's name).
    public var hostLabel: String?
    /// TTL of registered records. Short, because a registrant that crashes leaves its records
    /// in the zone (DNS has no leases): browsers drop them once the peer stops answering.
    public var ttl: UInt32 = 30
    /// The resolver configuration (servers, search list, timeout); nil: the system's
    /// (`/etc/resolv.conf`), read when a DNS domain is first used, never for the link alone.
    public var resolver: ResolverConfiguration?
    /// Whether a browse uses DNS Push where the zone offers it (RFC 8765): every change told
    /// as it happens instead of learned by asking again. Opportunistic by default, when a
    /// ``pushTransport`` is given.
    public var push: DNSPushPolicy = .opportunistic
    /// What DNS Push runs on: `TLSPushTransport()` from the DNSPushTLS module (TLS, as RFC
    /// 8765 asks). Nil (the default): browses in DNS zones poll, and a program that only
    /// discovers compiles no TLS library. Nearby's front door and the `nearby` tool give it.
    public var pushTransport: (any DNSPushTransport)?

    public init(
        servers: [DNSServer]? = nil, key: TSIGKey? = nil, updateServer: DNSServer? = nil, hostLabel: String? = nil, ttl: UInt32 = 30,
        resolver: ResolverConfiguration? = nil
    ) {
        self.servers = servers
        self.key = key
        self.updateServer = updateServer
        self.hostLabel = hostLabel
        self.ttl = ttl
        self.resolver = resolver
    }
}

/// DNS-SD over unicast DNS: browse, resolve and service types by asking DNS servers, and
/// registration by signed DNS UPDATE. Works in any domain but `local.`.
public struct UnicastBackend: DiscoveryBackend {
    public let settings: WideAreaSettings
    let logger: Logger
    /// The client and the resolver configuration, made on first use.
    private let made = Locked<(DNSClient, ResolverConfiguration)?>(nil)
    private let registrations = Locked<[ObjectIdentifier: DNSRegistration]>([:])

    /// Answers come one question at a time (SRV, TXT, A, AAAA): a changed resolution waits
    /// this long for the rest before it is reported.
    static let settleTime: Duration = .milliseconds(30)

    public init(settings: WideAreaSettings = WideAreaSettings(), logger: Logger = NearbyDiscovery.silentLogger) {
        self.settings = settings
        self.logger = logger
    }

    /// The configuration in use: the settings', else the system's, read once.
    var resolver: ResolverConfiguration { setUp().1 }

    var client: DNSClient { setUp().0 }

    private func setUp() -> (DNSClient, ResolverConfiguration) {
        made.withLockedValue { made in
            if let made { return made }
            let resolver = settings.resolver ?? .system()
            let pair = (DNSClient(configuration: resolver, servers: settings.servers, logger: logger), resolver)
            made = pair
            return pair
        }
    }

    public func advertise(_ registration: ServiceRegistration) async throws -> Advertisement {
        let domain = registration.type.domain
        guard domain != ServiceType.localDomain else {
            throw DiscoveryError(.unsupported, "local. is the link's domain: advertise there with mDNS, not DNS UPDATE")
        }
        let made: DNSRegistration
        do {
            made = try await DNSRegistration.register(
                registration, key: settings.key, client: client, server: settings.updateServer ?? settings.servers?.first,
                hostLabel: settings.hostLabel, ttl: registration.ttl ?? settings.ttl)
        } catch {
            throw DiscoveryError(Self.code(error), "cannot register \"\(registration.instance)\" in \(domain.description.dropLast()): \(error.message)")
        }
        let id = ObjectIdentifier(made)
        registrations.withLockedValue { $0[id] = made }
        // Pulled (unfolding): nothing waits here; the registration's own stream keeps the newest 8.
        let events = AsyncStream<AdvertisementEvent> {
            var iterator = made.events.makeAsyncIterator()
            while let event = await iterator.next() {
                switch event {
                case .renamed(let name): return .renamed(name)
                case .interrupted(_, let error):
                    return .interrupted(DiscoveryError(.transportFailure, "the registration in \(domain.description.dropLast()) cannot be refreshed: \(error.message)"))
                case .restored(let name): return .restored(name)
                case .registered, .failed, .withdrawn: continue
                }
            }
            return nil
        }
        return Advertisement(
            name: made.name, requestedName: registration.instance, type: registration.type, port: registration.port, events: events,
            update: { info in made.update(info: info) },
            cancel: { [registrations] in
                await made.withdraw()
                registrations.withLockedValue { $0[id] = nil }
            })
    }

    static func code(_ error: UnicastDNSError) -> DiscoveryError.Code {
        switch error.code {
        case .unreachable: .timeout
        case .invalidInput: .invalidInput
        case .transportFailure: .transportFailure
        default: .daemonFailure
        }
    }

    public func browse(_ type: ServiceType, resolve: Bool) -> EventStream<BrowseEvent> {
        DiscoveryDriver.browse(
            type, resolve: resolve, settleTime: Self.settleTime, source: UnicastObservationSource(
                client: client, browsing: type.domainName, push: settings.pushTransport.map { (settings.push, $0) }),
            logger: logger)
    }

    public func resolve(_ instance: ServiceInstanceName, timeout: Duration) async -> ResolvedService? {
        await DiscoveryDriver.resolve(
            instance, timeout: timeout, settleTime: Self.settleTime, source: UnicastObservationSource(client: client, browsing: nil),
            logger: logger)
    }

    /// Service types registered in `domain` (`_services._dns-sd._udp.<domain>`), as they appear.
    public func serviceTypes(in domain: DomainName) -> EventStream<ServiceType> {
        let client = client
        return EventStream(buffer: ServiceType.eachOnce) { types in
            let source = UnicastObservationSource(client: client, browsing: ServiceType.enumerationName(in: domain), listsTypes: true)
            let (observed, sink) = EventStream<[DiscoveryObservation]>.makeStream(buffer: DiscoveryObservation.buffer())
            await source.start(sink: ObservationSink { _ = sink.yield($0) })
            await withTaskGroup(of: Void.self) { group in
                group.addTask { await source.run() }
                var seen: Set<ServiceType> = []
                for await batch in observed {
                    for case .instanceAdded(let name, _) in batch {
                        if let type = try? ServiceType(domainName: name), seen.insert(type).inserted, !types.yield(type) { sink.finish() }
                    }
                }
                group.cancelAll()
            }
            await source.stop()
        }
    }

    /// A unicast backend has no default domain: use ``serviceTypes(in:)``.
    public func serviceTypes() -> EventStream<ServiceType> {
        .finished
    }

    public func hostName() async -> DomainName {
        (try? DomainName(parsing: settings.hostLabel ?? "localhost")) ?? .root
    }

    public func shutdown() async {
        let all = registrations.withLockedValue { registrations in
            defer { registrations = [:] }
            return Array(registrations.values)
        }
        await withTaskGroup(of: Void.self) { group in
            for registration in all { group.addTask { await registration.withdraw() } }
        }
    }

    public func addresses(of host: DomainName, timeout: Duration) async -> [IPAddress] {
        await DiscoveryDriver.addresses(
            of: host, timeout: timeout, settleTime: Self.settleTime, source: UnicastObservationSource(client: client, browsing: nil),
            logger: logger)
    }

    /// The domains the DNS recommends (RFC 6763 §11), starting from the search list, `domains`
    /// and this host's IPv4 subnets.
    public func recommendedDomains(adding domains: [DomainName] = []) async -> [DomainEnumeration.Recommendation] {
        let starting = DomainEnumeration.startingDomains(
            searchList: resolver.searchDomains, domains: domains, subnets: DomainEnumeration.localSubnets())
        return await DomainEnumeration.recommendations(from: starting, client: client)
    }
}
