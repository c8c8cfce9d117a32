/// What a stream keeps for a consumer that has not read yet, as a pure value: the policy that
/// bounds an ``EventStream``. The producer never waits; the policy decides what a slow consumer
/// gets (the latest state of each thing, a counted summary, ...), so memory does not depend on
/// how fast, or whether, the application reads.
public protocol EventBuffer<Element>: Sendable {
    associatedtype Element: Sendable
    /// Takes an event from the producer: queues it, merges it with one already waiting, or
    /// counts it into a summary.
    mutating func push(_ element: Element)
    /// The next event for the consumer, or nil when none waits.
    mutating func pop() -> Element?
    /// Events waiting for the consumer.
    var count: Int { get }
    /// Events the policy merged into others or dropped since the stream began.
    var merged: Int { get }
}

/// A first-in, first-out queue whose pops cost O(1) amortized: the buffers' storage.
public struct FIFO<Element: Sendable>: Sendable {
    private var items: [Element] = []
    private var head = 0

    public init() {}

    public var count: Int { items.count - head }

    public mutating func append(_ element: Element) {
        items.append(element)
    }

    /// The oldest element, removed; nil when empty.
    public mutating func popFirst() -> Element? {
        guard head < items.count else { return nil }
        let element = items[head]
        head += 1
        // Storage is given back once most of it lies before the head.
        if head > 32, head * 2 >= items.count {
            items.removeFirst(head)
            head = 0
        }
        return element
    }
}

/// Keeps every event, up to `limit` waiting; beyond it the oldest waiting event is dropped (and
/// counted). For streams whose events are rare by construction: the limit is a seat belt.
public struct NewestBuffer<Element: Sendable>: EventBuffer {
    private var waiting = FIFO<Element>()
    public let limit: Int
    public private(set) var merged = 0

    public init(limit: Int) {
        self.limit = max(1, limit)
    }

    public var count: Int { waiting.count }

    public mutating func push(_ element: Element) {
        if count >= limit {
            _ = waiting.popFirst()
            merged += 1
        }
        waiting.append(element)
    }

    public mutating func pop() -> Element? {
        waiting.popFirst()
    }
}

/// At most one waiting event per key: an event whose key already waits is merged with the
/// waiting one (`merge` returns what waits now, or nil when the two cancel out), keeping the
/// first one's place in the order. Memory is bounded by the number of keys, which the producer
/// bounds (services on the link, service types, files in a transfer).
public struct LatestPerKeyBuffer<Element: Sendable, Key: Hashable & Sendable>: EventBuffer {
    private var order = FIFO<Key>()
    /// Keys with a place in `order` (an event, or an empty place left by two that cancelled out).
    private var placed: Set<Key> = []
    private var waiting: [Key: Element] = [:]
    private let key: @Sendable (Element) -> Key
    private let merge: @Sendable (_ waiting: Element, _ new: Element) -> Element?
    public private(set) var merged = 0

    /// - Parameters:
    ///   - key: what an event is about.
    ///   - merge: the waiting event and a newer one about the same key, as one event (or nil: none).
    ///     The default keeps the newer one.
    public init(key: @escaping @Sendable (Element) -> Key, merge: @escaping @Sendable (Element, Element) -> Element? = { $1 }) {
        self.key = key
        self.merge = merge
    }

    public var count: Int { waiting.count }

    public mutating func push(_ element: Element) {
        let k = key(element)
        guard let old = waiting[k] else {
            waiting[k] = element
            if placed.insert(k).inserted { order.append(k) }
            return
        }
        merged += 1
        if let combined = merge(old, element) {
            waiting[k] = combined
        } else {
            merged += 1
            waiting[k] = nil
        }
    }

    public mutating func pop() -> Element? {
        while let k = order.popFirst() {
            placed.remove(k)
            // A key whose events cancelled out left its place in `order` empty.
            if let element = waiting.removeValue(forKey: k) { return element }
        }
        return nil
    }
}

/// Batches of items (what one packet or one moment brought) whose items are kept as by
/// ``LatestPerKeyBuffer``: a reader that falls behind reads everything that waits as one batch,
/// the newest item per key, in the order the keys first came. Bounded as that buffer is: by the
/// keys the producer has.
public struct LatestPerKeyBatchBuffer<Item: Sendable, Key: Hashable & Sendable>: EventBuffer {
    private var waiting: LatestPerKeyBuffer<Item, Key>

    /// - Parameters:
    ///   - key: what an item is about.
    ///   - merge: as ``LatestPerKeyBuffer/init(key:merge:)``'s; the default keeps the newer item.
    public init(key: @escaping @Sendable (Item) -> Key, merge: @escaping @Sendable (Item, Item) -> Item? = { $1 }) {
        waiting = LatestPerKeyBuffer(key: key, merge: merge)
    }

    public mutating func push(_ batch: [Item]) {
        for item in batch { waiting.push(item) }
    }

    public mutating func pop() -> [Item]? {
        var batch: [Item] = []
        while let item = waiting.pop() { batch.append(item) }
        return batch.isEmpty ? nil : batch
    }

    /// Items waiting, over all batches.
    public var count: Int { waiting.count }
    public var merged: Int { waiting.merged }
}

/// An `AsyncSequence` of events from the network to the application, bounded by an
/// ``EventBuffer`` policy: the producer never waits and the consumer gets, when it reads, what the
/// policy kept. One consumer; when it stops (its task is cancelled, or it drops the stream and
/// its iterators), the producer's `onTermination` runs, and a producer started by
/// ``init(buffer:producer:)`` is cancelled.
public struct EventStream<Element: Sendable>: AsyncSequence, Sendable {
    /// The producer's end.
    public struct Source: Sendable {
        fileprivate let storage: Storage

        /// Offers an event to the buffer's policy. False once the consumer is gone (the producer
        /// should stop).
        @discardableResult
        public func yield(_ element: Element) -> Bool {
            storage.yield(element)
        }

        /// No more events: the consumer reads what waits, then the stream ends.
        public func finish() {
            storage.finish()
        }

        /// Events the policy merged or dropped so far (to log and count).
        public var merged: Int { storage.merged }

        /// Events waiting for the consumer now.
        public var waiting: Int { storage.waiting }

        /// Runs once, when the consumer stops or the stream is finished and read to its end.
        public func onTermination(_ action: @escaping @Sendable () -> Void) {
            storage.setOnTermination(action)
        }
    }

    fileprivate let consumer: Consumer

    /// A stream and its source, with `buffer` as the policy for what waits.
    public static func makeStream(buffer: some EventBuffer<Element>) -> (stream: EventStream, source: Source) {
        let storage = Storage(buffer: buffer)
        return (EventStream(consumer: Consumer(storage)), Source(storage: storage))
    }

    /// A stream whose events come from `producer`, run in a task of its own that the stream owns:
    /// it is cancelled when the consumer stops, and the stream ends when it returns.
    public init(buffer: some EventBuffer<Element>, producer: @escaping @Sendable (Source) async -> Void) {
        let (stream, source) = Self.makeStream(buffer: buffer)
        let task = Task {
            await producer(source)
            source.finish()
        }
        source.onTermination { task.cancel() }
        self = stream
    }

    private init(consumer: Consumer) {
        self.consumer = consumer
    }

    public func makeAsyncIterator() -> Iterator {
        Iterator(consumer: consumer)
    }

    public struct Iterator: AsyncIteratorProtocol {
        fileprivate let consumer: Consumer

        public mutating func next() async -> Element? {
            await consumer.storage.next()
        }

        public mutating func next(isolation actor: isolated (any Actor)?) async -> Element? {
            await consumer.storage.next()
        }
    }

    /// Held by the stream and its iterators: when the last of them goes, the consumer is gone.
    fileprivate final class Consumer: Sendable {
        let storage: Storage
        init(_ storage: Storage) { self.storage = storage }
        deinit { storage.terminate() }
    }

    fileprivate final class Storage: @unchecked Sendable {
        private struct State {
            var buffer: any EventBuffer<Element>
            var waiter: CheckedContinuation<Element?, Never>?
            var finished = false
            var terminated = false
            var onTermination: (@Sendable () -> Void)?
        }
        private let state: Locked<State>
        private enum Outcome {
            case value(Element?)
            case wait(CheckedContinuation<Element?, Never>?)
            case end((@Sendable () -> Void)?)
        }

        init(buffer: some EventBuffer<Element>) {
            state = Locked(State(buffer: buffer))
        }

        var merged: Int { state.withLockedValue { $0.buffer.merged } }
        var waiting: Int { state.withLockedValue { $0.buffer.count } }

        func yield(_ element: Element) -> Bool {
            // One lock: the element goes to the waiting reader, into the buffer, or nowhere.
            let (taken, waiter): (Bool, CheckedContinuation<Element?, Never>?) = state.withLockedValue { state in
                guard !state.terminated, !state.finished else { return (false, nil) }
                if let waiter = state.waiter, state.buffer.count == 0 {
                    state.waiter = nil
                    return (true, waiter)
                }
                state.buffer.push(element)
                return (true, nil)
            }
            waiter?.resume(returning: element)
            return taken
        }

        func finish() {
            let (waiter, action): (CheckedContinuation<Element?, Never>?, (@Sendable () -> Void)?) = state.withLockedValue { state in
                guard !state.finished else { return (nil, nil) }
                state.finished = true
                guard state.buffer.count == 0 else { return (nil, nil) }
                // Nothing left to read: the stream is over for the consumer as well.
                let waiter = state.waiter
                state.waiter = nil
                return (waiter, Self.endLocked(&state))
            }
            waiter?.resume(returning: nil)
            action?()
        }

        func terminate() {
            let (waiter, action): (CheckedContinuation<Element?, Never>?, (@Sendable () -> Void)?) = state.withLockedValue { state in
                let waiter = state.waiter
                state.waiter = nil
                return (waiter, Self.endLocked(&state))
            }
            waiter?.resume(returning: nil)
            action?()
        }

        func setOnTermination(_ action: @escaping @Sendable () -> Void) {
            let runNow = state.withLockedValue { state -> Bool in
                if state.terminated { return true }
                state.onTermination = action
                return false
            }
            if runNow { action() }
        }

        /// Marks the stream over; the termination action to run (outside the lock), once.
        private static func endLocked(_ state: inout State) -> (@Sendable () -> Void)? {
            guard !state.terminated else { return nil }
            state.terminated = true
            state.finished = true
            let action = state.onTermination
            state.onTermination = nil
            return action
        }

        func next() async -> Element? {
            await withTaskCancellationHandler {
                await withCheckedContinuation { (continuation: CheckedContinuation<Element?, Never>) in
                    let outcome: Outcome = state.withLockedValue { state in
                        // A consumer that went away (cancelled) reads nothing more, as with
                        // AsyncStream; a finished stream is read to its end first.
                        if state.terminated { return .value(nil) }
                        if let element = state.buffer.pop() { return .value(element) }
                        if state.finished || Task.isCancelled { return .end(Self.endLocked(&state)) }
                        // One consumer: a second reader waiting at once gets the end.
                        let earlier = state.waiter
                        state.waiter = continuation
                        return .wait(earlier)
                    }
                    switch outcome {
                    case .value(let element): continuation.resume(returning: element)
                    case .end(let action):
                        continuation.resume(returning: nil)
                        action?()
                    case .wait(let earlier): earlier?.resume(returning: nil)
                    }
                }
            } onCancel: {
                terminate()
            }
        }
    }
}

extension EventStream {
    /// A stream that has ended: it yields nothing.
    public static var finished: EventStream {
        let (stream, source) = makeStream(buffer: NewestBuffer<Element>(limit: 1))
        source.finish()
        return stream
    }
}

/// Keeps every event in order, except notices (a stranger refused, a summary of them): beyond
/// `limit` notices waiting, further ones are folded into one summary event that waits in the
/// order of the first notice it holds. Events that are not notices are never dropped; they carry
/// what the application must act on (a live connection), and what produces them bounds them.
public struct SummarizingBuffer<Element: Sendable>: EventBuffer {
    private enum Entry: Sendable {
        case event(Element)
        case summary
    }

    private var waiting = FIFO<Entry>()
    private var summary: Element?
    private var noticesWaiting = 0
    private let limit: Int
    private let isNotice: @Sendable (Element) -> Bool
    private let fold: @Sendable (_ summary: Element?, _ notice: Element) -> Element
    public private(set) var merged = 0

    /// - Parameters:
    ///   - limit: notices that may wait one by one.
    ///   - isNotice: which events may be folded.
    ///   - fold: the summary so far (nil: none yet) with one more notice in it.
    public init(
        limit: Int, isNotice: @escaping @Sendable (Element) -> Bool, fold: @escaping @Sendable (_ summary: Element?, _ notice: Element) -> Element
    ) {
        self.limit = max(1, limit)
        self.isNotice = isNotice
        self.fold = fold
    }

    public var count: Int { waiting.count }

    public mutating func push(_ element: Element) {
        guard isNotice(element) else { return waiting.append(.event(element)) }
        if noticesWaiting < limit, summary == nil {
            noticesWaiting += 1
            return waiting.append(.event(element))
        }
        if summary == nil { waiting.append(.summary) }
        summary = fold(summary, element)
        merged += 1
    }

    public mutating func pop() -> Element? {
        while let entry = waiting.popFirst() {
            switch entry {
            case .event(let element):
                if isNotice(element) { noticesWaiting -= 1 }
                return element
            case .summary:
                defer { summary = nil }
                if let summary { return summary }
            }
        }
        return nil
    }
}
