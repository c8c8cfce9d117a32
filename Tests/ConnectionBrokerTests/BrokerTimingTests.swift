import DNSWire
import NearbyBasics
import NearbyDiscovery
import PeerConnection
import PeerTrust
import Testing

@testable import ConnectionBroker

/// The broker's shell on a clock moved by hand: callers who wait for a peer or a name give up
/// exactly when their time is up on the broker's clock, with no real time passing.
@Suite("broker timing")
struct BrokerTimingTests {
    static let local = PeerID(bytes: [UInt8](repeating: 0x11, count: 32))!
    static let absent = PeerID(bytes: [UInt8](repeating: 0x22, count: 32))!

    func makeLoop(clock: ManualClock) throws -> BrokerLoop {
        let connection = PeerConnectionConfiguration(identity: nil, trust: TrustEvaluator(policy: .pinned([])))
        let configuration = BrokerConfiguration(connection: connection, serviceType: try #require(ServiceType("_openagents._tcp")))
        let (_, continuation) = EventStream.makeStream(buffer: BrokerEventBuffer<BrokerEvent>())
        return BrokerLoop(
            configuration: configuration, localID: Self.local, continuation: continuation, discovery: NearbyDiscovery(backend: SilentBackend()),
            clock: clock)
    }

    /// Runs `call` on a running loop whose clock moves by `steps` once it waits, and gives back
    /// the error `call` ended with; the loop is then shut down and every child awaited.
    func outcome(
        advancing steps: [Duration], _ call: @escaping @Sendable (BrokerLoop) async -> BrokerError?
    ) async throws -> (error: BrokerError?, clock: ManualClock) {
        let clock = ManualClock()
        let loop = try makeLoop(clock: clock)
        let runner = Task { await loop.run() }
        let waiting = Task { await call(loop) }
        await clock.waitForSleepers()
        for step in steps { clock.advance(by: step) }
        let error = await waiting.value
        await loop.shutdown()
        runner.cancel()
        await runner.value  // every child ended
        return (error, clock)
    }

    @Test("a caller waiting for a peer nobody announces gives up at its timeout, on the broker's clock")
    func connectTimeout() async throws {
        let (error, clock) = try await outcome(advancing: [.milliseconds(4999), .milliseconds(1)]) { loop in
            do throws(BrokerError) {
                _ = try await loop.connect(peerID: Self.absent, timeout: .seconds(5))
                return nil
            } catch {
                return error
            }
        }
        #expect(error?.code == .notFound)
        #expect(error?.message.contains(Self.absent.short) == true)
        #expect(clock.now == .seconds(5))
    }

    @Test("a wait for a name ends at its timeout; shutting down ends the children")
    func nameTimeout() async throws {
        let (error, clock) = try await outcome(advancing: [.seconds(2)]) { loop in
            do throws(BrokerError) {
                _ = try await loop.peerID(named: "Build Box", timeout: .seconds(2))
                return nil
            } catch {
                return error
            }
        }
        #expect(error?.code == .notFound)
        #expect(error?.message.contains("Build Box") == true)
        #expect(clock.now == .seconds(2))
    }
}

/// Discovery that finds nothing: a browse that stays open and silent.
struct SilentBackend: DiscoveryBackend {
    func advertise(_ registration: ServiceRegistration) async throws -> Advertisement {
        throw DiscoveryError(.invalidInput, "this backend does not advertise")
    }
    func browse(_ type: ServiceType, resolve: Bool) -> EventStream<BrowseEvent> { EventStream.makeStream(buffer: NewestBuffer(limit: 1)).stream }
    func resolve(_ instance: ServiceInstanceName, timeout: Duration) async -> ResolvedService? { nil }
    func serviceTypes() -> EventStream<ServiceType> { .finished }
    func hostName() async -> DomainName { DomainName.root }
    func shutdown() async {}
}
