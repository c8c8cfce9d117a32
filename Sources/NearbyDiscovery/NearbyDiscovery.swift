public import NearbyBasics
public import DNSWire
public import Logging
import MulticastDNS
import SystemDNSSD

/// A service instance seen on the network.
public struct DiscoveredService: Hashable, Sendable, CustomStringConvertible {
    /// The instance name as people read it, e.g. `Build Box`.
    public var name: String
    public var type: ServiceType
    public var domain: DomainName { type.domain }
    /// The interface it was seen on.
    public var interface: NetworkInterface

    public init(name: String, type: ServiceType, interface: NetworkInterface) {
        self.name = name
        self.type = type
        self.interface = interface
    }

    public var description: String { "\(name).\(type).\(domain)" }

    var instanceName: DomainName {
        (try? ServiceInstanceName(name, type: type).domainName) ?? .root
    }
}

/// Where a service runs and what it says about itself.
public struct ResolvedService: Hashable, Sendable {
    public var service: DiscoveredService
    /// The host, e.g. `buildbox.local.`.
    public var host: DomainName
    public var port: UInt16
    /// IPv4 first, then IPv6; link-local IPv6 addresses carry the interface.
    public var addresses: [IPAddress]
    public var info: DiscoveryInfo
}

extension OpenKind where Owner == DiscoveryError {
    /// The system's DNS-SD daemon (avahi-daemon, mDNSResponder) is not running or not reachable.
    public static var daemonNotRunning: Self { Self("daemonNotRunning") }
    /// The system backend's library is not installed (on Linux, Avahi's `libdns_sd.so.1` from
    /// libavahi-compat-libdnssd1); the embedded backend needs nothing.
    public static var libraryMissing: Self { Self("libraryMissing") }
    /// The daemon refused or failed an operation (a name conflict it could not settle, a bad parameter, …).
    public static var daemonFailure: Self { Self("daemonFailure") }
    /// Nothing answered in time.
    public static var timeout: Self { Self("timeout") }
    /// The caller's input is unusable (an interface that does not exist, too many interfaces, …).
    public static var invalidInput: Self { Self("invalidInput") }
    /// The chosen backend cannot do what was asked (a TTL or a host name on the system backend).
    public static var unsupported: Self { Self("unsupported") }
    /// The network could not be used: UDP port 5353 could not be opened, a socket failed.
    public static var transportFailure: Self { Self("transportFailure") }
    /// Discovery was shut down before the operation finished.
    public static var stopped: Self { Self("stopped") }
}

/// What a browse reports.
///
/// Events are closed enums throughout the package (browse, advertisement, registration,
/// listener and broker events): a `switch` is exhaustive, what goes with each case needs no
/// unwrapping, and when a version adds a case the compiler shows every switch that must handle
/// it (a new case is a breaking change, and is released as one under semantic versioning). Errors
/// are the other way round: their codes are an open set (``DiscoveryError/Code``), because code
/// that handles errors picks out a few and passes the rest on.
///
/// ```swift
/// switch event {
/// case .found(let service, let resolved), .updated(let service, let resolved):
///     print(service.name, resolved?.port ?? 0)
/// case .lost(let service): print("gone", service.name)
/// case .interrupted(let error): print("cannot see the network:", error)
/// case .restored: print("can see the network again")
/// }
/// ```
public enum BrowseEvent: Sendable, Equatable, CustomStringConvertible {
    /// A service appeared, with where it runs and what it says when the browse resolves.
    case found(DiscoveredService, ResolvedService?)
    /// A resolved service changed its TXT, port, host or addresses.
    case updated(DiscoveredService, ResolvedService?)
    /// A service left: goodbye, expiry, or failure detection.
    case lost(DiscoveredService)
    /// The browse cannot see the network for now (the system daemon stopped). It carries on by
    /// itself: `restored` follows when it can see again.
    case interrupted(DiscoveryError)
    /// The browse sees the network again. Services still there are not reported again; those
    /// that left meanwhile are reported lost a few seconds later.
    case restored

    /// The service the event is about (nil for `interrupted` and `restored`).
    public var service: DiscoveredService? {
        switch self {
        case .found(let service, _), .updated(let service, _), .lost(let service): service
        case .interrupted, .restored: nil
        }
    }

    /// Where the service runs and what it says (`found` and `updated`, when the browse resolves).
    public var resolved: ResolvedService? {
        switch self {
        case .found(_, let resolved), .updated(_, let resolved): resolved
        case .lost, .interrupted, .restored: nil
        }
    }

    /// The case's name: `found`, `updated`, `lost`, `interrupted` or `restored` (as
    /// `nearby browse --json` writes it).
    public var caseName: String {
        switch self {
        case .found: "found"
        case .updated: "updated"
        case .lost: "lost"
        case .interrupted: "interrupted"
        case .restored: "restored"
        }
    }

    public var description: String {
        var text = caseName
        if let service { text += " \(service)" }
        if let resolved { text += " at \(resolved.host):\(resolved.port) \(resolved.addresses) \(resolved.info)" }
        if case .interrupted(let error) = self { text += ": \(error)" }
        return text
    }
}

/// What happens to an advertisement after its name was first won. A closed enum, like every
/// event of the package (see ``BrowseEvent``).
public enum AdvertisementEvent: Sendable, Equatable, CustomStringConvertible {
    /// A conflict arose and the service now goes by this name.
    case renamed(String)
    /// The service is off the network for now (the system daemon stopped, or its DNS
    /// registration cannot be refreshed); it is published again by itself when it can be.
    case interrupted(DiscoveryError)
    /// The service is published again, under this name.
    case restored(String)

    /// The case's name: `renamed`, `interrupted` or `restored` (as `nearby advertise --json`
    /// writes it).
    public var caseName: String {
        switch self {
        case .renamed: "renamed"
        case .interrupted: "interrupted"
        case .restored: "restored"
        }
    }

    public var description: String {
        switch self {
        case .renamed(let name), .restored(let name): "\(caseName) \"\(name)\""
        case .interrupted(let error): "interrupted: \(error)"
        }
    }
}

/// Why discovery failed: a ``code`` to switch on and a message a person can act on.
public struct DiscoveryError: Error, Sendable, Equatable, CustomStringConvertible {
    /// What kind of failure this is: `.daemonNotRunning`, `.timeout`, …
    /// New codes may be added; switch with a `default`.
    public typealias Code = OpenKind<DiscoveryError>

    /// What kind of failure this is.
    public var code: Code
    /// What happened and what to do, in words.
    public var message: String
    public var description: String { message }

    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    /// A failure of the system's daemon, classified by its dns_sd code.
    init(_ error: DNSSDError, context: String? = nil) {
        self.init(error.libraryMissing ? .libraryMissing : error.daemonUnavailable ? .daemonNotRunning : .daemonFailure,
                  context.map { "\($0): \(error.description)" } ?? error.description)
    }
}

/// A published service. Cancelling (or shutting the discovery down) sends goodbyes.
public final class Advertisement: Sendable {
    /// The name actually won, e.g. `Build Box (2)` after a conflict.
    public let name: String
    /// The name asked for.
    public let requestedName: String
    public let type: ServiceType
    public let port: UInt16
    /// Renames, interruptions and restorations after the name was first won, as they happen.
    /// They are rare (a conflict, the daemon going away); for a program that does not read
    /// them, at most the newest 8 wait, the last one saying where the service stands.
    public let events: AsyncStream<AdvertisementEvent>
    private let updateInfo: @Sendable (DiscoveryInfo) async -> Void
    private let withdraw: @Sendable () async -> Void

    /// Made by a backend: `update` replaces the TXT record, `cancel` withdraws with goodbyes.
    /// (Package-only: apps receive advertisements, they do not make them.)
    package init(
        name: String, requestedName: String, type: ServiceType, port: UInt16, events: AsyncStream<AdvertisementEvent>,
        update: @escaping @Sendable (DiscoveryInfo) async -> Void, cancel: @escaping @Sendable () async -> Void
    ) {
        self.name = name
        self.requestedName = requestedName
        self.type = type
        self.port = port
        self.events = events
        self.updateInfo = update
        self.withdraw = cancel
    }

    /// Replaces the TXT discovery info and announces it.
    public func update(info: DiscoveryInfo) async {
        await updateInfo(info)
    }

    /// Withdraws the service with goodbyes.
    public func cancel() async {
        await withdraw()
    }
}

/// A way of doing DNS-SD. ``NearbyDiscovery`` checks its input and hands the work to one:
/// the embedded mDNS engine (``EmbeddedBackend``) or the system's daemon (``SystemBackend``).
public protocol DiscoveryBackend: Sendable {
    /// Publishes a service; returns once its name is won.
    func advertise(_ registration: ServiceRegistration) async throws -> Advertisement
    /// Found / updated / lost events for a type.
    func browse(_ type: ServiceType, resolve: Bool) -> EventStream<BrowseEvent>
    /// One service's host, port, addresses and TXT; nil when nothing answers in time.
    func resolve(_ instance: ServiceInstanceName, timeout: Duration) async -> ResolvedService?
    /// Service types on the network, each once.
    func serviceTypes() -> EventStream<ServiceType>
    /// The host name this machine answers to.
    func hostName() async -> DomainName
    /// Withdraws everything with goodbyes and releases the network.
    func shutdown() async
    /// The addresses of a host such as `buildbox.local.` (A and AAAA records over mDNS),
    /// IPv4 first; empty when nothing answers within `timeout`.
    func addresses(of host: DomainName, timeout: Duration) async -> [IPAddress]
    /// The backend's own long-running work, as children of this call, until ``shutdown()``
    /// (the embedded engine's receiver, interface watch and timekeeper).
    func run() async
}

extension DiscoveryBackend {
    /// Backends written before host look-ups existed find no addresses.
    public func addresses(of host: DomainName, timeout: Duration) async -> [IPAddress] { [] }
    /// Backends whose work runs elsewhere (the daemon and its dns_sd thread, requests to DNS
    /// servers as they are made) have none to run.
    public func run() async {}
}

/// Which DNS-SD implementation does the work.
public enum BackendChoice: String, Sendable, CaseIterable {
    /// Nearby's own mDNS engine: no daemon needed.
    case embedded
    /// The system's daemon (avahi-daemon on Linux) through dns_sd: one responder per host.
    case system
    /// The system daemon when one answers, else the embedded engine.
    case automatic = "auto"
}

/// Advertise, browse and resolve DNS-SD services: over mDNS on the link (the domain `local.`),
/// and over unicast DNS in any other domain (RFC 6763 §11), with the same calls and events.
///
/// ```swift
/// let discovery = try await NearbyDiscovery.start()
/// let ad = try await discovery.advertise("Build Box", type: try ServiceType(parsing: "_openagents._tcp"), port: 9099)
/// for await event in await discovery.browse(ad.type) { print(event) }
/// ```
public final class NearbyDiscovery: Sendable {
    /// Where the link's work is done (`local.`); the wide-area backend when the link is not used.
    public let backend: any DiscoveryBackend
    /// DNS-SD over unicast DNS, for every domain but `local.`.
    public let wideArea: UnicastBackend
    /// False when discovery was started without the link (``start(backend:hostName:interfaces:logger:wideArea:multicast:)``
    /// with `multicast: false`): `local.` then finds nothing.
    public let usesLink: Bool

    /// Discovery over a backend of your choice (and unicast DNS with the system's resolvers).
    public init(backend: any DiscoveryBackend, wideArea: UnicastBackend? = nil) {
        self.backend = backend
        self.wideArea = wideArea ?? (backend as? UnicastBackend) ?? UnicastBackend()
        self.usesLink = !(backend is UnicastBackend)
    }

    /// Starts discovery on the chosen backend.
    /// - Parameters:
    ///   - backend: `.automatic` (the default) uses the system daemon when one answers and
    ///     `hostName` is not set (only the embedded engine can publish its own host name), else
    ///     the embedded engine.
    ///   - hostName: host label to publish (embedded only; default: this machine's name).
    ///   - interfaces: interface names to use (default: every multicast-capable one but
    ///     loopback). The system backend takes at most one.
    ///   - logger: where the library says what it does and what it throws away (drops,
    ///     failures, why a service does not resolve); silent by default.
    ///   - wideArea: servers, key and TTL for domains other than `local.` (default: the
    ///     system's resolvers, no key).
    ///   - multicast: false to leave the link alone (only unicast DNS domains are used), e.g.
    ///     on a VPN where multicast goes nowhere.
    /// - Throws: ``DiscoveryError`` when the backend cannot start, e.g. `.system` with no daemon.
    public static func start(
        backend: BackendChoice = .automatic, hostName: String? = nil, interfaces: [String]? = nil,
        logger: Logger = silentLogger, wideArea: WideAreaSettings = WideAreaSettings(), multicast: Bool = true
    ) async throws -> NearbyDiscovery {
        try await make(backend: backend, hostName: hostName, interfaces: interfaces, logger: logger, wideArea: wideArea, multicast: multicast, running: true)
    }

    /// Prepares discovery as ``start(backend:hostName:interfaces:logger:wideArea:multicast:)``
    /// does, with the embedded engine's work left to ``run()``: run it in your task group (a
    /// `ServiceGroup`, listed before the services that use discovery) and advertise, browse and
    /// resolve while it runs. On the system backend nothing differs (the daemon does the work).
    public static func prepare(
        backend: BackendChoice = .automatic, hostName: String? = nil, interfaces: [String]? = nil,
        logger: Logger = silentLogger, wideArea: WideAreaSettings = WideAreaSettings(), multicast: Bool = true
    ) async throws -> NearbyDiscovery {
        try await make(backend: backend, hostName: hostName, interfaces: interfaces, logger: logger, wideArea: wideArea, multicast: multicast, running: false)
    }

    private static func make(
        backend: BackendChoice, hostName: String?, interfaces: [String]?, logger: Logger, wideArea: WideAreaSettings, multicast: Bool, running: Bool
    ) async throws -> NearbyDiscovery {
        let unicast = UnicastBackend(settings: wideArea, logger: logger)
        guard multicast else { return NearbyDiscovery(backend: unicast) }
        func embedded() async throws -> EmbeddedBackend {
            running
                ? try await EmbeddedBackend.start(hostName: hostName, interfaces: interfaces, logger: logger)
                : try await EmbeddedBackend.prepare(hostName: hostName, interfaces: interfaces, logger: logger)
        }
        switch backend {
        case .embedded:
            return NearbyDiscovery(backend: try await embedded(), wideArea: unicast)
        case .system:
            if hostName != nil {
                throw DiscoveryError(.unsupported, "the system backend publishes under the daemon's host name; a host name needs the embedded backend")
            }
            return NearbyDiscovery(backend: try await SystemBackend.start(interfaces: interfaces, logger: logger), wideArea: unicast)
        case .automatic:
            if hostName == nil, await SystemBackend.daemonAnswers() {
                logger.debug("a DNS-SD daemon answers: using the system backend")
                return NearbyDiscovery(backend: try await SystemBackend.start(interfaces: interfaces, logger: logger), wideArea: unicast)
            }
            logger.debug("using the embedded engine")
            return NearbyDiscovery(backend: try await embedded(), wideArea: unicast)
        }
    }

    /// The backend that serves `domain`: the link's for `local.`, unicast DNS for the rest;
    /// nil for `local.` when the link is not used.
    private func backend(for domain: DomainName) -> (any DiscoveryBackend)? {
        if domain == ServiceType.localDomain { return usesLink ? backend : nil }
        return wideArea
    }

    /// The backend doing the work: ``BackendChoice/embedded`` or ``BackendChoice/system``
    /// (never `automatic`: that is resolved at start).
    public var backendInUse: BackendChoice { backend is SystemBackend ? .system : .embedded }

    private func noLink(_ what: String) -> DiscoveryError {
        DiscoveryError(.unsupported, "\(what) in local. needs the link, and this discovery was started without it (multicast: false)")
    }

    /// A logger that says nothing: the default everywhere, libraries are quiet unless asked.
    public static let silentLogger = Logger(label: "nearby", factory: { _ in SwiftLogNoOpLogHandler() })

    /// The host name this machine answers to, e.g. `buildbox.local.`.
    public var hostName: DomainName {
        get async { await backend.hostName() }
    }

    /// Publishes a service and returns once its name is won (probing takes about a second).
    /// - Parameters:
    ///   - name: the instance name people see (UTF-8, at most 63 bytes).
    ///   - type: the service type, e.g. `_openagents._tcp`.
    ///   - port: the port the service listens on.
    ///   - info: the TXT discovery info (empty by default).
    ///   - subtypes: subtypes to list the service under as well, e.g. `_bridge`.
    ///   - ttl: TTL of the service's records (default: RFC 6762's 120 s / 4500 s).
    /// - Throws: ``ServiceNameError`` for a bad instance name, before anything is sent.
    public func advertise(
        _ name: String, type: ServiceType, port: UInt16, info: DiscoveryInfo = DiscoveryInfo(), subtypes: [String] = [],
        ttl: UInt32? = nil
    ) async throws -> Advertisement {
        _ = try ServiceInstanceName(name, type: type)
        for subtype in subtypes { _ = try type.withSubtype(subtype) }
        guard let backend = backend(for: type.domain) else { throw noLink("advertising") }
        return try await backend.advertise(
            ServiceRegistration(instance: name, type: type, port: port, txt: info, subtypes: subtypes, ttl: ttl))
    }

    /// Browses for a service type: found, updated and lost events, with resolution when asked.
    /// - Parameters:
    ///   - type: the type; its domain is browsed unless `domains` says otherwise.
    ///   - resolve: resolve each service (host, port, addresses, TXT) before reporting it.
    ///   - domains: browse the type in each of these domains (`local.` is the link) and merge
    ///     the events; each event's service says where it was found (``DiscoveredService/domain``).
    ///
    /// The stream is bounded: while the application has not read them, events are merged per
    /// service, the latest state winning (a service found and updated waits as one `found`; one
    /// found and lost before it was read is never reported), so at most one event per service
    /// waits however busy the network. Merged events are counted and logged.
    public func browse(_ type: ServiceType, resolve: Bool = false, domains: [DomainName]? = nil) -> EventStream<BrowseEvent> {
        var streams: [EventStream<BrowseEvent>] = []
        for domain in domains ?? [type.domain] {
            guard let backend = backend(for: domain) else { continue }
            streams.append(backend.browse(type.inDomain(domain), resolve: resolve))
        }
        if streams.count == 1, let only = streams.first { return only }
        return Self.merge(streams)
    }

    /// One stream with the elements of all, as they come; it ends when all have ended.
    static func merge(_ streams: [EventStream<BrowseEvent>]) -> EventStream<BrowseEvent> {
        EventStream(buffer: BrowseEventBuffer()) { merged in
            await withTaskGroup(of: Void.self) { group in
                for stream in streams {
                    group.addTask {
                        for await event in stream where !merged.yield(event) { return }
                    }
                }
            }
        }
    }

    /// Finds one service by name and waits for its host, port, addresses and TXT.
    /// - Throws: ``ServiceNameError`` for a bad name; ``DiscoveryError`` when nothing answers
    ///   within `timeout`.
    public func resolve(_ name: String, type: ServiceType, timeout: Duration = .seconds(5)) async throws -> ResolvedService {
        let instance = try ServiceInstanceName(name, type: type)
        guard let backend = backend(for: type.domain) else { throw noLink("resolving") }
        if let result = await backend.resolve(instance, timeout: timeout) { return result }
        throw DiscoveryError(.timeout, "no answer for \"\(name)\" (\(type)) within \(timeout)")
    }

    /// Service types on the network (`_services._dns-sd._udp`), as they appear: on the link,
    /// or in another domain's zone.
    ///
    /// Each type is reported once; while the application has not read them, the stream holds at
    /// most one event per type.
    public func serviceTypes(in domain: DomainName = ServiceType.localDomain) -> EventStream<ServiceType> {
        if domain != ServiceType.localDomain { return wideArea.serviceTypes(in: domain) }
        return usesLink ? backend.serviceTypes() : .finished
    }

    /// The addresses of a host on the local link, such as `buildbox.local` (the host of a
    /// resolved service, or a name a person typed), asked for over mDNS. IPv4 first, then
    /// IPv6; link-local IPv6 addresses carry their interface.
    /// - Throws: ``DiscoveryError``: `invalidInput` for a name that is not a host name,
    ///   `timeout` when nothing answers within `timeout`.
    public func addresses(ofHost name: String, timeout: Duration = .seconds(3)) async throws(DiscoveryError) -> [IPAddress] {
        let host: DomainName
        do { host = try DomainName(parsing: name) } catch {
            throw DiscoveryError(.invalidInput, "\"\(name)\" is not a host name: \(error)")
        }
        guard host.labelCount >= 2 else {
            throw DiscoveryError(.invalidInput, "\"\(name)\" is not a host name on the local link; write it as name.local")
        }
        let local = host.hasSuffix(ServiceType.localDomain)
        let found = await (local ? (usesLink ? backend : nil) : wideArea)?.addresses(of: host, timeout: timeout) ?? []
        guard !found.isEmpty else { throw DiscoveryError(.timeout, "no address for \(host) within \(timeout)") }
        return found
    }

    /// Withdraws every advertisement (goodbyes on the link, removal from DNS zones) and
    /// releases the network.
    public func shutdown() async {
        await backend.shutdown()
        if usesLink { await wideArea.shutdown() }
    }
}

/// DNS-SD with Nearby's own mDNS engine: no daemon needed.
public struct EmbeddedBackend: DiscoveryBackend {
    let engine: MulticastDNSEngine
    let logger: Logger

    /// Starts the engine on the named interfaces (nil: all multicast-capable but loopback), its
    /// work in a task of its own until ``shutdown()``.
    public static func start(
        hostName: String? = nil, interfaces: [String]? = nil, logger: Logger = NearbyDiscovery.silentLogger
    ) async throws -> EmbeddedBackend {
        do {
            let engine = try await MulticastDNSEngine.start(hostName: hostName, interfaces: interfaces, logger: logger)
            return EmbeddedBackend(engine: engine, logger: logger)
        } catch let error as TransportError {
            throw DiscoveryError(error.isUnknownInterface ? .invalidInput : .transportFailure, error.description)
        }
    }

    /// Prepares the engine on the named interfaces; its work is ``run()``.
    public static func prepare(
        hostName: String? = nil, interfaces: [String]? = nil, logger: Logger = NearbyDiscovery.silentLogger
    ) async throws -> EmbeddedBackend {
        do {
            let engine = try await MulticastDNSEngine.prepare(hostName: hostName, interfaces: interfaces, logger: logger)
            return EmbeddedBackend(engine: engine, logger: logger)
        } catch let error as TransportError {
            throw DiscoveryError(error.isUnknownInterface ? .invalidInput : .transportFailure, error.description)
        }
    }

    /// The engine's work (receiver, interface watch, timekeeper) until ``shutdown()``.
    public func run() async { await engine.run() }

    public func hostName() async -> DomainName { await engine.hostName }

    public func advertise(_ registration: ServiceRegistration) async throws -> Advertisement {
        let name = registration.instance
        let (id, events) = await engine.register(registration)
        var iterator = events.makeAsyncIterator()
        while let event = await iterator.next() {
            if case .registered(let won) = event {
                let wonName = (try? ServiceInstanceName(domainName: won).instance) ?? name
                // Later renames, read from the engine's stream as the app asks for them (in the
                // app's task: no task of our own forwards them).
                // Pulled (unfolding): nothing waits here; the engine's stream keeps the newest 8.
                // Pulled (unfolding): nothing waits here; the engine's stream keeps the newest 8.
                let rest = RegistrationFeed(iterator)
                let later = AsyncStream<AdvertisementEvent> {
                    while let event = await rest.next() {
                        if case .registered(let renamed) = event, let text = try? ServiceInstanceName(domainName: renamed).instance {
                            return .renamed(text)
                        }
                    }
                    return nil
                }
                return Advertisement(
                    name: wonName, requestedName: name, type: registration.type, port: registration.port, events: later,
                    update: { [engine] info in await engine.updateTXT(id, info) },
                    cancel: { [engine] in await engine.unregister(id) })
            }
        }
        throw DiscoveryError(.stopped, "the engine stopped before \"\(name)\" was registered")
    }

    /// The engine hands over each packet's records as one batch, but responders such as
    /// python-zeroconf send a host's IPv4 and IPv6 addresses in separate packets a fraction of
    /// a millisecond apart: a resolution waits this long for the rest before it is reported,
    /// unless it has an address of each family already (`wholeAtOnce`).
    static let settleTime: Duration = .milliseconds(10)

    public func browse(_ type: ServiceType, resolve: Bool) -> EventStream<BrowseEvent> {
        DiscoveryDriver.browse(
            type, resolve: resolve, settleTime: Self.settleTime, wholeAtOnce: true,
            source: EmbeddedObservationSource(engine: engine, browsing: type.domainName), logger: logger)
    }

    public func resolve(_ instance: ServiceInstanceName, timeout: Duration) async -> ResolvedService? {
        await DiscoveryDriver.resolve(
            instance, timeout: timeout, settleTime: Self.settleTime, wholeAtOnce: true,
            source: EmbeddedObservationSource(engine: engine, browsing: nil), logger: logger)
    }

    public func serviceTypes() -> EventStream<ServiceType> {
        // The producer sets up the query before the first element and stops it when the
        // consumer stops listening.
        EventStream(buffer: ServiceType.eachOnce) { [engine] types in
            let (id, events) = await engine.query(name: ServiceType.enumerationName(), type: .ptr)
            var seen: Set<ServiceType> = []
            for await event in events {
                guard case .added(let record, _) = event, case .ptr(let target) = record.data,
                    let type = try? ServiceType(domainName: target), seen.insert(type).inserted
                else { continue }
                if !types.yield(type) { break }
            }
            await engine.stopQuery(id)
        }
    }

    public func shutdown() async {
        await engine.shutdown()
    }

    public func addresses(of host: DomainName, timeout: Duration) async -> [IPAddress] {
        await DiscoveryDriver.addresses(
            of: host, timeout: timeout, settleTime: Self.settleTime,
            source: EmbeddedObservationSource(engine: engine, browsing: nil), logger: logger)
    }
}

/// The rest of an engine registration's events, for an `AsyncStream(unfolding:)`: an
/// AsyncStream has one consumer at a time, so `next()` is never called twice at once.
private final class RegistrationFeed: @unchecked Sendable {
    private var iterator: AsyncStream<RegistrationEvent>.Iterator

    init(_ iterator: AsyncStream<RegistrationEvent>.Iterator) {
        self.iterator = iterator
    }

    func next() async -> RegistrationEvent? {
        await iterator.next()
    }
}
