import DNSWire
import Logging
import NearbyBasics

/// Where a ``DiscoveryDriver`` gets its observations: a backend's way of following a type, a
/// service and a host (an actor: its forwarding tasks and the driver both reach it).
protocol ObservationSource: AnyObject, Sendable {
    /// Runs the source's children (its forwarders and retries) until the task is cancelled:
    /// the driver runs it as a child of its own task group.
    func run() async
    /// Begins (for a browse: starts following the type's instances). Observations go to `sink`.
    func start(sink: ObservationSink) async
    func watch(_ watch: DiscoveryWatch) async
    func unwatch(_ watch: DiscoveryWatch) async
    /// Stops everything it started.
    func stop() async
}

/// Where sources deliver observations: one batch per call, in order.
struct ObservationSink: Sendable {
    let deliver: @Sendable ([DiscoveryObservation]) -> Void
}

/// The thin async shell around ``BrowseStateMachine``: feeds it the source's observations and
/// the clock, performs its watches, and hands its reports on. All decisions are the state
/// machine's.
struct DiscoveryDriver {
    enum Input: Sendable, Equatable {
        case observed([DiscoveryObservation])
        case tick
    }

    /// What waits for the driver's loop: the source's observations as
    /// ``DiscoveryObservation/buffer()`` keeps them (the newest of each thing), and at most
    /// one tick (the alarm went off: the machine looks at the time when it reads it).
    struct InputBuffer: EventBuffer {
        private var observations = DiscoveryObservation.buffer()
        private var tick = false

        mutating func push(_ input: Input) {
            switch input {
            case .observed(let batch): observations.push(batch)
            case .tick: tick = true
            }
        }

        mutating func pop() -> Input? {
            if let batch = observations.pop() { return .observed(batch) }
            guard tick else { return nil }
            tick = false
            return .tick
        }

        var count: Int { observations.count + (tick ? 1 : 0) }
        var merged: Int { observations.merged }
    }

    var machine: BrowseStateMachine
    let source: any ObservationSource
    var logger: Logger

    /// Runs until cancelled or until `onReport` returns false; then stops the source.
    /// - Parameters:
    ///   - deadline: also stop when this much time has passed (a resolve's timeout).
    ///   - clock: the time (a ``ManualClock`` in tests).
    func run(deadline: Duration? = nil, clock: any ShellClock = SystemClock(), onReport: (BrowseEvent) -> Bool) async {
        var machine = machine
        let start = clock.now
        func elapsed() -> Duration { clock.now - start }
        let (inputs, input) = EventStream<Input>.makeStream(buffer: InputBuffer())
        // The machine's next deadline (or the caller's), in the clock's time.
        let alarm = Alarm()

        var explained: [String: String] = [:]
        func perform(_ actions: [BrowseStateMachine.Action]) async -> Bool {
            for action in actions {
                switch action {
                case .watch(let watch):
                    logger.trace("watching \(watch)")
                    await source.watch(watch)
                case .unwatch(let watch):
                    logger.trace("no longer watching \(watch)")
                    await source.unwatch(watch)
                case .report(let event):
                    switch event {
                    case .interrupted(let error): logger.warning("discovery interrupted: \(error)")
                    case .restored: logger.notice("discovery restored")
                    case .found, .updated, .lost: logger.debug("\(event)")
                    }
                    if !onReport(event) { return false }
                }
            }
            // Why what is found is not resolved yet, each time that changes (only when someone listens).
            guard logger.logLevel <= .debug else { return true }
            var now: [String: String] = [:]
            for (service, waiting) in machine.unresolved() {
                let name = "\(service) on \(service.interface.name.isEmpty ? "any interface" : service.interface.name)"
                now[name] = waiting
                if explained[name] != waiting { logger.debug("\(name) is not resolved yet: waiting for \(waiting)") }
            }
            explained = now
            return true
        }
        func rearm() {
            alarm.set([machine.nextDeadline, deadline].compactMap({ $0 }).min().map { start + $0 })
        }

        await withTaskGroup(of: Void.self) { group in
            // The timekeeper and the source's forwarders: children of this run, so they end with it.
            group.addTask { await alarm.run(clock: clock) { _ = input.yield(.tick) } }
            let source = self.source
            group.addTask { await source.run() }
            await source.start(sink: ObservationSink { batch in _ = input.yield(.observed(batch)) })
            var going = await perform(machine.start(at: elapsed()))
            rearm()
            var iterator = inputs.makeAsyncIterator()
            while going, !Task.isCancelled {
                guard let next = await iterator.next() else { break }
                let now = elapsed()
                switch next {
                case .observed(let batch):
                    logger.trace("observed \(batch)")
                    going = await perform(machine.handle(batch, at: now))
                case .tick:
                    going = await perform(machine.advance(to: now))
                }
                if let deadline, now >= deadline { break }
                rearm()
            }
            group.cancelAll()
        }
        input.finish()
        await source.stop()
    }
}

extension DiscoveryDriver {
    /// Browse events for `type` until the consumer stops listening, merged per service while
    /// they wait for a slow consumer (``BrowseEventBuffer``).
    static func browse(
        _ type: ServiceType, resolve: Bool, settleTime: Duration, wholeAtOnce: Bool = false,
        source: any ObservationSource, logger: Logger
    ) -> EventStream<BrowseEvent> {
        // The producer runs in a task the stream owns (the consumer's loop is not ours to join):
        // it owns the driver and its children and is cancelled when the consumer stops.
        EventStream(buffer: BrowseEventBuffer()) { events in
            let driver = DiscoveryDriver(
                machine: BrowseStateMachine(type: type, mode: .browse(resolve: resolve), settleTime: settleTime, wholeAtOnce: wholeAtOnce),
                source: source, logger: logger)
            var merged = 0
            await driver.run { event in
                guard events.yield(event) else { return false }
                if events.merged > merged {
                    if merged == 0 || events.merged / 1000 > merged / 1000 {
                        logger.notice(
                            "the application reads browse events more slowly than they come: \(events.merged) merged so far (waiting events keep each service's latest state)")
                    }
                    merged = events.merged
                }
                return true
            }
        }
    }

    /// The first resolution of one instance, or nil when none came within `timeout`.
    static func resolve(
        _ instance: ServiceInstanceName, timeout: Duration, settleTime: Duration, wholeAtOnce: Bool = false,
        source: any ObservationSource, logger: Logger
    ) async -> ResolvedService? {
        let driver = DiscoveryDriver(
            machine: BrowseStateMachine(
                type: instance.type, mode: .resolve(instance.domainName), settleTime: settleTime, wholeAtOnce: wholeAtOnce),
            source: source, logger: logger)
        var result: ResolvedService?
        await driver.run(deadline: timeout) { event in
            if case .found(_, let resolved?) = event { result = resolved }
            return result == nil
        }
        return result
    }
}

extension DiscoveryDriver {
    /// The addresses of `host` (A and AAAA), as the source observes them: what arrives until
    /// `settleTime` after the first address (a responder may send IPv4 and IPv6 in separate
    /// packets), or nothing once `timeout` has passed. IPv4 first, then IPv6.
    static func addresses(
        of host: DomainName, timeout: Duration, settleTime: Duration, source: any ObservationSource, logger: Logger,
        clock: any ShellClock = SystemClock()
    ) async -> [IPAddress] {
        let (observed, sink) = EventStream<[DiscoveryObservation]>.makeStream(buffer: DiscoveryObservation.buffer())
        await source.start(sink: ObservationSink(deliver: { _ = sink.yield($0) }))
        await source.watch(.host(host, nil))
        // Ends the wait: at the timeout, or settleTime after the first address.
        let alarm = Alarm()
        alarm.set(clock.now + timeout)
        var found: [IPAddress] = []
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await alarm.run(clock: clock) { sink.finish() } }
            group.addTask { await source.run() }
            for await batch in observed {
                let first = found.isEmpty
                for case .addressAdded(let name, _, let address) in batch where name == host && !found.contains(address) {
                    found.append(address)
                }
                if first, !found.isEmpty, let end = alarm.deadline { alarm.set(min(end, clock.now + settleTime)) }
            }
            group.cancelAll()
        }
        await source.stop()
        logger.debug("\(host) has \(found.isEmpty ? "no address within \(timeout)" : found.map(\.description).joined(separator: ", "))")
        return found.filter { if case .v4 = $0 { true } else { false } } + found.filter { if case .v6 = $0 { true } else { false } }
    }
}
