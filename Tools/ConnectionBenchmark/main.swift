// Measures Nearby's channel from the client side, for Tools/bench-connection: connection
// set-up (TCP + TLS 1.3 + WebSocket + initialize), JSON-RPC round trips on one connection,
// and many idle connections held open at once. Prints one JSON object per figure.
//
//   nearby-connection-bench setup HOST PORT STATE-DIR COUNT
//   nearby-connection-bench roundtrips HOST PORT STATE-DIR SECONDS
//   nearby-connection-bench idle HOST PORT STATE-DIR COUNT     (holds them until stdin closes)

import Foundation
import PeerConnection
import PeerTrust

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("nearby-connection-bench: \(message)\n".utf8))
    exit(2)
}

let arguments = CommandLine.arguments
guard arguments.count == 6, let port = Int(arguments[3]), let count = Int(arguments[5]) else {
    fail("usage: nearby-connection-bench setup|roundtrips|idle HOST PORT STATE-DIR N")
}
let (mode, host, stateDirectory) = (arguments[1], arguments[2], URL(fileURLWithPath: arguments[4]))
let identity: PeerIdentity
let policy: TrustPolicy
do {
    identity = try IdentityStore(directory: stateDirectory).loadOrCreate()
    policy = try TrustPolicy.pinned(TrustStore(directory: stateDirectory.appendingPathComponent("trust")))
} catch {
    fail("\(error)")
}
var configuration = PeerConnectionConfiguration(identity: identity, trust: TrustEvaluator(policy: policy))
configuration.requestTimeout = .seconds(30)

func print(_ members: [String: Any]) {
    let data = (try? JSONSerialization.data(withJSONObject: members, options: [.sortedKeys])) ?? Data()
    FileHandle.standardOutput.write(data + Data("\n".utf8))
}

func milliseconds(_ duration: Duration) -> Double {
    Double(duration.components.seconds) * 1e3 + Double(duration.components.attoseconds) / 1e15
}

switch mode {
case "setup":
    var times: [Double] = []
    var failures = 0
    for _ in 0..<count {
        let start = ContinuousClock.now
        do {
            let connection = try await PeerConnection.connect(host: host, port: port, configuration: configuration)
            times.append(milliseconds(ContinuousClock.now - start))
            await connection.close()
        } catch {
            failures += 1
        }
    }
    times.sort()
    let pick = { (q: Double) in times.isEmpty ? 0 : times[min(times.count - 1, Int(Double(times.count) * q))] }
    print(["figure": "setup", "count": times.count, "failures": failures, "median_ms": pick(0.5), "p95_ms": pick(0.95), "p99_ms": pick(0.99)])
case "roundtrips":
    let connection: PeerConnection
    do { connection = try await PeerConnection.connect(host: host, port: port, configuration: configuration) } catch { fail("\(error)") }
    let params: JSONValue = .object(["text": .string("hello"), "n": .array([.integer(1), .integer(2), .integer(3)])])
    let end = ContinuousClock.now + .seconds(count)
    var done = 0
    var failures = 0
    let start = ContinuousClock.now
    while ContinuousClock.now < end {
        do { _ = try await connection.request("echo", params: params) } catch { failures += 1 }
        done += 1
    }
    let elapsed = milliseconds(ContinuousClock.now - start) / 1e3
    print(["figure": "roundtrips", "count": done, "failures": failures, "per_second": Double(done) / elapsed])
    await connection.close()
case "idle":
    var open: [PeerConnection] = []
    var failures = 0
    // 50 at a time: a burst of 1,000 handshakes is a different benchmark.
    for batch in stride(from: 0, to: count, by: 50) {
        await withTaskGroup(of: PeerConnection?.self) { group in
            for _ in batch..<min(count, batch + 50) {
                group.addTask { try? await PeerConnection.connect(host: host, port: port, configuration: configuration) }
            }
            for await connection in group {
                if let connection { open.append(connection) } else { failures += 1 }
            }
        }
    }
    print(["figure": "idle", "open": open.count, "failures": failures])
    _ = readLine()
    for connection in open { await connection.close() }
default:
    fail("unknown mode \(mode): setup, roundtrips or idle")
}
