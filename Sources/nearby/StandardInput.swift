import NearbyBasics
import NetworkPlatform
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Standard input for async code, the process's one reader of it: a thread of its own blocks in
/// `read` (never a thread of the cooperative pool) and hands over chunks as they come. Callers
/// take them as they are (``nextChunk()``: `nearby pipe`) or as lines, each with the time its
/// bytes were read (``nextLine()``: `connect`'s requests, the admission desk's answers, which
/// must tell an answer from input typed ahead).
///
/// At most ``chunksAhead`` chunks of up to ``chunkSize`` bytes wait for a caller: then the
/// thread stops reading until one is taken, so a fast stdin (a file, a generator) waits in its
/// pipe instead of in our memory.
final class StandardInput: @unchecked Sendable {  // Every stored property is touched under `lock`.
    static let shared = StandardInput(descriptor: STDIN_FILENO)
    static let chunkSize = 256 << 10
    static let chunksAhead = 4

    /// A line (without its `\n` or `\r\n`) and when the reading thread got its end.
    struct Line: Sendable {
        let text: String
        let arrived: ContinuousClock.Instant
    }

    private let descriptor: Int32
    private let lock = ThreadCondition()
    private var chunks: [(bytes: [UInt8], arrived: ContinuousClock.Instant)] = []
    private var ended = false
    private var started = false
    private var waiters: [UInt64: CheckedContinuation<Void, Never>] = [:]
    private var nextWaiter: UInt64 = 0
    /// Lines cut from chunks and not taken yet (a chunk may hold thousands: O(1) pops), and the
    /// start of the next one.
    private var lines = FIFO<Line>()
    private var partial: [UInt8] = []

    init(descriptor: Int32) {
        self.descriptor = descriptor
    }

    /// Starts reading now (lines are stamped as they arrive, whether or not anyone waits yet).
    func start() {
        lock.lock()
        startLocked()
        lock.unlock()
    }

    private func startLocked() {
        guard !started else { return }
        started = true
        do {
            try startThread(name: "nearby-stdin") { [self] in readForever() }
        } catch {
            // Out of threads at start-up: nothing sensible can go on.
            preconditionFailure("\(error)")
        }
    }

    private func readForever() {
        var buffer = [UInt8](repeating: 0, count: Self.chunkSize)
        while true {
            let count = buffer.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, Self.chunkSize) }
            if count < 0, errno == EINTR { continue }
            let arrived = ContinuousClock.now
            lock.lock()
            if count > 0 {
                while chunks.count >= Self.chunksAhead { lock.wait() }
                chunks.append((Array(buffer[..<count]), arrived))
            } else {
                ended = true  // the end, or a read error (a directory, say)
            }
            let waiting = Array(waiters.values)
            waiters = [:]
            lock.unlock()
            for waiter in waiting { waiter.resume() }
            if count <= 0 { return }
        }
    }

    /// The next chunk as read; nil at the end of input (or a read error), or once the task is
    /// cancelled (a read cannot be interrupted: what it brings later waits for the next caller).
    func nextChunk() async -> [UInt8]? {
        while !Task.isCancelled {
            lock.lock()
            startLocked()
            if !partial.isEmpty || lines.count > 0 {
                // Lines were taken before: what was cut and not taken comes first, as bytes.
                var rest: [UInt8] = []
                while let line = lines.popFirst() { rest += Array(line.text.utf8) + [10] }
                rest += partial
                partial = []
                lock.unlock()
                return rest
            }
            if !chunks.isEmpty {
                let chunk = chunks.removeFirst()
                lock.signal()
                lock.unlock()
                return chunk.bytes
            }
            let done = ended
            lock.unlock()
            if done { return nil }
            await input()
        }
        return nil
    }

    /// The next line, or nil at the end of input.
    func next() async -> String? {
        await nextLine()?.text
    }

    /// The next line with the time its end was read, or nil at the end of input. The last line
    /// needs no newline.
    func nextLine() async -> Line? {
        while true {
            lock.lock()
            startLocked()
            if let line = lines.popFirst() {
                lock.unlock()
                return line
            }
            if !chunks.isEmpty {
                let chunk = chunks.removeFirst()
                lock.signal()
                cut(chunk.bytes, arrived: chunk.arrived)
                lock.unlock()
                continue
            }
            if ended {
                let last = partial.isEmpty ? nil : Line(text: Self.text(partial), arrived: .now)
                partial = []
                lock.unlock()
                return last
            }
            lock.unlock()
            await input()
        }
    }

    /// Cuts `bytes` into lines after what was left of the last chunk (called under `lock`).
    private func cut(_ bytes: [UInt8], arrived: ContinuousClock.Instant) {
        var start = bytes.startIndex
        while let newline = bytes[start...].firstIndex(of: 10) {
            partial += bytes[start..<newline]
            lines.append(Line(text: Self.text(partial), arrived: arrived))
            partial = []
            start = newline + 1
        }
        partial += bytes[start...]
    }

    /// A line's bytes as text, without a `\r` before its `\n` (as `readLine` gives it); bytes
    /// that are not UTF-8 become U+FFFD.
    private static func text(_ bytes: [UInt8]) -> String {
        String(decoding: bytes.last == 13 ? bytes.dropLast() : bytes[...], as: UTF8.self)
    }

    /// Returns when more input (or its end) is there, or when the task is cancelled.
    private func input() async {
        lock.lock()
        let id = nextWaiter
        nextWaiter += 1
        lock.unlock()
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                lock.lock()
                if !chunks.isEmpty || ended || Task.isCancelled {
                    lock.unlock()
                    continuation.resume()
                    return
                }
                waiters[id] = continuation
                lock.unlock()
            }
        } onCancel: {
            lock.lock()
            let waiter = waiters.removeValue(forKey: id)
            lock.unlock()
            waiter?.resume()
        }
    }
}
