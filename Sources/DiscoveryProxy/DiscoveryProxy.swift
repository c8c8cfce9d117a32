import CoreMetrics
import DNSWire
public import DiscoveryProxyCore
public import Logging
import NIOCore
import NIOPosix
package import NearbyBasics
import PeerTrust

/// A discovery proxy (RFC 8766) on sockets: for each configured link, answers unicast DNS
/// questions for the link's zone from a continuous mDNS querier on that link, over UDP and TCP
/// on the configured addresses.
///
/// The decisions are the pure machines' (`ProxyStateMachine`, `LinkQuerySharing`,
/// `PushSessionTable`, `TCPConnectionState`); this actor only wires the shells that carry
/// them out: UDP answered on its event loop (`UDPAnswering`), TCP (`TCPAnswering`), DNS Push
/// (`PushSessions`), the link side (`ProxyLinks`), and the machine's one deadline.
///
/// ```swift
/// let zone = try ProxyZone("lan1.example.test.", nameServers: [.init(name: "proxy1.example.test.", addresses: [])])
/// let configuration = DiscoveryProxy.Configuration(
///     links: [.init(zone: zone, interface: "eth0")], listen: [.v4(IPv4Address(192, 0, 2, 5))])
/// let proxy = try await DiscoveryProxy.prepare(configuration)
/// await proxy.run()   // until shutdown() or cancellation
/// ```
public actor DiscoveryProxy {
    public let configuration: Configuration
    /// The port the proxy answers on.
    public nonisolated let port: UInt16
    /// The DNS Push port, when Push is offered.
    public nonisolated let pushPort: UInt16?
    /// The answering machine and the reply paths, shared with the UDP sockets' event loops.
    private let desk: AnsweringDesk
    private let links: ProxyLinks
    private let udpChannels: [any Channel]
    private let tcp: TCPAnswering
    private let push: PushSessions?
    /// The answering machine's one deadline, waited for by one child of ``run()``.
    private let alarm: Alarm
    private let clock: any ShellClock
    private let logger: Logger
    /// ``run()``'s children: ``shutdown()`` finishing it is the one way the proxy stops.
    private let children = ChildTasks()

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
        let tls = try configuration.push.map { service throws(ProxyError) in
            try Self.tlsContext(service, names: configuration.links.compactMap { $0.zone.nameServers.first?.name.description })
        }
        let querier: any LinkQuerier
        switch configuration.backend {
        case .embedded: querier = try await EmbeddedLinkQuerier.prepare(interfaces: names, logger: logger)
        case .system: querier = try await SystemLinkQuerier.prepare(interfaces: names, logger: logger)
        }
        var configuration = configuration
        // DNS Push's listeners first: the zones name their port.
        var pushServers: [Server] = []
        do {
            if let tls {
                let pushPort: Int
                (pushServers, pushPort) = try await openPush(configuration, tls: tls, port: Int(configuration.push?.port ?? 0))
                configuration.answering.pushPort = UInt16(pushPort)
            } else {
                configuration.answering.pushPort = nil
            }
            // Metrics from the factory in force now: swift-metrics' global one, or the caller's
            // task-local one (MetricsSystem.factory says which).
            let metrics = ProxyMetrics(factory: MetricsSystem.factory)
            let desk = AnsweringDesk(ProxyStateMachine(configuration.answering, now: clock.now), clock: clock, metrics: metrics.answering)
            let (udp, tcp, port) = try await openDNS(configuration, desk: desk, clock: clock)
            return DiscoveryProxy(
                configuration, port: UInt16(port), querier: querier, udp: udp, tcp: tcp, push: pushServers, desk: desk, metrics: metrics, clock: clock,
                logger: logger)
        } catch {
            for server in pushServers { try? await server.channel.close() }
            await querier.shutdown()
            throw error
        }
    }

    private init(
        _ configuration: Configuration, port: UInt16, querier: any LinkQuerier, udp: [any Channel], tcp: [Server], push: [Server],
        desk: AnsweringDesk, metrics: ProxyMetrics, clock: any ShellClock, logger: Logger
    ) {
        self.configuration = configuration
        self.port = port
        pushPort = configuration.answering.pushPort
        self.desk = desk
        self.clock = clock
        self.logger = logger
        let alarm = Alarm()
        self.alarm = alarm
        links = ProxyLinks(querier: querier, interfaces: configuration.links.map(\.interface), desk: desk, alarm: alarm, clock: clock)
        udpChannels = udp
        let limits = TCPAnswering.Limits(
            maximumConnections: configuration.maximumTCPConnections, maximumConnectionsPerSource: configuration.maximumTCPConnectionsPerSource,
            connection: .init(
                idleTimeout: configuration.tcpIdleTimeout, maximumInFlight: configuration.maximumTCPQuestionsInFlight,
                drainTime: configuration.answering.answerTimeout + .milliseconds(500)))
        self.tcp = TCPAnswering(servers: tcp, limits: limits, desk: desk, alarm: alarm, clock: clock, metrics: metrics.tcp, logger: logger)
        self.push = configuration.push.map { PushSessions($0.table, servers: push, desk: desk, clock: clock, metrics: metrics.push, logger: logger) }
    }

    /// The answering machine's counters.
    public var statistics: ProxyStateMachine.Statistics { desk.read(\.statistics) }
    /// The socket side's counters.
    public var shellStatistics: ShellStatistics {
        get async {
            let tcp = tcp.statistics
            let push = await push?.statistics ?? PushSessionTable.Statistics()
            return ShellStatistics(
                udpRepliesDropped: desk.udpRepliesDropped, tcpConnections: tcp.connections, tcpConnectionsRefused: tcp.refused,
                tcpIdleClosed: tcp.idleClosed, tcpOverfull: tcp.overfull, pushSessions: push.sessions, pushSessionsRefused: push.refused,
                pushSessionsOverfull: push.overfull, pushReconfirms: push.reconfirms)
        }
    }

    /// The proxy's work until ``shutdown()`` or cancellation, all children of this call: the
    /// link side (the querier, its work and its reports), the machine's actions, the
    /// timekeeper, the TCP and DNS Push listeners with their connections, and the counters'
    /// log. (UDP is answered on its event loop, outside any task.)
    public func run() async {
        let (desk, links, push, tcp, alarm, clock, logger) = (desk, links, push, tcp, alarm, clock, logger)
        alarm.set(desk.nextDeadline)
        logger.info("answering for \(configuration.links.map { "\($0.zone) (link \($0.interface))" }.joined(separator: ", ")) on \(configuration.listen.map(\.description).joined(separator: ", ")) port \(port), UDP and TCP\(pushPort.map { "; DNS Push over TLS on port \($0)" } ?? "")")
        children.spawn { await links.run() }
        children.spawn {
            // What the machine decided besides replies, in its order, whoever asked.
            for await actions in desk.actions {
                for case .push(let session, let changes) in actions { await push?.push(session, changes) }
                await links.perform(actions)
                alarm.set(desk.nextDeadline)
            }
        }
        children.spawn {
            await alarm.run(clock: clock) {
                let now = clock.now
                desk.act { $0.advance(to: now) }
                alarm.set(desk.nextDeadline)
            }
        }
        children.spawn { await tcp.run() }
        if let push { children.spawn { await push.run() } }
        children.spawn { await Self.logCounters(desk, every: .seconds(30), clock: clock, logger: logger) }
        await children.run()
    }

    /// Stops answering, stops the link questions, closes the sockets, and ends ``run()``.
    public func shutdown() async {
        desk.finish()
        for path in desk.takeAllPaths() {
            if case .tcp(let continuation) = path { continuation.finish() }
        }
        await push?.close()
        await tcp.close()
        await links.shutdown()
        for channel in udpChannels { try? await channel.close() }
        children.finish()
    }

    /// Logs the machine's counters when they have changed, at most once per `interval`.
    private static func logCounters(_ desk: AnsweringDesk, every interval: Duration, clock: any ShellClock, logger: Logger) async {
        var logged = ProxyStateMachine.Statistics()
        while (try? await clock.sleep(for: interval)) != nil {
            let (now, linkQuestions) = desk.read { ($0.statistics, $0.linkQuestions.count) }
            guard now != logged else { continue }
            logged = now
            logger.info(
                "\(now.questions) questions: \(now.answeredFromLink) answered from the link, \(now.noData) with no records, \(now.refusedOutsideZones) refused (outside the zones), \(now.rateLimited) over a source's rate, \(now.linkQuestionsOverBudget) over the link budget, \(now.formatErrors + now.droppedUnreadable) malformed; \(linkQuestions) link questions; \(now.cachedReplies) answered from kept replies; \(desk.udpRepliesDropped) UDP replies dropped")
        }
    }
}
