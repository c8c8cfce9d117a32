import Foundation
import NearbyBasics
import PeerConnection
import PeerTrust
import Testing

@testable import Nearby

/// The front door without the network: what its calls refuse before they touch it, the words of
/// its errors and events, the bound on a server's events, and a server's answers over loopback.
@Suite("The front door")
struct FrontDoorTests {
    static func temporaryFolder() throws -> URL {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("nearby-front-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        return folder
    }

    /// The message of the NearbyError `call` throws.
    static func message(_ call: () async throws(NearbyError) -> Void) async -> String? {
        do {
            try await call()
            return nil
        } catch {
            return error.message
        }
    }

    @Test("serve refuses a bad port, a bad type and its own TXT keys before it touches the network or the state directory")
    func serveRefusesBadInput() async throws {
        let folder = try Self.temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let answer: @Sendable (NearbyRequest) async throws -> String? = { _ in nil }
        let port = await Self.message { () async throws(NearbyError) in _ = try await serve("Box", type: "_openagents._tcp", port: 70_000, stateDirectory: folder.path, answer: answer) }
        #expect(port == "port 70000 is out of range; use 1-65535, or 0 for any free port")
        let type = await Self.message { () async throws(NearbyError) in _ = try await serve("Box", type: "openagents._tcp", stateDirectory: folder.path, answer: answer) }
        #expect(type == #""openagents._tcp" is not a service type: the service name must begin with an underscore, as in "_openagents._tcp""#)
        let empty = await Self.message { () async throws(NearbyError) in _ = try await serve("", type: "_openagents._tcp", stateDirectory: folder.path, answer: answer) }
        #expect(empty == #""" is not an instance name: it is empty; an instance name has 1 to 63 bytes of UTF-8"#)
        let own = await Self.message { () async throws(NearbyError) in _ = try await serve("Box", type: "_openagents._tcp", info: ["ID": "x"], stateDirectory: folder.path, answer: answer) }
        #expect(own == "TXT ID is the server's own (its peer ID); use another key")
        // Nothing was made: no identity was needed to say no.
        #expect(try FileManager.default.contentsOfDirectory(atPath: folder.path).isEmpty)
    }

    @Test("advertise's errors say each thing once, and quote a long value by its start")
    func advertiseErrorsSayItOnce() async {
        let long = String(repeating: "v", count: 300)
        let txt = await Self.message { () async throws(NearbyError) in _ = try await advertise("Box", type: "_openagents._tcp", port: 9099, info: ["version": long]) }
        #expect(txt == "TXT entry \"version=\(String(repeating: "v", count: 32))…\" is 308 bytes; an entry (key, \"=\" and value) holds at most 255", "\(txt ?? "")")
        let name = await Self.message { () async throws(NearbyError) in _ = try await advertise(String(repeating: "n", count: 70), type: "_openagents._tcp", port: 9099) }
        #expect(name == "\"\(String(repeating: "n", count: 40))…\" is not an instance name: it is 70 bytes of UTF-8; an instance name has at most 63", "\(name ?? "")")
        let port = await Self.message { () async throws(NearbyError) in _ = try await advertise("Box", type: "_openagents._tcp", port: 0) }
        #expect(port == "port 0 is out of range; use 1-65535")
    }

    @Test("connecting names the state directory given, and the command that fixes it: no identity, then nobody pinned with this peer's whole ID")
    func connectSaysWhatToDo() async throws {
        let folder = try Self.temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let none = await Self.message { () async throws(NearbyError) in _ = try await connectNearest("_openagents._tcp", stateDirectory: folder.path) }
        #expect(none == "there is no identity in \(folder.path): make one with `nearby identity create --name NAME`")
        let identity = try IdentityStore(directory: folder).loadOrCreate(displayName: "App").identity
        let nobody = await Self.message { () async throws(NearbyError) in _ = try await connect(named: "Box", type: "_openagents._tcp", stateDirectory: folder.path) }
        #expect(nobody?.hasPrefix("nobody is pinned in \(folder.path)/trust") == true, "\(nobody ?? "")")
        #expect(nobody?.hasSuffix("`nearby trust pin \(identity.peerID)`") == true, "\(nobody ?? "")")
    }

    @Test("a turned-away peer whose key is not pinned comes with the command that lets it in, its ID not repeated; other refusals say why")
    func turnedAwaySaysHowToLetIn() {
        let id = "ZWNJ2DQ4R7N6XJ8K3M5P9T2V6Y4B7C1D3F5G8H2J4K6M"
        let reason = turnedAwayReason(
            "the peer's certificate is not trusted", reasons: [TrustReason(.notPinned, "not pinned: peer ID \(id) is not among the 1 pinned peer")], peerID: id)
        #expect(reason == "not pinned here (to let it in: nearby trust pin \(id))")
        let other = turnedAwayReason("the TLS handshake failed", reasons: [], peerID: nil)
        #expect(other == "the TLS handshake failed")
        let event = ServerEvent.turnedAway(address: "198.18.1.3", peerID: id, reason: reason)
        #expect(event.description.hasPrefix("turned away 198.18.1.3 (peer ID \(id)): "))
    }

    @Test("a server's events wait up to 64 unread; beyond that they are counted in one missed event, in order")
    func eventsAreBounded() {
        var buffer = ServerEvent.policy
        for index in 0..<70 { buffer.push(.connected(name: "Peer \(index)", peerID: "ID\(index)", address: "198.18.1.\(index)")) }
        var popped: [ServerEvent] = []
        while let event = buffer.pop() { popped.append(event) }
        #expect(popped.count == 65)
        #expect(popped.first == .connected(name: "Peer 0", peerID: "ID0", address: "198.18.1.0"))
        #expect(popped.last == .missed(6))
        #expect(ServerEvent.missed(6).description == "6 events not shown: the program read them too slowly")
    }

    @Test("a server answers a trusted peer's requests with the closure: a result, method not found for nil, the thrown error's text, internal error for text that is not JSON")
    func serverAnswersRequests() async throws {
        let server = try PeerIdentity.generate(displayName: "Build Box")
        let client = try PeerIdentity.generate(displayName: "App")
        var serving = PeerConnectionConfiguration(identity: server, trust: TrustEvaluator(policy: .pinned([client.peerID])))
        serving.streams = nil
        let listener = try await PeerListener.listen(host: "127.0.0.1", port: 0, configuration: serving, accept: .trusted)
        struct Refusal: Error, CustomStringConvertible { var description: String { "not today" } }
        let answer: @Sendable (NearbyRequest) async throws -> String? = { request in
            switch request.method {
            case "hello": #"{"greeting": "hello, \#(request.peerName)", "params": \#(request.params ?? "null")}"#
            case "fail": throw Refusal()
            case "broken": "{not json"
            default: nil
            }
        }
        let serve = Task {
            for await event in listener.events {
                guard case .connected(let connection) = event else { continue }
                await answerRequests(on: connection, from: (connection.peer.displayName ?? "", connection.peerID?.description ?? ""), with: answer)
            }
        }
        let connection = try await PeerConnection.connect(
            host: "127.0.0.1", port: listener.port, configuration: PeerConnectionConfiguration(identity: client, trust: TrustEvaluator(policy: .pinned([server.peerID]))))
        let hello = try await connection.request("hello", params: .array([.number(1)]))
        #expect(hello.jsonText == #"{"greeting":"hello, App","params":[1]}"#)
        #expect(try await connection.request("ping").jsonText == "{}")
        for (method, code, text) in [("nothing", -32601, "no method \"nothing\" here"), ("fail", -32000, "not today"),
                                     ("broken", -32603, "the server's answer to broken is not JSON")] {
            do {
                _ = try await connection.request(method)
                Issue.record("\(method) was answered")
            } catch {
                #expect(error.remoteError?.code == code, "\(method): \(error)")
                #expect(error.remoteError?.message == text, "\(method): \(error)")
            }
        }
        _ = await connection.close()
        await listener.close()
        await serve.value
    }
}
