public import DNSWire
public import DiscoveryProxyCore
public import Logging
import NIOCore
import NIOPosix
import NIOSSL
import NetworkPlatform
import NearbyBasics
public import PeerTrust
import UnicastDNSSD

/// A discovery proxy (RFC 8766) on sockets: for each configured link, answers unicast DNS
/// questions for the link's zone from a continuous mDNS querier on that link, over UDP and TCP
/// on the configured addresses.
///
/// The decisions are `ProxyStateMachine`'s; this actor only carries them out: it reads
/// questions from the sockets, runs the link questions the machine asks for on Nearby's own
/// mDNS engine (bound to the links' interfaces and no others, so its multicast stays on them),
/// hands what the link learns back to the machine, and keeps its time.
///
/// ```swift
/// let zone = try ProxyZone("lan1.example.test.", nameServers: [.init(name: "proxy1.example.test.", addresses: [])])
/// let configuration = DiscoveryProxy.Configuration(
///     links: [.init(zone: zone, interface: "eth0")], listen: [.v4(IPv4Address(192, 0, 2, 5))])
/// let proxy = try await DiscoveryProxy.prepare(configuration)
/// await proxy.run()   // until shutdown() or cancellation
/// ```
public actor DiscoveryProxy {
    /// One link: the zone that stands for it, and the interface the proxy hears it on.
    public struct Link: Sendable, Hashable {
        public var zone: ProxyZone
        public var interface: String
        public init(zone: ProxyZone, interface: String) {
            self.zone = zone
            self.interface = interface
        }
    }

    /// Where and how the proxy works.
    public struct Configuration: Sendable {
        public var links: [Link]
        /// The addresses to answer on (UDP and TCP): only these, never every address.
        public var listen: [IPAddress]
        /// The port, 53 by default; 0 picks a free one (the same for UDP and TCP, and for
        /// every address), reported by ``DiscoveryProxy/port``.
        public var port: UInt16
        /// The answering machine's settings; its zones are the links' zones, in order.
        public var answering: ProxyStateMachine.Configuration
        /// At most this many TCP connections at once, and this many from one address; more are
        /// closed at once.
        public var maximumTCPConnections = 256
        public var maximumTCPConnectionsPerSource = 16
        /// At most this many questions in flight on one TCP connection (asked, not yet answered
        /// and written); a client that asks more without reading is closed.
        public var maximumTCPQuestionsInFlight = 64
        /// A TCP connection that sends no question for this long is closed (RFC 7766 §6.2.3).
        public var tcpIdleTimeout: Duration = .seconds(10)
        /// Who asks the links: Nearby's own mDNS engine on the links' interfaces, or the host's
        /// daemon (avahi-daemon) through dns_sd.
        public var backend: Backend = .embedded
        /// DNS Push (RFC 8765) over TLS, when offered: clients then subscribe and are told of
        /// every change instead of asking again. Nil offers none (clients poll).
        public var push: PushService?

        public init(links: [Link], listen: [IPAddress], port: UInt16 = 53) {
            self.links = links
            self.listen = listen
            self.port = port
            answering = ProxyStateMachine.Configuration(zones: links.map(\.zone))
        }
    }

    /// The DNS Push service: DSO sessions (RFC 8490) over TLS on the `--listen` addresses,
    /// named in each zone by `_dns-push-tls._tcp.<zone>` SRV (its target is the zone's first
    /// name server, so that name must lead to the proxy).
    public struct PushService: Sendable {
        /// The TLS port: 853 by default (RFC 8765 §6.1 uses the DNS-over-TLS port); 0 picks a
        /// free one, reported by ``DiscoveryProxy/pushPort``.
        public var port: UInt16
        /// The certificate and key the TLS server shows; nil makes a self-signed one at start,
        /// which clients that check certificates will not accept (Nearby's client encrypts
        /// without checking unless asked to: Push tells it nothing the plain DNS answers would
        /// not).
        public var identity: PeerIdentity?
        /// The sessions' timeouts and their limit of subscriptions.
        public var session = PushSession.Configuration()
        /// At most this many sessions at once, and this many from one address.
        public var maximumSessions = 256
        public var maximumSessionsPerSource = 16
        /// A session whose client leaves this many bytes unread is aborted (it resubscribes and
        /// gets the current records again): nothing is dropped from a live session, and a
        /// client that reads nothing holds at most this much of the proxy's memory.
        public var maximumUnsentBytes = 512 * 1024

        public init(port: UInt16 = 853, identity: PeerIdentity? = nil) {
            self.port = port
            self.identity = identity
        }
    }

    /// Who asks the links' questions.
    public enum Backend: Sendable, Hashable {
        /// Nearby's own mDNS engine, bound to the links' interfaces and no others.
        case embedded
        /// The host's mDNS daemon (avahi-daemon) through dns_sd; answers are kept to the links'
        /// interfaces.
        case system
    }

    private typealias TCPServer = NIOAsyncChannel<NIOAsyncChannel<ByteBuffer, ByteBuffer>, Never>

    /// What the shell itself counted (the machine counts the rest).
    public struct ShellStatistics: Sendable, Equatable {
        public var udpRepliesDropped = 0
        public var tcpConnections = 0
        public var tcpConnectionsRefused = 0
        public var tcpIdleClosed = 0
        public var tcpOverfull = 0
        public var pushSessions = 0
        public var pushSessionsRefused = 0
        /// Sessions closed because their client left too many messages unread.
        public var pushSessionsOverfull = 0
        /// RECONFIRMs received (those of records the link holds are asked again on it).
        public var pushReconfirms = 0
    }

    public let configuration: Configuration
    /// The port the proxy answers on.
    public nonisolated let port: UInt16
    /// The DNS Push port, when Push is offered.
    public nonisolated let pushPort: UInt16?
    /// The answering machine and the reply paths, shared with the UDP sockets' event loops.
    private let desk: AnsweringDesk
    private let querier: any LinkQuerier
    private let linksOfInterface: [String: [LinkIndex]]
    /// The links each engine query serves (one query serves every link that asks the question).
    private var engineQueries: [LinkQuestion: Set<LinkIndex>] = [:]
    /// Work for the link querier, done in order by one child of ``run()``.
    private enum EngineWork: Sendable {
        case start([LinkQuestion])
        case stop(LinkQuestion)
        case replay(LinkQuestion, LinkIndex)
        case reconfirm(ResourceRecord)
    }
    private let engineWork: AsyncStream<EngineWork>
    private let engineQueue: AsyncStream<EngineWork>.Continuation
    private let udpChannels: [any Channel]
    private let tcpServers: [TCPServer]
    private let pushServers: [TCPServer]
    /// The live DNS Push sessions.
    private var sessions: [UInt64: SessionState] = [:]
    private var nextSession: UInt64 = 1
    private var pushConnections = ConnectionCount()
    private struct SessionState {
        var session: PushSession
        var writer: AsyncStream<[UInt8]>.Continuation
        /// Bytes handed to the writer and not yet written.
        var unsent: Locked<Int>
        /// The connection, closed at once when the session is aborted.
        var channel: any Channel
    }
    private var shell = ShellStatistics()
    private var tcpConnections = ConnectionCount()
    /// Records a link reported gone while a replay for another link was on its way: the replay
    /// must not bring them back.
    private var pendingReplays: [ReplayKey: Set<ResourceRecord>] = [:]
    private struct ReplayKey: Hashable {
        var link: LinkIndex
        var question: LinkQuestion
    }
    private let clock: any ShellClock
    private let alarm = Alarm()
    private let logger: Logger
    private let stop: AsyncStream<Void>.Continuation
    private let stopped: AsyncStream<Void>
    private var isShutDown = false

    /// Opens the sockets and the mDNS engine on the links' interfaces; nothing is answered until
    /// ``run()`` runs.
    /// - Throws: `ProxyError`: `invalidInput` (no link, no address, an interface named twice),
    ///   `cannotListen` (an address that is not this host's, a port in use or needing root),
    ///   `linkUnavailable` (no such interface, or no multicast on it).
    public static func prepare(_ configuration: Configuration, logger: Logger = Logger(label: "nearby.proxy", factory: { _ in SwiftLogNoOpLogHandler() })) async throws(ProxyError) -> DiscoveryProxy {
        try await prepare(configuration, logger: logger, clock: SystemClock())
    }

    /// ``prepare(_:logger:)`` with the clock the proxy keeps its time by (tests give a manual one).
    package static func prepare(_ configuration: Configuration, logger: Logger, clock: any ShellClock) async throws(ProxyError) -> DiscoveryProxy {
        guard !configuration.links.isEmpty else { throw ProxyError(.invalidInput, "no link to proxy: give at least one INTERFACE=ZONE") }
        guard !configuration.listen.isEmpty else {
            throw ProxyError(.invalidInput, "no address to answer on: give the addresses the parent zone's NS records point at (--listen ADDRESS)")
        }
        let names = configuration.links.map(\.interface)
        guard Set(names).count == names.count else {
            throw ProxyError(.invalidInput, "an interface is named twice (\(names.joined(separator: ", "))): one zone per link")
        }
        let querier: any LinkQuerier
        switch configuration.backend {
        case .embedded: querier = try await EmbeddedLinkQuerier.prepare(interfaces: names, logger: logger)
        case .system: querier = try await SystemLinkQuerier.prepare(interfaces: names, logger: logger)
        }
        var udp: [any Channel] = []
        var tcp: [TCPServer] = []
        var push: [TCPServer] = []
        var port = Int(configuration.port)
        var tls: NIOSSLContext?
        if let service = configuration.push {
            do {
                tls = try Self.tlsContext(service, names: configuration.links.compactMap { $0.zone.nameServers.first?.name.description })
            } catch {
                await querier.shutdown()
                throw error
            }
        }
        // DNS Push's listeners first: the zones name their port.
        var pushPort = Int(configuration.push?.port ?? 0)
        if let tls {
            do {
                for address in configuration.listen {
                    let server = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
                        .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
                        .serverChannelOption(.backlog, value: 128)
                        .bind(to: try NIOCore.SocketAddress(ipAddress: address.withoutScope.description, port: pushPort)) { channel in
                            channel.eventLoop.makeCompletedFuture {
                                try channel.pipeline.syncOperations.addHandler(NIOSSLServerHandler(context: tls))
                                return try NIOAsyncChannel<ByteBuffer, ByteBuffer>(wrappingChannelSynchronously: channel)
                            }
                        }
                    if pushPort == 0 { pushPort = server.channel.localAddress?.port ?? 0 }
                    push.append(server)
                }
            } catch {
                for server in push { try? await server.channel.close() }
                await querier.shutdown()
                throw ProxyError(.cannotListen, "cannot offer DNS Push on \(configuration.listen.map(\.description).joined(separator: ", ")) port \(configuration.push?.port ?? 0): \(error) (is the port free, and below 1024 allowed: root or CAP_NET_BIND_SERVICE? --push-port 0 picks a free one, --no-push offers none)")
            }
        }
        var answering = configuration.answering
        answering.pushPort = tls == nil ? nil : UInt16(pushPort)
        let desk = AnsweringDesk(ProxyStateMachine(answering, now: clock.now))
        do {
            // One event loop answers every UDP socket: the answering machine is behind one lock,
            // and sockets on two loops (SO_REUSEPORT) spent more on waiting for it and on
            // waking each other than they gained (measured with Tools/bench-proxy: 19 µs of CPU
            // per question instead of 12).
            let loop = MultiThreadedEventLoopGroup.singleton.next()
            for address in configuration.listen {
                let socket = try NIOCore.SocketAddress(ipAddress: address.withoutScope.description, port: port)
                let channel = try await DatagramBootstrap(group: loop)
                    .channelOption(.socketOption(.so_reuseaddr), value: 1)
                    // Up to 16 questions read per wake-up, and their replies flushed together.
                    .channelOption(.maxMessagesPerRead, value: 16)
                    .channelInitializer { channel in
                        channel.eventLoop.makeCompletedFuture {
                            try channel.pipeline.syncOperations.addHandler(UDPAnswering(desk: desk, clock: clock))
                        }
                    }
                    .bind(to: socket).get()
                if port == 0 { port = channel.localAddress?.port ?? 0 }
                udp.append(channel)
                let server = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
                    .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
                    .serverChannelOption(.backlog, value: 128)
                    // A client may half-close once it has asked (RFC 7766 §6.2.1 lets it): its
                    // answers still go out, so the connection stays writable after its end.
                    .childChannelOption(.allowRemoteHalfClosure, value: true)
                    .bind(to: try NIOCore.SocketAddress(ipAddress: address.withoutScope.description, port: port)) { channel in
                        channel.eventLoop.makeCompletedFuture { try NIOAsyncChannel<ByteBuffer, ByteBuffer>(wrappingChannelSynchronously: channel) }
                    }
                tcp.append(server)
            }
        } catch {
            for channel in udp { try? await channel.close() }
            for server in tcp + push { try? await server.channel.close() }
            await querier.shutdown()
            throw ProxyError(.cannotListen, "cannot answer on \(configuration.listen.map(\.description).joined(separator: ", ")) port \(configuration.port): \(error) (is the address this host's, the port free, and port 53 allowed: root or CAP_NET_BIND_SERVICE?)")
        }
        return DiscoveryProxy(
            configuration, port: UInt16(port), pushPort: tls == nil ? nil : UInt16(pushPort), querier: querier, udp: udp, tcp: tcp, push: push,
            desk: desk, clock: clock, logger: logger)
    }

    private init(
        _ configuration: Configuration, port: UInt16, pushPort: UInt16?, querier: any LinkQuerier, udp: [any Channel], tcp: [TCPServer],
        push: [TCPServer], desk: AnsweringDesk, clock: any ShellClock, logger: Logger
    ) {
        var configuration = configuration
        configuration.answering.pushPort = pushPort
        self.configuration = configuration
        self.port = port
        self.pushPort = pushPort
        pushServers = push
        self.desk = desk
        self.clock = clock
        self.querier = querier
        var links: [String: [LinkIndex]] = [:]
        for (index, link) in configuration.links.enumerated() { links[link.interface, default: []].append(LinkIndex(index)) }
        linksOfInterface = links
        udpChannels = udp
        tcpServers = tcp
        self.logger = logger
        (stopped, stop) = AsyncStream<Void>.makeStream()
        (engineWork, engineQueue) = AsyncStream<EngineWork>.makeStream()
    }

    /// The answering machine's counters.
    public var statistics: ProxyStateMachine.Statistics { desk.read(\.statistics) }
    /// The socket side's counters.
    public var shellStatistics: ShellStatistics {
        var statistics = shell
        statistics.udpRepliesDropped = desk.udpRepliesDropped
        return statistics
    }

    /// The proxy's work until ``shutdown()`` or cancellation: the mDNS engine, a reader and a
    /// writer per UDP socket, the TCP listeners and their connections, the link's reports and
    /// the timekeeper, all children of this call.
    public func run() async {
        guard !isShutDown else { return }
        let (querier, alarm, clock, stopped) = (querier, alarm, clock, stopped)
        let work = engineWork
        let deskActions = desk.actions
        let interfaces = configuration.links.map(\.interface)
        let tcp = tcpServers
        alarm.set(desk.nextDeadline)
        logger.info("answering for \(configuration.links.map { "\($0.zone) (link \($0.interface))" }.joined(separator: ", ")) on \(configuration.listen.map(\.description).joined(separator: ", ")) port \(port), UDP and TCP\(pushPort.map { "; DNS Push over TLS on port \($0)" } ?? "")")
        await withDiscardingTaskGroup { group in
            group.addTask { await querier.run() }
            group.addTask { [weak self] in
                // The link questions, started and stopped in the order the machine asked.
                await withDiscardingTaskGroup { reconfirms in
                    for await item in work {
                        switch item {
                        case .start(let questions): await querier.start(questions)
                        case .stop(let question): await querier.stop(question)
                        case .replay(let question, let link):
                            let known = await querier.known(question, interface: interfaces[link.rawValue])
                            await self?.replayed(known, question: question, link: link)
                        case .reconfirm(let record):
                            // Twice, a second apart: two unanswered queries flush it (§10.5).
                            reconfirms.addTask {
                                await querier.reconfirm(record)
                                try? await clock.sleep(for: .seconds(1))
                                await querier.reconfirm(record)
                            }
                        }
                    }
                }
            }
            group.addTask { [weak self] in
                for await batch in querier.reports {
                    guard let self else { return }
                    await self.linkReported(batch)
                }
            }
            group.addTask {
                await alarm.run(clock: clock) { await self.tick() }
            }
            group.addTask { [weak self] in
                // What the machine decided besides replies, in its order, whoever asked.
                for await actions in deskActions {
                    await self?.perform(actions)
                }
            }
            for server in tcp {
                group.addTask { [weak self] in await self?.serve(server, as: .dns) }
            }
            for server in self.pushServers {
                group.addTask { [weak self] in await self?.serve(server, as: .push) }
            }
            group.addTask { [weak self] in
                while !Task.isCancelled {
                    try? await clock.sleep(for: .seconds(30))
                    await self?.logCounters()
                }
            }
            for await _ in stopped {}
            group.cancelAll()
        }
    }

    /// Stops answering, stops the link questions and closes the sockets.
    public func shutdown() async {
        guard !isShutDown else { return }
        isShutDown = true
        for path in desk.takeAllPaths() {
            if case .tcp(let continuation) = path { continuation.finish() }
        }
        for state in sessions.values { state.writer.finish() }
        engineQueue.finish()
        desk.finish()
        await querier.shutdown()
        for channel in udpChannels { try? await channel.close() }
        for server in tcpServers + pushServers { try? await server.channel.close() }
        stop.finish()
    }

    // MARK: Questions in

    /// The TCP listeners: plain DNS (RFC 7766) or DNS Push sessions over TLS.
    private enum Listener: Sendable {
        case dns
        case push
    }

    private func serve(_ server: TCPServer, as kind: Listener) async {
        do {
            try await server.executeThenClose { connections in
                try await withThrowingDiscardingTaskGroup { group in
                    for try await connection in connections {
                        guard let remote = connection.channel.remoteAddress.flatMap(Self.ipAddress(of:)),
                            kind == .dns ? self.admitTCP(remote) : self.admitPush(remote)
                        else {
                            try? await connection.channel.close()
                            continue
                        }
                        group.addTask { [weak self] in
                            switch kind {
                            case .dns: await self?.serveConnection(connection, from: remote)
                            case .push: await self?.serveSession(connection, from: remote)
                            }
                        }
                    }
                }
            }
        } catch {
            if !isShutDown { logger.warning("\(kind == .dns ? "TCP" : "DNS Push") listener \(server.channel.localAddress?.description ?? "?") failed: \(error)") }
        }
    }

    private func admitTCP(_ source: IPAddress) -> Bool {
        guard tcpConnections.admit(source, most: configuration.maximumTCPConnections, fromOne: configuration.maximumTCPConnectionsPerSource) else {
            shell.tcpConnectionsRefused += 1
            return false
        }
        shell.tcpConnections += 1
        return true
    }

    private func tcpClosed(_ source: IPAddress) { tcpConnections.closed(source) }

    /// One TCP connection: questions with their 2-byte lengths (RFC 1035 §4.2.2, RFC 7766), any
    /// number in a row, answered in the order the answers are ready. The connection is closed
    /// when it has asked nothing whole for the idle time, when it has more questions in flight
    /// than allowed (it asks without reading), and after the peer's end of stream once every
    /// question it asked has been answered.
    private func serveConnection(_ connection: NIOAsyncChannel<ByteBuffer, ByteBuffer>, from source: IPAddress) async {
        defer { tcpClosed(source) }
        let (answers, continuation) = AsyncStream<[UInt8]?>.makeStream()
        // Bounded: at most `limit` questions are in flight, and each gives one answer (or nil).
        let lastQuestion = Locked(clock.now)
        /// Questions asked and not yet answered, and whether the peer has stopped asking.
        let inFlight = Locked((count: 0, peerDone: false))
        let (clock, idle, limit, drainTime) = (
            clock, configuration.tcpIdleTimeout, configuration.maximumTCPQuestionsInFlight, configuration.answering.answerTimeout + .milliseconds(500)
        )
        do {
            try await connection.executeThenClose { inbound, outbound in
                await withThrowingTaskGroup(of: Void.self) { group in
                    group.addTask {
                        for await answer in answers {
                            if let answer { try await outbound.write(DNSOverTCP.framed(answer)) }
                            let drained = inFlight.withLockedValue { state -> Bool in
                                state.count -= 1
                                return state.peerDone && state.count == 0
                            }
                            // The peer is done asking and has every answer: the connection ends.
                            if drained { return }
                        }
                    }
                    group.addTask {
                        // Closes a connection that has asked nothing whole for the idle time.
                        while !Task.isCancelled {
                            let deadline = lastQuestion.withLockedValue { $0 } + idle
                            if clock.now >= deadline, inFlight.withLockedValue({ $0.count }) == 0 {
                                await self.countTCP(\.tcpIdleClosed)
                                throw CancellationError()
                            }
                            try await clock.sleep(until: max(deadline, clock.now + .milliseconds(100)))
                        }
                    }
                    group.addTask {
                        try await DNSOverTCP.messages(in: inbound) { message in
                            lastQuestion.withLockedValue { $0 = clock.now }
                            let count = inFlight.withLockedValue { state -> Int in
                                state.count += 1
                                return state.count
                            }
                            if count > limit {
                                await self.countTCP(\.tcpOverfull)
                                throw CancellationError()
                            }
                            await self.questionArrived(message, from: source, over: .tcp, path: .tcp(continuation))
                            return true
                        }
                        // The peer is done asking: its answers still in flight get their time
                        // (the writer ends the connection when the last is written).
                        let waiting = inFlight.withLockedValue { state -> Int in
                            state.peerDone = true
                            return state.count
                        }
                        if waiting > 0 { try await clock.sleep(until: clock.now + drainTime) }
                        throw CancellationError()
                    }
                    // The first child to end (the peer closed, idle, too many in flight, or the
                    // writer failed) ends them all.
                    _ = try? await group.next()
                    group.cancelAll()
                    continuation.finish()
                }
            }
        } catch {
            logger.debug("TCP connection from \(source) ended: \(error)")
        }
        continuation.finish()
    }

    private func countTCP(_ counter: WritableKeyPath<ShellStatistics, Int>) { shell[keyPath: counter] += 1 }


    /// A question over TCP (UDP's are answered on their event loop, by ``UDPAnswering``).
    private func questionArrived(_ bytes: [UInt8], from source: IPAddress, over transport: ProxyStateMachine.Transport, path: ReplyPath) {
        guard !isShutDown else { return }
        let (reply, dropped) = desk.received(bytes, from: source, over: transport, path: path, now: clock.now)
        if case .tcp(let continuation) = path {
            if let reply { continuation.yield(reply) } else if dropped { continuation.yield(nil) }
        }
        alarm.set(desk.nextDeadline)
    }

    // MARK: DNS Push sessions

    static func tlsContext(_ service: PushService, names: [String]) throws(ProxyError) -> NIOSSLContext {
        let identity: PeerIdentity
        do {
            identity = try service.identity ?? PeerIdentity.generate(displayName: names.first ?? "nearby proxy")
        } catch {
            throw ProxyError(.invalidInput, "cannot make a certificate for DNS Push: \(error)")
        }
        do {
            let chain = try identity.certificateChain.map { NIOSSLCertificateSource.certificate(try NIOSSLCertificate(bytes: $0.der, format: .der)) }
            let key = NIOSSLPrivateKeySource.privateKey(try NIOSSLPrivateKey(bytes: identity.privateKeyPKCS8, format: .der))
            var configuration = TLSConfiguration.makeServerConfiguration(certificateChain: chain, privateKey: key)
            configuration.minimumTLSVersion = .tlsv12  // RFC 8490 §8: TLS 1.2 or later
            return try NIOSSLContext(configuration: configuration)
        } catch {
            throw ProxyError(.invalidInput, "the DNS Push certificate or key cannot be used for TLS: \(error)")
        }
    }

    private func admitPush(_ source: IPAddress) -> Bool {
        guard let push = configuration.push, !isShutDown,
            pushConnections.admit(source, most: push.maximumSessions, fromOne: push.maximumSessionsPerSource)
        else {
            shell.pushSessionsRefused += 1
            return false
        }
        shell.pushSessions += 1
        return true
    }

    /// One DSO session over TLS: DSO messages with their 2-byte lengths in, the session
    /// machine's answers and the proxy's pushes out, in order. It ends when the client closes,
    /// when the machine closes it (a protocol error, inactivity), or when the client leaves too
    /// many messages unread.
    private func serveSession(_ connection: NIOAsyncChannel<ByteBuffer, ByteBuffer>, from source: IPAddress) async {
        let id = nextSession
        nextSession += 1
        let (outgoing, writer) = AsyncStream<[UInt8]>.makeStream()
        let unsent = Locked(0)
        sessions[id] = SessionState(
            session: PushSession(configuration.push?.session ?? .init(), now: clock.now), writer: writer, unsent: unsent, channel: connection.channel)
        logger.debug("DNS Push session \(id) from \(source)")
        defer { sessionClosed(id, source: source) }
        let clock = clock
        do {
            try await connection.executeThenClose { inbound, outbound in
                await withThrowingTaskGroup(of: Void.self) { group in
                    group.addTask {
                        for await message in outgoing {
                            try await outbound.write(DNSOverTCP.framed(message))
                            unsent.withLockedValue { $0 -= message.count }
                        }
                    }
                    group.addTask {
                        try await DNSOverTCP.messages(in: inbound) { message in
                            await self.sessionReceived(id, message)
                            return true
                        }
                    }
                    group.addTask {
                        // The session's clock: inactivity and keepalive. At most 5 s asleep, so
                        // that a deadline brought forward (the last UNSUBSCRIBE) is kept.
                        while let deadline = await self.sessionDeadline(id) {
                            try await clock.sleep(until: min(deadline, clock.now + .seconds(5)))
                            await self.sessionTick(id)
                        }
                    }
                    _ = try? await group.next()
                    group.cancelAll()
                }
            }
        } catch {
            logger.debug("DNS Push session \(id) from \(source) ended: \(error)")
        }
    }

    private func sessionDeadline(_ id: UInt64) -> Duration? { sessions[id]?.session.nextDeadline }

    private func sessionReceived(_ id: UInt64, _ bytes: [UInt8]) {
        guard !isShutDown, var state = sessions[id] else { return }
        let actions = state.session.received(bytes, now: clock.now)
        sessions[id] = state
        sessionPerform(id, actions)
    }

    private func sessionTick(_ id: UInt64) {
        guard !isShutDown, var state = sessions[id] else { return }
        let actions = state.session.advance(to: clock.now)
        sessions[id] = state
        sessionPerform(id, actions)
    }

    /// Carries out a session machine's actions (the proxy machine's, which they set off, come
    /// through the desk's queue).
    private func sessionPerform(_ id: UInt64, _ actions: [PushSession.Action]) {
        for action in actions {
            guard let state = sessions[id] else { return }
            switch action {
            case .send(let message):
                let backlog = state.unsent.withLockedValue { count -> Int in
                    count += message.count
                    return count
                }
                if backlog > configuration.push?.maximumUnsentBytes ?? 512 * 1024 {
                    shell.pushSessionsOverfull += 1
                    logger.info("DNS Push session \(id) aborted: its client left \(backlog) bytes unread")
                    endSession(id, abort: true)
                    return
                }
                sessions[id]?.session.sent(now: clock.now)
                state.writer.yield(message)
            case .subscribe(let messageID, let question):
                let now = clock.now
                let result = desk.act { $0.subscribe(question, session: .init(id), id: messageID, now: now) }
                var follow: [PushSession.Action]
                switch result {
                case .accepted(let current):
                    follow = sessions[id]?.session.subscribed(messageID, code: .noError) ?? []
                    follow += sessions[id]?.session.push(current) ?? []
                case .refused(let code):
                    follow = sessions[id]?.session.subscribed(messageID, code: code) ?? []
                }
                sessionPerform(id, follow)
            case .unsubscribe(let messageID):
                let now = clock.now
                desk.act { machine in
                    machine.unsubscribe(session: .init(id), id: messageID, now: now)
                    return []
                }
            case .reconfirm(let record):
                shell.pushReconfirms += 1
                logger.debug("DNS Push session \(id): RECONFIRM of \(record.name) \(record.type)")
                desk.act { $0.reconfirm(record) }
            case .close(let abort, let reason):
                logger.debug("DNS Push session \(id) \(abort ? "aborted" : "closed"): \(reason)")
                endSession(id, abort: abort)
            }
        }
    }

    /// Ends a session from this side: its subscriptions end, and its writer finishes, which
    /// closes the connection once what is queued is written; an abort closes it at once.
    private func endSession(_ id: UInt64, abort: Bool) {
        guard var state = sessions.removeValue(forKey: id) else { return }
        _ = state.session.ended()
        let now = clock.now
        desk.act { machine in
            machine.sessionEnded(.init(id), now: now)
            return []
        }
        state.writer.finish()
        if abort { state.channel.close(promise: nil) }
    }

    private func sessionClosed(_ id: UInt64, source: IPAddress) {
        endSession(id, abort: false)
        pushConnections.closed(source)
    }

    // MARK: The link

    private func linkReported(_ batch: [LinkReport]) {
        guard !isShutDown else { return }
        struct Change {
            var added: [ResourceRecord] = []
            var removed: [ResourceRecord] = []
        }
        var changes: [LinkIndex: [LinkQuestion: Change]] = [:]
        for report in batch {
            let (record, isAdded) = (report.record, report.added)
            for link in linksOfInterface[report.interface] ?? [] {
                let question = LinkQuestion(name: record.name, type: record.type)
                if !isAdded || record.isGoodbye, pendingReplays[ReplayKey(link: link, question: question)] != nil {
                    pendingReplays[ReplayKey(link: link, question: question)]?.insert(record)
                }
                if isAdded {
                    changes[link, default: [:]][question, default: Change()].added.append(record)
                } else {
                    changes[link, default: [:]][question, default: Change()].removed.append(record)
                }
            }
        }
        let now = clock.now
        desk.act { machine in
            var actions: [ProxyStateMachine.Action] = []
            for (link, questions) in changes {
                for (question, change) in questions {
                    actions += machine.linkChanged(link, question, added: change.added, removed: change.removed, now: now)
                }
            }
            return actions
        }
        alarm.set(desk.nextDeadline)
    }

    private func tick() {
        guard !isShutDown else { return }
        let now = clock.now
        desk.act { $0.advance(to: now) }
        alarm.set(desk.nextDeadline)
    }

    // MARK: Actions out

    private func perform(_ actions: [ProxyStateMachine.Action]) {
        var starts: [LinkQuestion] = []
        for action in actions {
            switch action {
            case .reply, .drop:
                break  // delivered by the desk, never queued
            case .push(let session, let changes):
                guard let state = sessions[session.rawValue] else { continue }
                sessionPerform(session.rawValue, state.session.push(changes))
            case .reconfirmOnLink(_, let record):
                engineQueue.yield(.reconfirm(record))
            case .startLinkQuestion(let link, let question):
                if engineQueries[question] != nil {
                    // Already asked for another link: what the querier knows is replayed; what
                    // goes meanwhile is noted, so that the replay does not bring it back.
                    engineQueries[question]?.insert(link)
                    pendingReplays[ReplayKey(link: link, question: question)] = []
                    engineQueue.yield(.replay(question, link))
                } else {
                    engineQueries[question] = [link]
                    starts.append(question)
                }
            case .stopLinkQuestion(let link, let question):
                engineQueries[question]?.remove(link)
                if engineQueries[question]?.isEmpty == true {
                    engineQueries[question] = nil
                    engineQueue.yield(.stop(question))
                }
            }
        }
        if !starts.isEmpty { engineQueue.yield(.start(starts)) }
        alarm.set(desk.nextDeadline)
    }

    private func replayed(_ records: [ResourceRecord], question: LinkQuestion, link: LinkIndex) {
        guard !isShutDown else { return }
        let gone = pendingReplays.removeValue(forKey: ReplayKey(link: link, question: question)) ?? []
        let current = records.filter { record in !gone.contains { $0.name == record.name && $0.data == record.data } }
        let now = clock.now
        desk.act { $0.linkChanged(link, question, added: current, removed: [], now: now) }
        alarm.set(desk.nextDeadline)
    }

    private var loggedStatistics = ProxyStateMachine.Statistics()

    private func logCounters() {
        let (now, linkQuestions) = desk.read { ($0.statistics, $0.linkQuestions.count) }
        guard now != loggedStatistics else { return }
        loggedStatistics = now
        logger.info(
            "\(now.questions) questions: \(now.answeredFromLink) answered from the link, \(now.noData) with no records, \(now.refusedOutsideZones) refused (outside the zones), \(now.rateLimited) over a source's rate, \(now.linkQuestionsOverBudget) over the link budget, \(now.formatErrors + now.droppedUnreadable) malformed; \(linkQuestions) link questions; \(now.cachedReplies) answered from kept replies; \(desk.udpRepliesDropped) UDP replies dropped")
    }

    static func ipAddress(of address: NIOCore.SocketAddress) -> IPAddress? {
        guard let text = address.ipAddress else { return nil }
        if let v4 = IPv4Address(text) { return .v4(v4) }
        if let v6 = IPv6Address(text) { return .v6(v6) }
        return nil
    }
}

/// Connections open at once, in all and from each address.
struct ConnectionCount {
    private var open = 0
    private var bySource: [IPAddress: Int] = [:]

    /// Counts a new connection from `source` if it stays within `most` in all and `fromOne`
    /// from that address; false (nothing counted) when it would not.
    mutating func admit(_ source: IPAddress, most: Int, fromOne: Int) -> Bool {
        guard open < most, bySource[source, default: 0] < fromOne else { return false }
        open += 1
        bySource[source, default: 0] += 1
        return true
    }

    mutating func closed(_ source: IPAddress) {
        open -= 1
        let left = bySource[source, default: 1] - 1
        bySource[source] = left > 0 ? left : nil
    }
}
