import NearbyBasics
import SystemDNSSD
import Testing

@testable import NearbyDiscovery

/// A backend that records what reaches it, to show that checks happen above the backends.
/// Tests that need more of a backend subclass it.
class RecordingBackend: DiscoveryBackend, @unchecked Sendable {
    private(set) var advertised: [ServiceRegistration] = []

    func advertise(_ registration: ServiceRegistration) async throws -> Advertisement {
        advertised.append(registration)
        return Advertisement(
            name: registration.instance, requestedName: registration.instance, type: registration.type, port: registration.port,
            events: AsyncStream { $0.finish() }, update: { _ in }, cancel: {})
    }
    func browse(_ type: ServiceType, resolve: Bool) -> EventStream<BrowseEvent> { .finished }
    func resolve(_ instance: ServiceInstanceName, timeout: Duration) async -> ResolvedService? { nil }
    func serviceTypes() -> EventStream<ServiceType> { .finished }
    func hostName() async -> DomainName { "test.local." }
    func shutdown() async {}
    func run() async {}
}

@Suite("backends")
struct BackendTests {
    let type = try! ServiceType(parsing: "_openagents._tcp")

    @Test("a bad instance name or subtype is refused before any backend sees it")
    func checksAboveBackends() async throws {
        let backend = RecordingBackend()
        let discovery = NearbyDiscovery(backend: backend)
        await #expect(throws: ServiceNameError.self) {
            _ = try await discovery.advertise(String(repeating: "n", count: 64), type: type, port: 1)
        }
        await #expect(throws: ServiceNameError.self) {
            _ = try await discovery.advertise("Box", type: type, port: 1, subtypes: [String(repeating: "s", count: 64)])
        }
        #expect(backend.advertised.isEmpty)
        _ = try await discovery.advertise("Box", type: type, port: 9099, subtypes: ["_bridge"])
        #expect(backend.advertised.map(\.instance) == ["Box"])
    }

    @Test("an unanswered resolve is a DiscoveryError naming the service and the time waited")
    func unanswered() async throws {
        let discovery = NearbyDiscovery(backend: RecordingBackend())
        do {
            _ = try await discovery.resolve("Box", type: type, timeout: .seconds(1))
            Issue.record("resolve succeeded")
        } catch let error as DiscoveryError {
            #expect(error.code == .timeout)
            #expect(error.description == "no answer for \"Box\" (_openagents._tcp) within 1.0 seconds")
        }
    }

    @Test("dns_sd gets the type with subtypes after commas")
    func dnssdTypes() throws {
        #expect(type.dnssdType() == "_openagents._tcp")
        #expect(type.dnssdType(subtypes: ["_bridge", "_mobile"]) == "_openagents._tcp,_bridge,_mobile")
        let narrowed = try type.withSubtype("_bridge")
        #expect(narrowed.dnssdType() == "_openagents._tcp,_bridge")
    }

    @Test("the system backend takes all interfaces or one, and says so before contacting a daemon")
    func oneInterface() async {
        do {
            _ = try await SystemBackend.start(interfaces: ["lan1", "lan2"])
            Issue.record("two interfaces were accepted")
        } catch let error as DiscoveryError {
            #expect(error.code == .invalidInput)
            #expect(error.description.contains("all interfaces or on one"))
        } catch {
            Issue.record("unexpected \(error)")
        }
        do {
            _ = try await NearbyDiscovery.start(backend: .system, hostName: "box")
            Issue.record("a host name was accepted")
        } catch {
            #expect("\(error)".contains("host name needs the embedded backend"))
        }
    }

    @Test("dns_sd errors name the code, and a missing daemon says what to start")
    func errorWords() {
        let missing = DNSSDError(code: -65537, operation: "DNSServiceBrowse")
        #expect(missing.daemonUnavailable)
        #expect(missing.description.hasPrefix("avahi-daemon is not running or not reachable over D-Bus (dns_sd: Unknown)"))
        #expect(missing.description.contains("systemctl start avahi-daemon"))
        #expect(DNSSDError(code: -65563, operation: "DNSServiceRegister").daemonUnavailable)
        let conflict = DNSSDError(code: -65548, operation: "DNSServiceRegister")
        #expect(!conflict.daemonUnavailable)
        #expect(conflict.description == "DNSServiceRegister failed (dns_sd: NameConflict)")
        #expect(DNSSDError(code: -2, operation: "X").name == "error -2")
    }

    @Test("a missing dns_sd library says which package to install and that the embedded backend needs none")
    func libraryMissingWords() {
        let error = DNSSDError(code: -1, operation: "dlopen", detail: "libdns_sd.so.1: cannot open shared object file: No such file or directory")
        #expect(error.libraryMissing && !error.daemonUnavailable)
        #expect(error.description == "the system backend needs Avahi's dns_sd library, which could not be loaded "
            + "(libdns_sd.so.1: cannot open shared object file: No such file or directory); install libavahi-compat-libdnssd1 "
            + "(Debian, Ubuntu) or use the embedded backend (--backend embedded)")
        #expect(DiscoveryError(error).code == .libraryMissing)
    }
}
