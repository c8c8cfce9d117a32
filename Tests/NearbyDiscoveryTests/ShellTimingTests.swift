import DNSWire
import Logging
import NearbyBasics
import Testing

@testable import NearbyDiscovery

/// The shells' timing on a clock moved by hand: the alarm their timekeeping child waits on, and
/// the discovery driver's timeouts, with no real time passing.
@Suite("shell timing")
struct ShellTimingTests {
    /// Yields until `condition` holds, at most `limit` times (a test that waits for something
    /// that never happens fails instead of hanging).
    func eventually(_ limit: Int = 100_000, _ condition: () async -> Bool) async -> Bool {
        for _ in 0..<limit {
            if await condition() { return true }
            await Task.yield()
        }
        return false
    }

    @Test("an alarm fires at its deadline; moved earlier, it fires earlier; cleared, it does not fire")
    func alarm() async {
        let clock = ManualClock()
        let alarm = Alarm()
        let fired = Locked<[Duration]>([])
        let runner = Task { await alarm.run(clock: clock) { fired.withLockedValue { $0.append(clock.now) } } }
        alarm.set(.seconds(10))
        await clock.waitForSleepers()
        clock.advance(by: .seconds(5))
        alarm.set(.seconds(7))  // earlier than the 10 s it sleeps towards
        #expect(await eventually { clock.sleeping == 1 && alarm.deadline == .seconds(7) })
        clock.advance(by: .seconds(2))
        #expect(await eventually { fired.withLockedValue { $0 } == [.seconds(7)] })
        #expect(alarm.deadline == nil)
        alarm.set(.seconds(20))
        await clock.waitForSleepers()
        alarm.set(nil)
        clock.advance(by: .seconds(60))
        #expect(await eventually(1000) { false } == false)  // give a wrong fire every chance to happen
        #expect(fired.withLockedValue { $0 } == [.seconds(7)])
        runner.cancel()
        await runner.value  // cancellation ends it
    }

    @Test("a cancel scope ends the jobs running in it and every later one; a job that ends first gives its result; its latch opens for every waiter")
    func cancelScope() async {
        let clock = ManualClock()
        let scope = CancelScope()
        #expect(await scope.run { 7 } == 7)
        // A job waiting on the clock (a probe's timeout) ends at once when the scope is cancelled.
        let long = Task { await scope.run { () async -> Int in (try? await clock.sleep(until: .seconds(60))) == nil ? -1 : 60 } }
        await clock.waitForSleepers()
        let waiter = Task { await scope.wait() }
        scope.cancel()
        #expect(await long.value == nil)
        await waiter.value
        #expect(clock.sleeping == 0)
        #expect(await scope.run { 1 } == nil)
        await scope.wait()
    }

    @Test("a resolve that hears nothing ends at its timeout on the shell's clock, and stops its source")
    func resolveTimeout() async throws {
        let clock = ManualClock()
        let source = ScriptedSource()
        let name = try DomainName(parsing: "Box._openagents._tcp.local.")
        let driver = DiscoveryDriver(
            machine: BrowseStateMachine(type: try #require(ServiceType("_openagents._tcp")), mode: .resolve(name), settleTime: .milliseconds(10)),
            source: source, logger: Logger(label: "test"))
        let resolving = Task {
            var reports = 0
            await driver.run(deadline: .seconds(5), clock: clock) { _ in
                reports += 1
                return true
            }
            return reports
        }
        await clock.waitForSleepers()
        #expect(await source.stopped == false)
        // Step by step to the timeout: the machine's own deadlines (query intervals) come first.
        #expect(await eventually {
            if clock.now < .seconds(5) { clock.advance(by: .milliseconds(500)) }
            return await source.stopped
        })
        #expect(await resolving.value == 0)
        #expect(clock.now == .seconds(5))
    }

    @Test("a host's addresses: IPv4 before IPv6, or none once the timeout has passed")
    func addresses() async throws {
        let clock = ManualClock()
        let host = try DomainName(parsing: "buildbox.local.")
        let lan = NetworkInterface(index: 2, name: "lan1")

        let silent = ScriptedSource()
        let nothing = Task {
            await DiscoveryDriver.addresses(
                of: host, timeout: .seconds(3), settleTime: .milliseconds(10), source: silent, logger: Logger(label: "test"), clock: clock)
        }
        await clock.waitForSleepers()
        clock.advance(by: .seconds(3))
        #expect(await nothing.value.isEmpty)
        #expect(await silent.stopped)

        let source = ScriptedSource()
        let finding = Task {
            await DiscoveryDriver.addresses(
                of: host, timeout: .seconds(3), settleTime: .milliseconds(10), source: source, logger: Logger(label: "test"), clock: clock)
        }
        #expect(await eventually { await source.watches == [.host(host, nil)] })
        let v6 = IPAddress.v6(try #require(IPv6Address("2001:db8::1")))
        let v4 = IPAddress.v4(try #require(IPv4Address("192.0.2.7")))
        await source.send([.addressAdded(host, lan, v6), .addressAdded(host, lan, v4)])
        #expect(await eventually {
            clock.advance(by: .milliseconds(5))
            return await source.stopped
        })
        #expect(await finding.value == [v4, v6])
    }
}

/// A source that delivers what the test tells it to.
actor ScriptedSource: ObservationSource {
    private var sink: ObservationSink?
    private(set) var watches: [DiscoveryWatch] = []
    private(set) var stopped = false

    nonisolated func run() async {}
    func start(sink: ObservationSink) { self.sink = sink }
    func watch(_ watch: DiscoveryWatch) { watches.append(watch) }
    func unwatch(_ watch: DiscoveryWatch) { watches.removeAll { $0 == watch } }
    func stop() { stopped = true }
    func send(_ batch: [DiscoveryObservation]) { sink?.deliver(batch) }
}
