import DNSWire
import Logging
import NearbyBasics
import UnicastDNSSD

/// Observations from unicast DNS (RFC 6763 §11): a ``RecordPoller`` decides what to ask and
/// when, from the TTLs of the answers; this actor asks (at most ``maximumInFlight`` questions at
/// once) and turns what changed into the same observations the mDNS engine makes, so one
/// ``BrowseStateMachine`` serves every domain.
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
        clock: any ShellClock = SystemClock()
    ) {
        self.client = client
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
        if let browsing { perform(poller.watch(.init(browsing, .ptr), isList: true, at: now)) }
    }

    func watch(_ watch: DiscoveryWatch) async {
        for key in Self.keys(watch) { perform(poller.watch(key, at: now)) }
    }

    func unwatch(_ watch: DiscoveryWatch) async {
        for key in Self.keys(watch) { poller.unwatch(key) }
        rearm()
    }

    func stop() async {
        stopped = true
        alarm.set(nil)
        children.finish()
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
