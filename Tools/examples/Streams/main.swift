import FileTransfer
import Foundation
import NIOCore
import PeerConnection
import PeerTrust

// Two identities that trust each other, and a folder for the files that arrive.
let server = try PeerIdentity.generate(displayName: "Inbox")
let client = try PeerIdentity.generate(displayName: "Laptop")
let serverSide = PeerConnectionConfiguration(identity: server, trust: TrustEvaluator(policy: .pinned([client.peerID])))
let clientSide = PeerConnectionConfiguration(identity: client, trust: TrustEvaluator(policy: .pinned([server.peerID])))
let folder = FileManager.default.temporaryDirectory.appendingPathComponent("inbox-\(UUID())")
try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)

// The accepting side: files go into the folder; any other stream is echoed back.
let listener = try await PeerListener.listen(host: "127.0.0.1", port: 0, configuration: serverSide, accept: .trusted)
let receiver = FileReceiver(directory: folder.path)
let (arrivals, arrived) = AsyncStream<String>.makeStream()
let serving = Task {
    for await event in listener.events {
        guard case .connected(let connection) = event else { continue }
        Task {
            for await stream in connection.incomingStreams {
                if FileReceiver.carriesFile(stream) {
                    for try await update in receiver.receive(stream, from: connection.peerID) {
                        if case .finished(let file) = update { arrived.yield(file.savedAs) }
                    }
                } else {
                    for try await chunk in stream { try await stream.write(chunk) }
                    try await stream.finish()
                }
            }
        }
    }
}

let connection = try await PeerConnection.connect(
    host: "127.0.0.1", port: listener.port, expecting: server.peerID, configuration: clientSide)

// A byte stream: each write returns once the peer's window took it; finish() half-closes.
let stream = try await connection.openStream(label: "echo")
try await stream.write(Array("hello, stream".utf8))
try await stream.finish()
var echoed: [UInt8] = []
for try await chunk in stream { echoed += chunk.readableBytesView }
print("echoed:", String(decoding: echoed, as: UTF8.self))

// A file, with progress: verified by SHA-256 on both sides before it gets its name.
let file = FileManager.default.temporaryDirectory.appendingPathComponent("report-\(UUID()).txt")
try Data(repeating: 42, count: 3_000_000).write(to: file)
for try await update in FileSender.send([FileSender.Item(path: file.path, name: "report.txt")], over: connection) {
    switch update {
    case .progress(let progress): print("sent \(Int(progress.fraction * 100)) %")
    case .finished(let result): print("done:", result.savedAs, result.size, "bytes, SHA-256", result.sha256.prefix(16))
    default: break
    }
}
// The receiving side has the file by then; it says so before the connection closes.
for await name in arrivals {
    print("received", name)
    break
}
await connection.close()
await listener.close()
serving.cancel()
