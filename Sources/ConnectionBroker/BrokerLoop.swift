import Logging
import NearbyBasics
import NearbyDiscovery
import PeerConnection
public import PeerTrust

/// A peer on the link as discovery shows it, for listings such as `nearby peers`.
public struct DiscoveredPeer: Hashable, Sendable {
    public var name: String
    /// From TXT `id`; nil when absent or not a peer ID.
    public var peerID: PeerID?
    public var addresses: [PeerAddress]
    public var port: Int
    /// TXT `pv`, as announced.
    public var protocolVersion: String?
    /// Whether the broker would connect to it; when not, `reason` says why.
    public var compatible: Bool
    public var reason: String?
    /// The round-trip time of its best address (nil: not measured, or no answer).
    public var rtt: Duration?
}

/// The async shell around ``BrokerStateMachine``: it feeds the machine what discovery, the
/// listener, the connections and the clock say, and performs what the machine decides. All
/// decisions are the machine's.
///
/// Its work runs in ``run()``'s task group: the listener's and discovery's event loops, every
/// dial, probe, close and connection watcher (``ChildTasks``), and one timekeeper (``Alarm``)
/// for the machine's next deadline and every caller's. Times are the injected clock's.
actor BrokerLoop {
    let configuration: BrokerConfiguration
    private let discovery: NearbyDiscovery
    private let continuation: EventStream<BrokerEvent>.Source
    private var machine: BrokerStateMachine
    private let clock: any ShellClock
    /// The children started while the broker runs.
    private let children = ChildTasks()
    /// The earliest of the machine's deadline and the callers' (see ``tick()``).
    private let alarm = Alarm()
    /// Who waits for what, until when (``CallerWaits``); the continuations by ticket below.
    private var waits = CallerWaits()
    private let origin: Duration
    private var logger: Logger { configuration.logger }

    /// Open connections by their ``PeerConnection/id``, which the machine uses as its own.
    private var connections: [UInt64: PeerConnection] = [:]
    /// Callers waiting for a connection to a peer, by ticket.
    private var waiters: [CallerWaits.Ticket: CheckedContinuation<Result<PeerConnection, BrokerError>, Never>] = [:]
    /// Why the last dial to a peer failed, for a caller waiting on it.
    private var lastFailure: [PeerID: PeerConnectionError] = [:]
    /// Who is announced, by instance name, with its addresses on each interface it was seen on.
    private var announced = AnnouncedInstances()
    /// Callers waiting for news from discovery, by ticket.
    private var announcementWaiters: [CallerWaits.Ticket: CheckedContinuation<Void, Never>] = [:]
    private(set) var listener: PeerListener?
    private var advertisements: [Advertisement] = []
    private let dials = AsyncLimiter(DialPlan.concurrencyLimit)
    private var stopped = false
    private(set) var statistics = BrokerStatistics()
    /// When browsing began: responders answer a query within 20-120 ms (RFC 6762 §6).
    private var browseStarted: Duration?

    init(
        configuration: BrokerConfiguration, localID: PeerID, continuation: EventStream<BrokerEvent>.Source, discovery: NearbyDiscovery,
        clock: any ShellClock = SystemClock()
    ) {
        self.configuration = configuration
        self.continuation = continuation
        self.discovery = discovery
        self.clock = clock
        origin = clock.now
        var seed = SystemRandomNumberGenerator()
        machine = BrokerStateMachine(
            configuration: .init(
                localID: localID, protocolVersion: configuration.connection.protocolVersion, autoInvite: configuration.autoInvite),
            seed: seed.next())
    }

    private var now: Duration { clock.now - origin }

    // MARK: Start and stop

    /// Runs the broker's children until the task is cancelled (``ConnectionBroker`` runs it).
    nonisolated func run() async {
        let (children, alarm, clock) = (children, alarm, clock)
        await withDiscardingTaskGroup { group in
            group.addTask { await children.run() }
            group.addTask { await alarm.run(clock: clock) { await self.tick() } }
        }
    }

    func started(listener: PeerListener, advertisements: [Advertisement]) {
        self.listener = listener
        self.advertisements = advertisements
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

    func browse() {
        // Browsing may have begun before the broker, on the same discovery (see
        // BrokerConfiguration.browsingSince): the answers are due from then.
        let earlier = configuration.browsingSince.map { max(.zero, ContinuousClock.now - $0) } ?? .zero
        browseStarted = clock.now - earlier
        let events = discovery.browse(configuration.serviceType, resolve: true, domains: configuration.domains)
        children.spawn { [weak self] in
            for await event in events {
                await self?.discovered(event)
            }
        }
    }

    /// Stops dialing and listening and closes every connection; then the children end (the
    /// caller of ``run()`` cancels it).
    func shutdown() async {
        guard !stopped else { return }
        stopped = true
        alarm.set(nil)
        for advertisement in advertisements { await advertisement.cancel() }
        await listener?.close()
        let open = Array(connections.values)
        connections = [:]
        for connection in open { await connection.close(code: 1001, reason: "the broker is shutting down") }
        let everyone = waits.shutDown()
        for ticket in everyone.peers {
            waiters.removeValue(forKey: ticket)?.resume(returning: .failure(BrokerError(.unreachable, "the broker was shut down")))
        }
        for ticket in everyone.news { announcementWaiters.removeValue(forKey: ticket)?.resume() }
        continuation.finish()
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
            let announcement = announced.seen(
                PeerAnnouncement(
                    name: service.name, domain: service.domain.description, peerID: resolved.info.string(for: "id"), protocolVersion: resolved.info.string(for: "pv"),
                    addresses: [], port: Int(resolved.port)),
                on: Self.place(service), at: resolved.addresses.map(PeerAddress.init))
            let after = browseStarted.map { " \(millisecondsText(clock.now - $0))" } ?? ""
            logger.debug(
                "announced\(after) after browsing began: \(service.name) at \(announcement.addresses.map(\.description).joined(separator: ", ")) port \(resolved.port)")
            handle(.announced(announcement))
            raceNews?.yield(.news)
            for ticket in waits.news() { announcementWaiters.removeValue(forKey: ticket)?.resume() }
        case .lost(let service):
            guard let change = announced.lost(service.name, in: service.domain.description, on: Self.place(service)) else { return }
            if case .withdrawn = change { logger.debug("withdrawn: \(service.name)") }
            handle(change)
        case .restored:
            handle(.networkChanged)
        case .found(_, nil), .updated(_, nil), .interrupted:
            break
        }
    }

    private func accepted(_ connection: PeerConnection) {
        guard let peer = connection.peerID, !stopped else {
            children.spawn { await connection.close(code: 1008, reason: "a broker speaks only to peers that prove their key") }
            return
        }
        let id = register(connection)
        statistics.accepted += 1
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
        let before = continuation.merged
        continuation.yield(event)
        let merged = continuation.merged
        if merged > before, before == 0 || merged / 1000 > before / 1000 {
            logger.notice("the application reads broker events more slowly than they come: \(merged) merged so far (see ConnectionBroker.events)")
        }
    }

    // MARK: The machine

    private func handle(_ event: BrokerStateMachine.Event) {
        guard !stopped else { return }
        perform(machine.handle(event, at: now))
    }

    private func perform(_ actions: [BrokerStateMachine.Action]) {
        for action in actions {
            switch action {
            case .dial(let peer, let addresses, let port):
                logger.debug("dialing \(peer.short) at \(addresses.map(\.description).joined(separator: ", ")) port \(port)")
                children.spawn { [weak self] in await self?.dial(peer, addresses: addresses, port: port) }
            case .close(let id, let reason):
                guard let connection = connections.removeValue(forKey: id) else { continue }
                switch reason {
                case .duplicate: statistics.duplicatesClosed += 1
                case .replaced: statistics.replaced += 1
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
                    await self?.probed(id, alive: alive)
                }
            case .report(let report):
                self.report(report)
            }
        }
        rearm()
    }

    private func probed(_ id: UInt64, alive: Bool) {
        handle(.probed(id, alive: alive))
    }

    private func report(_ report: BrokerStateMachine.Report) {
        switch report {
        case .connected(let peer, let id, let initiator):
            guard let connection = connections[id] else { return }
            logger.info("connected to \(peer.short) (dialed by \(initiator.short))")
            emit(.connected(connection, initiator: initiator))
            for ticket in waits.answered(peer) { waiters.removeValue(forKey: ticket)?.resume(returning: .success(connection)) }
        case .disconnected(let peer, let id, let reason):
            logger.info("disconnected from \(peer.short): \(reason)")
            emit(.disconnected(peer, ConnectionID(value: id), reason: reason))
        case .skipped(let name, let reason):
            statistics.skipped += 1
            logger.info("skipping \"\(name)\": \(reason)")
            emit(.skipped(name: name, reason: reason))
        case .dialFailed(let peer, let reason, _):
            logger.info("dial to \(peer.short) failed: \(reason)")
            emit(.dialFailed(peer, reason: reason))
        case .refused(let peer, let reason):
            for ticket in waits.answered(peer) {
                waiters.removeValue(forKey: ticket)?.resume(returning: .failure(BrokerError(.refused, reason, connectionError: lastFailure[peer])))
            }
        }
    }

    /// Sets the alarm to the earliest deadline: the machine's, a caller's who gives up, or the
    /// end of a wait for news from discovery (all in the clock's time).
    private func rearm() {
        guard !stopped else { return alarm.set(nil) }
        alarm.set([machine.nextDeadline.map { origin + $0 }, waits.nextDeadline].compactMap { $0 }.min())
    }

    /// The alarm went off: whatever is due now happens.
    private func tick() {
        guard !stopped else { return }
        let time = clock.now
        let due = waits.due(at: time)
        for (peer, ticket) in due.gaveUp { giveUp(peer, ticket) }
        for ticket in due.news { announcementWaiters.removeValue(forKey: ticket)?.resume() }
        if let due = machine.nextDeadline, origin + due <= time {
            perform(machine.advance(to: now))
        } else {
            rearm()
        }
    }

    // MARK: Dialing

    private func dial(_ peer: PeerID, addresses: [PeerAddress], port: Int) async {
        statistics.dials += 1
        await dials.acquire()
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
        let outcome = await HappyEyeballs.connect(DialPlan.schedule(addresses), port: port, expecting: peer, configuration: settings)
        await dials.release()
        switch outcome {
        case .success(let connection):
            statistics.dialsSucceeded += 1
            guard !stopped else {
                await connection.close(code: 1001, reason: "the broker is shutting down")
                return
            }
            let id = register(connection)
            handle(.dialSucceeded(peer, id))
        case .failure(let error):
            statistics.dialsFailed += 1
            lastFailure[peer] = error
            handle(.dialFailed(peer, reason: error.description, code: error.code))
        }
    }

    // MARK: Requests

    func connect(peerID: PeerID, timeout: Duration) async throws(BrokerError) -> PeerConnection {
        if let id = machine.connection(to: peerID), let connection = connections[id] { return connection }
        guard !stopped else { throw BrokerError(.unreachable, "the broker was shut down") }
        let ticket = waits.waitForPeer(peerID, until: clock.now + timeout)
        let outcome = await withCheckedContinuation { waiter in
            waiters[ticket] = waiter
            handle(.requested(peerID))
            rearm()
        }
        return try outcome.get()
    }

    /// The peer being dialed asks someone whether to let us in, for up to `wait`: callers
    /// waiting for it wait that long (plus slack for the network), never less than before.
    private func admissionPending(_ peer: PeerID, _ wait: Duration) {
        waits.extend(peer, to: clock.now + wait + .seconds(2))
        rearm()
    }

    /// A caller waiting for `peer` gives up (see ``connect(peerID:timeout:)``).
    private func giveUp(_ peer: PeerID, _ ticket: CallerWaits.Ticket) {
        guard let waiter = waiters.removeValue(forKey: ticket) else { return }
        let known = announced.announcements.contains { $0.peerID.flatMap { PeerID($0) } == peer }
        let why = lastFailure[peer].map { ": the last attempt: \($0.description)" } ?? ""
        waiter.resume(returning: .failure(
            known
                ? BrokerError(.unreachable, "no connection to \(peer.short) within the time allowed\(why)", connectionError: lastFailure[peer])
                : BrokerError(.notFound, "no peer with ID \(peer.short) was found within the time allowed")))
    }

    func peerID(named name: String, timeout: Duration) async throws(BrokerError) -> PeerID {
        let end = clock.now + timeout
        while clock.now < end {
            let announcements = announced.named(name)
            if !announcements.isEmpty {
                let peers = Set(announcements.compactMap { $0.peerID.flatMap(PeerID.init) })
                if peers.count > 1 {
                    let domains = announcements.map { String($0.domain.dropLast()) }.joined(separator: ", ")
                    throw BrokerError(.notFound, "\"\(name)\" is announced by \(peers.count) different peers (in \(domains)): connect by peer ID")
                }
                guard let peer = peers.first else {
                    throw BrokerError(.notFound, "\"\(name)\" is announced without a valid TXT id, so whom to expect is unknown")
                }
                return peer
            }
            await waitForAnnouncement(until: end)
        }
        throw BrokerError(.notFound, "no peer named \"\(name)\" was found within \(timeout)")
    }

    /// Waits until something new is announced, or `end` (clock time).
    private func waitForAnnouncement(until end: Duration) async {
        guard !stopped, clock.now < end else { return }
        let ticket = waits.waitForNews(until: end)
        await withCheckedContinuation {
            announcementWaiters[ticket] = $0
            rearm()
        }
    }

    /// The shell of ``ManualConnect``: it dials and closes, the decisions are there.
    func connect(host: String, port: Int, timeout: Duration) async throws(BrokerError) -> PeerConnection {
        let machine = self.machine
        if let id = ManualConnect.existing(host: host, port: port, announcements: announced.announcements, connection: { machine.connection(to: $0) }),
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
    /// announced, until the nearest is certain (``NearestRace``): nearest first, then the
    /// others as far as they were measured.
    func measureCandidates(timeout: Duration) async throws(BrokerError) -> (nearest: MeasuredPeer?, candidates: [MeasuredPeer]) {
        let end = clock.now + timeout
        while compatibleAnnouncements().isEmpty, clock.now < end { await waitForAnnouncement(until: end) }
        guard !compatibleAnnouncements().isEmpty else {
            throw BrokerError(.notFound, "no compatible peer offering \(configuration.serviceType) was found within \(timeout)\(skippedText())")
        }
        let due = Nearest.answersDue(
            browseStarted: browseStarted ?? clock.now, firstAnswer: clock.now, window: configuration.answerWindow, deadline: end)
        return await race(NearestRace(answersDue: due, deadline: end))
    }

    /// What wakes the race: news from discovery or a probe, or its own alarm.
    private enum RaceInput: Sendable {
        case event(NearestRace.Event, at: Duration)
        case news
    }

    /// Where discovery's news goes while a race runs.
    private var raceNews: AsyncStream<RaceInput>.Continuation?

    /// Runs the race: measures candidates as they join, and returns its verdict the moment it
    /// is given; probes still under way are cancelled (their connections closed) on the way out.
    private func race(_ start: NearestRace) async -> (nearest: MeasuredPeer?, candidates: [MeasuredPeer]) {
        var race = start
        let (inputs, sink) = AsyncStream.makeStream(of: RaceInput.self)
        raceNews = sink
        defer {
            raceNews = nil
            sink.finish()
        }
        let (clock, limiter, timeout) = (clock, dials, configuration.probeTimeout)
        return await withTaskGroup(of: Void.self) { group in
            defer { group.cancelAll() }
            var alarm: Duration?
            sink.yield(.news)
            for await input in inputs {
                if case .event(let event, let time) = input { race.handle(event, at: time) }
                let now = clock.now
                if race.isGathering(at: now) {
                    for (peer, announcement) in compatibleAnnouncements() where !race.contains(peer) {
                        let plan = DialPlan.schedule(announcement.addresses)
                        race.handle(.joined(peer, name: announcement.name, addresses: plan.count), at: now)
                        group.addTask {
                            await limiter.acquire()
                            let (rtt, address) = await HappyEyeballs.measure(plan, port: announcement.port, timeout: timeout) { progress in
                                sink.yield(.event(.progress(peer, progress), at: clock.now))
                            }
                            await limiter.release()
                            sink.yield(.event(.measured(peer, rtt: rtt, address: address?.description), at: clock.now))
                        }
                    }
                }
                switch race.verdict(at: now) {
                case .decided(let nearest, let candidates):
                    let after = browseStarted.map { " \(millisecondsText(now - $0))" } ?? ""
                    let farther = candidates.filter { $0.rttExceeds != nil }.count
                    logger.debug(
                        "nearest decided\(after) after browsing began: \(nearest?.name ?? "none") of \(candidates.count) candidate(s)\(farther > 0 ? ", \(farther) not waited for" : "")")
                    return (nearest, candidates)
                case .wait(let until):
                    guard let until, until != alarm else { continue }
                    alarm = until
                    group.addTask {
                        try? await clock.sleep(until: until)
                        sink.yield(.news)
                    }
                }
            }
            // Cancelled: whatever is known.
            if case .decided(let nearest, let candidates) = race.verdict(at: race.deadline) { return (nearest, candidates) }
            return (nil, [])
        }
    }

    /// Everything announced within `duration`, compatible or not; compatible peers measured.
    func measureAll(after duration: Duration) async -> [DiscoveredPeer] {
        let end = clock.now + duration
        while clock.now < end { await waitForAnnouncement(until: end) }
        let measured = await measure(compatibleAnnouncements())
        return announced.announcements.sorted { $0.name < $1.name }.map { announcement in
            let peer = announcement.peerID.flatMap { PeerID($0) }
            let why: String? =
                switch machine.compatibility(of: announcement) {
                case .success: nil
                case .failure(let incompatibility): incompatibility.description
                }
            return DiscoveredPeer(
                name: announcement.name, peerID: peer, addresses: announcement.addresses, port: announcement.port,
                protocolVersion: announcement.protocolVersion, compatible: why == nil, reason: why,
                rtt: measured.first { $0.peerID == peer }?.rtt)
        }
    }

    /// The announcements the machine would connect to, with their peers.
    /// What was found but not taken, and why, for an error a person reads: `; skipped 1:
    /// "Printer" (its TXT has no valid id …)`. Our own announcement is not counted.
    private func skippedText() -> String {
        var reasons: [String] = []
        for announcement in announced.announcements {
            guard case .failure(let why) = machine.compatibility(of: announcement) else { continue }
            if case .ownAnnouncement = why { continue }
            reasons.append("\"\(announcement.name)\" (\(why))")
        }
        guard !reasons.isEmpty else { return "" }
        let shown = reasons.sorted().prefix(5).joined(separator: ", ")
        return "; skipped \(reasons.count): \(shown)\(reasons.count > 5 ? ", ..." : "")"
    }

    private func compatibleAnnouncements() -> [(PeerID, PeerAnnouncement)] {
        announced.announcements.compactMap { announcement in
            guard let peer = try? machine.compatibility(of: announcement).get() else { return nil }
            return (peer, announcement)
        }
    }

    private func measure(_ candidates: [(PeerID, PeerAnnouncement)]) async -> [MeasuredPeer] {
        let limiter = dials
        let timeout = configuration.probeTimeout
        return await withTaskGroup(of: MeasuredPeer.self) { group in
            for (peer, announcement) in candidates {
                group.addTask {
                    await limiter.acquire()
                    let (rtt, address) = await HappyEyeballs.measure(
                        DialPlan.schedule(announcement.addresses), port: announcement.port, timeout: timeout)
                    await limiter.release()
                    return MeasuredPeer(peerID: peer, name: announcement.name, rtt: rtt, address: address?.description)
                }
            }
            var measured: [MeasuredPeer] = []
            for await peer in group { measured.append(peer) }
            return measured
        }
    }
}

/// At most `limit` holders at once; the others wait in order.
actor AsyncLimiter {
    private let limit: Int
    private var inUse = 0
    private var waiting: [CheckedContinuation<Void, Never>] = []

    init(_ limit: Int) { self.limit = limit }

    func acquire() async {
        if inUse < limit {
            inUse += 1
            return
        }
        await withCheckedContinuation { waiting.append($0) }
    }

    func release() {
        if waiting.isEmpty {
            inUse -= 1
        } else {
            waiting.removeFirst().resume()
        }
    }
}
