import NearbyBasics

/// The updates of a transfer, as it runs: iterating drives it, and stopping early (or
/// cancelling the iterating task) cancels it, which resets its stream so the other side stops
/// too. Ends after the last file, or throws the error that stopped the transfer.
public struct TransferUpdates: AsyncSequence, Sendable {
    public typealias Element = TransferUpdate
    public typealias Failure = FileTransferError

    let run: @Sendable (_ report: @escaping @Sendable (TransferUpdate) -> Void) async throws(FileTransferError) -> Void

    public func makeAsyncIterator() -> AsyncIterator {
        let run = self.run
        // The transfer is the stream's producer: it runs while the iterator is read and is
        // cancelled when the reader stops.
        let stream = EventStream<Result<TransferUpdate, FileTransferError>>(buffer: TransferUpdateBuffer()) { updates in
            do throws(FileTransferError) {
                try await run { updates.yield(.success($0)) }
            } catch {
                updates.yield(.failure(error))
            }
        }
        return AsyncIterator(base: stream.makeAsyncIterator())
    }

    public struct AsyncIterator: AsyncIteratorProtocol {
        var base: EventStream<Result<TransferUpdate, FileTransferError>>.Iterator

        public mutating func next() async throws(FileTransferError) -> TransferUpdate? {
            let next = await base.next()
            guard let next else { return nil }
            return try next.get()
        }

        public mutating func next(isolation actor: isolated (any Actor)?) async throws(FileTransferError) -> TransferUpdate? {
            let next = await base.next(isolation: actor)
            guard let next else { return nil }
            return try next.get()
        }
    }
}

/// The policy of ``TransferUpdates`` for a reader slower than the transfer: progress reports
/// merge (the newest waits, in the place of the first one not read), while `started`,
/// `finished`, `failed` and the error always wait: one of each per file, which the caller named.
struct TransferUpdateBuffer: EventBuffer {
    private var waiting: [Result<TransferUpdate, FileTransferError>?] = []
    private var head = 0
    private var progressAt: Int?
    private(set) var merged = 0

    private(set) var count = 0

    mutating func push(_ update: Result<TransferUpdate, FileTransferError>) {
        if case .success(.progress) = update {
            if let at = progressAt {
                waiting[at] = update
                merged += 1
                return
            }
            progressAt = waiting.count
        } else if case .success = update, let at = progressAt {
            // A file's end (or the next file's start) makes the waiting progress old news.
            waiting[at] = nil
            progressAt = nil
            merged += 1
            count -= 1
        }
        waiting.append(update)
        count += 1
    }

    mutating func pop() -> Result<TransferUpdate, FileTransferError>? {
        while head < waiting.count {
            let at = head
            head += 1
            if at == progressAt { progressAt = nil }
            if let update = waiting[at] {
                count -= 1
                if head > 32, head * 2 >= waiting.count {
                    waiting.removeFirst(head)
                    progressAt = progressAt.map { $0 - head }
                    head = 0
                }
                return update
            }
        }
        return nil
    }
}
