import NearbyBasics
import PeerConnection
import PeerTrust
import Testing

/// Who gets in under `.ask` and under `.trusted` with pairing, over real loopback sockets.
@Suite("loopback: admission")
struct AdmissionTests {
    @Test("under .ask, a trusted peer gets in without a question, and a peer the app accepted once is not asked again")
    func notAskedAgain() async throws {
        let server = try Peers.identity("Build Box")
        let pinned = try Peers.identity("Pinned")
        let stranger = try Peers.identity("Stranger")
        let seen = InvitationLog()
        let echo = try await EchoServer(Peers.configuration(server, pinning: [pinned]), accept: .ask { invitation in
            await seen.add(invitation)
            return true
        })
        let trusted = try await PeerConnection.connect(host: "127.0.0.1", port: echo.port, configuration: Peers.configuration(pinned, pinning: [server]))
        #expect(try await trusted.request("ping") == .object([:]))
        await trusted.close()
        #expect(await seen.all.isEmpty)
        for _ in 0..<2 {
            let connection = try await PeerConnection.connect(
                host: "127.0.0.1", port: echo.port, configuration: Peers.configuration(stranger, pinning: [server]))
            #expect(try await connection.request("ping") == .object([:]))
            await connection.close()
        }
        // Asked about the stranger once; its second connection got in on the first answer.
        #expect(await seen.all.map(\.peer.peerID) == [stranger.peerID])
        let invitation = try #require(await seen.all.first)
        // The question came with its deadline (30 s by default), in the future when asked.
        #expect(invitation.answerBy > .now - .seconds(5))
        await echo.stop()
    }

    @Test("while someone decides, the connecting side is told so and waits past its own initialize timeout")
    func clientWaits() async throws {
        let server = try Peers.identity("Build Box")
        let client = try Peers.identity("Laptop")
        var serving = Peers.configuration(server)
        serving.invitationTimeout = .seconds(20)
        let echo = try await EchoServer(serving, accept: .ask { _ in
            // Longer than the client's 0.3 s initialize timeout below.
            try? await Task.sleep(for: .seconds(1))
            return true
        })
        let told = Locked<[Duration]>([])
        var connecting = Peers.configuration(client, pinning: [server])
        connecting.initializeTimeout = .milliseconds(300)
        connecting.waitingForAdmission = { wait in told.withLockedValue { $0.append(wait) } }
        let connection = try await PeerConnection.connect(host: "127.0.0.1", port: echo.port, configuration: connecting)
        #expect(try await connection.request("ping") == .object([:]))
        await connection.close()
        let waits = told.withLockedValue { $0 }
        #expect(waits.count == 1)
        #expect(waits.allSatisfy { $0 > .seconds(15) && $0 <= .seconds(20) }, "\(waits)")
        await echo.stop()
    }

    @Test("a peer that goes away while its question is open cancels the question")
    func questionCancelled() async throws {
        let server = try Peers.identity("Build Box")
        let client = try Peers.identity("Laptop")
        let (cancelled, cancellation) = AsyncStream.makeStream(of: Bool.self)
        let echo = try await EchoServer(Peers.configuration(server), accept: .ask { _ in
            // Waits for an answer that never comes, until the task is cancelled.
            while !Task.isCancelled { try? await Task.sleep(for: .milliseconds(20)) }
            cancellation.yield(true)
            return true
        })
        var connecting = Peers.configuration(client, pinning: [server])
        connecting.initializeTimeout = .milliseconds(300)
        connecting.admissionWaitLimit = .milliseconds(500)
        let error = try #require(await dial(echo.port, as: connecting).failure)
        #expect(error.message.contains("no answer to initialize"))
        var iterator = cancelled.makeAsyncIterator()
        #expect(await iterator.next() == true)
        await echo.stop()
    }

    @Test(".trusted with pairing: an untrusted peer's initialize is declined with what to do (pair first)")
    func pairFirst() async throws {
        let server = try Peers.identity("Build Box")
        let client = try Peers.identity("Laptop")
        let store = try PairingLoopbackTests.store()
        let offer = PeerListener.PairingOffer(store: store) { _ in false }
        let echo = try await EchoServer(Peers.configuration(server), accept: .trusted, pairing: offer)
        let error = try #require(await dial(echo.port, as: Peers.configuration(client, pinning: [server])).failure)
        #expect(error.message.contains("pair with it first"), "\(error.message)")
        await echo.stop()
    }

    @Test("a pairing whose other side says no (and hangs up) cancels the question still open on this side")
    func pairingQuestionCancelled() async throws {
        let server = try Peers.identity("Build Box")
        let client = try Peers.identity("Laptop")
        let (cancelled, cancellation) = AsyncStream.makeStream(of: Bool.self)
        let offer = PeerListener.PairingOffer(store: try PairingLoopbackTests.store()) { _ in
            while !Task.isCancelled { try? await Task.sleep(for: .milliseconds(20)) }
            cancellation.yield(true)
            return true
        }
        let echo = try await EchoServer(Peers.configuration(server), accept: .trusted, pairing: offer)
        let clientStore = try PairingLoopbackTests.store()
        do {
            _ = try await PeerConnection.pair(
                host: "127.0.0.1", port: echo.port, configuration: Peers.configuration(client), store: clientStore) { _ in false }
            Issue.record("paired although this side said no")
        } catch {
            #expect(error.code == .pairing)
        }
        var iterator = cancelled.makeAsyncIterator()
        #expect(await iterator.next() == true)
        await echo.stop()
    }
}
