import Foundation
import PeerConnection
import PeerTrust
import Testing

/// Connects to `server` as `client`; returns the connection or the error.
func dial(
    _ port: Int, as configuration: PeerConnectionConfiguration, expecting: PeerID? = nil
) async -> Result<PeerConnection, PeerConnectionError> {
    do {
        return .success(try await PeerConnection.connect(host: "127.0.0.1", port: port, expecting: expecting, configuration: configuration))
    } catch {
        return .failure(error)
    }
}

extension Result {
    var failure: Failure? { if case .failure(let error) = self { error } else { nil } }
    var success: Success? { if case .success(let value) = self { value } else { nil } }
}

@Suite("loopback: TLS trust, both directions")
struct TrustTests {
    @Test("two peers that pin each other connect, initialize, and answer ping and echo")
    func pinnedBothWays() async throws {
        let server = try Peers.identity("Build Box")
        let client = try Peers.identity("Laptop")
        let echo = try await EchoServer(Peers.configuration(server, pinning: [client]))
        let connection = try await PeerConnection.connect(
            host: "127.0.0.1", port: echo.port, expecting: server.peerID, configuration: Peers.configuration(client, pinning: [server]))
        #expect(connection.peerID == server.peerID)
        #expect(connection.peer.displayName == "Build Box")
        #expect(connection.verdict?.isTrusted == true)
        #expect(try await connection.request("ping") == .object([:]))
        #expect(try await connection.request("echo", params: .array([.integer(1), .string("two")])) == .array([.integer(1), .string("two")]))
        await connection.close()
        await echo.stop()
    }

    @Test("serve judging a client: one it has not pinned is refused in TLS, and the listener says why")
    func serverRefusesUnpinnedClient() async throws {
        let server = try Peers.identity("Build Box")
        let client = try Peers.identity("Stranger")
        let echo = try await EchoServer(Peers.configuration(server, pinning: []))
        let outcome = await dial(echo.port, as: Peers.configuration(client, pinning: [server]))
        #expect(outcome.failure?.code == .tls)
        let rejection = try #require(await echo.nextRejection())
        #expect(rejection.peerID == client.peerID)
        #expect(rejection.error.code == .untrusted)
        #expect(rejection.error.reasons.contains { $0.code == .notPinned || $0.code == .nothingTrusted })
        await echo.stop()
    }

    @Test("connect judging a server: one it has not pinned is refused with the reasons")
    func clientRefusesUnpinnedServer() async throws {
        let server = try Peers.identity("Build Box")
        let client = try Peers.identity("Laptop")
        let echo = try await EchoServer(Peers.configuration(server, pinning: [client]))
        let error = try #require(await dial(echo.port, as: Peers.configuration(client, pinning: [])).failure)
        #expect(error.code == .untrusted)
        #expect(!error.reasons.isEmpty)
        await echo.stop()
    }

    @Test("the peer ID expected differs from the server's key: refused before any application byte")
    func expectedPeerIDDiffers() async throws {
        let server = try Peers.identity("Build Box")
        let impostor = try Peers.identity("Impostor")
        let client = try Peers.identity("Laptop")
        let echo = try await EchoServer(Peers.configuration(server, pinning: [client]))
        let error = try #require(await dial(echo.port, as: Peers.configuration(client, pinning: [server]), expecting: impostor.peerID).failure)
        #expect(error.code == .untrusted)
        #expect(error.reasons.contains { $0.code == .peerIDMismatch })
        await echo.stop()
    }

    @Test("a connection to ourselves is refused")
    func selfConnection() async throws {
        let me = try Peers.identity("Me")
        let echo = try await EchoServer(Peers.configuration(me, pinning: [me]))
        let error = try #require(await dial(echo.port, as: Peers.configuration(me, pinning: [me])).failure)
        #expect(error.code == .untrusted)
        #expect(error.message.contains("ourselves"))
        await echo.stop()
    }

    @Test("anchored chains: ok with the intermediate, refused without it, refused when expired")
    func anchoredChains() async throws {
        let root = try Peers.authority("Test Root")
        let intermediate = try Peers.authority("Test Intermediate", issuedBy: root)
        let server = try Peers.issued("Build Box", by: intermediate, presenting: [intermediate.certificate])
        let client = try Peers.issued("Laptop", by: intermediate, presenting: [intermediate.certificate])
        let echo = try await EchoServer(Peers.configuration(server, anchors: [root.certificate]))
        let ok = try await PeerConnection.connect(
            host: "127.0.0.1", port: echo.port, configuration: Peers.configuration(client, anchors: [root.certificate]))
        #expect(try await ok.request("ping") == .object([:]))
        guard case .trusted(let trusted)? = ok.verdict else { Issue.record("not trusted: \(String(describing: ok.verdict))"); return }
        #expect(trusted.chain.count == 3)
        await ok.close()

        let bare = try Peers.issued("Laptop", by: intermediate, presenting: [])
        #expect(await dial(echo.port, as: Peers.configuration(bare, anchors: [root.certificate])).failure != nil)
        let missing = try #require(await echo.nextRejection())
        #expect(missing.error.reasons.contains { $0.code == .unknownIssuer })

        let expired = try Peers.issued(
            "Old Laptop", by: intermediate, presenting: [intermediate.certificate], from: Date() - 2 * Peers.year, until: Date() - 86_400)
        #expect(await dial(echo.port, as: Peers.configuration(expired, anchors: [root.certificate])).failure != nil)
        let old = try #require(await echo.nextRejection())
        #expect(old.error.reasons.contains { $0.code == .expired })
        await echo.stop()
    }

    @Test("a certificate made for servers only (no clientAuth) is refused when used as a client")
    func serverOnlyCertificateAsClient() async throws {
        let root = try Peers.authority("Test Root")
        let server = try Peers.issued("Build Box", by: root, presenting: [])
        let serverOnly = try Peers.issued("Web Server", by: root, presenting: [], usage: 1)
        let echo = try await EchoServer(Peers.configuration(server, anchors: [root.certificate]))
        #expect(await dial(echo.port, as: Peers.configuration(serverOnly, anchors: [root.certificate])).failure != nil)
        let rejection = try #require(await echo.nextRejection())
        #expect(rejection.error.reasons.contains { $0.code == .wrongUsage })
        await echo.stop()
    }
}

@Suite("loopback: the initialize handshake and invitations")
struct InvitationTests {
    @Test("--accept ask: the app sees the invitation (untrusted), declines, the client hears -32003")
    func declined() async throws {
        let server = try Peers.identity("Build Box")
        let client = try Peers.identity("Laptop")
        let seen = InvitationLog()
        let echo = try await EchoServer(Peers.configuration(server), accept: .ask { invitation in
            await seen.add(invitation)
            return false
        })
        let error = try #require(await dial(echo.port, as: Peers.configuration(client, pinning: [server])).failure)
        #expect(error.code == .handshake)
        #expect(error.message.contains("declined"))
        let invitation = try #require(await seen.all.first)
        #expect(invitation.peer.peerID == client.peerID)
        #expect(invitation.displayName == "Laptop")
        #expect(!invitation.isTrusted)
        await echo.stop()
    }

    @Test("--accept ask: accepted, the connection works; --accept all admits an unpinned peer")
    func acceptedAndAll() async throws {
        let server = try Peers.identity("Build Box")
        let client = try Peers.identity("Laptop")
        let asking = try await EchoServer(Peers.configuration(server), accept: .ask { _ in true })
        let one = try await PeerConnection.connect(host: "127.0.0.1", port: asking.port, configuration: Peers.configuration(client, pinning: [server]))
        #expect(try await one.request("ping") == .object([:]))
        await one.close()
        await asking.stop()
        let open = try await EchoServer(Peers.configuration(server), accept: .all)
        let two = try await PeerConnection.connect(host: "127.0.0.1", port: open.port, configuration: Peers.configuration(client, pinning: [server]))
        #expect(try await two.request("echo", params: .array([.string("hi")])) == .array([.string("hi")]))
        await two.close()
        await open.stop()
    }

    @Test("incompatible protocol versions: refused with a message naming both")
    func incompatibleVersions() async throws {
        let server = try Peers.identity("Build Box")
        let client = try Peers.identity("Laptop")
        let echo = try await EchoServer(Peers.configuration(server, pinning: [client], version: "0.3.0"))
        let error = try #require(await dial(echo.port, as: Peers.configuration(client, pinning: [server], version: "0.2.2")).failure)
        #expect(error.code == .handshake)
        #expect(error.message.contains("0.2.2") && error.message.contains("0.3.0"))
        await echo.stop()
    }
}

actor InvitationLog {
    private(set) var all: [PeerListener.Invitation] = []
    func add(_ invitation: PeerListener.Invitation) { all.append(invitation) }
}
