#if canImport(Dispatch)
import Dispatch
#endif
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif
import ConnectionBroker
import DNSPushTLS
import DNSWire
import NearbyBasics
import NearbyDiscovery
public import PeerConnection
import PeerTrust

// The front door: the three jobs Nearby exists for, each a call, with safe defaults (the link
// through avahi-daemon when it runs, else the embedded engine; the identity and pins that
// `nearby identity` and `nearby trust` keep; connecting as a client only). The full modules
// (NearbyDiscovery, ConnectionBroker, PeerConnection, PeerTrust) are there for everything else.

/// Why a front-door call failed, in words a person can act on (what was wrong, what to do).
public struct NearbyError: Error, Sendable, CustomStringConvertible {
    public let message: String
    public var description: String { message }
    init(_ message: String) { self.message = message }
}

/// A service on the network: where it runs and what it says (TXT).
public struct NearbyService: Hashable, Sendable, CustomStringConvertible {
    /// The instance name, e.g. `Build Box`.
    public var name: String
    /// The service type, e.g. `_openagents._tcp`.
    public var type: String
    /// `local.` on the link, or the DNS zone it was found in.
    public var domain: String
    /// The host, e.g. `buildbox.local.`.
    public var host: String
    public var port: Int
    /// IPv4 first, then IPv6 (a link-local one with its `%interface`).
    public var addresses: [String]
    /// The TXT "discovery info", e.g. `["version": "0.2.2"]` (a key without a value maps to "").
    public var info: [String: String]

    public var description: String {
        let txt = info.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: " ")
        return "\(name) at \(addresses.first ?? host):\(port)" + (txt.isEmpty ? "" : " \(txt)")
    }

    init(_ resolved: ResolvedService) {
        name = resolved.service.name
        type = resolved.service.type.description
        domain = resolved.service.domain.description
        host = resolved.host.description
        port = Int(resolved.port)
        addresses = resolved.addresses.map(PeerAddress.init).map(\.description)
        var info: [String: String] = [:]
        for entry in resolved.info.entries where info[entry.key] == nil { info[entry.key] = entry.value.string ?? "" }
        self.info = info
    }
}

/// What happened to a service. A closed enum with whole payloads: a `switch` needs no
/// `default`, and a kind added later would be a new major version.
public enum ServiceChange: Hashable, Sendable, CustomStringConvertible {
    /// A service appeared, resolved.
    case found(NearbyService)
    /// It changed its TXT, port, host or addresses.
    case updated(NearbyService)
    /// It left (a goodbye, or its records expired); the service as it was last seen.
    case lost(NearbyService)

    public var description: String {
        switch self {
        case .found(let service): "found \(service)"
        case .updated(let service): "updated \(service)"
        case .lost(let service): "lost \(service.name)"
        }
    }
}

/// The changes of a browse, from ``browse(_:domains:)``. Bounded: while the program has not read
/// them, changes merge per service, the latest state winning. Ends on SIGINT or SIGTERM, or when
/// the loop stops reading; then discovery stops.
public struct ServiceChanges: AsyncSequence, Sendable {
    let events: EventStream<BrowseEvent>

    public func makeAsyncIterator() -> Iterator { Iterator(base: events.makeAsyncIterator()) }

    public struct Iterator: AsyncIteratorProtocol {
        var base: EventStream<BrowseEvent>.Iterator
        /// The last resolution of each service present (for `lost`).
        var present: [DiscoveredService: NearbyService] = [:]

        public mutating func next() async -> ServiceChange? {
            while let event = await base.next() {
                switch event {
                case .found(let service, let resolved?), .updated(let service, let resolved?):
                    let seen = NearbyService(resolved)
                    let known = present.updateValue(seen, forKey: service) != nil
                    if case .found = event, !known { return .found(seen) }
                    return .updated(seen)
                case .lost(let service):
                    guard let last = present.removeValue(forKey: service) else { continue }
                    return .lost(last)
                case .found(_, nil), .updated(_, nil), .interrupted, .restored:
                    continue
                }
            }
            return nil
        }
    }
}

/// Browses for `type` (e.g. `_openagents._tcp`) on the link, or also in DNS zones (`domains`,
/// e.g. `["local.", "lab.example.test."]`), resolving each service before it is reported.
/// The changes end on SIGINT or SIGTERM (Ctrl-C), so a `for await` loop over them ends and the
/// program exits normally, its output written.
/// - Throws: ``NearbyError`` for a malformed type or domain, or when discovery cannot start.
public func browse(_ type: String, domains: [String]? = nil) async throws(NearbyError) -> ServiceChanges {
    let serviceType = try parse(type)
    let zones = try domains?.map { text throws(NearbyError) -> DomainName in
        do { return try DomainName(parsing: text) } catch { throw NearbyError("\"\(text)\" is not a domain name (\(error))") }
    }
    let discovery = try await startDiscovery()
    let events = EventStream<BrowseEvent>(buffer: BrowseEventBuffer()) { source in
        await withTaskGroup(of: Void.self) { group in
            group.addTask {
                for await event in discovery.browse(serviceType, resolve: true, domains: zones) where !source.yield(event) { return }
            }
            group.addTask { await interrupted() }
            await group.next()
            group.cancelAll()
        }
        await discovery.shutdown()
    }
    return ServiceChanges(events: events)
}

/// A service this program advertises, from ``advertise(_:type:port:info:)``.
public final class Advertising: Sendable {
    /// The name won on the network, e.g. `Build Box (2)` when `Build Box` was taken.
    public let name: String
    private let advertisement: Advertisement
    private let discovery: NearbyDiscovery

    init(advertisement: Advertisement, discovery: NearbyDiscovery) {
        self.advertisement = advertisement
        self.discovery = discovery
        name = advertisement.name
    }

    /// Takes the service off the network (goodbyes) and stops discovery.
    public func withdraw() async {
        await advertisement.cancel()
        await discovery.shutdown()
    }
}

/// Advertises `name` as a `type` service on `port` with TXT `info`, on the link, until
/// ``Advertising/withdraw()``.
/// - Throws: ``NearbyError`` for a bad name, type, port or TXT entry, or when advertising fails.
public func advertise(_ name: String, type: String, port: Int, info: [String: String] = [:]) async throws(NearbyError) -> Advertising {
    let serviceType = try parse(type)
    guard let port = UInt16(exactly: port), port > 0 else { throw NearbyError("port \(port) is out of range; use 1-65535") }
    var txt = DiscoveryInfo()
    for (key, value) in info.sorted(by: { $0.key < $1.key }) {
        do { try txt.set(key, to: value) } catch { throw NearbyError("TXT entry \(key)=\(value): \(error)") }
    }
    let discovery = try await startDiscovery()
    do {
        let advertisement = try await discovery.advertise(name, type: serviceType, port: port, info: txt)
        return Advertising(advertisement: advertisement, discovery: discovery)
    } catch {
        await discovery.shutdown()
        throw NearbyError("cannot advertise \"\(name)\": \(error)")
    }
}

/// A connection to a peer, authenticated both ways and initialized, from ``connectNearest(_:timeout:)``
/// or ``connect(named:type:timeout:)``.
public final class NearbyPeer: Sendable {
    /// The peer's instance name.
    public let name: String
    /// Its peer ID (the hash of its key), as `nearby identity show` prints it.
    public let peerID: String
    /// The round trip measured to it, when it was chosen as the nearest.
    public let rtt: Duration?
    /// The round trip in words, e.g. `0.4 ms` (empty when not measured).
    public var rttText: String { rtt.map(millisecondsText) ?? "" }
    /// The connection itself, for everything else (streams, files, notifications).
    public let connection: PeerConnection
    private let broker: ConnectionBroker
    private let discovery: NearbyDiscovery

    init(name: String, rtt: Duration?, connection: PeerConnection, broker: ConnectionBroker, discovery: NearbyDiscovery) {
        self.name = name
        self.rtt = rtt
        self.connection = connection
        peerID = connection.peerID?.description ?? ""
        self.broker = broker
        self.discovery = discovery
    }

    /// Sends a JSON-RPC request and returns the result as JSON text.
    /// - Parameters:
    ///   - method: the method to call, such as `ping`.
    ///   - params: the request's params as JSON text (nil: none).
    public func request(_ method: String, params: String? = nil) async throws(NearbyError) -> String {
        var value: JSONValue?
        if let params {
            do { value = try JSONValue(parsing: params) } catch { throw NearbyError("params are not JSON: \(error)") }
        }
        do { return try await connection.request(method, params: value).jsonText } catch { throw NearbyError("\(method) failed: \(error)") }
    }

    /// Closes the connection and stops discovery.
    public func close() async {
        _ = await connection.close()
        await broker.shutdown()
        await discovery.shutdown()
    }
}

/// Connects to the nearest peer offering `type`: every compatible peer found is measured (a
/// round trip each) and the fastest is dialed, over TLS with the identity and pins `nearby`
/// keeps ($NEARBY_STATE_DIR, else ~/.local/state/nearby). Client only: nothing is advertised or
/// listened on.
/// - Throws: ``NearbyError`` when there is no identity or nobody is pinned (with the commands
///   that fix it), when nobody compatible was found (with what was skipped, and why), or when
///   the connection failed.
public func connectNearest(_ type: String, timeout: Duration = .seconds(10)) async throws(NearbyError) -> NearbyPeer {
    let (broker, discovery) = try await startBroker(type)
    do {
        let (connection, measured) = try await broker.connectNearest(timeout: timeout)
        let chosen = measured.first { $0.peerID == connection.peerID }
        return NearbyPeer(name: chosen?.name ?? connection.peer.displayName ?? "", rtt: chosen?.rtt, connection: connection, broker: broker, discovery: discovery)
    } catch {
        await broker.shutdown()
        await discovery.shutdown()
        throw NearbyError(error.message)
    }
}

/// Connects to the peer advertised as `name`, as ``connectNearest(_:timeout:)`` does.
public func connect(named name: String, type: String, timeout: Duration = .seconds(10)) async throws(NearbyError) -> NearbyPeer {
    let (broker, discovery) = try await startBroker(type)
    do {
        let connection = try await broker.connect(name: name, timeout: timeout)
        return NearbyPeer(name: name, rtt: nil, connection: connection, broker: broker, discovery: discovery)
    } catch {
        await broker.shutdown()
        await discovery.shutdown()
        throw NearbyError(error.message)
    }
}

/// Returns when the process receives SIGINT or SIGTERM (Ctrl-C, `kill`, `timeout`), or when the
/// calling task is cancelled. The signals are caught only while something waits here.
public func interrupted() async {
    await SignalWait.shared.wait()
}

// MARK: Behind the door

private func parse(_ type: String) throws(NearbyError) -> ServiceType {
    do { return try ServiceType(parsing: type) } catch { throw NearbyError("\"\(type)\" is not a service type: \(error)") }
}

private func startDiscovery() async throws(NearbyError) -> NearbyDiscovery {
    // Browses in DNS zones use DNS Push where the zone offers it, over TLS.
    var wideArea = WideAreaSettings()
    wideArea.pushTransport = TLSPushTransport()
    do { return try await NearbyDiscovery.start(wideArea: wideArea) } catch { throw NearbyError("cannot start discovery: \(error)") }
}

private func startBroker(_ type: String) async throws(NearbyError) -> (ConnectionBroker, NearbyDiscovery) {
    let serviceType = try parse(type)
    let state = IdentityStore.defaultDirectory
    let identity: PeerIdentity
    let trust: TrustEvaluator
    do {
        guard let loaded = try IdentityStore(directory: state).load() else {
            throw NearbyError("there is no identity in \(state.path): make one with `nearby identity create --name NAME`")
        }
        identity = loaded
        let pins = TrustStore(directory: state.appendingPathComponent("trust"))
        guard try !pins.pins().isEmpty else {
            throw NearbyError(
                "nobody is pinned in \(pins.directory.path), so no peer would be trusted: pin the peers to connect to "
                    + "(`nearby trust pin PEER-ID` or `nearby pair`), and have them pin this one: `nearby trust pin \(identity.peerID)`")
        }
        trust = TrustEvaluator(policy: try .pinned(pins))
    } catch let error as NearbyError {
        throw error
    } catch {
        throw NearbyError("cannot use the identity and pins in \(state.path): \(error)")
    }
    var configuration = BrokerConfiguration(connection: PeerConnectionConfiguration(identity: identity, trust: trust), serviceType: serviceType)
    configuration.advertises = false
    let discovery = try await startDiscovery()
    do {
        return (try await ConnectionBroker.start(configuration, discovery: discovery), discovery)
    } catch {
        await discovery.shutdown()
        throw NearbyError(error.message)
    }
}

private func millisecondsText(_ duration: Duration) -> String {
    let (seconds, attoseconds) = duration.components
    return fixedPoint(Double(seconds) * 1000 + Double(attoseconds) / 1e15, digits: 1) + " ms"
}

/// The process's SIGINT and SIGTERM, caught while someone waits: the first one wakes every
/// waiter, and the signals act as usual again a second after nobody waits.
private final class SignalWait: Sendable {
    static let shared = SignalWait()

    private struct State {
        var waiters: [UInt64: CheckedContinuation<Void, Never>] = [:]
        var next: UInt64 = 0
        var sources: [any DispatchSourceSignal] = []
    }
    private let state = Locked(State())

    func wait() async {
        let id = state.withLockedValue { state -> UInt64 in
            state.next += 1
            return state.next
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let cancelled = state.withLockedValue { state -> Bool in
                    if Task.isCancelled { return true }
                    state.waiters[id] = continuation
                    if state.sources.isEmpty { state.sources = Self.catchSignals { [weak self] in self?.fire() } }
                    return false
                }
                if cancelled { continuation.resume() }
            }
        } onCancel: {
            let continuation = state.withLockedValue { state -> CheckedContinuation<Void, Never>? in
                let continuation = state.waiters.removeValue(forKey: id)
                if state.waiters.isEmpty { Self.release(&state.sources) }
                return continuation
            }
            continuation?.resume()
        }
    }

    private static func catchSignals(_ handler: @escaping @Sendable () -> Void) -> [any DispatchSourceSignal] {
        [SIGINT, SIGTERM].map { number in
            signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
            source.setEventHandler(handler: handler)
            source.resume()
            return source
        }
    }

    private static func release(_ sources: inout [any DispatchSourceSignal]) {
        guard !sources.isEmpty else { return }
        for source in sources { source.cancel() }
        sources = []
        signal(SIGINT, SIG_DFL)
        signal(SIGTERM, SIG_DFL)
    }

    private func fire() {
        let woken = state.withLockedValue { state -> [CheckedContinuation<Void, Never>] in
            defer { state.waiters = [:] }
            return Array(state.waiters.values)
        }
        for continuation in woken { continuation.resume() }
        // One signal often comes twice: `timeout` and a terminal send it to the process and to
        // its group. The second is caught too (and does nothing) for a second, so that it
        // cannot kill the program while it says its goodbyes; after that, if nobody waits
        // again, the signals act as usual (a second Ctrl-C stops a program that hangs).
        DispatchQueue.global().asyncAfter(deadline: .now() + 1) { [weak self] in
            self?.state.withLockedValue { state in
                if state.waiters.isEmpty { Self.release(&state.sources) }
            }
        }
    }
}
