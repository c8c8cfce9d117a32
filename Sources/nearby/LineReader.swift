import Foundation

/// Standard input, line by line, for async code: a thread of its own blocks in `readLine`
/// (never a thread of the cooperative pool), and callers get lines in turn, oldest first.
final class LineReader: @unchecked Sendable {
    static let standardInput = LineReader()

    private let lock = NSLock()
    private var lines: [String] = []
    private var waiting: [CheckedContinuation<String?, Never>] = []
    private var finished = false
    private var started = false

    /// The next line, or nil at the end of input.
    func next() async -> String? {
        await withCheckedContinuation { continuation in
            lock.lock()
            if !started {
                started = true
                let thread = Thread { [self] in
                    while let line = readLine(strippingNewline: true) { deliver(line) }
                    finish()
                }
                thread.name = "nearby-stdin"
                thread.start()
            }
            if !lines.isEmpty {
                let line = lines.removeFirst()
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

    private func deliver(_ line: String) {
        lock.lock()
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
