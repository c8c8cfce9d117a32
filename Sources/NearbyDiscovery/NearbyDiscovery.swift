@_exported public import DNSWire
@_exported public import MulticastDNS

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

/// What a browse reports.
public enum BrowseEvent: Sendable, Equatable {
    /// A service appeared (resolved when the browse resolves).
    case found(DiscoveredService, ResolvedService?)
    /// A resolved service changed its TXT, port, host or addresses.
    case updated(DiscoveredService, ResolvedService?)
    /// A service left: goodbye, expiry, or failure detection.
    case lost(DiscoveredService)
}

/// Why discovery failed, in words a person can act on.
public struct DiscoveryError: Error, Sendable, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }
}

/// A published service. Cancelling (or shutting the discovery down) sends goodbyes.
public final class Advertisement: Sendable {
    /// The name actually won, e.g. `Build Box (2)` after a conflict.
    public let name: String
    /// The name asked for.
    public let requestedName: String
    public let type: ServiceType
    public let port: UInt16
    let id: RegistrationID
    let engine: MulticastDNSEngine
    /// Renames after the name was first won (a conflict arising later), as they happen.
    public let renames: AsyncStream<String>

    init(name: String, requestedName: String, type: ServiceType, port: UInt16, id: RegistrationID,
         engine: MulticastDNSEngine, renames: AsyncStream<String>) {
        self.name = name
        self.requestedName = requestedName
        self.type = type
        self.port = port
        self.id = id
        self.engine = engine
        self.renames = renames
    }

    /// Replaces the TXT discovery info and announces it.
    public func update(info: DiscoveryInfo) async {
        await engine.updateTXT(id, info)
    }

    /// Withdraws the service with goodbyes.
    public func cancel() async {
        await engine.unregister(id)
    }
}

/// Advertise, browse and resolve DNS-SD services over mDNS with the embedded engine.
///
/// ```swift
/// let discovery = try await NearbyDiscovery.start()
/// let ad = try await discovery.advertise("Build Box", type: try ServiceType(parsing: "_openagents._tcp"), port: 9099)
/// for await event in await discovery.browse(ad.type) { print(event) }
/// ```
public final class NearbyDiscovery: Sendable {
    let engine: MulticastDNSEngine

    init(engine: MulticastDNSEngine) { self.engine = engine }

    /// Starts the embedded mDNS engine.
    /// - Parameters:
    ///   - hostName: host label to publish (default: this machine's name).
    ///   - interfaces: interface names to use (default: every multicast-capable one but loopback).
    public static func start(hostName: String? = nil, interfaces: [String]? = nil) async throws -> NearbyDiscovery {
        do {
            return NearbyDiscovery(engine: try await MulticastDNSEngine.start(hostName: hostName, interfaces: interfaces))
        } catch let error as TransportError {
            throw DiscoveryError(error.description)
        }
    }

    /// The host name this machine answers to, e.g. `buildbox.local.`.
    public var hostName: DomainName {
        get async { await engine.hostName }
    }

    /// Publishes a service and returns once its name is won (probing takes about a second).
    /// - Parameter ttl: TTL of the service's records (default: RFC 6762's 120 s / 4500 s).
    public func advertise(
        _ name: String, type: ServiceType, port: UInt16, info: DiscoveryInfo = DiscoveryInfo(), subtypes: [String] = [],
        ttl: UInt32? = nil
    ) async throws -> Advertisement {
        _ = try ServiceInstanceName(name, type: type)  // refuse bad names before the network sees them
        let (id, events) = await engine.register(
            ServiceRegistration(instance: name, type: type, port: port, txt: info, subtypes: subtypes, ttl: ttl))
        let (renames, renameContinuation) = AsyncStream<String>.makeStream()
        var iterator = events.makeAsyncIterator()
        while let event = await iterator.next() {
            if case .registered(let won) = event {
                let wonName = (try? ServiceInstanceName(domainName: won).instance) ?? name
                // Keep listening for later renames.
                let rest = iterator
                Task {
                    var later = rest
                    while let event = await later.next() {
                        if case .registered(let renamed) = event, let text = try? ServiceInstanceName(domainName: renamed).instance {
                            renameContinuation.yield(text)
                        }
                    }
                    renameContinuation.finish()
                }
                return Advertisement(name: wonName, requestedName: name, type: type, port: port, id: id, engine: engine, renames: renames)
            }
        }
        throw DiscoveryError("the engine stopped before \"\(name)\" was registered")
    }

    /// Browses for a service type: found, updated and lost events, with resolution when asked.
    public func browse(_ type: ServiceType, resolve: Bool = false) -> AsyncStream<BrowseEvent> {
        let (stream, continuation) = AsyncStream<BrowseEvent>.makeStream()
        let task = Task { [engine] in
            let browser = Browser(engine: engine, type: type, resolve: resolve, continuation: continuation)
            await browser.run()
        }
        continuation.onTermination = { _ in task.cancel() }
        return stream
    }

    /// Finds one service by name and waits for its host, port, addresses and TXT.
    /// - Throws: ``DiscoveryError`` when nothing answers within `timeout`.
    public func resolve(_ name: String, type: ServiceType, timeout: Duration = .seconds(5)) async throws -> ResolvedService {
        let instance = try ServiceInstanceName(name, type: type).domainName
        let resolver = Resolver(engine: engine, instance: instance, type: type)
        if let result = await resolver.resolve(timeout: timeout) { return result }
        throw DiscoveryError("no answer for \"\(name)\" (\(type)) within \(timeout)")
    }

    /// Service types on the network (`_services._dns-sd._udp`), as they appear.
    public func serviceTypes() -> AsyncStream<ServiceType> {
        let (stream, continuation) = AsyncStream<ServiceType>.makeStream()
        let task = Task { [engine] in
            let (id, events) = await engine.query(name: ServiceType.enumerationName(), type: .ptr)
            var seen: Set<ServiceType> = []
            for await event in events {
                guard case .added(let record, _) = event, case .ptr(let target) = record.data,
                    let type = try? ServiceType(domainName: target), seen.insert(type).inserted
                else { continue }
                continuation.yield(type)
            }
            await engine.stopQuery(id)
        }
        continuation.onTermination = { _ in task.cancel() }
        return stream
    }

    /// Withdraws every advertisement with goodbyes and closes the sockets.
    public func shutdown() async {
        await engine.shutdown()
    }
}
