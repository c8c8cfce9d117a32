import NetworkPlatform
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
/// TCP holds the peer back. A message's place is taken when ``emit(_:)`` is called (see
/// ``OutputQueue``), not when its task runs again. At exit, what is queued is written first,
/// unless stdout makes no progress for ``exitPatience``.
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
    let limit: Int
    let exitPatience: Duration = .seconds(2)

    private let descriptor: Int32
    private let condition = ThreadCondition()
    /// What waits for stdout and who waits for room, behind `condition`.
    private var output: OutputQueue<CheckedContinuation<Void, Never>>
    private var started = false

    init(descriptor: Int32, limit: Int = 1 << 20) {
        self.descriptor = descriptor
        self.limit = limit
        output = OutputQueue(limit: limit)
    }

    /// Queues `text` as it is (no newline added) and returns at once.
    func enqueue(_ text: String) {
        enqueue(data: Data(text.utf8))
    }

    /// Queues a line, first waiting (suspended, not blocking a thread) while more than
    /// ``limit`` bytes wait for stdout, or while lines emitted before it wait.
    func emit(_ line: String) async {
        await offer(Data((line + "\n").utf8))
    }

    /// Waits while more than ``limit`` bytes wait for stdout (or lines emitted before this call
    /// do): a loop that prints what the network brings calls it before it reads on, so that when
    /// nobody reads stdout it stops reading, and the stream it reads holds what its policy keeps.
    func room() async {
        await offer(Data())
    }

    /// Queues bytes as they are (a pipe's), first waiting while more than ``limit`` bytes wait.
    func emit(bytes: Data) async {
        await offer(bytes)
    }

    /// Queues `data` now, or parks it (its place taken) and returns once stdout's thread has
    /// queued it; also returns when stdout is gone.
    private func offer(_ data: Data) async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            condition.lock()
            startLocked()
            let queued = output.offer(data, continuation)
            if queued { condition.broadcast() }
            condition.unlock()
            if queued { continuation.resume() }
        }
    }

    private func enqueue(data: Data) {
        condition.lock()
        startLocked()
        output.append(data)
        condition.broadcast()
        condition.unlock()
    }

    /// Whether stdout is gone (its reader closed it).
    var isBroken: Bool {
        condition.lock()
        defer { condition.unlock() }
        return output.broken
    }

    /// Waits until everything queued is written, or until stdout made no progress for
    /// ``exitPatience`` (a reader that stopped must not keep the process from ending).
    func drain() {
        condition.lock()
        defer { condition.unlock() }
        var lastProgress = ContinuousClock.now
        var lastQueued = output.bytes
        while output.bytes > 0 && !output.broken {
            _ = condition.wait(seconds: 0.05)
            if output.bytes != lastQueued {
                lastQueued = output.bytes
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
        do { try startThread(name: "nearby-stdout") { [self] in writeForever() } } catch { preconditionFailure("\(error)") }
    }

    private func writeForever() {
        while true {
            condition.lock()
            while output.isEmpty { condition.wait() }
            let batch = output.takeAll()
            condition.unlock()
            for data in batch {
                let wrote = writeAll(data)
                condition.lock()
                // Parked messages are queued (in the order they came) before anyone is resumed.
                let resumed = wrote ? output.written(data.count) : output.breakDown()
                condition.broadcast()
                condition.unlock()
                for continuation in resumed { continuation.resume() }
                if !wrote { return }
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

/// What stdout's thread has yet to write and the messages waiting for room, as a pure value
/// (``StandardOutput`` keeps it behind its lock). A message offered by ``offer(_:_:)`` takes its
/// place then: queued at once, or parked behind every message parked before it; ``written(_:)``
/// moves parked messages into the queue first parked first, before their waiters are resumed.
/// So the order in which waiting tasks run again changes nothing that is written, and a message
/// never overtakes one that waits.
struct OutputQueue<Waiter> {
    /// Bytes beyond which offered messages are parked; parked ones are queued again at half.
    let limit: Int
    private var queued: [Data] = []
    private var parked: [(data: Data, waiter: Waiter)] = []
    /// Bytes queued or being written.
    private(set) var bytes = 0
    /// stdout is gone: nothing is queued or parked any more.
    private(set) var broken = false

    init(limit: Int) { self.limit = limit }

    /// Nothing for the writer.
    var isEmpty: Bool { queued.isEmpty }
    /// Messages waiting for room.
    var parkedCount: Int { parked.count }

    /// Queues `data` now, whatever is queued (events and results never wait).
    mutating func append(_ data: Data) {
        guard !broken else { return }
        queued.append(data)
        bytes += data.count
    }

    /// Queues `data` and returns true when no more than ``limit`` bytes are queued and no message
    /// is parked; otherwise parks it with `waiter` and returns false (`waiter` comes back from
    /// ``written(_:)`` or ``breakDown()`` once `data` is queued or dropped).
    mutating func offer(_ data: Data, _ waiter: Waiter) -> Bool {
        guard !broken else { return true }
        guard parked.isEmpty, bytes <= limit else {
            parked.append((data, waiter))
            return false
        }
        if !data.isEmpty { append(data) }
        return true
    }

    /// Everything queued, oldest first, for the writer (its bytes count until ``written(_:)``).
    mutating func takeAll() -> [Data] {
        var batch: [Data] = []
        swap(&batch, &queued)
        return batch
    }

    /// `count` bytes were written. Once no more than half of ``limit`` is queued, parked messages
    /// are queued, first parked first, while no more than ``limit`` is: their waiters are returned,
    /// to be resumed.
    mutating func written(_ count: Int) -> [Waiter] {
        bytes -= count
        guard bytes <= limit / 2 else { return [] }
        var resumed: [Waiter] = []
        while !parked.isEmpty, bytes <= limit {
            let next = parked.removeFirst()
            append(next.data)
            resumed.append(next.waiter)
        }
        return resumed
    }

    /// stdout is gone: what is queued and parked is dropped; every waiter is returned.
    mutating func breakDown() -> [Waiter] {
        broken = true
        queued = []
        bytes = 0
        let waiters = parked.map(\.waiter)
        parked = []
        return waiters
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
