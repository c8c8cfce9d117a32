import Foundation
import PeerConnection
import PeerTrust
import Testing

/// Pairing over real TLS on 127.0.0.1: the library's `pair` against a listener that offers it.
@Suite("loopback: pairing")
struct PairingLoopbackTests {
    /// A trust store in a fresh temporary directory.
    static func store() throws -> TrustStore {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("nearby-pairing-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        return TrustStore(directory: directory)
    }

    /// Codes the people were shown, in order (each side keeps its own).
    final class Shown: @unchecked Sendable {
        private let lock = NSLock()
        private var codes: [String] = []
        func add(_ code: String) { lock.withLock { codes.append(code) } }
        var all: [String] { lock.withLock { codes } }
    }

    /// A person who answers `answer` and notes the code.
    static func person(_ answer: Bool, _ shown: Shown) -> @Sendable (PairingRequest) async -> Bool {
        { request in
            shown.add(request.code)
            return answer
        }
    }

    func pair(_ port: Int, as client: PeerIdentity, store: TrustStore, answer: Bool, shown: Shown) async -> Result<PairingResult, PeerConnectionError> {
        do {
            return .success(try await PeerConnection.pair(
                host: "127.0.0.1", port: port, configuration: Peers.configuration(client), store: store,
                confirm: Self.person(answer, shown)))
        } catch {
            return .failure(error)
        }
    }

    @Test("two strangers pair: both see one code, both pin the other, and then connect under pins alone, both ways")
    func pairThenConnect() async throws {
        let server = try Peers.identity("Build Box")
        let client = try Peers.identity("Laptop")
        let (serverStore, clientStore) = (try Self.store(), try Self.store())
        let (serverShown, clientShown) = (Shown(), Shown())
        let echo = try await EchoServer(
            Peers.configuration(server), accept: .trusted,
            pairing: PeerListener.PairingOffer(store: serverStore, confirm: Self.person(true, serverShown)))
        let outcome = await pair(echo.port, as: client, store: clientStore, answer: true, shown: clientShown)
        let result = try #require(outcome.success, "\(String(describing: outcome.failure))")
        #expect(result.peerID == server.peerID)
        #expect(result.name == "Build Box")
        #expect(clientShown.all == serverShown.all && clientShown.all == [result.code])
        var pairings = echo.pairings.makeAsyncIterator()
        let serverSide = try #require(await pairings.next())
        #expect(serverSide.peerID == client.peerID && serverSide.name == "Laptop" && serverSide.code == result.code)
        #expect(try clientStore.pins().map(\.peerID) == [server.peerID])
        #expect(try serverStore.pins().map(\.peerID) == [client.peerID])
        #expect(try serverStore.pins().first?.name == "Laptop")
        await echo.stop()

        // Now each admits the other with nothing but its pins.
        var serverConfiguration = Peers.configuration(server)
        serverConfiguration.trust = TrustEvaluator(policy: try .pinned(serverStore))
        var clientConfiguration = Peers.configuration(client)
        clientConfiguration.trust = TrustEvaluator(policy: try .pinned(clientStore))
        let pinned = try await EchoServer(serverConfiguration)
        let connection = try await PeerConnection.connect(host: "127.0.0.1", port: pinned.port, configuration: clientConfiguration)
        #expect(try await connection.request("ping") == .object([:]))
        await connection.close()
        await pinned.stop()
        let reverse = try await EchoServer(clientConfiguration)
        let back = try await PeerConnection.connect(host: "127.0.0.1", port: reverse.port, configuration: serverConfiguration)
        #expect(back.peerID == client.peerID)
        await back.close()
        await reverse.stop()
    }

    @Test("a no on either side pins nothing on either side", arguments: [true, false])
    func declined(serverSaysNo: Bool) async throws {
        let server = try Peers.identity("Build Box")
        let client = try Peers.identity("Laptop")
        let (serverStore, clientStore) = (try Self.store(), try Self.store())
        let (serverShown, clientShown) = (Shown(), Shown())
        let echo = try await EchoServer(
            Peers.configuration(server), accept: .trusted,
            pairing: PeerListener.PairingOffer(store: serverStore, confirm: Self.person(!serverSaysNo, serverShown)))
        let error = try #require(await pair(echo.port, as: client, store: clientStore, answer: serverSaysNo, shown: clientShown).failure)
        #expect(error.code == .pairing)
        #expect(error.message.contains(serverSaysNo ? "other side" : "declined here"), "\(error)")
        // Both were asked (the codes were the same), and nobody pinned anything.
        #expect(clientShown.all.count == 1 && clientShown.all == serverShown.all)
        #expect(try clientStore.pins().isEmpty)
        #expect(try serverStore.pins().isEmpty)
        await echo.stop()
    }

    @Test("after the allowed failures the listener refuses pairing without asking anyone, and says why")
    func rateLimited() async throws {
        let server = try Peers.identity("Build Box")
        let client = try Peers.identity("Laptop")
        let serverShown = Shown()
        var offer = PeerListener.PairingOffer(store: try Self.store(), confirm: Self.person(false, serverShown))
        offer.maximumFailures = 2
        let echo = try await EchoServer(Peers.configuration(server), accept: .trusted, pairing: offer)
        let clientStore = try Self.store()
        for _ in 0..<2 {
            let error = await pair(echo.port, as: client, store: clientStore, answer: true, shown: Shown()).failure
            #expect(error?.code == .pairing)
        }
        let refused = try #require(await pair(echo.port, as: client, store: clientStore, answer: true, shown: Shown()).failure)
        #expect(refused.message.contains("too many failed pairings"), "\(refused)")
        #expect(serverShown.all.count == 2)
        await echo.stop()
    }

    @Test("a listener that offers pairing under .trusted lets a stranger pair but not initialize, and reports why")
    func strangersOnlyPair() async throws {
        let server = try Peers.identity("Build Box")
        let stranger = try Peers.identity("Stranger")
        let echo = try await EchoServer(
            Peers.configuration(server), accept: .trusted,
            pairing: PeerListener.PairingOffer(store: try Self.store(), confirm: { _ in true }))
        let error = try #require(await dial(echo.port, as: Peers.configuration(stranger, pinning: [server])).failure)
        #expect(error.code == .handshake && error.message.contains("declined"), "\(error)")
        let rejection = try #require(await echo.nextRejection())
        #expect(rejection.peerID == stranger.peerID)
        #expect(rejection.error.code == .untrusted)
        #expect(rejection.error.message.contains("pair first"))
        #expect(rejection.error.reasons.contains { $0.code == .notPinned })
        await echo.stop()
    }

    @Test("a listener that does not offer pairing: refused in TLS (.trusted), or pair/request refused before initialize (.all)")
    func notOffered() async throws {
        let server = try Peers.identity("Build Box")
        let client = try Peers.identity("Laptop")
        let strict = try await EchoServer(Peers.configuration(server))
        let refusedInTLS = try #require(await pair(strict.port, as: client, store: try Self.store(), answer: true, shown: Shown()).failure)
        #expect(refusedInTLS.code == .tls, "\(refusedInTLS)")
        await strict.stop()
        let open = try await EchoServer(Peers.configuration(server), accept: .all)
        let refused = try #require(await pair(open.port, as: client, store: try Self.store(), answer: true, shown: Shown()).failure)
        #expect(refused.code == .pairing)
        #expect(refused.message.contains("-32002"), "\(refused)")
        await open.stop()
    }
}

@Suite("loopback: built-in methods")
struct BuiltInMethodTests {
    @Test("ping is built in and a custom method is answered on the event loop: neither reaches incoming; others still do")
    func answeredBeforeIncoming() async throws {
        let server = try Peers.identity("Build Box")
        let client = try Peers.identity("Laptop")
        var configuration = Peers.configuration(server, pinning: [client])
        configuration.methods["sum"] = { params in
            guard case .array(let items)? = params else { return .failure(JSONRPCError(JSONRPCError.invalidParams, "sum takes an array")) }
            return .success(.integer(items.reduce(0) { total, item in if case .integer(let n) = item { total + n } else { total } }))
        }
        let listener = try await PeerListener.listen(host: "127.0.0.1", port: 0, configuration: configuration)
        let seen = Task { () -> [String] in
            var methods: [String] = []
            for await event in listener.events {
                guard case .connected(let connection) = event else { continue }
                for await message in connection.incoming {
                    methods.append(message.method ?? "?")
                    message.respond(with: .string("from the app"))
                }
                return methods
            }
            return methods
        }
        let connection = try await PeerConnection.connect(
            host: "127.0.0.1", port: listener.port, configuration: Peers.configuration(client, pinning: [server]))
        #expect(try await connection.request("ping") == .object([:]))
        #expect(try await connection.request("sum", params: .array([.integer(2), .integer(40)])) == .integer(42))
        do {
            _ = try await connection.request("sum", params: .object(["x": .integer(1)]))
            Issue.record("sum of an object was answered")
        } catch {
            #expect(error.remoteError?.code == JSONRPCError.invalidParams)
        }
        #expect(try await connection.request("other") == .string("from the app"))
        // A batch mixing both: the built-in part and the app's part come back together.
        try await connection.send(text: #"[{"jsonrpc":"2.0","id":"a","method":"ping"},{"jsonrpc":"2.0","id":"b","method":"later"}]"#)
        var incoming = connection.incoming.makeAsyncIterator()
        var answers: [JSONRPCID: JSONValue] = [:]
        for _ in 0..<2 {
            guard case .response(let id, let result)? = await incoming.next()?.message else { Issue.record("not a response"); break }
            answers[id] = result
        }
        #expect(answers == [.string("a"): .object([:]), .string("b"): .string("from the app")])
        await connection.close()
        let methods = await seen.value
        #expect(methods == ["other", "later"])
        await listener.close()
    }

    @Test("without the built-in ping, ping reaches the app like any request")
    func pingRemoved() async throws {
        let server = try Peers.identity("Build Box")
        let client = try Peers.identity("Laptop")
        var configuration = Peers.configuration(server, pinning: [client])
        configuration.methods = [:]
        let listener = try await PeerListener.listen(host: "127.0.0.1", port: 0, configuration: configuration)
        let served = Task {
            for await event in listener.events {
                guard case .connected(let connection) = event else { continue }
                for await message in connection.incoming where message.method == "ping" {
                    message.respond(with: .string("pong from the app"))
                }
                return
            }
        }
        let connection = try await PeerConnection.connect(
            host: "127.0.0.1", port: listener.port, configuration: Peers.configuration(client, pinning: [server]))
        #expect(try await connection.request("ping") == .string("pong from the app"))
        await connection.close()
        await listener.close()
        served.cancel()
    }
}
