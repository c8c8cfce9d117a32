import Foundation
import PeerConnection
import PeerTrust
import Testing

/// Invitations over real TLS on 127.0.0.1: a listener that takes them, `PeerConnection.accept`.
@Suite("loopback: invitations")
struct InvitationLoopbackTests {
    let server: PeerIdentity
    let client: PeerIdentity
    let serverStore: TrustStore
    let clientStore: TrustStore

    init() throws {
        server = try Peers.identity("Build Box")
        client = try Peers.identity("Laptop")
        serverStore = try PairingLoopbackTests.store()
        clientStore = try PairingLoopbackTests.store()
    }

    /// A listener that admits peers pinned in its store (read live) and takes invitations.
    func inviter() async throws -> EchoServer {
        var configuration = Peers.configuration(server)
        configuration.trust = TrustEvaluator(policy: try .pinned(serverStore))
        return try await EchoServer(configuration, accept: .trusted, invitations: PeerListener.InvitationOffer(store: serverStore))
    }

    func invitation(_ echo: EchoServer, uses: Int = 1, ttl: Duration = .seconds(60)) throws -> InvitationLink {
        try echo.listener.invite(ttl: ttl, uses: uses, addresses: [try InvitationLink.Address(host: "127.0.0.1", port: echo.port)])
    }

    func accept(_ link: InvitationLink, as identity: PeerIdentity? = nil, store: TrustStore? = nil) async -> Result<PeerConnection, PeerConnectionError> {
        do {
            return .success(try await PeerConnection.accept(link, configuration: Peers.configuration(identity ?? client), store: store ?? clientStore))
        } catch {
            return .failure(error)
        }
    }

    @Test("an invitation connects and pins both ways; the inviter reports it; afterwards both connect under their pins alone")
    func accepted() async throws {
        let echo = try await inviter()
        let link = try invitation(echo)
        let connection = try #require(await accept(link).success)
        // From the moment the invitee is in, the inviter is not idle: `nearby invite`, which
        // stops once its invitations are over and its listener idle, must not drop it.
        #expect(!echo.listener.isIdle)
        #expect(connection.peerID == server.peerID)
        let echoed = try await connection.request("echo", params: .object(["hi": 1]))
        #expect(echoed == .object(["hi": 1]))
        #expect(try clientStore.pins().map(\.peerID) == [server.peerID])
        #expect(try clientStore.pins().first?.name == "Build Box")
        #expect(try serverStore.pins().map(\.peerID) == [client.peerID])
        #expect(try serverStore.pins().first?.name == "Laptop")
        var attempts = echo.invitations.makeAsyncIterator()
        let attempt = try #require(await attempts.next())
        #expect(attempt.peerID == client.peerID && attempt.name == "Laptop" && attempt.outcome == .accepted(usesLeft: 0, again: false))
        #expect(echo.listener.invitationsAreOver)
        _ = await connection.close()
        // The pin applies to the running listener at once (its policy reads the store), and the
        // client connects under its own pin.
        var configuration = Peers.configuration(client)
        configuration.trust = TrustEvaluator(policy: try .pinned(clientStore))
        let again = try await PeerConnection.connect(host: "127.0.0.1", port: echo.port, expecting: server.peerID, configuration: configuration)
        _ = await again.close()
        await echo.listener.close()
    }

    @Test("a second invitee finds the invitation used up; the first one, pinned now, connects without using anything")
    func usedUp() async throws {
        let echo = try await inviter()
        let link = try invitation(echo)
        let first = try #require(await accept(link).success)
        _ = await first.close()
        let other = try Peers.identity("Stranger")
        let refused = try #require(await accept(link, as: other, store: try PairingLoopbackTests.store()).failure)
        #expect(refused.code == .invitation)
        #expect(refused.message.contains("this invitation was already used"), "\(refused.message)")
        let back = try #require(await accept(link).success)
        _ = await back.close()
        var attempts = echo.invitations.makeAsyncIterator()
        #expect(await attempts.next()?.outcome == .accepted(usesLeft: 0, again: false))
        #expect(await attempts.next()?.outcome == .refused(InvitationRefusal(.usedUp, "this invitation was already used (it allowed 1 use)")))
        #expect(await attempts.next()?.outcome == .alreadyTrusted)
        #expect(try serverStore.pins().map(\.peerID) == [client.peerID])
        await echo.listener.close()
    }

    @Test("a changed secret is a wrong proof, reported with the attempts left; three make the invitation void for the right secret too")
    func wrongSecret() async throws {
        let echo = try await inviter()
        let link = try invitation(echo, uses: 2)
        let forged = try InvitationLink(
            peerID: link.peerID, id: link.id, secret: [UInt8](repeating: 1, count: 16), expires: link.expires, addresses: link.addresses)
        var messages: [String] = []
        for _ in 1...3 { messages.append(try #require(await accept(forged).failure).message) }
        #expect(messages[0].contains("the proof does not match this invitation's secret"), "\(messages[0])")
        #expect(messages[0].contains("2 more wrong proofs make it void"))
        #expect(messages[2].contains("it is now void"))
        let void = try #require(await accept(link).failure)
        #expect(void.code == .invitation && void.message.contains("this invitation is void"), "\(void.message)")
        #expect(try serverStore.pins().isEmpty && clientStore.pins().isEmpty)
        var attempts = echo.invitations.makeAsyncIterator()
        for _ in 1...3 {
            guard case .refused(let refusal)? = await attempts.next()?.outcome else { Issue.record("no refusal reported"); return }
            #expect(refusal.kind == .wrongProof)
        }
        #expect(echo.listener.invitationsAreOver)
        await echo.listener.close()
    }

    @Test("the invitee refuses a server whose key is not the link's peer ID, before any application byte")
    func impostor() async throws {
        let echo = try await inviter()
        let real = try invitation(echo)
        let someoneElse = try Peers.identity("Impostor")
        let changed = try InvitationLink(peerID: someoneElse.peerID, id: real.id, secret: real.secret, expires: real.expires, addresses: real.addresses)
        let refused = try #require(await accept(changed).failure)
        #expect(refused.code == .untrusted)
        #expect(refused.message.contains("is not the inviter"), "\(refused.message)")
        #expect(refused.message.contains("nothing was sent to it"))
        #expect(try clientStore.pins().isEmpty)
        #expect(!echo.listener.invitationsAreOver)
        await echo.listener.close()
    }

    @Test("an expired link is refused here without dialing; a revoked one (listener gone) says nothing answered")
    func expiredAndRevoked() async throws {
        let echo = try await inviter()
        let link = try invitation(echo)
        var expired = PeerConnectionError(.closed, "no error")
        do {
            _ = try await PeerConnection.accept(link, configuration: Peers.configuration(client), store: clientStore, now: link.expires)
        } catch {
            expired = error
        }
        #expect(expired.code == .invitation && expired.message.contains("this invitation expired at"))
        #expect(echo.listener.revoke(link))
        let revoked = try #require(await accept(link).failure)
        #expect(revoked.message.contains("not known here: it was revoked"), "\(revoked.message)")
        await echo.listener.close()
        let stopped = try #require(await accept(link).failure)
        #expect(stopped.message.contains("no address of the invitation answered"), "\(stopped.message)")
    }

    @Test("a listener without invitations refuses one in words; the invitee is not pinned")
    func notOffered() async throws {
        var configuration = Peers.configuration(server)
        configuration.trust = TrustEvaluator(policy: .pinned([]))
        let plain = try await EchoServer(configuration, accept: .all)
        let withOffer = try await inviter()
        let offered = try invitation(withOffer)
        let link = try InvitationLink(
            peerID: server.peerID, id: offered.id, secret: offered.secret, expires: Date() + 60,
            addresses: [try InvitationLink.Address(host: "127.0.0.1", port: plain.port)])
        let refused = try #require(await accept(link).failure)
        #expect(refused.message.contains("takes no invitations"), "\(refused.message)")
        #expect(try clientStore.pins().isEmpty)
        await plain.listener.close()
        await withOffer.listener.close()
    }

    @Test("a pin made while a listener runs applies at once: a stranger refused before is admitted after `trust pin`, no restart")
    func livePins() async throws {
        let echo = try await inviter()
        let connecting = Peers.configuration(client, pinning: [server])
        await #expect(throws: PeerConnectionError.self) {
            _ = try await PeerConnection.connect(host: "127.0.0.1", port: echo.port, configuration: connecting)
        }
        try serverStore.pin(client.peerID, name: "Laptop")
        let connection = try await PeerConnection.connect(host: "127.0.0.1", port: echo.port, configuration: connecting)
        _ = await connection.close()
        await echo.listener.close()
    }
}
