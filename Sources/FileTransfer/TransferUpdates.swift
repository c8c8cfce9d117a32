/// The updates of a transfer, as it runs: iterating drives it, and stopping early (or
/// cancelling the iterating task) cancels it, which resets its stream so the other side stops
/// too. Ends after the last file, or throws the error that stopped the transfer.
public struct TransferUpdates: AsyncSequence, Sendable {
    public typealias Element = TransferUpdate
    public typealias Failure = FileTransferError

    let run: @Sendable (_ report: @escaping @Sendable (TransferUpdate) -> Void) async throws(FileTransferError) -> Void

    public func makeAsyncIterator() -> AsyncIterator {
        let (stream, continuation) = AsyncStream<Result<TransferUpdate, FileTransferError>>.makeStream()
        let run = self.run
        let task = Task {
            do throws(FileTransferError) {
                try await run { continuation.yield(.success($0)) }
            } catch {
                continuation.yield(.failure(error))
            }
            continuation.finish()
        }
        continuation.onTermination = { _ in task.cancel() }
        return AsyncIterator(base: stream.makeAsyncIterator(), task: task)
    }

    public struct AsyncIterator: AsyncIteratorProtocol {
        var base: AsyncStream<Result<TransferUpdate, FileTransferError>>.AsyncIterator
        let task: Task<Void, Never>

        public mutating func next() async throws(FileTransferError) -> TransferUpdate? {
            let next = await withTaskCancellationHandler {
                await base.next()
            } onCancel: { [task] in
                task.cancel()
            }
            guard let next else { return nil }
            return try next.get()
        }

        public mutating func next(isolation actor: isolated (any Actor)?) async throws(FileTransferError) -> TransferUpdate? {
            let next = await withTaskCancellationHandler {
                await base.next(isolation: actor)
            } onCancel: { [task] in
                task.cancel()
            }
            guard let next else { return nil }
            return try next.get()
        }
    }
}
