import NearbyBasics
public import NIOCore
import NIOConcurrencyHelpers

/// One byte stream on a ``PeerConnection``, beside its JSON-RPC messages and its other streams.
///
/// Read it as an `AsyncSequence` of byte buffers (`for try await chunk in stream`); the loop
/// ends when the peer finishes its side, and throws when either side resets the stream or the
/// connection ends. Write with ``write(_:)-(ByteBuffer)``: it returns once the peer's credit
/// window took the bytes, so a writer goes at the reader's pace and nothing piles up in memory.
/// ``finish()`` half-closes (the peer's loop ends; it may still write to us); ``reset(_:code:)``
/// ends both directions at once and tells the peer why.
///
/// Each stream has its own window (`StreamSettings.window`): a reader that stops holds back
/// its own stream only. One reader and one writer at a time. A stream dropped before it ended
/// is reset ("dropped").
public final class PeerStream: AsyncSequence, Sendable {
    public typealias Element = ByteBuffer
    public typealias Failure = PeerConnectionError

    let core: StreamCore

    init(core: StreamCore) { self.core = core }

    deinit { core.dropped() }

    /// The stream's number on its connection.
    public var id: StreamID { core.id }
    /// What the opener said the stream is for (up to 255 bytes of UTF-8; may be empty).
    public var label: String { core.label }

    public struct AsyncIterator: AsyncIteratorProtocol {
        let core: StreamCore
        public mutating func next() async throws(PeerConnectionError) -> ByteBuffer? { try await core.next() }
        public mutating func next(isolation actor: isolated (any Actor)?) async throws(PeerConnectionError) -> ByteBuffer? {
            try await core.next()
        }
    }

    public func makeAsyncIterator() -> AsyncIterator { AsyncIterator(core: core) }

    /// Sends `bytes`; returns once the peer's window took all of them (in frames of at most its
    /// `max_frame`).
    /// - Throws: `PeerConnectionError`: `streamReset` (by either side), `closed` (the
    ///   connection ended), `invalidInput` (after ``finish()``), `cancelled` (the task was
    ///   cancelled: the stream is then reset).
    public func write(_ bytes: ByteBuffer) async throws(PeerConnectionError) {
        try await core.write(bytes)
    }

    /// Sends `bytes` (copied into a buffer first).
    public func write(_ bytes: some Sequence<UInt8>) async throws(PeerConnectionError) {
        try await core.write(ByteBuffer(bytes: bytes))
    }

    /// Half-closes: once what was written went out, the peer's reading loop ends. Reading from
    /// the peer goes on until it finishes too. Does nothing once the stream is over (finished
    /// both ways, or reset); fails only when the connection has ended.
    public func finish() async throws(PeerConnectionError) {
        try await core.finish()
    }

    /// Ends the stream both ways at once; the peer's reads and writes fail with `reason`.
    /// Writes still waiting here fail too. Does nothing once the stream is over.
    public func reset(_ reason: String, code: StreamResetCode = .cancelled) {
        core.reset(code: code, reason: reason)
    }
}

/// The streams the peer opens, in the order it opened them; ends with the connection. At most
/// `StreamSettings.maximumStreams` wait or run at once: the peer's next one is refused. An
/// app that takes no streams should not offer them (``PeerConnectionConfiguration/streams``).
public struct IncomingStreams: AsyncSequence, Sendable {
    public typealias Element = PeerStream
    let streams: AsyncStream<PeerStream>

    public struct AsyncIterator: AsyncIteratorProtocol {
        var base: AsyncStream<PeerStream>.AsyncIterator
        public mutating func next() async -> PeerStream? { await base.next() }
    }

    public func makeAsyncIterator() -> AsyncIterator { AsyncIterator(base: streams.makeAsyncIterator()) }
}

/// The state one stream shares between the connection's event loop (which delivers bytes and
/// ends) and the app's tasks (which read, write, finish and reset).
final class StreamCore: Sendable {
    let id: StreamID
    let label: String
    private let handler: NIOLoopBound<WeakStreamHandler>

    private struct State: Sendable {
        var buffered = CircularBuffer<ByteBuffer>()
        var peerFinished = false
        var error: PeerConnectionError?
        var reader: CheckedContinuation<Result<ByteBuffer?, PeerConnectionError>, Never>?
        /// Reset here, or over: nothing to do when the app drops the stream.
        var settled = false
        /// Finished here: dropping it then resets it only while the peer still writes.
        var finishedHere = false
    }

    private let state = Locked(State())

    init(id: StreamID, label: String, handler: NIOLoopBound<WeakStreamHandler>) {
        self.id = id
        self.label = label
        self.handler = handler
    }

    // MARK: From the event loop

    func deliver(_ bytes: ByteBuffer) {
        let reader = state.withLockedValue { state -> CheckedContinuation<Result<ByteBuffer?, PeerConnectionError>, Never>? in
            guard state.error == nil else { return nil }
            if let reader = state.reader {
                state.reader = nil
                return reader
            }
            state.buffered.append(bytes)
            return nil
        }
        if let reader {
            reader.resume(returning: .success(bytes))
            consumed(bytes.readableBytes)
        }
    }

    func peerFinished() {
        let reader = state.withLockedValue { state in
            state.peerFinished = true
            defer { state.reader = nil }
            return state.buffered.isEmpty ? state.reader : nil
        }
        reader?.resume(returning: .success(nil))
    }

    /// The stream is over both ways. Bytes the peer sent before it finished are still read;
    /// otherwise what is buffered is dropped and reading fails with `error`.
    func ended(_ error: PeerConnectionError) {
        let (reader, outcome) = state.withLockedValue { state -> (CheckedContinuation<Result<ByteBuffer?, PeerConnectionError>, Never>?, Result<ByteBuffer?, PeerConnectionError>) in
            state.settled = true
            if state.error == nil, !state.peerFinished {
                state.error = error
                state.buffered.removeAll()
            }
            defer { state.reader = nil }
            return (state.reader, state.error.map { .failure($0) } ?? .success(nil))
        }
        reader?.resume(returning: outcome)
    }

    // MARK: From the app

    func next() async throws(PeerConnectionError) -> ByteBuffer? {
        if let taken = take() {
            if case .success(let bytes?) = taken { consumed(bytes.readableBytes) }
            return try taken.get()
        }
        let outcome = await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Result<ByteBuffer?, PeerConnectionError>, Never>) in
                let taken = state.withLockedValue { state -> Result<ByteBuffer?, PeerConnectionError>? in
                    if let now = Self.take(&state) { return now }
                    if Task.isCancelled { return .failure(PeerConnectionError(.cancelled, "reading stream \(id) was cancelled")) }
                    state.reader = continuation
                    return nil
                }
                if let taken {
                    if case .success(let bytes?) = taken { consumed(bytes.readableBytes) }
                    continuation.resume(returning: taken)
                }
            }
        } onCancel: {
            let reader = state.withLockedValue { state in
                defer { state.reader = nil }
                return state.reader
            }
            reader?.resume(returning: .failure(PeerConnectionError(.cancelled, "reading stream \(id) was cancelled")))
        }
        return try outcome.get()
    }

    private func take() -> Result<ByteBuffer?, PeerConnectionError>? {
        state.withLockedValue { Self.take(&$0) }
    }

    private static func take(_ state: inout State) -> Result<ByteBuffer?, PeerConnectionError>? {
        if let error = state.error { return .failure(error) }
        if let bytes = state.buffered.popFirst() { return .success(bytes) }
        if state.peerFinished { return .success(nil) }
        return nil
    }

    private func consumed(_ bytes: Int) {
        let handler = self.handler
        let id = self.id
        handler.eventLoop.execute { handler.value.handler?.consumed(id, bytes: bytes) }
    }

    func write(_ bytes: ByteBuffer) async throws(PeerConnectionError) {
        try await onLoop { handler, promise in handler.write(self.id, bytes, promise: promise) }
    }

    func finish() async throws(PeerConnectionError) {
        state.withLockedValue { $0.finishedHere = true }
        try await onLoop { handler, promise in handler.finish(self.id, promise: promise) }
    }

    func reset(code: StreamResetCode, reason: String) {
        state.withLockedValue { $0.settled = true }
        let handler = self.handler
        let id = self.id
        handler.eventLoop.execute { handler.value.handler?.reset(id, code: code, reason: reason) }
    }

    /// The app let go of the stream: unless it is over both ways, it is reset, so that a peer
    /// still writing is not left waiting for credit that will never come.
    func dropped() {
        let needed = state.withLockedValue { state in
            defer { state.settled = true }
            return !state.settled && !(state.finishedHere && state.peerFinished)
        }
        if needed { reset(code: .cancelled, reason: "the stream was dropped") }
    }

    /// Runs `body` on the event loop with a promise, and waits for it; a cancelled wait resets the stream.
    private func onLoop(_ body: @escaping @Sendable (StreamHandler, EventLoopPromise<Void>) -> Void) async throws(PeerConnectionError) {
        let handler = self.handler
        let promise = handler.eventLoop.makePromise(of: Void.self)
        handler.eventLoop.execute {
            guard let live = handler.value.handler else {
                return promise.fail(PeerConnectionError(.closed, "the connection is closed"))
            }
            body(live, promise)
        }
        let id = self.id
        do {
            try await withTaskCancellationHandler {
                try await promise.futureResult.get()
            } onCancel: {
                handler.eventLoop.execute { handler.value.handler?.reset(id, code: .cancelled, reason: "the writer was cancelled") }
            }
        } catch let error as PeerConnectionError {
            if error.code == .streamReset, Task.isCancelled { throw PeerConnectionError(.cancelled, "writing to stream \(id) was cancelled") }
            throw error
        } catch {
            throw PeerConnectionError(.closed, "\(error)")
        }
    }
}

/// A stream handler that callbacks may reach without keeping it alive.
final class WeakStreamHandler {
    weak var handler: StreamHandler?
    init(_ handler: StreamHandler) { self.handler = handler }
}
