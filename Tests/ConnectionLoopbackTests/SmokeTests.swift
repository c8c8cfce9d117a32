import Foundation
import PeerConnection
import PeerTrust
import Testing

@Suite("loopback: pinned peers")
struct PinnedTests {
    @Test("two peers that pin each other connect, initialize, and answer ping and echo")
    func pinnedBothWays() async throws {
        let server = try Peers.identity("Build Box")
        let client = try Peers.identity("Laptop")
        let echo = try await EchoServer(Peers.configuration(server, pinning: [client]))
        let connection = try await PeerConnection.connect(
            host: "127.0.0.1", port: echo.port, expecting: server.peerID, configuration: Peers.configuration(client, pinning: [server]))
        #expect(connection.peerID == server.peerID)
        #expect(connection.peer.displayName == "Build Box")
        #expect(try await connection.request("ping") == .object([:]))
        #expect(try await connection.request("echo", params: .array([.integer(1), .string("two")])) == .array([.integer(1), .string("two")]))
        await connection.close()
        await echo.stop()
    }
}
