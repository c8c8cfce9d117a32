import NetworkPlatform
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import NearbyBasics

/// Standard input, line by line, for async code: a thread of its own blocks in `readLine`
/// (never a thread of the cooperative pool), and callers get lines in turn, oldest first,
/// each with the time it was read (so an answer can be told from input typed ahead).
///
/// At most ``limit`` lines wait for a caller: then the thread stops reading until one is taken,
/// so a fast stdin (a file, a generator) waits in its pipe instead of in our memory.
final class LineReader: @unchecked Sendable {
    static let standardInput = LineReader()
    let limit = 64

    /// A line and when the reading thread got it.
    struct Line: Sendable {
        let text: String
        let arrived: ContinuousClock.Instant
    }

    private let lock = ThreadCondition()
    private var lines: [Line] = []
    private var waiting: [CheckedContinuation<Line?, Never>] = []
    private var finished = false
    private var started = false

    /// The next line, or nil at the end of input.
    func next() async -> String? {
        await nextLine()?.text
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
            try startThread(name: "nearby-stdin") { [self] in
                while let line = readLine(strippingNewline: true) { deliver(Line(text: line, arrived: .now)) }
                finish()
            }
        } catch {
            // Out of threads at start-up: nothing sensible can go on.
            preconditionFailure("\(error)")
        }
    }

    /// The next line with its arrival time, or nil at the end of input.
    func nextLine() async -> Line? {
        await withCheckedContinuation { continuation in
            lock.lock()
            startLocked()
            if !lines.isEmpty {
                let line = lines.removeFirst()
                lock.signal()
                lock.unlock()
                continuation.resume(returning: line)
            } else if finished {
                lock.unlock()
                continuation.resume(returning: nil)
            } else {
                waiting.append(continuation)
                lock.unlock()
            }
        }
    }

    private func deliver(_ line: Line) {
        lock.lock()
        while waiting.isEmpty && lines.count >= limit { lock.wait() }
        if waiting.isEmpty {
            lines.append(line)
            lock.unlock()
        } else {
            let next = waiting.removeFirst()
            lock.unlock()
            next.resume(returning: line)
        }
    }

    private func finish() {
        lock.lock()
        finished = true
        let all = waiting
        waiting = []
        lock.unlock()
        for continuation in all { continuation.resume(returning: nil) }
    }
}
