import DNSWire
import Logging
import NearbyBasics
import UnicastDNSSD

/// Observations from unicast DNS (RFC 6763 §11): a ``RecordPoller`` decides what to ask and
/// when, from the TTLs of the answers; this actor asks (at most ``maximumInFlight`` questions at
/// once) and turns what changed into the same observations the mDNS engine makes, so one
/// ``BrowseStateMachine`` serves every domain.
///
/// A browse also looks for the zone's DNS Push server (RFC 8765) unless told not to. While a
/// Push session lasts, each watch the server accepts is fed by it and asked nothing; when the
/// session ends, the watches are asked again at once, and the server is looked for again later
/// (10 s, doubling to 5 minutes, or the server's Retry Delay).
actor UnicastObservationSource: ObservationSource {
    /// Unicast DNS has no interfaces: every observation carries this one.
    static let interface = NetworkInterface(index: 0, name: "")
    static let maximumInFlight = 32
    /// Answers come one question at a time; what they change is handed on in batches at most
    /// this often, so the browse machine looks at a thousand services a hundred times during a
    /// one-second burst of answers rather than after each of the four thousand answers.
    static let batchInterval: Duration = .milliseconds(10)

    let client: DNSClient
    /// The PTR name to follow (nil for a resolve by name or a host look-up).
    let browsing: DomainName?
    /// The PTR name is a service-type enumeration (`_services._dns-sd._udp`): its targets are types.
    let listsTypes: Bool
    let clock: any ShellClock
    /// How to use DNS Push, and what it runs on; nil: never (poll).
    let push: (policy: DNSPushPolicy, transport: any DNSPushTransport)?
    /// The Push session in use, and its zone (only names under it are subscribed).
    private var subscriber: PushSubscriber?
    private var pushZone: DomainName?
    private var poller: RecordPoller
    private var sink: ObservationSink?
    private var queue: [RecordPoller.Key] = []
    private var inFlight = 0
    private var stopped = false
    /// Observations waiting for the next batch, and whether its delivery is scheduled.
    private var pending: [DiscoveryObservation] = []
    private var flushScheduled = false
    private let children = ChildTasks()
    private let alarm = Alarm()
    private let origin: Duration

    init(
        client: DNSClient, browsing: DomainName?, listsTypes: Bool = false, settings: RecordPoller.Settings = RecordPoller.Settings(),
        push: (policy: DNSPushPolicy, transport: any DNSPushTransport)? = nil, clock: any ShellClock = SystemClock()
    ) {
        self.client = client
        self.push = push.flatMap { $0.policy == .off ? nil : $0 }
        self.browsing = browsing
        self.listsTypes = listsTypes
        self.clock = clock
        self.poller = RecordPoller(settings: settings)
        self.origin = clock.now
    }

    private var now: Duration { clock.now - origin }

    nonisolated func run() async {
        await children.run()
    }

    func start(sink: ObservationSink) async {
        self.sink = sink
        let alarm = alarm
        let clock = clock
        children.spawn { [weak self] in
            await alarm.run(clock: clock) { [weak self] in await self?.tick() }
        }
        if let browsing {
            perform(poller.watch(.init(browsing, .ptr), isList: true, at: now))
            if push != nil {
                children.spawn { [weak self] in await self?.pushLoop(for: browsing) }
            }
        }
    }

    func watch(_ watch: DiscoveryWatch) async {
        for key in Self.keys(watch) {
            perform(poller.watch(key, at: now))
            if let subscriber, let pushZone, key.name.hasSuffix(pushZone) { subscriber.subscribe(key) }
        }
    }

    func unwatch(_ watch: DiscoveryWatch) async {
        for key in Self.keys(watch) {
            poller.unwatch(key)
            subscriber?.unsubscribe(key)
        }
        rearm()
    }

    func stop() async {
        stopped = true
        alarm.set(nil)
        subscriber?.close()
        children.finish()
    }

    // MARK: DNS Push

    /// Finds the zone's Push server and keeps a session with it while the browse lasts; tries
    /// again after a session ends or no server is found.
    private func pushLoop(for name: DomainName) async {
        var wait: Duration = .seconds(10)
        while !stopped, !Task.isCancelled {
            var retryAfter: Duration?
            if let push, let server = await PushServer.find(for: name, client: client), !stopped {
                let subscriber = PushSubscriber(server: server, policy: push.policy, transport: push.transport, logger: client.logger, clock: clock)
                self.subscriber = subscriber
                pushZone = server.zone
                client.logger.info("\(name): DNS Push from \(server)")
                for key in poller.watchedKeys where key.name.hasSuffix(server.zone) { subscriber.subscribe(key) }
                await withDiscardingTaskGroup { group in
                    group.addTask { await subscriber.run() }
                    for await event in subscriber.events {
                        if case .subscribed = event { wait = .seconds(10) }
                        if case .ended(let reason, let delay) = event {
                            retryAfter = delay
                            client.logger.info("\(name): the DNS Push session with \(server) ended (\(reason)); asking again instead")
                        }
                        pushed(event)
                    }
                }
                self.subscriber = nil
                pushZone = nil
                for key in poller.watchedKeys { perform(poller.pushEnded(key, at: now)) }
            } else {
                client.logger.debug("\(name): no DNS Push server found; asking again as TTLs run out")
            }
            guard !stopped else { return }
            try? await clock.sleep(for: retryAfter.map { max($0, .seconds(1)) } ?? wait)
            wait = min(wait * 2, .seconds(300))
        }
    }

    private func pushed(_ event: PushSubscriber.Event) {
        guard !stopped else { return }
        switch event {
        case .subscribed(let key):
            poller.pushStarted(key, at: now)
            rearm()
        case .refused(let key, let code):
            client.logger.debug("\(key): DNS Push subscription refused or cancelled (\(code)); asking instead")
            perform(poller.pushEnded(key, at: now))
        case .changed(let key, let added, let removed, let removeAll):
            perform(poller.pushed(key, added: added, removed: removed, removeAll: removeAll, at: now))
        case .ended:
            break
        }
    }

    private static func keys(_ watch: DiscoveryWatch) -> [RecordPoller.Key] {
        watch.recordSets.map { RecordPoller.Key($0.name, $0.type) }
    }

    private func tick() {
        perform(poller.advance(to: now))
    }

    private func perform(_ actions: [RecordPoller.Action]) {
        var observations: [DiscoveryObservation] = []
        for action in actions {
            switch action {
            case .query(let key):
                queue.append(key)
            case .added(let key, let data):
                if let observation = observation(key, data, added: true) { observations.append(observation) }
            case .removed(let key, let data):
                if let observation = observation(key, data, added: false) { observations.append(observation) }
            }
        }
        if !observations.isEmpty {
            pending += observations
            if !flushScheduled {
                flushScheduled = true
                let clock = clock
                children.spawn { [weak self] in
                    try? await clock.sleep(for: Self.batchInterval)
                    await self?.flush()
                }
            }
        }
        askQueued()
        rearm()
    }

    private func flush() {
        flushScheduled = false
        guard !pending.isEmpty, !stopped else { return }
        let batch = pending
        pending = []
        sink?.deliver(batch)
    }

    private func rearm() {
        alarm.set(poller.nextDeadline.map { origin + $0 })
    }

    private func askQueued() {
        while !stopped, inFlight < Self.maximumInFlight, !queue.isEmpty {
            let key = queue.removeFirst()
            inFlight += 1
            let client = client
            children.spawn { [weak self] in
                let result: Message?
                do { result = try await client.query(key.name, key.type) } catch {
                    client.logger.debug("\(key): \(error)")
                    result = nil
                }
                await self?.answered(key, result)
            }
        }
    }

    private func answered(_ key: RecordPoller.Key, _ message: Message?) {
        inFlight -= 1
        guard !stopped else { return }
        if let message {
            perform(poller.answered(key, with: message, at: now))
        } else {
            perform(poller.failed(key, at: now))
        }
    }

    /// A change the poller reported, in DNS-SD terms. A source listing service types takes
    /// each PTR target as it is (a type, not an instance).
    func observation(_ key: RecordPoller.Key, _ data: RecordData, added: Bool) -> DiscoveryObservation? {
        if listsTypes, case .ptr(let target) = data, key.name == browsing {
            return added ? .instanceAdded(target, Self.interface) : .instanceRemoved(target, Self.interface)
        }
        return DiscoveryObservation.record(key.name, data, on: Self.interface, added: added, browsing: browsing)
    }
}
