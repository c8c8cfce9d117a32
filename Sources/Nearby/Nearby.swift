#if canImport(Dispatch)
import Dispatch
#endif
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
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
import Logging
import NearbyDiscovery
import NetworkPlatform
public import PeerConnection
import PeerTrust
import UnicastDNSSD

// The front door: the jobs Nearby exists for, each a call, with safe defaults (the link through
// avahi-daemon when it runs, else the embedded engine; the identity and pins that `nearby
// identity` and `nearby trust` keep, in the state directory a call names or the one `nearby`
// uses). Advertise, browse, connect to the nearest or a named peer, and serve (Server.swift).
// The full modules (NearbyDiscovery, ConnectionBroker, PeerConnection, PeerTrust) are there for
// everything else.

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
        do { return try DomainName(parsing: text) } catch { throw NearbyError("\(text.quotedPrefix()) is not a domain name (\(error))") }
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

/// A service this program advertises, from ``advertise(_:type:port:info:registrar:stateDirectory:)``.
public final class Advertising: Sendable {
    /// The name won on the network, e.g. `Build Box (2)` when `Build Box` was taken on the link.
    /// (A registrar never renames: a name taken is refused, and `advertise` throws.)
    public let name: String
    private let withdrawal: @Sendable () async -> Void

    init(name: String, withdrawal: @escaping @Sendable () async -> Void) {
        self.name = name
        self.withdrawal = withdrawal
    }

    /// Takes the service off the network: goodbyes on the link, or the registration removed
    /// (the registrar says the goodbyes, and keeps the name for this key). Then discovery stops.
    public func withdraw() async {
        await withdrawal()
    }
}

/// Advertises `name` as a `type` service on `port` with TXT `info` until
/// ``Advertising/withdraw()``: on the link with mDNS, or, with a `registrar`, by registering
/// with an SRP registrar (RFC 9665), which advertises it on its LAN.
///
/// A registrar is for a program whose network carries no multicast to the LAN (a container, a
/// VM, another subnet): `nearby registrar` on the container's host or the router. The
/// registration is one DNS UPDATE signed with this peer's identity key (made in the state
/// directory when there is none); the name then belongs to that key, and is refreshed before
/// its lease runs out until ``Advertising/withdraw()``.
/// - Parameters:
///   - name: the instance name people see, e.g. `Build Box` (UTF-8, up to 63 bytes).
///   - type: the service type, e.g. `_openagents._tcp`.
///   - port: the TCP or UDP port the service listens on, 1-65535.
///   - info: TXT entries, e.g. `["version": "0.2.2"]` (each `key=value` at most 255 bytes).
///   - registrar: nil (the default): the link. Else the registrar's `ADDRESS` or
///     `ADDRESS:PORT` (port 53 by default), or a DNS domain whose `_dnssd-srp._udp` SRV record
///     names it (RFC 9665 §3.1). Every address of this host but loopback, link-local and
///     container bridges is registered.
///   - stateDirectory: with a registrar, where the identity that signs lives (nil: the one
///     `nearby` uses, `$NEARBY_STATE_DIR`, else `~/.local/state/nearby`).
/// - Throws: ``NearbyError`` for a bad name, type, port or TXT entry, or when advertising fails;
///   with a registrar, when none is found or it refuses (a name held by another key or in use
///   on its LAN, a signature it does not accept), in words that say which.
public func advertise(
    _ name: String, type: String, port: Int, info: [String: String] = [:], registrar: String? = nil, stateDirectory: String? = nil
) async throws(NearbyError) -> Advertising {
    let serviceType = try parse(type)
    try checkInstanceName(name, type: serviceType)
    guard let port = UInt16(exactly: port), port > 0 else { throw NearbyError("port \(port) is out of range; use 1-65535") }
    let txt = try discoveryInfo(info)
    if let registrar {
        let identity = try loadIdentity(stateDirectory, creating: true)
        let registration = try await register(
            SRPRequest.Service(instance: name, type: serviceType, port: port, info: txt), identity: identity, registrar: registrar)
        // Unstructured: the registration outlives this call, as the Advertising value does;
        // withdraw() cancels the refresh and waits for it before removing the registration.
        let refreshing = Task { await registration.keepRefreshed() }
        return Advertising(name: name) {
            refreshing.cancel()
            await refreshing.value
            try? await registration.remove()
        }
    }
    let discovery = try await startDiscovery()
    do {
        let advertisement = try await discovery.advertise(name, type: serviceType, port: port, info: txt)
        return Advertising(name: advertisement.name) {
            await advertisement.cancel()
            await discovery.shutdown()
        }
    } catch {
        await discovery.shutdown()
        throw NearbyError("cannot advertise \(name.quotedPrefix()): \(error)")
    }
}

/// A connection to a peer, authenticated both ways and initialized, from
/// ``connectNearest(_:timeout:stateDirectory:)`` or ``connect(named:type:timeout:stateDirectory:)``.
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
/// keeps. Client only: nothing is advertised or listened on.
/// - Parameters:
///   - type: the service type, e.g. `_openagents._tcp`.
///   - timeout: how long to look, measure and connect before giving up.
///   - stateDirectory: the folder of the identity and pins, as `nearby --state-dir`
///     names it (nil: `$NEARBY_STATE_DIR`, else `~/.local/state/nearby`). Two programs on one
///     machine that should be two peers each need their own.
/// - Throws: ``NearbyError`` when there is no identity or nobody is pinned (with the commands
///   that fix it), when nobody compatible was found (with what was skipped, and why), or when
///   the connection failed.
public func connectNearest(_ type: String, timeout: Duration = .seconds(10), stateDirectory: String? = nil) async throws(NearbyError) -> NearbyPeer {
    let (broker, discovery) = try await startBroker(type, stateDirectory: stateDirectory)
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

/// Connects to the peer advertised as `name`, as ``connectNearest(_:timeout:stateDirectory:)`` does.
public func connect(named name: String, type: String, timeout: Duration = .seconds(10), stateDirectory: String? = nil) async throws(NearbyError) -> NearbyPeer {
    let (broker, discovery) = try await startBroker(type, stateDirectory: stateDirectory)
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

/// Writes `message` to standard error and ends the program with exit status 1, so that a shell
/// or a script sees that it failed (a `print` and a normal end would say it succeeded). What was
/// printed before is written out first.
public func fail(_ message: String) -> Never {
    fflush(nil)  // every stdio stream: what was printed is written before the message
    let line = Array((message + "\n").utf8)
    var written = 0
    while written < line.count {
        let result = line[written...].withUnsafeBytes { write(2, $0.baseAddress, $0.count) }
        guard result > 0 else { break }
        written += result
    }
    exit(1)
}

// MARK: Behind the door

func parse(_ type: String) throws(NearbyError) -> ServiceType {
    do { return try ServiceType(parsing: type) } catch { throw NearbyError(error.description) }
}

func startDiscovery() async throws(NearbyError) -> NearbyDiscovery {
    // Browses in DNS zones use DNS Push where the zone offers it, over TLS.
    var wideArea = WideAreaSettings()
    wideArea.pushTransport = TLSPushTransport()
    do { return try await NearbyDiscovery.start(wideArea: wideArea) } catch { throw NearbyError("cannot start discovery: \(error)") }
}

private func startBroker(_ type: String, stateDirectory: String?) async throws(NearbyError) -> (ConnectionBroker, NearbyDiscovery) {
    let serviceType = try parse(type)
    let identity = try loadIdentity(stateDirectory, creating: false)
    let trust = try pinnedTrust(stateDirectory, identity: identity)
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

/// The state directory a call names, else the one `nearby` uses.
func stateFolder(_ path: String?) -> URL {
    guard let path, !path.isEmpty else { return IdentityStore.defaultDirectory }
    return URL(fileURLWithPath: path)
}

/// The identity in the state directory; made there first when `creating` and there is none.
func loadIdentity(_ stateDirectory: String?, creating: Bool) throws(NearbyError) -> PeerIdentity {
    let folder = stateFolder(stateDirectory)
    let store = IdentityStore(directory: folder)
    let loaded: PeerIdentity?
    do throws(PeerTrustError) {
        loaded = creating ? try store.loadOrCreate().identity : try store.load()
    } catch {
        throw NearbyError(error.message)
    }
    guard let loaded else { throw NearbyError("there is no identity in \(folder.path): make one with `nearby identity create --name NAME`") }
    return loaded
}

/// Trust in the peers pinned in the state directory (read again at each connection, so a peer
/// pinned meanwhile counts). With `required`, throws (saying what to do) when nobody is pinned.
func pinnedTrust(_ stateDirectory: String?, identity: PeerIdentity, required: Bool = true) throws(NearbyError) -> TrustEvaluator {
    let pins = TrustStore(directory: stateFolder(stateDirectory).appendingPathComponent("trust"))
    let pinned: Int
    let policy: TrustPolicy
    do throws(PeerTrustError) {
        pinned = try pins.pins().count
        policy = try .pinned(pins)
    } catch {
        throw NearbyError(error.message)
    }
    if required, pinned == 0 {
        throw NearbyError(
            "nobody is pinned in \(pins.directory.path), so no peer would be trusted: pin the peers to connect to "
                + "(`nearby trust pin PEER-ID` or `nearby pair`), and have them pin this one: `nearby trust pin \(identity.peerID)`")
    }
    return TrustEvaluator(policy: policy)
}

/// Throws what is wrong with an instance name (empty, over 63 bytes, a control character).
func checkInstanceName(_ name: String, type: ServiceType) throws(NearbyError) {
    do { _ = try ServiceInstanceName(name, type: type) } catch { throw NearbyError(error.description) }
}

/// TXT discovery info from a dictionary, in key order.
func discoveryInfo(_ info: [String: String]) throws(NearbyError) -> DiscoveryInfo {
    var txt = DiscoveryInfo()
    for (key, value) in info.sorted(by: { $0.key < $1.key }) {
        do { try txt.set(key, to: value) } catch { throw NearbyError("\(error)") }
    }
    return txt
}

/// Registers `service` for this host with `registrar` (an address or a domain), signed with
/// `identity`'s key.
func register(_ service: SRPRequest.Service, identity: PeerIdentity, registrar: String) async throws(NearbyError) -> SRPRegistration {
    let logger = Logger(label: "nearby.registration", factory: { _ in SwiftLogNoOpLogHandler() })
    do {
        let server = try await SRPRegistration.locate(registrar, logger: logger)
        return try await SRPRegistration.register(
            [service], hostLabel: NetworkPlatform.hostLabel() ?? "nearby", addresses: DNSRegistration.hostAddresses(), publicKey: try identity.rawPublicKey(),
            lease: 7200, signer: { bytes in try identity.signRaw(bytes) }, registrar: server, logger: logger)
    } catch let error as UnicastDNSError {
        throw NearbyError(error.message)
    } catch {
        throw NearbyError("cannot sign the registration with the identity's key: \(error)")
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
