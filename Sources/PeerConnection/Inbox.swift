import NearbyBasics
import NIOCore

/// How much the peer may send ahead of the app before the connection stops reading from the
/// socket. Once either limit is reached, no more is read until the app has taken the queue
/// down to half of both, so a fast peer is held back by TCP instead of filling memory.
public struct IncomingLimit: Hashable, Sendable {
    /// Messages waiting for the app (default 64).
    public var messages: Int
    /// Bytes of message text waiting for the app (default 4 MiB).
    public var bytes: Int

    public init(messages: Int = 64, bytes: Int = 4 << 20) {
        self.messages = max(1, messages)
        self.bytes = max(1, bytes)
    }
}

/// The queue between the connection's event loop and the app, as a pure value: messages in
/// arrival order with their sizes, and whether it is over its limit (stop reading) or back
/// under half of it (read again).
struct InboxQueue<Element> {
    let limit: IncomingLimit
    /// Small at first: most connections never queue more than a message or two, and an idle
    /// one should cost little (it grows as needed, up to the limit).
    private var queued = CircularBuffer<(element: Element, size: Int)>(initialCapacity: 2)
    private(set) var bytes = 0

    init(limit: IncomingLimit) { self.limit = limit }

    var count: Int { queued.count }
    var isEmpty: Bool { queued.isEmpty }
    /// At or over a limit: the connection should stop reading.
    var isFull: Bool { queued.count >= limit.messages || bytes >= limit.bytes }
    /// Down to half of both limits: a connection that stopped reading may read again.
    var hasRoom: Bool { queued.count <= limit.messages / 2 && bytes <= limit.bytes / 2 }

    mutating func append(_ element: Element, size: Int) {
        queued.append((element, size))
        bytes += size
    }

    mutating func removeFirst() -> Element? {
        guard let first = queued.popFirst() else { return nil }
        bytes -= first.size
        return first.element
    }

    mutating func removeAll() {
        queued.removeAll()
        bytes = 0
    }
}

/// The messages a connection received for the app, in arrival order; ends when the connection
/// ends (after everything received before that was read).
///
/// The queue behind it is bounded by ``PeerConnectionConfiguration/incomingLimit``: while it is
/// full the connection reads nothing more from the peer (TCP holds the peer back), and reading
/// resumes once the app has taken it down to half. Nothing is dropped or reordered. So an app
/// must read ``PeerConnection/incoming`` (or stop caring about the connection): a connection
/// whose messages nobody reads stops receiving, answers to its own requests included.
///
/// Several loops may read at once; each message goes to one of them. Cancelling the task of a
/// waiting reader ends its loop without taking a message.
public struct IncomingMessages: AsyncSequence, Sendable {
    public typealias Element = IncomingMessage
    let inbox: Inbox

    public struct AsyncIterator: AsyncIteratorProtocol {
        let inbox: Inbox
        public mutating func next() async -> IncomingMessage? { await inbox.next() }
    }

    public func makeAsyncIterator() -> AsyncIterator { AsyncIterator(inbox: inbox) }
}

/// The thread-safe shell around ``InboxQueue``: the event loop pushes, the app's tasks take.
/// When the app takes the queue down to half after it was full, `onRoom` is called (the
/// session then reads again, on its event loop).
final class Inbox: Sendable {
    fileprivate struct State: Sendable {
        var queue: InboxQueue<IncomingMessage>
        var waiters: [(id: Int, continuation: CheckedContinuation<IncomingMessage?, Never>)] = []
        var nextWaiter = 0
        var finished = false
        /// The session was told the queue is full and waits for `onRoom`.
        var holding = false
    }

    private let state: Locked<State>
    private let onRoom: Locked<(@Sendable () -> Void)?> = Locked(nil)

    init(limit: IncomingLimit) {
        state = Locked(State(queue: InboxQueue(limit: limit)))
    }

    /// Called once the app made room after ``push(_:size:)`` said the queue is full.
    func whenRoom(_ body: @escaping @Sendable () -> Void) {
        onRoom.withLockedValue { $0 = body }
    }

    /// Adds a message (a waiting reader gets it at once). Returns false when the queue is now
    /// full: the caller should stop reading until `onRoom`.
    @discardableResult
    func push(_ message: IncomingMessage, size: Int) -> Bool {
        let (reader, hasRoom): (CheckedContinuation<IncomingMessage?, Never>?, Bool) = state.withLockedValue { state in
            if state.finished { return (nil, true) }
            if !state.waiters.isEmpty {
                return (state.waiters.removeFirst().continuation, true)
            }
            state.queue.append(message, size: size)
            if state.queue.isFull {
                state.holding = true
                return (nil, false)
            }
            return (nil, true)
        }
        reader?.resume(returning: message)
        return hasRoom
    }

    /// True when the queue is at or over its limit.
    var isFull: Bool { state.withLockedValue { $0.queue.isFull } }

    /// How many messages wait for the app.
    var count: Int { state.withLockedValue { $0.queue.count } }

    /// No more messages will come: readers get what is queued, then nil.
    func finish() {
        let readers = state.withLockedValue { state in
            state.finished = true
            defer { state.waiters = [] }
            return state.waiters.map(\.continuation)
        }
        for reader in readers { reader.resume(returning: nil) }
    }

    /// The next queued message without waiting, or nil when none is queued now.
    func poll() -> IncomingMessage? {
        let (taken, room) = state.withLockedValue { state -> (IncomingMessage?, Bool) in
            guard let message = state.queue.removeFirst() else { return (nil, false) }
            return (message, state.releaseIfRoom())
        }
        if room { onRoom.withLockedValue { $0 }?() }
        return taken
    }

    func next() async -> IncomingMessage? {
        if Task.isCancelled { return nil }
        // A message already queued is taken without suspending (the common case under load).
        if let queued = poll() { return queued }
        let id = state.withLockedValue { state in
            defer { state.nextWaiter &+= 1 }
            return state.nextWaiter
        }
        return await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<IncomingMessage?, Never>) in
                let (taken, room): (IncomingMessage??, Bool) = state.withLockedValue { state in
                    if let message = state.queue.removeFirst() {
                        return (.some(message), state.releaseIfRoom())
                    }
                    if state.finished || Task.isCancelled { return (.some(nil), false) }
                    state.waiters.append((id, continuation))
                    return (nil, state.releaseIfRoom())
                }
                if room { onRoom.withLockedValue { $0 }?() }
                if let taken { continuation.resume(returning: taken) }
            }
        } onCancel: {
            let waiter = state.withLockedValue { state -> CheckedContinuation<IncomingMessage?, Never>? in
                guard let index = state.waiters.firstIndex(where: { $0.id == id }) else { return nil }
                return state.waiters.remove(at: index).continuation
            }
            waiter?.resume(returning: nil)
        }
    }
}

extension Inbox.State {
    /// After a take: if the session stopped reading and there is room again, it may read.
    fileprivate mutating func releaseIfRoom() -> Bool {
        guard holding, queue.hasRoom else { return false }
        holding = false
        return true
    }
}

extension InboxQueue: Sendable where Element: Sendable {}
