import Logging
import PeerConnection
import PeerTrust
import ServiceLifecycle
import Testing

@Suite("loopback: a listener as a service")
struct LifecycleTests {
    @Test("in a ServiceGroup, graceful shutdown closes the listener's connections with 1001 and the group returns; cancellation does the same")
    func gracefulShutdown() async throws {
        for cancel in [false, true] {
            let server = try Peers.identity("Build Box")
            let client = try Peers.identity("Laptop")
            let listener = try await PeerListener.listen(host: "127.0.0.1", port: 0, configuration: Peers.configuration(server, pinning: [client]))
            let group = ServiceGroup(configuration: ServiceGroupConfiguration(
                services: [ServiceGroupConfiguration.ServiceConfiguration(service: listener)], logger: Logger(label: "test")))
            let running = Task { try await group.run() }
            let connection = try await PeerConnection.connect(host: "127.0.0.1", port: listener.port, configuration: Peers.configuration(client, pinning: [server]))
            #expect(try await connection.request("ping") == .object([:]))
            if cancel { running.cancel() } else { await group.triggerGracefulShutdown() }
            let reason = await connection.closed()
            #expect(reason.message.contains("1001") && reason.message.contains("shutting down"), "\(reason)")
            #expect(reason.kind == .closed && reason.closeCode == .goingAway && reason.byPeer, "\(reason)")
            try await running.value
            // The listener accepts nobody any more.
            await #expect(throws: PeerConnectionError.self) {
                _ = try await PeerConnection.connect(host: "127.0.0.1", port: listener.port, configuration: Peers.configuration(client, pinning: [server]))
            }
        }
    }
}
