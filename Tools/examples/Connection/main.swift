import PeerConnection
import PeerTrust

// Two identities that trust each other by peer ID (in real use: pins made at pairing time).
let server = try PeerIdentity.generate(displayName: "Build Box")
let client = try PeerIdentity.generate(displayName: "Laptop")
var serverSide = PeerConnectionConfiguration(identity: server, trust: TrustEvaluator(policy: .pinned([client.peerID])))
serverSide.info = .object(["name": "bridge", "title": "Build Box bridge", "version": "1.0.0"])
let clientSide = PeerConnectionConfiguration(identity: client, trust: TrustEvaluator(policy: .pinned([server.peerID])))

// The accepting side: answer `echo` on every connection that gets through.
let listener = try await PeerListener.listen(host: "127.0.0.1", port: 0, configuration: serverSide, accept: .trusted)
let serving = Task {
    for await event in listener.events {
        guard case .connected(let connection) = event else { continue }
        Task {
            for await message in connection.incoming where message.method == "echo" {
                message.respond(with: message.params ?? .null)
            }
        }
    }
}

// The connecting side: TLS 1.3 both ways, the peer ID checked, then `initialize`.
let connection = try await PeerConnection.connect(
    host: "127.0.0.1", port: listener.port, expecting: server.peerID, configuration: clientSide)
print("connected to", connection.peer.displayName ?? "?", connection.peer.info["title"]?.stringValue ?? "")
struct Greeting: Codable { var text: String }
let echoed: Greeting = try await connection.request("echo", params: Greeting(text: "hello"))
print("echo:", echoed.text)
await connection.close()
await listener.close()
serving.cancel()
