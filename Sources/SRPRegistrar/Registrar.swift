import CoreMetrics
import NearbyMetrics
public import DNSWire
public import Logging
import MulticastDNS
import MulticastDNSCore
import NIOCore
import NIOPosix
package import NearbyBasics
import PeerTrust
public import SRPRegistrarCore
import UnicastDNSSD

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// An SRP registrar (RFC 9665) and advertising proxy: devices that cannot reach the link with
/// multicast (in a container, a VM, on another subnet) register their services with a signed
/// DNS UPDATE over unicast, and the registrar publishes them on the link with mDNS, as if they
/// were there: avahi, python-zeroconf and Apple devices see ordinary `.local` services.
///
/// The decisions are ``RegistrarStateMachine``'s (validation, SIG(0), first come first served,
/// leases); this actor reads the sockets, verifies signatures with PeerTrust, publishes through
/// the embedded mDNS engine (its probing and conflict rules), keeps the names in a state file,
/// and waits for the machine's next deadline. An update's reply is held until the link has
/// accepted its names (probing, about a second): a name already used on the link is refused
/// with YXDOMAIN, never taken over or renamed behind the requestor's back.
public actor Registrar {
    /// How a registrar is set up.
    public struct Configuration: Sendable {
        /// The addresses to answer updates on (UDP and TCP).
        public var listen: [IPAddress]
        /// The port (53 is the DNS port RFC 9665 registrars use; 0: a free one).
        public var port: UInt16 = 53
        /// The interfaces to advertise registrations on (nil: every multicast-capable one).
        public var interfaces: [String]?
        /// The zones updates may name.
        public var zones: [DomainName] = [RegistrarConfiguration.defaultZone]
        public var leases = LeasePolicy()
        public var limits = RegistrarLimits()
        /// Where the names, keys and leases are kept across restarts (nil: nowhere).
        public var stateFile: String?
        /// How long an update's reply waits for the link to accept its names before it goes
        /// anyway (probing takes 0.75–1 s).
        public var probeWait: Duration = .seconds(3)

        public init(listen: [IPAddress]) {
            self.listen = listen
        }
    }

    public let configuration: Configuration
    /// The port updates are answered on.
    public nonisolated let port: UInt16
    private var machine: RegistrarStateMachine
    private let engine: MulticastDNSEngine
    private let sockets: Sockets
    private var link: LinkPublications
    private var held: HeldReplies<ReplyPath>
    private let clock: any ShellClock
    private let alarm = Alarm()
    private let children = ChildTasks()
    private let logger: Logger
    /// When the state file was last written, and whether a change waits for the next write.
    private var stateWrite = (last: Duration?.none, pending: false, busy: false)
    /// The machine's statistics as metrics (published after each call into it), reply times.
    private var metrics: RegistrarMetrics

    /// Opens the sockets and the mDNS engine, and restores what the state file holds (its names
    /// are advertised again once ``run()`` runs).
    public static func prepare(_ configuration: Configuration, logger: Logger) async throws(RegistrarError) -> Registrar {
        try await prepare(configuration, logger: logger, clock: SystemClock())
    }

    package static func prepare(_ configuration: Configuration, logger: Logger, clock: any ShellClock) async throws(RegistrarError) -> Registrar {
        guard !configuration.listen.isEmpty else {
            throw RegistrarError(.malformed, "no address to answer updates on: give the addresses devices reach this host at (--listen ADDRESS)")
        }
        let engine: MulticastDNSEngine
        do {
            engine = try await MulticastDNSEngine.prepare(interfaces: configuration.interfaces, logger: logger)
        } catch {
            throw RegistrarError(.malformed, "cannot advertise on the link: \(error)")
        }
        let sockets: Sockets
        do {
            sockets = try await Sockets.open(configuration.listen, port: Int(configuration.port))
        } catch {
            await engine.shutdown()
            throw RegistrarError(
                .malformed,
                "cannot answer updates on \(configuration.listen.map(\.description).joined(separator: ", ")) port \(configuration.port): \(error) (is the address this host's, the port free, and port 53 allowed: root or CAP_NET_BIND_SERVICE?)")
        }
        let verifier = SIG0Verifier { key, bytes, signature in P256Signature.verify(publicKey: key, message: bytes, signature: signature) }
        let machine = RegistrarStateMachine(
            configuration: RegistrarConfiguration(zones: configuration.zones, leases: configuration.leases, limits: configuration.limits, verifier: verifier))
        // Metrics from the factory in force now: swift-metrics' global one, or the caller's
        // task-local one (MetricsSystem.factory says which).
        let metrics = RegistrarMetrics(factory: MetricsSystem.factory)
        return Registrar(
            configuration, port: UInt16(sockets.port), machine: machine, engine: engine, sockets: sockets, metrics: metrics, clock: clock, logger: logger)
    }

    private init(
        _ configuration: Configuration, port: UInt16, machine: RegistrarStateMachine, engine: MulticastDNSEngine, sockets: Sockets,
        metrics: RegistrarMetrics, clock: any ShellClock, logger: Logger
    ) {
        self.metrics = metrics
        self.configuration = configuration
        self.port = port
        self.machine = machine
        self.engine = engine
        self.sockets = sockets
        self.clock = clock
        self.logger = logger
        link = LinkPublications()
        held = HeldReplies()
    }

    /// What the registrar did and refused.
    public var statistics: RegistrarStatistics { machine.statistics }

    /// The hosts whose records are on the link, with their services.
    public var published: [(host: SRPHost, services: [SRPService])] { machine.publishedHosts }

    // MARK: Running

    /// The registrar's work, until ``shutdown()`` or cancellation: the engine, the sockets,
    /// and the alarm for leases that run out and replies held for probing.
    public func run() async {
        let (engine, alarm, clock, sockets) = (engine, alarm, clock, sockets)
        children.spawn { await engine.run() }
        // What the link says of every registration, on one stream.
        children.spawn {
            for await told in engine.proxiedEvents {
                await self.linkSaid(told)
            }
        }
        children.spawn { await alarm.run(clock: clock) { await self.tick() } }
        for channel in sockets.udp {
            children.spawn {
                _ = try? await channel.executeThenClose { inbound, outbound in
                    for try await envelope in inbound {
                        guard let source = IPAddress(envelope.remoteAddress) else { continue }
                        let reply = ReplyPath.udp(outbound, envelope.remoteAddress)
                        await self.received(Array(envelope.data.readableBytesView), from: source, reply: reply)
                    }
                }
            }
        }
        for server in sockets.tcp {
            children.spawn { await self.serve(server) }
        }
        children.spawn { await self.summarize(every: .seconds(30)) }
        restore()
        logger.info(
            "answering SRP updates for \(configuration.zones.map(\.description).joined(separator: ", ")) on \(configuration.listen.map(\.description).joined(separator: ", ")) port \(port), UDP and TCP; advertising on \(configuration.interfaces?.joined(separator: ", ") ?? "every interface")")
        await children.run()
    }

    /// Withdraws every registration from the link (goodbyes; the names stay in the state file)
    /// and closes the sockets; ``run()`` then returns.
    public func shutdown() async {
        alarm.set(nil)
        // What is pending is written now: by the writer child when one runs (cancelled, it
        // writes at once; run() waits for it), else here.
        if stateWrite.pending, !stateWrite.busy {
            stateWrite.busy = true
            await writeState()
        }
        for answer in held.takeAll() { await send(answer) }
        await sockets.close()
        await engine.shutdown()
        children.finish()
    }

    // MARK: Updates

    /// TCP connections at once, in all: an update is one message, so a connection is short.
    static let maximumTCPConnections = 64
    /// How long a TCP connection may stay open (an update and its reply take well under a second).
    static let tcpConnectionTime: Duration = .seconds(10)

    private func serve(_ server: Sockets.Server) async {
        let (open, clock, refused) = (Locked(0), clock, metrics.tcpRefused)
        try? await server.executeThenClose { connections in
            try await withThrowingDiscardingTaskGroup { group in
                for try await connection in connections {
                    guard let remote = connection.channel.remoteAddress, let source = IPAddress(remote),
                        open.withLockedValue({ count in
                            guard count < Self.maximumTCPConnections else { return false }
                            count += 1
                            return true
                        })
                    else {
                        refused.increment()
                        try? await connection.channel.close()
                        continue
                    }
                    group.addTask {
                        defer { open.withLockedValue { $0 -= 1 } }
                        // Whichever ends first: the client's messages, or the time a connection may take.
                        await withTaskGroup(of: Void.self) { lifetime in
                            lifetime.addTask {
                                _ = try? await connection.executeThenClose { inbound, outbound in
                                    try await DNSOverTCP.messages(in: inbound) { bytes in
                                        await self.received(bytes, from: source, reply: .tcp(outbound))
                                        return true
                                    }
                                }
                            }
                            lifetime.addTask { try? await clock.sleep(for: Self.tcpConnectionTime) }
                            await lifetime.next()
                            lifetime.cancelAll()
                            try? await connection.channel.close()
                        }
                    }
                }
            }
        }
    }

    /// One request: the machine's verdict, its records put on (or taken off) the link, and the
    /// reply sent now, or once the link has accepted the new names.
    private func received(_ bytes: [UInt8], from source: IPAddress, reply path: ReplyPath) async {
        let arrived = clock.now
        let actions = machine.handle(bytes, from: source, now: arrived)
        metrics.record(machine)
        var reply: Message?
        var host: DomainName?
        var waiting: Set<RegistrationKey> = []
        for action in actions {
            switch action {
            case .reply(let message): reply = message
            case .publishHost(let srpHost):
                host = srpHost.name
                waiting.formUnion(await publish(host: srpHost))
            case .publishService(let service):
                host = host ?? service.srv.target
                waiting.formUnion(await publish(service: service))
            case .withdrawService(let name): await withdraw(name)
            case .withdrawHost(let name): await withdraw(name)
            }
        }
        if let code = reply.map({ ResponseCode(UInt16($0.header.responseCode)) }), code != .noError {
            // One line each at debug; the refusals are summed up every 30 s (``summarize()``),
            // so a flood costs the log one line.
            logger.debug("refused an update from \(source): \(code)")
        }
        guard let reply else { return }
        saveState()
        guard let host, !waiting.isEmpty else {
            await path.send(reply)
            metrics.replyTime.record(clock.now - arrived)
            rearm()
            return
        }
        held.hold(reply, path: path, host: host, arrived: arrived, waiting: waiting, until: clock.now + configuration.probeWait)
        rearm()
    }

    // MARK: The link

    /// The registration's names as the link knows them: `name.<zone>` → `name.local.`.
    private func localName(_ name: DomainName) -> DomainName? {
        for zone in configuration.zones where name.hasSuffix(zone) && name != zone {
            let labels = Array(name.labels.dropLast(zone.labels.count)) + [Array("local".utf8)]
            return try? DomainName(labels: labels)
        }
        return nil
    }

    private func publish(host: SRPHost) async -> Set<RegistrationKey> {
        guard let local = localName(host.name) else { return [] }
        let addresses = LinkPublications.advertisable(host.addresses)
        if addresses.count < host.addresses.count {
            logger.info("\(host.name): advertising \(addresses.count) of \(host.addresses.count) addresses (link-local and loopback ones cannot be used from the link)")
        }
        await withdraw(host.name)
        let id = await engine.registerProxiedHost(local, addresses: addresses)
        return [link.published(host.name, id: id, host: host.name)]
    }

    private func publish(service: SRPService) async -> Set<RegistrationKey> {
        guard let instance = localName(service.instance), let hostName = localName(service.srv.target),
            let parsed = try? ServiceInstanceName(domainName: instance)
        else {
            logger.warning("\(service.instance): not a service instance name the link can use; not advertised")
            return []
        }
        var registration = ServiceRegistration(
            instance: parsed.instance, type: parsed.type, port: service.srv.port, txt: DiscoveryInfo(rdata: service.txt.rdata),
            subtypes: service.subtypes.compactMap { $0.firstLabel.flatMap { String(validating: $0, as: UTF8.self) } }, ttl: service.ttl)
        registration.ttl = min(service.ttl, 4500)
        await withdraw(service.instance)
        let id = await engine.registerProxied(registration, host: hostName)
        return [link.published(service.instance, id: id, host: service.srv.target)]
    }

    /// The engine's word on one of the registrations: its names won, or one in use on the link.
    private func linkSaid(_ told: ProxiedEvent) async {
        guard let (key, host) = link.registration(told.id) else { return }
        switch told.event {
        case .registered: await accepted(key)
        case .conflicted(let local): await conflicted(told.id, host: host, local: local)
        case .renamed: break  // a proxied name is never renamed
        }
    }

    private func withdraw(_ name: DomainName) async {
        guard let id = link.withdrawn(name) else { return }
        await engine.unregister(id)
    }

    /// The link accepted a name: a reply waiting only for it goes out.
    private func accepted(_ key: RegistrationKey) async {
        for answer in held.accepted(key) { await send(answer) }
    }

    /// A name is already in use on the link: the registration is given up and its held reply
    /// becomes YXDOMAIN.
    private func conflicted(_ id: RegistrationID, host: DomainName, local: DomainName) async {
        logger.notice("\(local) is already in use on the link: the registration of \(host) is refused (YXDOMAIN)")
        link.forget(id)
        let actions = machine.conflictOnLink(host)
        metrics.record(machine)
        for action in actions {
            switch action {
            case .withdrawService(let name), .withdrawHost(let name): await withdraw(name)
            default: break
            }
        }
        saveState()
        for var answer in held.refused(host) {
            answer.message.header.responseCode = UInt8(truncatingIfNeeded: ResponseCode.nameExists.rawValue)
            answer.message.additionals = []
            await send(answer)
        }
    }

    /// Sends a reply that was held, and records how long its update waited.
    private func send(_ answer: HeldReplies<ReplyPath>.Held) async {
        await answer.path.send(answer.message)
        metrics.replyTime.record(clock.now - answer.arrived)
    }

    // MARK: Time

    private func rearm() {
        alarm.set([machine.nextDeadline, held.nextDeadline].compactMap { $0 }.min())
    }

    private func tick() async {
        let now = clock.now
        for answer in held.due(at: now) {
            logger.debug("a reply went out before the link confirmed every name (probing took longer than \(configuration.probeWait))")
            await send(answer)
        }
        let expired = machine.expire(now: now)
        metrics.record(machine)
        for action in expired {
            switch action {
            case .withdrawService(let name), .withdrawHost(let name):
                logger.info("\(name): the lease ran out; withdrawn from the link")
                await withdraw(name)
            default: break
            }
        }
        saveState()
        rearm()
    }

    /// Every `interval`, when something changed: what was accepted and refused since the last
    /// summary, by kind, in one line (as the listener sums up strangers turned away).
    private func summarize(every interval: Duration) async {
        var last = machine.statistics
        while (try? await clock.sleep(for: interval)) != nil {
            let now = machine.statistics
            guard now != last else { continue }
            let refused = now.refused - last.refused
            let line =
                "\(now.accepted - last.accepted) updates accepted, \(refused) refused in the last \(interval)"
                + (refused == 0
                    ? ""
                    : ": \(now.malformed - last.malformed) malformed, \(now.badSignature - last.badSignature) bad signatures, \(now.wrongPeerID - last.wrongPeerID) TXT ids of another key, \(now.nameHeld - last.nameHeld) names held by another key, \(now.rateLimited - last.rateLimited) over a source's rate, \(now.limitReached - last.limitReached) over a limit, \(now.zoneNotServed - last.zoneNotServed) for zones not served")
                + "; \(machine.registrationCount) registrations held, \(now.linkConflicts) refused for names in use on the link in all"
            if refused > 0 { logger.notice("\(line)") } else { logger.info("\(line)") }
            last = now
        }
    }

    // MARK: State

    private static func wallClock() -> UInt64 { UInt64(max(0, Date().timeIntervalSince1970)) }

    /// At most once a second (a thousand registrations arriving at once would otherwise write
    /// the whole file a thousand times): at once when the last write is older, else once the
    /// second is up. A crash loses at most that second's changes.
    static let stateWriteInterval: Duration = .seconds(1)

    /// A change to keep: written by one writer child, at most once a second (a thousand
    /// registrations at once would otherwise write the whole file a thousand times).
    private func saveState() {
        guard configuration.stateFile != nil else { return }
        stateWrite.pending = true
        guard !stateWrite.busy else { return }
        stateWrite.busy = true
        children.spawn { await self.writeState() }
    }

    /// Writes the names, keys and leases while changes are pending, one write at a time, a
    /// second apart; cancelled (shutting down) it writes what is pending at once. Each write is
    /// a whole new file, flushed and renamed over the old (PeerTrust's safe write, on NIO's
    /// thread pool: never on the cooperative pool), so a crash leaves the old state or the new.
    private func writeState() async {
        while stateWrite.pending, let path = configuration.stateFile {
            if let last = stateWrite.last, clock.now < last + Self.stateWriteInterval {
                try? await clock.sleep(until: last + Self.stateWriteInterval)
            }
            stateWrite.pending = false
            stateWrite.last = clock.now
            let bytes = Array(machine.savedState(now: clock.now, wallClock: Self.wallClock()).utf8)
            do {
                try await NIOThreadPool.singleton.runIfActive {
                    try Storage.replace(URL(fileURLWithPath: path), with: bytes)
                }
            } catch {
                logger.error("cannot keep the registrations in \(path): \(error); a restart will forget them")
            }
        }
        stateWrite.busy = false
    }

    /// Reads the state file, and advertises again what it holds.
    private func restore() {
        guard let path = configuration.stateFile, let data = FileManager.default.contents(atPath: path) else { return }
        guard let text = String(validating: Array(data), as: UTF8.self) else {
            logger.error("\(path) is not text: starting with no registrations (the file is left as it is)")
            return
        }
        do {
            let actions = try machine.restore(text, now: clock.now, wallClock: Self.wallClock())
            metrics.record(machine)
            logger.info("restored \(machine.registrationCount) registration(s) from \(path)")
            children.spawn {
                for action in actions {
                    switch action {
                    case .publishHost(let host): _ = await self.publish(host: host)
                    case .publishService(let service): _ = await self.publish(service: service)
                    default: break
                    }
                }
                await self.rearm()
            }
        } catch {
            logger.error("cannot read \(path): \(error.message); starting with no registrations (the file is left as it is)")
        }
    }
}
