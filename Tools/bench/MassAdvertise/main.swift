// nearby-mass-advertise: publishes N instances from one process, for Tools/bench/discovery's
// "1,000 instances" figure. Prints "advertised N" once every name is won, then runs until
// SIGINT/SIGTERM and withdraws them all with goodbyes.
//
//   nearby-mass-advertise COUNT TYPE [--host LABEL] [--churn MS] [--first N] [--prefix TEXT]
//
// --first N: the instances are "Mass N" to "Mass N+COUNT-1" (default 1), so that several
// publishers share a link without conflicts.
// --churn MS: every MS milliseconds, change every instance's TXT (`n=<round>`), so that a
// browser sees COUNT updates per round (Tools/bench/unread measures a browser nobody reads).

import Dispatch
import NearbyDiscovery

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Writes all of `text` to `descriptor` now (unbuffered, as FileHandle did).
func writeAll(_ descriptor: Int32, _ text: String) {
    var bytes = Array(text.utf8)
    bytes.withUnsafeMutableBytes { raw in
        guard var base = raw.baseAddress else { return }
        var left = raw.count
        while left > 0 {
            let count = write(descriptor, base, left)
            if count < 0 {
                if errno == EINTR { continue }
                return
            }
            base += count
            left -= count
        }
    }
}

var arguments = Array(CommandLine.arguments.dropFirst())
var host: String?
if let index = arguments.firstIndex(of: "--host"), index + 1 < arguments.count {
    host = arguments[index + 1]
    arguments.removeSubrange(index...(index + 1))
}
var first = 1
if let index = arguments.firstIndex(of: "--first"), index + 1 < arguments.count {
    guard let value = Int(arguments[index + 1]), value > 0 else {
        writeAll(STDERR_FILENO, "nearby-mass-advertise: --first takes a positive number\n")
        exit(2)
    }
    first = value
    arguments.removeSubrange(index...(index + 1))
}
// --prefix TEXT: instance names are TEXT followed by the number (default "Mass "); a prefix
// without spaces suits tools that cannot write a space in a name (dnsperf's query files).
var prefix = "Mass "
if let index = arguments.firstIndex(of: "--prefix"), index + 1 < arguments.count {
    prefix = arguments[index + 1]
    arguments.removeSubrange(index...(index + 1))
}
var churn: Int?
if let index = arguments.firstIndex(of: "--churn"), index + 1 < arguments.count {
    churn = Int(arguments[index + 1])
    guard let every = churn, every > 0 else {
        writeAll(STDERR_FILENO, "nearby-mass-advertise: --churn takes a positive number of milliseconds\n")
        exit(2)
    }
    arguments.removeSubrange(index...(index + 1))
}
guard arguments.count == 2, let count = Int(arguments[0]), count > 0, let type = try? ServiceType(parsing: arguments[1]) else {
    writeAll(STDERR_FILENO, "usage: nearby-mass-advertise COUNT TYPE [--host LABEL] [--first N] [--prefix TEXT] [--churn MS]\n")
    exit(2)
}

let discovery = try await NearbyDiscovery.start(hostName: host)
let advertisements = try await withThrowingTaskGroup(of: Advertisement.self) { group in
    for index in first..<(first + count) {
        group.addTask { try await discovery.advertise("\(prefix)\(index)", type: type, port: UInt16(10_000 + index % 50_000)) }
    }
    var all: [Advertisement] = []
    for try await ad in group { all.append(ad) }
    return all
}
writeAll(STDOUT_FILENO, "advertised \(advertisements.count)\n")
let churning: Task<Void, Never>? = churn.map { every in
    Task {
        var round = 0
        while !Task.isCancelled {
            try? await Task.sleep(for: .milliseconds(every))
            round += 1
            var info = DiscoveryInfo()
            try? info.set("n", to: String(round))
            for ad in advertisements { await ad.update(info: info) }
        }
    }
}

signal(SIGINT, SIG_IGN)
signal(SIGTERM, SIG_IGN)
let done = DispatchSemaphore(value: 0)
let sources = [SIGINT, SIGTERM].map { number in
    let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
    source.setEventHandler { @Sendable in done.signal() }
    source.resume()
    return source
}
await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
    DispatchQueue.global().async { @Sendable in
        done.wait()
        continuation.resume()
    }
}
_ = sources
churning?.cancel()
await discovery.shutdown()
