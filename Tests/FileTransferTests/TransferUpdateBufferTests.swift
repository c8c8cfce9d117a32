import Testing

@testable import FileTransfer

/// TransferUpdates for a reader slower than the transfer (no threads: the policy is a value).
@Suite("transfer updates while nobody reads")
struct TransferUpdateBufferTests {
    func progress(_ name: String, _ done: Int64) -> Result<TransferUpdate, FileTransferError> {
        .success(.progress(TransferProgress(name: name, size: 1000, done: done, resumedAt: 0, rate: nil, secondsLeft: nil)))
    }

    @Test("progress merges to the newest, in its place; a file's start and end always wait, and end the waiting progress")
    func progressMerges() {
        var buffer = TransferUpdateBuffer()
        buffer.push(.success(.started(TransferProgress(name: "a", size: 1000, done: 0, resumedAt: 0, rate: nil, secondsLeft: nil))))
        for done in stride(from: Int64(1), through: 900, by: 1) { buffer.push(progress("a", done)) }
        #expect(buffer.count == 2)
        buffer.push(.success(.failed(name: "a", FileTransferError(.declined, "no room"))))
        buffer.push(.success(.started(TransferProgress(name: "b", size: 1000, done: 0, resumedAt: 0, rate: nil, secondsLeft: nil))))
        for done in stride(from: Int64(1), through: 500, by: 1) { buffer.push(progress("b", done)) }
        #expect(buffer.count == 4)
        var seen: [String] = []
        while let update = buffer.pop() {
            switch update {
            case .success(.started(let p)): seen.append("started \(p.name)")
            case .success(.progress(let p)): seen.append("progress \(p.name) \(p.done)")
            case .success(.failed(let name, _)): seen.append("failed \(name)")
            default: seen.append("other")
            }
        }
        #expect(seen == ["started a", "failed a", "started b", "progress b 500"])
        #expect(buffer.merged == 899 + 1 + 499)
    }
}
