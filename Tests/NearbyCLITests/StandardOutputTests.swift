import Foundation
import Testing

@testable import nearby

/// stdout's order under back-pressure. Where a peer's message lands is decided when it is
/// emitted (``OutputQueue/offer(_:_:)``), so the interleavings that could reorder output are
/// driven here step by step on the pure queue: no thread, no descriptor, no sleep.
@Suite("stdout: order under back-pressure")
struct StandardOutputTests {
    private func lines(_ batch: [Data]) -> [String] { batch.map { String(decoding: $0, as: UTF8.self) } }
    private func data(_ text: String) -> Data { Data(text.utf8) }

    @Test("a message emitted while another waits is parked behind it, even when there is room again; both are queued in the order emitted before either task runs")
    func noOvertaking() {
        var output = OutputQueue<String>(limit: 10)
        output.append(data("xxxxxx"))
        output.append(data("yyyyyy"))  // 12 bytes: over the limit
        let aQueued = output.offer(data("A"), "A")
        #expect(!aQueued)  // A waits for room
        #expect(lines(output.takeAll()) == ["xxxxxx", "yyyyyy"])
        let afterFirst = output.written(6)
        #expect(afterFirst.isEmpty)  // 6 bytes left: under the limit, not yet down to half
        // The interleaving that let a message overtake: C comes while A waits and the queue is
        // under its limit. Before, C was queued at once, ahead of A.
        let cQueued = output.offer(data("C"), "C")
        #expect(!cQueued)
        let resumed = output.written(6)
        #expect(resumed == ["A", "C"])  // down to 0: both queued, then both resumed
        // The tasks run again in the other order: C's first, which emits its next message D,
        // then A's, which emits B. What A and C emitted is already queued, in the order emitted.
        let dQueued = output.offer(data("D"), "D")
        let bQueued = output.offer(data("B"), "B")
        #expect(dQueued && bQueued)
        #expect(lines(output.takeAll()) == ["A", "C", "D", "B"])
        #expect(output.parkedCount == 0)
    }

    @Test("parked messages are queued first parked first, up to the limit, the rest at half again: memory stays bounded")
    func boundedHandOff() {
        var output = OutputQueue<Int>(limit: 10)
        output.append(Data(count: 11))
        var parked: [Bool] = []
        for waiter in 0..<4 { parked.append(!output.offer(Data(count: 4), waiter)) }
        #expect(parked == [true, true, true, true])
        _ = output.takeAll()
        let first = output.written(11)
        #expect(first == [0, 1, 2])  // queued while 0, 4 and 8 bytes were
        #expect(output.bytes == 12 && output.parkedCount == 1)
        _ = output.takeAll()
        let overHalf = output.written(4)
        let atHalf = output.written(4)
        #expect(overHalf.isEmpty && atHalf == [3])  // 8 bytes left, then 4
    }

    @Test("once stdout is gone every waiter is let go, and nothing more is queued or parked")
    func broken() {
        var output = OutputQueue<Int>(limit: 10)
        output.append(Data(count: 11))
        let queued = output.offer(Data(count: 1), 1)
        let letGo = output.breakDown()
        let queuedAfter = output.offer(Data(count: 1), 2)
        output.append(Data(count: 1))
        #expect(!queued && letGo == [1] && queuedAfter)
        #expect(output.isEmpty && output.bytes == 0 && output.broken)
    }

    @Test("through a pipe with a small limit, four tasks emitting at once: every line once, each task's in order")
    func concurrentEmitters() async {
        var descriptors: [Int32] = [0, 0]
        #expect(pipe(&descriptors) == 0)
        let output = StandardOutput(descriptor: descriptors[1], limit: 64)
        let emitters = 4
        let count = 2000
        let reader = descriptors[0]
        // A thread reads the pipe (a blocking read must not take a cooperative thread).
        let text: String = await withCheckedContinuation { continuation in
            Thread.detachNewThread {
                var bytes: [UInt8] = []
                var buffer = [UInt8](repeating: 0, count: 4096)
                var newlines = 0
                while newlines < emitters * count {
                    let got = read(reader, &buffer, buffer.count)
                    guard got > 0 else { break }
                    bytes += buffer[0..<got]
                    newlines += buffer[0..<got].lazy.filter { $0 == 10 }.count
                }
                continuation.resume(returning: String(decoding: bytes, as: UTF8.self))
            }
            Task {
                await withDiscardingTaskGroup { group in
                    for emitter in 0..<emitters {
                        group.addTask { for index in 0..<count { await output.emit("\(emitter) \(index)") } }
                    }
                }
            }
        }
        var next = [Int](repeating: 0, count: emitters)
        var inOrder = true
        for line in text.split(separator: "\n") {
            let fields = line.split(separator: " ").compactMap { Int($0) }
            guard fields.count == 2, fields[0] < emitters else {
                inOrder = false
                continue
            }
            inOrder = inOrder && fields[1] == next[fields[0]]
            next[fields[0]] = fields[1] + 1
        }
        #expect(inOrder && next == [Int](repeating: count, count: emitters))
        close(descriptors[0])
    }
}
