#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif
import NearbyBasics

/// Standard output, written by a thread of its own. When stdout is a pipe that nobody reads,
/// write(2) blocks: that thread blocks, never one of the cooperative pool's (two threads on two
/// cores: two blocked prints would stop every task, signal handling included).
///
/// Output keeps its order. ``printLine(_:)`` queues and returns; ``emit(_:)`` (for what a peer
/// sends, at the peer's pace) waits while more than ``limit`` bytes are queued, so a command
/// that prints messages slows down to what its reader takes, its connection stops reading, and
/// TCP holds the peer back. At exit, what is queued is written first, unless stdout makes no
/// progress for ``exitPatience``.
final class StandardOutput: @unchecked Sendable {
    static let shared = StandardOutput(descriptor: STDOUT_FILENO)
    static let standardError = StandardOutput(descriptor: STDERR_FILENO)

    /// Where events and results go: stdout, unless stdout carries a pipe's bytes (`nearby pipe`),
    /// which nothing else may be mixed into.
    static var events: StandardOutput { routing.withLockedValue { $0 } ? standardError : shared }
    private static let routing = Locked(false)

    /// From now on events go to stderr (stdout carries bytes).
    static func sendEventsToStandardError() { routing.withLockedValue { $0 = true } }

    /// Bytes queued beyond which ``emit(_:)`` waits (1 MiB); it goes on at half.
    let limit = 1 << 20
    let exitPatience: Duration = .seconds(2)

    private let descriptor: Int32
    private let condition = ThreadCondition()
    private var queue: [Data] = []
    private var queuedBytes = 0
    private var waiting: [CheckedContinuation<Void, Never>] = []
    private var started = false
    /// stdout is gone (EPIPE or another error): output is dropped from now on.
    private var broken = false

    init(descriptor: Int32) {
        self.descriptor = descriptor
    }

    /// Queues `text` as it is (no newline added) and returns at once.
    func enqueue(_ text: String) {
        enqueue(data: Data(text.utf8))
    }

    /// Queues a line, first waiting (suspended, not blocking a thread) while more than
    /// ``limit`` bytes wait for stdout.
    func emit(_ line: String) async {
        await waitForRoom()
        enqueue(line + "\n")
    }

    /// Queues bytes as they are (a pipe's), first waiting while more than ``limit`` bytes wait.
    func emit(bytes: Data) async {
        await waitForRoom()
        enqueue(data: bytes)
    }

    /// Returns once no more than ``limit`` bytes wait (or stdout is gone).
    private func waitForRoom() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            condition.lock()
            if queuedBytes > limit && !broken {
                waiting.append(continuation)
                condition.unlock()
            } else {
                condition.unlock()
                continuation.resume()
            }
        }
    }

    private func enqueue(data: Data) {
        condition.lock()
        startLocked()
        if !broken {
            queue.append(data)
            queuedBytes += data.count
        }
        condition.broadcast()
        condition.unlock()
    }

    /// Whether stdout is gone (its reader closed it).
    var isBroken: Bool {
        condition.lock()
        defer { condition.unlock() }
        return broken
    }

    /// Waits until everything queued is written, or until stdout made no progress for
    /// ``exitPatience`` (a reader that stopped must not keep the process from ending).
    func drain() {
        condition.lock()
        defer { condition.unlock() }
        var lastProgress = ContinuousClock.now
        var lastQueued = queuedBytes
        while queuedBytes > 0 && !broken {
            _ = condition.wait(seconds: 0.05)
            if queuedBytes != lastQueued {
                lastQueued = queuedBytes
                lastProgress = .now
            } else if ContinuousClock.now - lastProgress > exitPatience {
                return
            }
        }
    }

    private func startLocked() {
        guard !started else { return }
        started = true
        if descriptor == STDERR_FILENO {
            atexit { StandardOutput.standardError.drain() }
        } else {
            atexit { StandardOutput.shared.drain() }
        }
        startThread(name: "nearby-stdout") { [self] in writeForever() }
    }

    private func writeForever() {
        while true {
            condition.lock()
            while queue.isEmpty { condition.wait() }
            let batch = queue
            queue = []
            condition.unlock()
            for data in batch {
                guard writeAll(data) else {
                    condition.lock()
                    broken = true
                    queuedBytes = 0
                    queue = []
                    let resumed = waiting
                    waiting = []
                    condition.broadcast()
                    condition.unlock()
                    for continuation in resumed { continuation.resume() }
                    return
                }
                condition.lock()
                queuedBytes -= data.count
                var resumed: [CheckedContinuation<Void, Never>] = []
                if queuedBytes <= limit / 2 {
                    resumed = waiting
                    waiting = []
                }
                condition.broadcast()
                condition.unlock()
                for continuation in resumed { continuation.resume() }
            }
        }
    }

    private func writeAll(_ data: Data) -> Bool {
        data.withUnsafeBytes { raw in
            guard var base = raw.baseAddress else { return true }
            var left = raw.count
            while left > 0 {
                let count = write(descriptor, base, left)
                if count < 0 {
                    if errno == EINTR { continue }
                    return false
                }
                base += count
                left -= count
            }
            return true
        }
    }
}

/// Writes `text` to stderr now, all of it (what `FileHandle.standardError.write` did; a
/// failure is ignored: there is nowhere left to tell).
func writeToStandardError(_ text: String) {
    var bytes = Array(text.utf8)
    bytes.withUnsafeMutableBytes { raw in
        guard var base = raw.baseAddress else { return }
        var left = raw.count
        while left > 0 {
            let count = write(STDERR_FILENO, base, left)
            if count < 0 {
                if errno == EINTR { continue }
                return
            }
            base += count
            left -= count
        }
    }
}

/// Ends the process with `status` (atexit handlers run: queued output is written first).
func exitProcess(_ status: Int32) -> Never {
    exit(status)
}
