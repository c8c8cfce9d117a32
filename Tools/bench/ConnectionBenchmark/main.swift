// Measures Nearby's channel from the client side, for Tools/bench/connection: connection
// set-up (TCP + TLS 1.3 + WebSocket + initialize), JSON-RPC round trips on one connection,
// and many idle connections held open at once. Prints one JSON object per figure.
//
//   nearby-connection-bench setup HOST PORT STATE-DIR COUNT
//   nearby-connection-bench roundtrips HOST PORT STATE-DIR SECONDS     (one request at a time)
//   nearby-connection-bench pipelined HOST PORT STATE-DIR SECONDS      (32 requests in flight)
//   nearby-connection-bench idle HOST PORT STATE-DIR COUNT     (holds them until stdin closes)
//   nearby-connection-bench churn HOST PORT STATE-DIR COUNT    (connect, one ping, close; a line
//                                                              every 1,000 for the caller's RSS samples)
//   nearby-connection-bench probe HOST PORT STATE-DIR COUNT    (the broker's round-trip probe, before TLS)
//   nearby-connection-bench streamping HOST PORT STATE-DIR SECONDS   (pings every 20 ms for SECONDS
//                                  alone, then SECONDS more while a pipe stream to the peer is
//                                  written as fast as its window allows; RTT p50/p99 of each
//                                  phase, bytes sent, this process's peak RSS)

import Foundation
import NIOCore
import PeerConnection
import PeerTrust

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("nearby-connection-bench: \(message)\n".utf8))
    exit(2)
}

let arguments = CommandLine.arguments
guard arguments.count == 6, let port = Int(arguments[3]), let count = Int(arguments[5]) else {
    fail("usage: nearby-connection-bench setup|roundtrips|pipelined|idle|churn|probe HOST PORT STATE-DIR N")
}
let (mode, host, stateDirectory) = (arguments[1], arguments[2], URL(fileURLWithPath: arguments[4]))
let identity: PeerIdentity
let policy: TrustPolicy
do {
    identity = try IdentityStore(directory: stateDirectory).loadOrCreate().identity
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

let echoParams: JSONValue = .object(["text": .string("hello"), "n": .array([.integer(1), .integer(2), .integer(3)])])

/// `lanes` loops of echo requests, one at a time each, on one connection for `duration`.
func roundTrips(_ connection: PeerConnection, lanes: Int, for duration: Duration) async -> (done: Int, failures: Int, perSecond: Double) {
    let start = ContinuousClock.now
    let end = start + duration
    let counts = await withTaskGroup(of: (Int, Int).self) { group in
        for _ in 0..<lanes {
            group.addTask {
                var (done, failures) = (0, 0)
                while ContinuousClock.now < end {
                    do { _ = try await connection.request("echo", params: echoParams) } catch { failures += 1 }
                    done += 1
                }
                return (done, failures)
            }
        }
        return await group.reduce((0, 0)) { ($0.0 + $1.0, $0.1 + $1.1) }
    }
    return (counts.0, counts.1, Double(counts.0) / (milliseconds(ContinuousClock.now - start) / 1e3))
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
case "churn":
    // What a phone that reconnects all day does to a server: each connection set up,
    // initialized, pinged once and closed. stdout gets a line every 1,000 so the caller can
    // sample the server's memory as the count grows.
    var failures = 0
    for index in 1...max(1, count) {
        do {
            let connection = try await PeerConnection.connect(host: host, port: port, configuration: configuration)
            _ = try await connection.request("ping")
            await connection.close()
        } catch {
            failures += 1
        }
        if index % 1000 == 0 || index == count {
            print(["figure": "churn", "done": index, "failures": failures])
        }
    }
case "probe":
    var failures = 0
    for index in 1...max(1, count) {
        if await PeerConnection.measureRoundTrip(host: host, port: port, samples: 1) == nil { failures += 1 }
        if index % 1000 == 0 || index == count {
            print(["figure": "probe", "done": index, "failures": failures])
        }
    }
case "roundtrips", "pipelined":
    let connection: PeerConnection
    do { connection = try await PeerConnection.connect(host: host, port: port, configuration: configuration) } catch { fail("\(error)") }
    // roundtrips: one request at a time; pipelined: 32 in flight at once, on the same connection.
    let outcome = await roundTrips(connection, lanes: mode == "pipelined" ? 32 : 1, for: .seconds(count))
    print(["figure": mode, "count": outcome.done, "failures": outcome.failures, "per_second": outcome.perSecond])
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
case "streamping":
    let connection: PeerConnection
    do { connection = try await PeerConnection.connect(host: host, port: port, configuration: configuration) } catch { fail("\(error)") }
    func pings(for duration: Duration) async -> [Double] {
        var rtts: [Double] = []
        let end = ContinuousClock.now + duration
        while ContinuousClock.now < end {
            let start = ContinuousClock.now
            if (try? await connection.request("ping", timeout: .seconds(5))) != nil { rtts.append(milliseconds(ContinuousClock.now - start)) }
            try? await Task.sleep(for: .milliseconds(20))
        }
        return rtts.sorted()
    }
    func residentKiB() -> Int {
        let status = (try? String(contentsOfFile: "/proc/self/status", encoding: .utf8)) ?? ""
        let line = status.split(separator: "\n").first { $0.hasPrefix("VmRSS:") } ?? ""
        return Int(line.split(separator: " ").dropFirst().first ?? "") ?? 0
    }
    func quantile(_ values: [Double], _ q: Double) -> Double { values.isEmpty ? 0 : values[min(values.count - 1, Int(Double(values.count) * q))] }
    let idle = await pings(for: .seconds(count))
    let stream: PeerStream
    do { stream = try await connection.openStream(label: "nearby.pipe/1") } catch { fail("\(error)") }
    let before = residentKiB()
    let writer = Task {
        let chunk = ByteBuffer(repeating: 0x5A, count: 256 << 10)
        var sent = 0
        while !Task.isCancelled {
            do { try await stream.write(chunk) } catch { break }
            sent += chunk.readableBytes
        }
        return sent
    }
    let peak = Task {
        var peak = 0
        while !Task.isCancelled {
            peak = max(peak, residentKiB())
            try? await Task.sleep(for: .milliseconds(100))
        }
        return peak
    }
    let loaded = await pings(for: .seconds(count))
    writer.cancel()
    peak.cancel()
    let sent = await writer.value
    print([
        "figure": "streamping", "idle_p50_ms": quantile(idle, 0.5), "idle_p99_ms": quantile(idle, 0.99), "idle_count": idle.count,
        "loaded_p50_ms": quantile(loaded, 0.5), "loaded_p99_ms": quantile(loaded, 0.99), "loaded_count": loaded.count,
        "bytes_sent": sent, "rss_before_kib": before, "rss_peak_kib": await peak.value,
    ])
    await connection.close()
default:
    fail("unknown mode \(mode): setup, roundtrips, pipelined or idle")
}
