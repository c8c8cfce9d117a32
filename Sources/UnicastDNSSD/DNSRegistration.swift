import NearbyCrypto
public import DNSWire
import Logging
import NearbyBasics
import NetworkPlatform

/// A service registered in a DNS zone with signed DNS UPDATEs, refreshed while it lives and
/// removed by ``withdraw()``. The I/O around a pure state machine, which decides (zone, server, names, refresh, removal).
public final class DNSRegistration: Sendable {
    /// The instance name won in the zone (e.g. `Build Box (2)` when the name was taken).
    public var name: String { state.withLockedValue { $0.name } }
    /// The host name the SRV record points at, e.g. `buildbox.lab.example.test.` (or
    /// `buildbox-2.…` when another machine holds the first).
    public var hostName: DomainName { state.withLockedValue { $0.hostName } }
    /// Renames, interruptions and restorations after the first registration. They are rare
    /// (each follows a failed refresh or a conflict in the zone); the newest 8 wait for a reader,
    /// the last of them saying where the registration stands.
    public let events: AsyncStream<RegistrationEvent>

    private struct State {
        var name: String
        var hostName: DomainName
    }
    private let state: Locked<State>
    private let inputs: AsyncStream<Input>.Continuation
    private let task: Task<Void, Never>

    enum Input: Sendable {
        case answer(Result<Message, UnicastDNSError>)
        case tick
        case info(DiscoveryInfo)
        case withdraw(CheckedContinuation<Void, Never>)
    }

    /// Registers a service in its type's domain and returns once the records are in the zone.
    /// - Parameters:
    ///   - registration: the service; its type's domain is the DNS domain, e.g. `lab.example.test.`.
    ///   - key: the TSIG key the zone's update-policy grants (nil: unsigned updates).
    ///   - client: asks the questions (zone, primary server, conflicts).
    ///   - server: where updates go; nil finds the zone's primary (`_dns-update._udp` SRV, else the SOA's MNAME).
    ///   - hostLabel: the host's label in the domain (default: this machine's name).
    ///   - ttl: TTL of every record (default 30 s: records a crashed registrant leaves go stale quickly).
    /// - Throws: ``UnicastDNSError`` with one line saying what went wrong.
    public static func register(
        _ registration: ServiceRegistration, key: TSIGKey?, client: DNSClient, server: DNSServer? = nil,
        hostLabel: String? = nil, ttl: UInt32? = nil
    ) async throws(UnicastDNSError) -> DNSRegistration {
        let label = hostLabel ?? NetworkPlatform.hostLabel() ?? "nearby"
        var settings = RegistrationStateMachine.Settings()
        if let ttl = ttl ?? registration.ttl { settings.ttl = ttl }
        let machine = RegistrationStateMachine(
            registration: registration, hostLabel: label, addresses: Self.hostAddresses(), ownerToken: Self.ownerToken(label: label),
            server: server, signed: key != nil, settings: settings)
        // Not bounded by a count: one answer per request the machine sent (it sends the next
        // only after the last one's answer), one alarm's ticks, and the app's own calls.
        let (inputs, input) = AsyncStream<Input>.makeStream()
        let (events, eventSink) = AsyncStream<RegistrationEvent>.makeStream(bufferingPolicy: .bufferingNewest(8))
        // The first outcome, yielded once.
        let (first, firstSink) = AsyncStream<RegistrationEvent>.makeStream()
        let state = Locked(State(name: registration.instance, hostName: machine.hostName))
        let task = Task {
            await Self.run(machine, inputs: inputs, input: input, key: key, client: client, state: state) { event in
                switch event {
                case .registered:
                    firstSink.yield(event)
                    firstSink.finish()
                case .failed:
                    firstSink.yield(event)
                    firstSink.finish()
                    eventSink.finish()
                case .renamed, .interrupted, .restored, .withdrawn:
                    eventSink.yield(event)
                }
            }
            firstSink.finish()
            eventSink.finish()
        }
        var iterator = first.makeAsyncIterator()
        let outcome = await iterator.next()
        guard case .registered = outcome else {
            task.cancel()
            if case .failed(let error) = outcome { throw error }
            throw UnicastDNSError(.unreachable, "the registration stopped before it was made")
        }
        return DNSRegistration(events: events, state: state, inputs: input, task: task)
    }

    private init(events: AsyncStream<RegistrationEvent>, state: Locked<State>, inputs: AsyncStream<Input>.Continuation, task: Task<Void, Never>) {
        self.events = events
        self.state = state
        self.inputs = inputs
        self.task = task
    }

    /// Replaces the TXT record in the zone.
    public func update(info: DiscoveryInfo) {
        inputs.yield(.info(info))
    }

    /// Removes the records from the zone; returns once the server has answered (or given up).
    public func withdraw() async {
        await withCheckedContinuation { continuation in
            if case .terminated = inputs.yield(.withdraw(continuation)) { continuation.resume() }
        }
        await task.value
    }

    private static func run(
        _ initial: RegistrationStateMachine, inputs: AsyncStream<Input>, input: AsyncStream<Input>.Continuation, key: TSIGKey?,
        client: DNSClient, state: Locked<State>, report: @escaping @Sendable (RegistrationEvent) -> Void
    ) async {
        var machine = initial
        let clock = SystemClock()
        let alarm = Alarm()
        let logger = client.logger
        var waiters: [CheckedContinuation<Void, Never>] = []
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await alarm.run(clock: clock) { input.yield(.tick) } }
            var finished = false
            func perform(_ actions: [RegistrationStateMachine.Action]) {
                for action in actions {
                    switch action {
                    case .send(let request):
                        let server = machine.server
                        group.addTask {
                            let result: Result<Message, UnicastDNSError>
                            switch request {
                            case .query(let name, let type):
                                result = await client.result { () async throws(UnicastDNSError) in try await client.query(name, type) }
                            case .update(let update):
                                guard let server else {
                                    input.yield(.answer(.failure(UnicastDNSError(.unreachable, "no server to send the update to"))))
                                    return
                                }
                                logger.debug("sending an update of \(update.zone) to \(server): \(update.changes.count) change(s), \(update.prerequisites.count) prerequisite(s)")
                                result = await client.result { () async throws(UnicastDNSError) in try await client.send(update, key: key, to: server) }
                            }
                            input.yield(.answer(result))
                        }
                    case .report(let event):
                        logger.debug("registration: \(event)")
                        state.withLockedValue {
                            $0.name = machine.name
                            $0.hostName = machine.hostName
                        }
                        report(event)
                    case .finish:
                        finished = true
                    }
                }
                alarm.set(machine.deadline)
            }
            perform(machine.start(at: clock.now))
            for await next in inputs {
                let now = clock.now
                switch next {
                case .answer(let result):
                    perform(machine.handle(result, at: now))
                case .tick:
                    perform(machine.update(addresses: hostAddresses(), at: now))
                    perform(machine.advance(to: now))
                case .info(let info):
                    perform(machine.update(info: info, at: now))
                case .withdraw(let continuation):
                    waiters.append(continuation)
                    perform(machine.withdraw(at: now))
                }
                if finished { break }
                if Task.isCancelled {
                    perform(machine.withdraw(at: now))
                    if finished { break }
                }
            }
            input.finish()
            group.cancelAll()
        }
        for waiter in waiters { waiter.resume() }
        // Anything still queued (a withdraw that came after the end) is answered too.
        for await next in inputs {
            if case .withdraw(let continuation) = next { continuation.resume() }
        }
    }

    /// The addresses other hosts can reach: every running interface's, but loopback and
    /// link-local (which mean nothing off the link) and container bridges (which no other
    /// machine reaches), IPv4 first.
    package static func hostAddresses() -> [IPAddress] {
        var v4: [IPAddress] = []
        var v6: [IPAddress] = []
        for entry in NetworkPlatform.interfaceAddresses() where entry.isRunning && entry.reachableFromElsewhere {
            guard let address = IPAddress(bytes: entry.address, linkScope: nil) else { continue }
            switch address {
            case .v4(let a) where a.value >> 24 != 127 && a.value >> 16 != 0xA9FE:
                if !v4.contains(address) { v4.append(address) }
            case .v6(let a, _) where a.high >> 54 != 0x3FA && !(a.high == 0 && a.low <= 1):
                if !v6.contains(address) { v6.append(address) }
            default:
                continue
            }
        }
        return v4 + v6
    }

    /// Marks the host's records as this machine's (so a restart reclaims them): a hash of
    /// /etc/machine-id (or the host name) and the label, 16 hex digits.
    static func ownerToken(label: String) -> String {
        let machine = readTextFile("/etc/machine-id")?.trimmingWhitespace ?? NetworkPlatform.hostName() ?? label
        return hexString(SHA256.hash(Array("nearby host owner\u{0}\(machine)\u{0}\(label)".utf8)).prefix(8))
    }
}

extension DNSClient {
    /// The outcome of `body` as a Result.
    func result(_ body: () async throws(UnicastDNSError) -> Message) async -> Result<Message, UnicastDNSError> {
        do { return .success(try await body()) } catch { return .failure(error) }
    }
}
