import CoreMetrics
import Logging
import NearbyBasics
import NearbyMetrics
import NearbyDiscovery
import PeerConnection
import PeerTrust
import ServiceLifecycle

/// The async shell around ``BrokerStateMachine`` and ``BrokerDesk``: it feeds them what
/// discovery, the listener, the connections and the clock say, and performs what they decide.
/// All decisions are theirs; the shell waits one way, for its inputs or the earliest deadline
/// the two give (one ``Alarm``).
///
/// Its work runs in ``run()``'s task group: the listener's and discovery's event loops, every
/// dial, probe, close and connection watcher (``ChildTasks``), and the alarm. ``run()`` ends
/// when ``stop()`` is called, its `ServiceGroup` shuts down gracefully, or its task is cancelled;
/// then it shuts down (one path) and returns. Times are the injected clock's.
actor BrokerLoop {
    let configuration: BrokerConfiguration
    private let discovery: NearbyDiscovery
    private let events: EventStream<BrokerEvent>.Source
    private var machine: BrokerStateMachine
    /// Callers, announcements, dial slots, races (``BrokerDesk``).
    private var desk: BrokerDesk
    private let clock: any ShellClock
    /// The clock's reading when the machine's time began (the machine counts from zero).
    private let origin: Duration
    /// The children started while the broker runs.
    private let children = ChildTasks()
    /// The earliest of the machine's and the desk's deadlines (see ``tick()``).
    private let alarm = Alarm()
    /// Open connections by their ``PeerConnection/id``, which the machine uses as its own.
    private var connections: [UInt64: PeerConnection] = [:]
    /// The callers waiting, by the desk's ticket.
    private var callers: [BrokerDesk.Ticket: Caller] = [:]
    /// The listener and what is advertised, when the broker serves.
    private var serving: (listener: PeerListener, advertisements: [Advertisement])?
    /// Opened by ``stop()`` (the one way to end ``run()``), and by ``run()`` once it is over.
    private let lifecycle = (stop: CancelScope(), over: CancelScope())
    /// The desk's statistics as metrics, published after each step (see ``rearm()``).
    private var metrics: BrokerMetrics

    private struct Caller {
        let continuation: CheckedContinuation<Answer, Never>
        /// A race's probes, ended once its verdict is in.
        var probes: CancelScope?
    }

    /// A caller's answer: the desk's reply, with a connection ID turned into the connection.
    private enum Answer: Sendable {
        case connection(PeerConnection)
        case reply(BrokerDesk.Reply)
    }

    private var logger: Logger { configuration.logger }
    var listener: PeerListener? { serving?.listener }
    var statistics: BrokerStatistics { desk.statistics }

    init(
        configuration: BrokerConfiguration, localID: PeerID, continuation: EventStream<BrokerEvent>.Source, discovery: NearbyDiscovery,
        clock: any ShellClock = SystemClock()
    ) {
        self.configuration = configuration
        self.events = continuation
        self.discovery = discovery
        self.clock = clock
        origin = clock.now
        // Metrics from the factory in force now: swift-metrics' global one, or the caller's
        // task-local one (MetricsSystem.factory says which).
        metrics = BrokerMetrics(factory: MetricsSystem.factory)
        desk = BrokerDesk(localID: localID, protocolVersion: configuration.connection.protocolVersion)
        var seed = SystemRandomNumberGenerator()
        machine = BrokerStateMachine(
            configuration: .init(
                localID: localID, protocolVersion: configuration.connection.protocolVersion, autoInvite: configuration.autoInvite),
            seed: seed.next())
    }

    private var now: Duration { clock.now - origin }

    // MARK: Start and stop

    /// Runs the broker's children until ``stop()``, a graceful shutdown of its `ServiceGroup`,
    /// or the task's cancellation; then shuts down (``shutdown()``) and returns once every child
    /// has ended.
    nonisolated func run() async {
        let (children, alarm, clock, lifecycle) = (children, alarm, clock, lifecycle)
        await withDiscardingTaskGroup { group in
            group.addTask { await children.run() }
            group.addTask { await alarm.run(clock: clock) { await self.tick() } }
            await self.browse()
            // Whichever comes first: stop(), a graceful shutdown, the task's cancellation.
            _ = await lifecycle.stop.run { try? await gracefulShutdown() }
            await self.shutdown()
            group.cancelAll()
        }
        lifecycle.over.cancel()
    }

    /// Asks ``run()`` to end (it shuts the broker down on its way out).
    nonisolated func stop() {
        lifecycle.stop.cancel()
    }

    /// Returns once ``run()`` is over.
    nonisolated func finished() async {
        await lifecycle.over.wait()
    }

    func started(listener: PeerListener, advertisements: [Advertisement]) {
        serving = (listener, advertisements)
        children.spawn { [weak self] in
            for await event in listener.events {
                switch event {
                case .connected(let connection): await self?.accepted(connection)
                case .rejected(let rejection): await self?.emit(.rejected(rejection))
                case .strangers(let summary): await self?.emit(.strangers(summary))
                case .invitation(let attempt): await self?.emit(.invitation(attempt))
                case .paired: break
                }
            }
        }
    }

    private func browse() {
        guard !desk.stopped else { return }
        // Browsing may have begun before the broker, on the same discovery (see
        // BrokerConfiguration.browsingSince): the answers are due from then.
        let earlier = configuration.browsingSince.map { max(.zero, ContinuousClock.now - $0) } ?? .zero
        desk.browseStarted = clock.now - earlier
        let found = discovery.browse(configuration.serviceType, resolve: true, domains: configuration.domains)
        children.spawn { [weak self] in
            for await event in found {
                await self?.discovered(event)
            }
        }
    }

    /// Stops dialing and listening, answers every caller and closes every connection; then the
    /// children end. ``run()`` calls it on its way out; a broker that never ran is shut down
    /// by calling it directly.
    func shutdown() async {
        guard !desk.stopped else { return }
        alarm.set(nil)
        deliver(desk.shutDown())
        for advertisement in serving?.advertisements ?? [] { await advertisement.cancel() }
        await serving?.listener.close()
        let open = Array(connections.values)
        connections = [:]
        for connection in open { await connection.close(code: 1001, reason: "the broker is shutting down") }
        events.finish()
        children.finish()
    }

    // MARK: Inputs

    /// Where a service was seen: its interface on the link, its domain elsewhere (unicast DNS
    /// has no interfaces).
    static func place(_ service: DiscoveredService) -> String {
        service.domain == ServiceType.localDomain ? service.interface.name : service.domain.description
    }

    private func discovered(_ event: BrowseEvent) {
        switch event {
        case .found(let service, let resolved?), .updated(let service, let resolved?):
            let (announcement, work) = desk.seen(
                PeerAnnouncement(
                    name: service.name, domain: service.domain.description, peerID: resolved.info.string(for: "id"), protocolVersion: resolved.info.string(for: "pv"),
                    addresses: [], port: Int(resolved.port)),
                on: Self.place(service), at: resolved.addresses.map(PeerAddress.init))
            let after = desk.browseStarted.map { " \(millisecondsText(clock.now - $0))" } ?? ""
            logger.debug(
                "announced\(after) after browsing began: \(service.name) at \(announcement.addresses.map(\.description).joined(separator: ", ")) port \(resolved.port)")
            handle(.announced(announcement))
            deliver(work)
            settle()
        case .lost(let service):
            guard let change = desk.lost(service.name, in: service.domain.description, on: Self.place(service)) else { return }
            if case .withdrawn = change { logger.debug("withdrawn: \(service.name)") }
            handle(change)
        case .restored:
            handle(.networkChanged)
        case .found(_, nil), .updated(_, nil), .interrupted:
            break
        }
    }

    private func accepted(_ connection: PeerConnection) {
        guard let peer = connection.peerID, !desk.stopped else {
            children.spawn { await connection.close(code: 1008, reason: "a broker speaks only to peers that prove their key") }
            return
        }
        let id = register(connection)
        desk.count { $0.accepted += 1 }
        handle(.accepted(peer, id))
    }

    private func register(_ connection: PeerConnection) -> UInt64 {
        let id = connection.id.value
        connections[id] = connection
        children.spawn { [weak self] in
            let reason = await connection.closed()
            await self?.ended(id, reason: reason)
        }
        return id
    }

    private func ended(_ id: UInt64, reason: ConnectionEnd) {
        guard connections.removeValue(forKey: id) != nil else { return }
        handle(.closed(id, reason: reason))
    }

    private func emit(_ event: BrokerEvent) {
        let before = events.merged
        events.yield(event)
        let merged = events.merged
        if merged > before, before == 0 || merged / 1000 > before / 1000 {
            logger.notice("the application reads broker events more slowly than they come: \(merged) merged so far (see ConnectionBroker.events)")
        }
    }

    // MARK: The machine and the desk

    private func handle(_ event: BrokerStateMachine.Event) {
        guard !desk.stopped else { return }
        perform(machine.handle(event, at: now))
    }

    private func perform(_ actions: [BrokerStateMachine.Action]) {
        for action in actions {
            switch action {
            case .dial(let peer, let addresses, let port):
                logger.debug("dialing \(peer.short) at \(addresses.map(\.description).joined(separator: ", ")) port \(port)")
                deliver(desk.dial(peer, addresses: addresses, port: port))
            case .close(let id, let reason):
                guard let connection = connections.removeValue(forKey: id) else { continue }
                desk.count { statistics in
                    switch reason {
                    case .duplicate: statistics.duplicatesClosed += 1
                    case .replaced: statistics.replaced += 1
                    }
                }
                logger.debug("closing connection \(id): \(reason)")
                children.spawn { await connection.close(code: 1000, reason: reason.description) }
            case .probe(let id):
                guard let connection = connections[id] else {
                    perform(machine.handle(.probed(id, alive: false), at: now))
                    continue
                }
                let timeout = machine.configuration.probeTimeout
                let deadPeerTimeout = configuration.connection.deadPeerTimeout
                children.spawn { [weak self] in
                    let alive = await connection.isAlive(timeout: timeout, deadPeerTimeout: deadPeerTimeout)
                    await self?.handle(.probed(id, alive: alive))
                }
            case .report(let report):
                self.report(report)
            }
        }
        rearm()
    }

    private func report(_ report: BrokerStateMachine.Report) {
        switch report {
        case .connected(let peer, let id, let initiator):
            guard let connection = connections[id] else { return }
            logger.info("connected to \(peer.short) (dialed by \(initiator.short))")
            emit(.connected(connection, initiator: initiator))
            deliver(desk.connected(peer, id))
        case .disconnected(let peer, let id, let reason):
            logger.info("disconnected from \(peer.short): \(reason)")
            emit(.disconnected(peer, ConnectionID(value: id), reason: reason))
        case .skipped(let name, let reason):
            desk.count { $0.skipped += 1 }
            logger.info("skipping \"\(name)\": \(reason)")
            emit(.skipped(name: name, reason: reason))
        case .dialFailed(let peer, let reason, _):
            logger.info("dial to \(peer.short) failed: \(reason)")
            emit(.dialFailed(peer, reason: reason))
        case .refused(let peer, let reason):
            deliver(desk.refused(peer, reason))
        }
    }

    /// Performs what the desk decided: races' probes end, callers are answered, jobs start.
    private func deliver(_ work: BrokerDesk.Work) {
        for ticket in work.endProbes { callers[ticket]?.probes?.cancel() }
        for answer in work.replies {
            guard let caller = callers.removeValue(forKey: answer.ticket) else { continue }
            if case .connected(let id) = answer.reply {
                caller.continuation.resume(
                    returning: connections[id].map(Answer.connection)
                        ?? .reply(.failed(BrokerError(.unreachable, "the connection closed as it was handed over"))))
            } else {
                caller.continuation.resume(returning: .reply(answer.reply))
            }
        }
        for job in work.start {
            switch job {
            case .dial(let peer, let addresses, let port):
                children.spawn { [weak self] in await self?.dial(peer, addresses: addresses, port: port) }
            case .measure(let peer, let announcement, let ticket):
                measure(peer, announcement, for: ticket, probes: callers[ticket]?.probes)
            }
        }
    }

    /// The desk looks at the time and what is announced: callers give up, races gather and decide.
    private func settle() {
        deliver(desk.advance(at: clock.now))
        rearm()
    }

    /// Sets the alarm to the earliest deadline: the machine's, or the desk's (a caller who gives
    /// up, a news wait that ends, a race that looks again), in the clock's time. Every step ends
    /// here, so the metrics are published here too.
    private func rearm() {
        metrics.record(desk.statistics, connections: connections.count)
        guard !desk.stopped else { return alarm.set(nil) }
        alarm.set([machine.nextDeadline.map { origin + $0 }, desk.nextDeadline(at: clock.now)].compactMap { $0 }.min())
    }

    /// The alarm went off: whatever is due now happens.
    private func tick() {
        guard !desk.stopped else { return }
        if let due = machine.nextDeadline, origin + due <= clock.now {
            perform(machine.advance(to: now))
        }
        settle()
    }

    /// Waits for the desk's answer to `ticket`; `begin` runs once the caller is registered.
    private func wait(for ticket: BrokerDesk.Ticket, probes: CancelScope? = nil, then begin: () -> Void = {}) async -> Answer {
        await withCheckedContinuation { continuation in
            callers[ticket] = Caller(continuation: continuation, probes: probes)
            begin()
            rearm()
        }
    }

    // MARK: Dialing and measuring

    /// Runs in a slot the desk gave: the peer's one connection, happy-eyeballs style.
    private func dial(_ peer: PeerID, addresses: [PeerAddress], port: Int) async {
        // A peer that asks someone before letting us in says how long that may take: whoever
        // waits for this peer waits that long too, instead of giving up at its own timeout.
        var settings = configuration.connection
        let told = settings.waitingForAdmission
        let children = self.children
        settings.waitingForAdmission = { [weak self] wait in
            told?(wait)
            // From the event loop into the actor; nothing to wait for here.
            children.spawn { [weak self] in await self?.admissionPending(peer, wait) }
        }
        let started = clock.now
        let outcome = await HappyEyeballs.connect(DialPlan.schedule(addresses), port: port, expecting: peer, configuration: settings)
        switch outcome {
        case .success: metrics.dialSucceeded.record(clock.now - started)
        case .failure: metrics.dialFailed.record(clock.now - started)
        }
        switch outcome {
        case .success(let connection):
            deliver(desk.dialEnded(peer, failure: nil))
            guard !desk.stopped else {
                await connection.close(code: 1001, reason: "the broker is shutting down")
                return
            }
            let id = register(connection)
            handle(.dialSucceeded(peer, id))
        case .failure(let error):
            deliver(desk.dialEnded(peer, failure: error))
            handle(.dialFailed(peer, reason: error.description, code: error.code))
        }
    }

    /// Runs in a slot the desk gave: one candidate's round trip, for a race (whose `probes`
    /// end it early once its verdict is in, and which hears its progress) or a survey.
    private func measure(_ peer: PeerID, _ announcement: PeerAnnouncement, for ticket: BrokerDesk.Ticket, probes: CancelScope?) {
        let (clock, timeout, plan, port) = (clock, configuration.probeTimeout, DialPlan.schedule(announcement.addresses), announcement.port)
        let children = self.children
        var progress: (@Sendable (ProbeProgress) -> Void)?
        if probes != nil {
            progress = { [weak self] step in
                guard let loop = self else { return }
                let time = clock.now
                children.spawn { await loop.probed(ticket, peer, step, at: time) }
            }
        }
        let heard = progress
        children.spawn { [weak self] in
            let measure: @Sendable () async -> (Duration?, PeerAddress?) = {
                await HappyEyeballs.measure(plan, port: port, timeout: timeout, progress: heard)
            }
            let result: (Duration?, PeerAddress?)?
            if let probes { result = await probes.run(measure) } else { result = await measure() }
            let (rtt, address) = result ?? (nil, nil)
            await self?.measured(ticket, peer, rtt: rtt, address: address?.description, at: clock.now)
        }
    }

    private func probed(_ ticket: BrokerDesk.Ticket, _ peer: PeerID, _ step: ProbeProgress, at time: Duration) {
        desk.probe(ticket, peer, step, at: time)
        settle()
    }

    private func measured(_ ticket: BrokerDesk.Ticket, _ peer: PeerID, rtt: Duration?, address: String?, at time: Duration) {
        deliver(desk.measured(ticket, peer, rtt: rtt, address: address, at: time))
        settle()
    }

    /// The peer being dialed asks someone whether to let us in, for up to `wait`: callers
    /// waiting for it wait that long (plus slack for the network), never less than before.
    private func admissionPending(_ peer: PeerID, _ wait: Duration) {
        desk.extend(peer, to: clock.now + wait + .seconds(2))
        rearm()
    }

    // MARK: Requests

    func connect(peerID: PeerID, timeout: Duration) async throws(BrokerError) -> PeerConnection {
        if let id = machine.connection(to: peerID), let connection = connections[id] { return connection }
        guard !desk.stopped else { throw BrokerError(.unreachable, "the broker was shut down") }
        let ticket = desk.waitForPeer(peerID, until: clock.now + timeout)
        switch await wait(for: ticket, then: { handle(.requested(peerID)) }) {
        case .connection(let connection): return connection
        case .reply(.failed(let error)): throw error
        case .reply: throw BrokerError(.unreachable, "no connection to \(peerID.short)")
        }
    }

    func peerID(named name: String, timeout: Duration) async throws(BrokerError) -> PeerID {
        let end = clock.now + timeout
        while clock.now < end, !desk.stopped {
            if let found = desk.peer(named: name) { return try found.get() }
            await waitForNews(until: end)
        }
        throw BrokerError(.notFound, "no peer named \"\(name)\" was found within \(timeout)")
    }

    /// Waits until something new is announced, or `end` (clock time).
    private func waitForNews(until end: Duration) async {
        guard !desk.stopped, clock.now < end else { return }
        _ = await wait(for: desk.waitForNews(until: end))
    }

    /// The shell of ``ManualConnect``: it dials and closes, the decisions are there.
    func connect(host: String, port: Int, timeout: Duration) async throws(BrokerError) -> PeerConnection {
        let machine = self.machine
        if let id = ManualConnect.existing(host: host, port: port, announcements: desk.announced.announcements, connection: { machine.connection(to: $0) }),
            let open = connections[id]
        {
            return open
        }
        var settings = configuration.connection
        settings.setupTimeout = timeout
        let connection: PeerConnection
        do {
            connection = try await PeerConnection.connect(host: host, port: port, configuration: settings)
        } catch {
            throw BrokerError(BrokerStateMachine.isRefusal(error.code) ? .refused : .unreachable, error.description, connectionError: error)
        }
        let openID = connection.peerID.flatMap { self.machine.connection(to: $0) }
        let open = openID.flatMap { connections[$0] }
        switch ManualConnect.settle(peer: connection.peerID, host: host, port: port, open: open == nil ? nil : openID) {
        case .refuse(let why):
            await connection.close(code: 1008, reason: "no peer ID")
            throw BrokerError(.refused, why)
        case .keepOpen:
            await connection.close(code: 1000, reason: BrokerStateMachine.CloseReason.duplicate.description)
            return open ?? connection
        case .adopt(let peer):
            let id = register(connection)
            handle(.dialSucceeded(peer, id))
            return connections[id] ?? connection
        }
    }

    // MARK: Measuring

    /// The compatible candidates announced while gathering, each measured as soon as it is
    /// announced, until the nearest is certain (``NearestRace``, run by the desk): nearest first,
    /// then the others as far as they were measured.
    func measureCandidates(timeout: Duration) async throws(BrokerError) -> (nearest: MeasuredPeer?, candidates: [MeasuredPeer]) {
        let end = clock.now + timeout
        while desk.compatible.isEmpty, clock.now < end, !desk.stopped { await waitForNews(until: end) }
        guard !desk.compatible.isEmpty else {
            throw BrokerError(.notFound, "no compatible peer offering \(configuration.serviceType) was found within \(timeout)\(desk.skippedText)")
        }
        let due = Nearest.answersDue(
            browseStarted: desk.browseStarted ?? clock.now, firstAnswer: clock.now, window: configuration.answerWindow, deadline: end)
        let ticket = desk.waitForNearest(NearestRace(answersDue: due, deadline: end))
        switch await wait(for: ticket, probes: CancelScope(), then: settle) {
        case .reply(.nearest(let nearest, let candidates)):
            let after = desk.browseStarted.map { " \(millisecondsText(clock.now - $0))" } ?? ""
            let farther = candidates.filter { $0.rttExceeds != nil }.count
            logger.debug(
                "nearest decided\(after) after browsing began: \(nearest?.name ?? "none") of \(candidates.count) candidate(s)\(farther > 0 ? ", \(farther) not waited for" : "")")
            return (nearest, candidates)
        case .reply(.failed(let error)): throw error
        default: throw BrokerError(.unreachable, "the nearest peer could not be measured")
        }
    }

    /// Everything announced within `duration`, compatible or not; compatible peers measured.
    func measureAll(after duration: Duration) async -> [DiscoveredPeer] {
        let end = clock.now + duration
        while clock.now < end, !desk.stopped { await waitForNews(until: end) }
        let (ticket, work) = desk.survey()
        var measured: [MeasuredPeer] = []
        if case .reply(.surveyed(let peers)) = await wait(for: ticket, then: { deliver(work) }) { measured = peers }
        return desk.listing(measured: measured)
    }
}
