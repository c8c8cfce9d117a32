import Dispatch
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import NearbyBasics
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif
import PeerConnection

/// Waits for SIGINT or SIGTERM, or until `timeout` has passed.
func waitForTermination(timeout: Duration? = nil) async {
    signal(SIGINT, SIG_IGN)
    signal(SIGTERM, SIG_IGN)
    let queue = DispatchQueue(label: "nearby.signals")
    await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
        let resumed = ResumeOnce(continuation)
        for number in [SIGINT, SIGTERM] {
            let source = DispatchSource.makeSignalSource(signal: number, queue: queue)
            source.setEventHandler { resumed.resume() }
            source.resume()
            Signals.keep(source)
        }
        if let timeout {
            queue.asyncAfter(deadline: .now() + .nanoseconds(Int(nanoseconds(timeout)))) { resumed.resume() }
        }
    }
}

/// Keeps signal sources alive for the life of the process.
enum Signals {
    nonisolated(unsafe) private static var sources: [any DispatchSourceSignal] = []
    private static let lock = Locked()
    static func keep(_ source: any DispatchSourceSignal) {
        lock.withLock { sources.append(source) }
    }
}

final class ResumeOnce: @unchecked Sendable {
    private let lock = Locked()
    private var continuation: CheckedContinuation<Void, Never>?
    init(_ continuation: CheckedContinuation<Void, Never>) { self.continuation = continuation }
    func resume() {
        let pending = lock.withLock {
            defer { continuation = nil }
            return continuation
        }
        pending?.resume()
    }
}

/// Runs `handler` on every SIGHUP.
func onHangUp(_ handler: @escaping @Sendable () -> Void) {
    signal(SIGHUP, SIG_IGN)
    let source = DispatchSource.makeSignalSource(signal: SIGHUP, queue: DispatchQueue(label: "nearby.sighup"))
    source.setEventHandler(handler: handler)
    source.resume()
    Signals.keep(source)
}

/// Each SIGHUP, as an element (for a loop in a task group rather than a callback).
func hangUps() -> AsyncStream<Void> {
    let (stream, continuation) = AsyncStream<Void>.makeStream(bufferingPolicy: .bufferingNewest(1))
    onHangUp { continuation.yield() }
    return stream
}

/// Runs `work` as a child task until SIGINT or SIGTERM (or `timeout`), then calls `stopping`
/// (a service tells systemd so at once), cancels the work and returns what it gave back: the
/// work's loops end at cancellation, so nothing outlives the command.
func untilTermination<T: Sendable>(
    timeout: Duration? = nil, stopping: @Sendable () -> Void = {}, _ work: @escaping @Sendable () async -> T
) async -> T? {
    await withTaskGroup(of: T.self) { group in
        group.addTask { await work() }
        await waitForTermination(timeout: timeout)
        stopping()
        group.cancelAll()
        return await group.next()
    }
}

/// Each SIGINT or SIGTERM, as an element (for a task group whose work may also end by itself:
/// iterating it ends when the task is cancelled, unlike ``waitForTermination(timeout:)``).
func terminations() -> AsyncStream<Void> {
    let (stream, continuation) = AsyncStream<Void>.makeStream(bufferingPolicy: .bufferingNewest(1))
    let queue = DispatchQueue(label: "nearby.terminations")
    for number in [SIGINT, SIGTERM] {
        signal(number, SIG_IGN)
        let source = DispatchSource.makeSignalSource(signal: number, queue: queue)
        source.setEventHandler { continuation.yield() }
        source.resume()
        Signals.keep(source)
    }
    return stream
}

/// Runs `work` until it ends or SIGINT or SIGTERM arrives, whichever is first; nil when a
/// signal came first (the work is then cancelled, and its loops end at cancellation).
func unlessInterrupted<T: Sendable>(_ work: @escaping @Sendable () async -> T) async -> T? {
    await withTaskGroup(of: T?.self) { group in
        group.addTask { await work() }
        group.addTask {
            for await _ in terminations() { return nil }
            return nil
        }
        let first = await group.next() ?? nil
        group.cancelAll()
        return first
    }
}
