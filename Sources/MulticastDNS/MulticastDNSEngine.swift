import CoreMetrics
public import DNSWire
public import Logging
public import MulticastDNSCore
public import NearbyBasics
import NetworkPlatform

/// What happens to a registration.
public enum RegistrationEvent: Sendable, Equatable {
    /// The name was won after probing; the service is being announced.
    case registered(DomainName)
    /// A conflict made the engine give up a name and try another.
    case renamed(from: DomainName, to: DomainName)
    /// Another device's registration (``MulticastDNSEngine/registerProxied(_:host:)``,
    /// ``MulticastDNSEngine/registerProxiedHost(_:addresses:)``) met a rival on the link: it is
    /// given up, never renamed. The stream ends after it.
    case conflicted(DomainName)
}

/// What happened to a registration of another device (``MulticastDNSEngine/registerProxied(_:host:)``,
/// ``MulticastDNSEngine/registerProxiedHost(_:addresses:)``).
public struct ProxiedEvent: Sendable, Equatable {
    public var id: RegistrationID
    /// `registered` (probing won the name) or `conflicted` (another device holds it: given up).
    public var event: RegistrationEvent
}

/// What a continuous query learns.
public enum QueryEvent: Sendable, Equatable {
    case added(ResourceRecord, NetworkInterface)
    case removed(ResourceRecord, NetworkInterface)
}

/// A set of queries whose events are delivered together (see ``MulticastDNSEngine/openQueryGroup()``).
public struct QueryGroup: Hashable, Sendable {
    public let rawValue: Int
}

/// The embedded mDNS responder and querier on real sockets: drives an ``MDNSCore`` with a
/// clock and an ``MulticastTransport``, watches the interfaces, and hands events to whoever
/// asked for them. Needs no daemon; shares port 5353 with one if it runs.
///
/// Its work is the children of one task group (``run()``): the receiver, the interface watch
/// (the kernel's reports and a look every two seconds) and the timekeeper. Made with
/// ``prepare(hostName:interfaces:logger:)``, the caller's task group runs ``run()`` and owns
/// that work; ``start(hostName:interfaces:logger:)`` runs it in a task of the engine's own,
/// for callers without a task group. Either way ``shutdown()`` says the goodbyes and ends it.
public actor MulticastDNSEngine {
    let core: MDNSCore
    let transport: MulticastTransport
    let clock: any ShellClock
    let interfaceNames: [String]?
    /// The kernel's link and address reports (nil where there are none).
    let linkWatch: LinkWatch?
    var interfaceInfo: [Int: InterfaceInfo] = [:]
    /// This machine's addresses on the interfaces in use (scopes removed).
    var ownAddresses: [IPAddress] = []
    /// The core's next deadline, for the timekeeping child.
    let alarm = Alarm()
    /// ``start(hostName:interfaces:logger:)``'s task, which runs the work.
    var runner: Task<Void, Never>?
    /// Finished at ``shutdown()``: ends ``run()``.
    let stopped: AsyncStream<Never>
    let stop: AsyncStream<Never>.Continuation
    /// ``run()`` is doing the work.
    var running = false
    /// Datagrams we multicast lately: the multicast loop brings each back, and every other
    /// interface of ours on the same link hears it once more. None of them is news.
    var recentlySent = SentPackets()
    var registrations: [RegistrationID: AsyncStream<RegistrationEvent>.Continuation] = [:]
    /// Registrations of other devices (an advertising proxy's), whose events go to
    /// ``proxiedEvents`` instead of a stream each: a registrar holding a thousand of them reads
    /// one stream, with one task, rather than a thousand.
    var proxiedIDs: Set<RegistrationID> = []
    /// What happens to the proxied registrations (won after probing, given up on a conflict),
    /// for their one reader. A reader that falls behind reads the newest event of each
    /// registration (bounded by the registrations).
    public nonisolated let proxiedEvents: EventStream<ProxiedEvent>
    let proxied: EventStream<ProxiedEvent>.Source
    var queries: [QueryID: EventStream<QueryEvent>.Source] = [:]
    /// Query groups: the events of all their queries arrive together, one batch per flush.
    var groups: [QueryGroup: EventStream<[QueryEvent]>.Source] = [:]
    var groupOfQuery: [QueryID: QueryGroup] = [:]
    var nextGroup = 1
    var isShutDown = false
    let logger: Logger
    /// The counters as last logged, so that each log line tells what is new.
    var loggedCounters = Statistics()
    /// The counters as metrics, published when they are logged.
    var metrics: EngineMetrics

    private init(
        core: MDNSCore, transport: MulticastTransport, clock: any ShellClock, interfaceNames: [String]?, linkWatch: LinkWatch?, logger: Logger
    ) {
        self.core = core
        self.linkWatch = linkWatch
        self.transport = transport
        self.clock = clock
        self.interfaceNames = interfaceNames
        self.logger = logger
        // Metrics from the factory in force now: swift-metrics' global one, or the caller's
        // task-local one (MetricsSystem.factory says which).
        metrics = EngineMetrics(factory: MetricsSystem.factory)
        // Never yields (its element is Never): finishing it is the stop signal; nothing to bound.
        (stopped, stop) = AsyncStream.makeStream()
        (proxiedEvents, proxied) = EventStream<ProxiedEvent>.makeStream(buffer: LatestPerKeyBuffer(key: \.id))
    }

    /// Starts the engine on every multicast-capable interface but loopback, or on those named,
    /// its work running in a task of its own until ``shutdown()``: for callers without a task
    /// group (a script, a command). Parameters as ``prepare(hostName:interfaces:logger:)``.
    public static func start(
        hostName: String? = nil, interfaces: [String]? = nil, logger: Logger = Logger(label: "nearby.mdns", factory: { _ in SwiftLogNoOpLogHandler() })
    ) async throws -> MulticastDNSEngine {
        let engine = try await prepare(hostName: hostName, interfaces: interfaces, logger: logger)
        await engine.begin()
        return engine
    }

    /// Opens the sockets and joins the groups on every multicast-capable interface but
    /// loopback, or on those named; nothing is sent and nothing happens until ``run()`` runs
    /// (in the caller's task group: the engine's work is its children). Probing a name needs
    /// the work running, so run it before registering.
    /// - Parameters:
    ///   - hostName: the host label to claim in `.local` (default: this machine's name).
    ///   - interfaces: interface names to run on; nil for all.
    ///   - logger: where to say what happens (interfaces, drops, failures); silent by default.
    public static func prepare(
        hostName: String? = nil, interfaces: [String]? = nil, logger: Logger = Logger(label: "nearby.mdns", factory: { _ in SwiftLogNoOpLogHandler() })
    ) async throws -> MulticastDNSEngine {
        try checkInterfaces(interfaces)
        let shared = MulticastTransport.portInUse()
        let transport = try await MulticastTransport.open(logger: logger)
        let core = MDNSCore(hostName: hostName ?? Self.defaultHostLabel(), seed: UInt64.random(in: .min ... .max))
        if shared {
            core.unicastRepliesReachUs = false
            logger.info("another mDNS stack on this machine has UDP port 5353: asking for multicast replies only (RFC 6762 §15.1)")
        }
        let engine = MulticastDNSEngine(
            core: core, transport: transport, clock: SystemClock(), interfaceNames: interfaces, linkWatch: LinkWatch.start(logger: logger), logger: logger)
        await engine.refreshInterfaces()
        return engine
    }

    deinit {
        stop.finish()
        linkWatch?.stop()
    }

    /// Throws an unknown-interface ``TransportError`` naming the interfaces there are when one
    /// of `names` is not a multicast-capable interface of this machine (nil: all; checks only).
    public static func checkInterfaces(_ names: [String]?) throws {
        guard let names else { return }
        let known = Set(MulticastTransport.interfaces(named: nil).map(\.interface.name) + ["lo"])
        if let unknown = names.first(where: { !known.contains($0) }) {
            throw TransportError(
                "no multicast-capable interface named \"\(unknown)\" (have: \(known.sorted().joined(separator: ", ")))",
                unknownInterface: true)
        }
    }

    /// This machine's host name without a domain, or `nearby` when it has none.
    public static func defaultHostLabel() -> String {
        NetworkPlatform.hostLabel() ?? "nearby"
    }

    var elapsed: Duration { clock.now }

    private func begin() {
        guard runner == nil, !running, !isShutDown else { return }
        // The one unstructured task: start() serves callers that have no task group or
        // ServiceGroup to run the engine in. It does what run() does, holding the engine only
        // weakly (dropping the engine ends it), and ends the same way: shutdown() finishes
        // `stopped`, then waits for it.
        runner = Task { [weak self, transport, alarm, clock, linkWatch, stopped] in
            await Self.work(of: self, inbox: transport.inbox, links: linkWatch?.changes, alarm: alarm, clock: clock, until: stopped)
        }
    }

    /// The engine's work, until ``shutdown()`` or until the task is cancelled: the receiver
    /// (one wake-up per turn of the receive thread, which batches a busy link itself), the
    /// interface watch (interfaces and addresses that come and go are noticed as the kernel
    /// reports them, within about 20 ms, and looked at every two seconds besides) and the
    /// timekeeper (the core's next deadline), as children of this call. For an engine made by
    /// ``prepare(hostName:interfaces:logger:)``. An engine made by
    /// ``start(hostName:interfaces:logger:)`` already works in its own task: then this waits
    /// for that to end. Call it once; a second call returns at once.
    public func run() async {
        if let runner {
            await runner.value
            return
        }
        // Once: a second call while the work runs (the stream below has one reader) or a call
        // after shutdown has nothing to do.
        guard !running, !isShutDown else { return }
        running = true
        await Self.work(of: self, inbox: transport.inbox, links: linkWatch?.changes, alarm: alarm, clock: clock, until: stopped)
        running = false
    }

    /// The children, until `stopped` is finished (``shutdown()``, or the engine's release) or
    /// the task is cancelled: the one way the work ends, for run() and start() alike.
    private static func work(
        of engine: MulticastDNSEngine?, inbox: DatagramInbox, links: AsyncStream<Void>?, alarm: Alarm, clock: any ShellClock,
        until stopped: AsyncStream<Never>
    ) async {
        let held = WeakEngine(engine: engine)
        await withDiscardingTaskGroup { group in
            group.addTask { await Self.runChildren(of: held.engine, inbox: inbox, links: links, alarm: alarm, clock: clock) }
            for await _ in stopped {}
            group.cancelAll()
        }
    }

    /// How long a burst of link reports (an address deleted, then one added) may take to settle
    /// before the interfaces are looked at: one look for all of it.
    static let linkSettling: Duration = .milliseconds(20)

    /// The children hold the engine weakly: an engine nobody holds any more ends them.
    private static func runChildren(
        of engine: MulticastDNSEngine?, inbox: DatagramInbox, links: AsyncStream<Void>?, alarm: Alarm, clock: any ShellClock
    ) async {
        let held = WeakEngine(engine: engine)
        await withDiscardingTaskGroup { group in
            group.addTask {
                for await _ in inbox.wakeUps {
                    guard let engine = held.engine else { return }
                    await engine.drain(inbox)
                }
            }
            group.addTask {
                while !Task.isCancelled {
                    try? await clock.sleep(for: .seconds(2))
                    guard let engine = held.engine, !Task.isCancelled else { return }
                    await engine.refreshInterfaces()
                    await engine.logCounters()
                }
            }
            if let links {
                group.addTask {
                    for await _ in links {
                        try? await clock.sleep(for: linkSettling)
                        guard let engine = held.engine, !Task.isCancelled else { return }
                        await engine.refreshInterfaces()
                    }
                }
            }
            group.addTask {
                await alarm.run(clock: clock) { await held.engine?.tick() }
            }
        }
    }

    func refreshInterfaces() {
        guard !isShutDown else { return }
        let current = MulticastTransport.interfaces(named: interfaceNames)
        let byIndex = Dictionary(current.map { ($0.interface.index, $0) }, uniquingKeysWith: { first, _ in first })
        guard byIndex != interfaceInfo else { return }
        for (index, old) in interfaceInfo where byIndex[index] == nil { transport.leave(old) }
        for (index, info) in byIndex where interfaceInfo[index] != info { transport.join(info) }
        interfaceInfo = byIndex
        // A short list, searched for every datagram: a scan beats hashing here.
        ownAddresses = Array(Set(byIndex.values.flatMap { $0.addresses.map(\.withoutScope) }))
        logger.info("mDNS on \(current.isEmpty ? "no interface" : current.map { "\($0.interface.name) (\($0.addresses.map(\.description).joined(separator: ", ")))" }.joined(separator: "; "))")
        core.advance(to: elapsed)
        core.setInterfaces(Dictionary(current.map { ($0.interface, $0.addresses) }, uniquingKeysWith: { first, _ in first }))
        flush()
    }

    /// Datagrams taken per turn of the actor: large enough that a flood costs one hop per
    /// batch, small enough that API calls are not kept waiting behind it.
    static let batchSize = 256

    /// Handles one batch of waiting datagrams, then sends and reports once for all of them.
    func drain(_ inbox: DatagramInbox) {
        let batch = inbox.take(upTo: Self.batchSize)
        guard !batch.isEmpty else { return }
        let now = elapsed
        recentlySent.forget(before: now)
        core.advance(to: now)
        for datagram in batch { handle(datagram, at: now) }
        flush()
        if !inbox.isEmpty { inbox.signal() }
    }

    func handle(_ datagram: ReceivedDatagram, at now: Duration) {
        guard !isShutDown, let info = interfaceInfo[datagram.interfaceIndex] else { return }
        statistics.datagramsHandled += 1
        if datagram.source.port == DNSWire.SocketAddress.mdnsPort && ownAddresses.contains(datagram.source.address.withoutScope) {
            // Ours, whichever copy (RFC 6762 §14): a copy does not use the entry up.
            if recentlySent.contains(datagram.bytes) { return }
            // mDNS from this machine that we did not send: another stack shares port 5353.
            if core.unicastRepliesReachUs {
                core.unicastRepliesReachUs = false
                logger.info("another mDNS stack on this machine is speaking on port 5353: asking for multicast replies only (RFC 6762 §15.1)")
            }
        }
        let message: Message
        do {
            message = try Message(decoding: datagram.bytes)
        } catch {
            // Counted here, logged (with the first one's reason) every two seconds at most.
            if statistics.undecodable == loggedCounters.undecodable && lastUndecodable == nil {
                lastUndecodable = "\(error) (from \(datagram.source))"
            }
            statistics.undecodable += 1
            return
        }
        let onLink = info.networks.contains { $0.contains(datagram.source.address) }
            || (datagram.source.address.isLinkLocalIPv6)
        core.receive(
            ReceivedMessage(message: message, source: datagram.source, interface: info.interface, family: datagram.family,
                            sourceIsOnLink: onLink, destinationIsMulticast: datagram.toGroup),
            at: now)
    }

    /// What the engine took in and threw away, for logs and benchmarks.
    public struct Statistics: Sendable, Equatable {
        /// Datagrams from an interface the engine runs on.
        public var datagramsHandled = 0
        /// Datagrams handed to the sockets to send (those that failed are ``sendFailures``).
        public var datagramsSent = 0
        /// Datagrams that did not decode as DNS messages (and cost nothing further).
        public var undecodable = 0
        /// Datagrams dropped because the engine had fallen behind (the inbox was full).
        public var droppedWhileBusy = 0
        /// Datagrams thrown away as they were read: longer than 9000 bytes (cut short by the
        /// kernel), or without the packet information that names their interface.
        public var unreadable = 0
        /// Reads from the sockets that failed (a pending ICMP error, say).
        public var readFailures = 0
        /// Datagrams the kernel dropped before we could read them: the socket buffer was full.
        public var droppedByKernel = 0
        /// Datagrams the sockets failed to send.
        public var sendFailures = 0
        /// What the RFC 6762 engine held back or refused on purpose.
        public var engine = EngineStatistics()
    }
    var statistics = Statistics()

    /// Why the first undecodable datagram since the last log line did not decode.
    var lastUndecodable: String?

    /// Logs what was dropped or went wrong since the last call: one line per kind, so a flood
    /// costs a line every two seconds, not one per packet.
    func logCounters() {
        let now = counters
        let before = loggedCounters
        if now.undecodable > before.undecodable {
            logger.debug("ignored \(now.undecodable - before.undecodable) undecodable datagram(s); first: \(lastUndecodable ?? "?")")
        }
        if now.droppedWhileBusy > before.droppedWhileBusy {
            logger.warning("dropped \(now.droppedWhileBusy - before.droppedWhileBusy) datagram(s): the engine fell behind (inbox full)")
        }
        if now.unreadable > before.unreadable {
            logger.debug("ignored \(now.unreadable - before.unreadable) datagram(s) longer than 9000 bytes or without packet information")
        }
        if now.droppedByKernel > before.droppedByKernel {
            logger.warning("the kernel dropped \(now.droppedByKernel - before.droppedByKernel) datagram(s): more arrived than the socket buffer holds")
        }
        if now.readFailures > before.readFailures {
            logger.warning("\(now.readFailures - before.readFailures) read(s) from the mDNS sockets failed")
        }
        if now.sendFailures > before.sendFailures {
            logger.warning("\(now.sendFailures - before.sendFailures) datagram(s) could not be sent; last: \(transport.lastSendFailure ?? "?")")
        }
        if now.engine.unicastResponsesRefused > before.engine.unicastResponsesRefused {
            logger.debug("refused \(now.engine.unicastResponsesRefused - before.engine.unicastResponsesRefused) unicast response(s) we had not asked for, or from off the link")
        }
        loggedCounters = now
        lastUndecodable = nil
        metrics.record(now)
    }

    /// Counts of what was taken in, dropped and held back so far.
    public var counters: Statistics {
        var counts = statistics
        counts.droppedWhileBusy = transport.inbox.counts.dropped
        counts.sendFailures = transport.sendFailures
        let drops = transport.receiveDrops
        counts.unreadable = drops.truncated + drops.malformed
        counts.readFailures = drops.errors
        counts.droppedByKernel = drops.kernelDropped
        counts.engine = core.statistics
        return counts
    }

    /// Sends what the core wants sent, hands out its events and re-arms the timer.
    @discardableResult
    func flush() -> Int {
        let now = elapsed
        var sent = 0
        for outgoing in core.takeOutgoing() {
            guard let info = interfaceInfo[outgoing.interface.index],
                let packets = try? outgoing.message.encodedPackets(maximumPacketSize: outgoing.packetLimit)
            else { continue }
            sent += packets.count
            statistics.datagramsSent += packets.count
            for packet in packets {
                transport.send(packet, to: outgoing.destination, on: info)
                if case .multicast = outgoing.destination { recentlySent.note(packet, at: now) }
            }
        }
        var batches: [QueryGroup: [QueryEvent]] = [:]
        var order: [QueryGroup] = []
        func deliver(_ id: QueryID, _ event: QueryEvent) {
            if let group = groupOfQuery[id] {
                if batches[group] == nil { order.append(group) }
                batches[group, default: []].append(event)
            } else {
                queries[id]?.yield(event)
            }
        }
        for event in core.takeEvents() {
            switch event {
            case .registered(let id, let name):
                if proxiedIDs.contains(id) {
                    proxied.yield(ProxiedEvent(id: id, event: .registered(name)))
                } else {
                    registrations[id]?.yield(.registered(name))
                }
            case .renamed(let id, let from, let to): registrations[id]?.yield(.renamed(from: from, to: to))
            case .conflicted(let id, let name):
                proxiedIDs.remove(id)
                proxied.yield(ProxiedEvent(id: id, event: .conflicted(name)))
            case .hostNameRegistered: break
            case .recordAdded(let id, let record, let interface): deliver(id, .added(record, interface))
            case .recordRemoved(let id, let record, let interface): deliver(id, .removed(record, interface))
            }
        }
        for group in order {
            if let batch = batches[group] { groups[group]?.yield(batch) }
        }
        rearmTimer()
        return sent
    }

    func rearmTimer() {
        guard !isShutDown, let deadline = core.nextDeadline else {
            alarm.set(nil)
            return
        }
        // Move the alarm only for an earlier deadline: an alarm that fires early finds nothing
        // due and is set again, which is cheaper than waking the timekeeper for every packet
        // of a busy link.
        if let armed = alarm.deadline, armed <= deadline { return }
        alarm.set(deadline)
    }

    func tick() {
        core.advance(to: elapsed)
        flush()
    }

    // MARK: API

    /// Publishes a service; the stream reports the name won and any renames. Names change
    /// rarely (conflicts are rate-limited, RFC 6762 §8.1), and only the newest 8 events wait for
    /// a reader: the last of them is the name the service goes by.
    public func register(_ registration: ServiceRegistration) -> (RegistrationID, AsyncStream<RegistrationEvent>) {
        core.advance(to: elapsed)
        let (stream, continuation) = AsyncStream<RegistrationEvent>.makeStream(bufferingPolicy: .bufferingNewest(8))
        let id = core.register(registration)
        registrations[id] = continuation
        flush()
        return (id, stream)
    }

    /// Publishes a service of another device (an advertising proxy) whose SRV names `host`;
    /// a conflict gives it up (``RegistrationEvent/conflicted(_:)``) instead of renaming it.
    /// What happens to it is told on ``proxiedEvents``, with every other proxied registration's.
    public func registerProxied(_ registration: ServiceRegistration, host: DomainName) -> RegistrationID {
        core.advance(to: elapsed)
        let id = core.registerProxied(registration, host: host)
        proxiedIDs.insert(id)
        flush()
        return id
    }

    /// Publishes another device's host name with `addresses` (an advertising proxy); a
    /// conflict gives it up instead of renaming it. Told on ``proxiedEvents``.
    public func registerProxiedHost(_ name: DomainName, addresses: [IPAddress]) -> RegistrationID {
        core.advance(to: elapsed)
        let id = core.registerProxiedHost(name, addresses: addresses)
        proxiedIDs.insert(id)
        flush()
        return id
    }

    /// Withdraws a service (or a proxied host) with goodbyes.
    public func unregister(_ id: RegistrationID) {
        proxiedIDs.remove(id)
        core.advance(to: elapsed)
        core.unregister(id)
        registrations.removeValue(forKey: id)?.finish()
        flush()
    }

    /// Replaces a service's TXT record.
    public func updateTXT(_ id: RegistrationID, _ txt: DiscoveryInfo) {
        core.advance(to: elapsed)
        core.updateTXT(id, txt)
        flush()
    }

    /// Starts a continuous query; the stream reports records as they come and go. Bounded by
    /// ``QueryEventBuffer``: a reader that falls behind reads the newest event of each record
    /// (an actor cannot wait for its reader, and a dropped `removed` would leave a record that
    /// is gone, so nothing is dropped, only superseded).
    public func query(name: DomainName, type: RecordType) -> (QueryID, EventStream<QueryEvent>) {
        core.advance(to: elapsed)
        let (stream, continuation) = EventStream<QueryEvent>.makeStream(buffer: QueryEventBuffer())
        let id = core.startQuery(name: name, type: type)
        queries[id] = continuation
        flush()
        return (id, stream)
    }

    /// Stops a continuous query.
    public func stopQuery(_ id: QueryID) {
        core.stopQuery(id)
        queries.removeValue(forKey: id)?.finish()
        groupOfQuery[id] = nil
    }

    /// Opens a group of queries whose events arrive together: each batch holds what one
    /// received packet (or one tick of the clock) taught all of the group's queries, in order.
    /// Records already cached when a query starts come as a batch of their own. Bounded by
    /// ``QueryBatchBuffer``: batches a reader has not read are merged into one, the newest
    /// event of each record kept.
    public func openQueryGroup() -> (QueryGroup, EventStream<[QueryEvent]>) {
        let group = QueryGroup(rawValue: nextGroup)
        nextGroup += 1
        let (stream, continuation) = EventStream<[QueryEvent]>.makeStream(buffer: QueryBatchBuffer())
        groups[group] = isShutDown ? nil : continuation
        if isShutDown { continuation.finish() }
        return (group, stream)
    }

    /// Starts continuous queries whose events go to `group`. What the cache already holds for
    /// all of them arrives as one batch.
    public func startQueries(_ questions: [(name: DomainName, type: RecordType)], in group: QueryGroup) -> [QueryID] {
        core.advance(to: elapsed)
        let ids = questions.map { question in
            let id = core.startQuery(name: question.name, type: question.type)
            groupOfQuery[id] = group
            return id
        }
        flush()
        return ids
    }

    /// Stops every query of `group` and ends its stream.
    public func closeQueryGroup(_ group: QueryGroup) {
        for (id, owner) in groupOfQuery where owner == group {
            core.stopQuery(id)
            groupOfQuery[id] = nil
        }
        groups.removeValue(forKey: group)?.finish()
    }

    /// The host name claimed, e.g. `buildbox.local.`.
    public var hostName: DomainName { core.hostName }

    /// Sends one query to reconfirm a cached record someone believes is gone (RFC 6762 §10.4),
    /// not listing it as known. Call it twice, a second or more apart: with no answer, the
    /// record is flushed about ten seconds after the first, and the queries holding it say so.
    public func reconfirm(_ record: ResourceRecord) {
        core.advance(to: elapsed)
        core.reconfirm(record)
        flush()
    }

    /// Records cached for a name and type.
    public func cached(name: DomainName, type: RecordType) -> [(ResourceRecord, NetworkInterface)] {
        core.cachedRecords(name: name, type: type)
    }

    /// Says goodbye for every registration and closes the sockets.
    public func shutdown() async {
        guard !isShutDown else { return }
        core.advance(to: elapsed)
        core.unregisterAll()
        let goodbyes = flush()
        isShutDown = true
        alarm.set(nil)
        for continuation in registrations.values { continuation.finish() }
        proxied.finish()
        for continuation in queries.values { continuation.finish() }
        for continuation in groups.values { continuation.finish() }
        groups.removeAll()
        registrations.removeAll()
        queries.removeAll()
        // Sends are synchronous, so the goodbyes have left; a moment more lets the multicast
        // loop hand our copies back before the sockets close. Nothing advertised: no goodbyes,
        // no wait (a browse or a `connect --nearest` ends at once).
        if goodbyes > 0 { try? await clock.sleep(for: .milliseconds(20)) }
        stop.finish()
        await runner?.value
        runner = nil
        linkWatch?.stop()
        await transport.close()
    }
}

/// The engine, for children that must not keep it alive.
private struct WeakEngine: Sendable {
    weak var engine: MulticastDNSEngine?
}

extension IPAddress {
    var isLinkLocalIPv6: Bool {
        if case .v6(let address, _) = self { return address.isLinkLocal }
        return false
    }
}
