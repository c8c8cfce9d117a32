public import DNSWire
import NearbyBasics

/// A datagram as it arrived on one of the mDNS sockets.
public struct ReceivedDatagram: Sendable {
    public var bytes: [UInt8]
    public var source: DNSWire.SocketAddress
    public var interfaceIndex: Int
    public var family: IPFamily
    /// Sent to the mDNS group rather than to this host alone.
    public var toGroup: Bool
}

/// The bounded buffer between the sockets' receive thread and the engine. The receive thread
/// never waits: when the buffer is full (the engine is behind, say under a flood) a datagram is
/// dropped and counted. The engine takes datagrams in batches, one wake-up per batch.
public final class DatagramInbox: Sendable {
    /// At most this many datagrams wait; at most this many bytes in all.
    public static let capacity = 4096
    public static let byteCapacity = 4 << 20

    private struct State {
        var queue: [ReceivedDatagram] = []
        var head = 0
        var bytes = 0
        var dropped = 0
        var received = 0
        var closed = false

        /// Appends `datagram` unless the inbox is full; true if it was empty before.
        mutating func append(_ datagram: ReceivedDatagram) -> Bool {
            received += 1
            guard queue.count - head < DatagramInbox.capacity, bytes + datagram.bytes.count <= DatagramInbox.byteCapacity else {
                dropped += 1
                return false
            }
            let wasEmpty = queue.count == head
            queue.append(datagram)
            bytes += datagram.bytes.count
            return wasEmpty
        }
    }
    private let state = Locked(State())
    /// Signals that datagrams are waiting (at most one signal is buffered).
    public let wakeUps: AsyncStream<Void>
    private let wake: AsyncStream<Void>.Continuation

    init() {
        (wakeUps, wake) = AsyncStream<Void>.makeStream(bufferingPolicy: .bufferingNewest(1))
    }

    /// Adds a datagram, or drops it when the inbox is full.
    func push(_ datagram: ReceivedDatagram) {
        var one = [datagram]
        push(taking: &one)
    }

    /// Adds what one turn of the receive thread read, under one lock, and leaves `batch`
    /// empty; what does not fit is dropped and counted. When the engine has taken all there
    /// was (the usual case), the lists are swapped instead of copied one by one.
    func push(taking batch: inout [ReceivedDatagram]) {
        let signal: Bool = state.withLockedValue { state in
            guard !state.closed else { return false }
            let bytes = batch.reduce(0) { $0 + $1.bytes.count }
            if state.queue.count == state.head, batch.count <= DatagramInbox.capacity, bytes <= DatagramInbox.byteCapacity {
                guard !batch.isEmpty else { return false }
                state.queue.removeAll(keepingCapacity: true)
                swap(&state.queue, &batch)
                state.head = 0
                state.bytes = bytes
                state.received += state.queue.count
                return true
            }
            var signal = false
            for datagram in batch where state.append(datagram) { signal = true }
            return signal
        }
        batch.removeAll(keepingCapacity: true)
        if signal { wake.yield() }
    }

    /// Takes up to `limit` datagrams, oldest first.
    public func take(upTo limit: Int) -> [ReceivedDatagram] {
        state.withLockedValue { state in
            if state.head == 0 && state.queue.count <= limit {
                // All of it: hand the list over whole.
                var all: [ReceivedDatagram] = []
                swap(&all, &state.queue)
                state.bytes = 0
                return all
            }
            let end = state.head + min(max(0, limit), state.queue.count - state.head)
            let batch = Array(state.queue[state.head..<end])
            state.head = end
            for datagram in batch { state.bytes -= datagram.bytes.count }
            if state.head == state.queue.count {
                state.queue.removeAll(keepingCapacity: state.queue.capacity <= 256)
                state.head = 0
            } else if state.head > 1024 {
                state.queue.removeFirst(state.head)
                state.head = 0
            }
            return batch
        }
    }

    /// Whether datagrams are waiting.
    public var isEmpty: Bool { state.withLockedValue { $0.queue.count == $0.head } }

    /// Datagrams that arrived, and those dropped because the inbox was full.
    public var counts: (received: Int, dropped: Int) { state.withLockedValue { ($0.received, $0.dropped) } }

    /// Asks the engine to look again (more is waiting than one batch took).
    public func signal() { wake.yield() }

    func close() {
        state.withLockedValue { $0.closed = true }
        wake.finish()
    }
}
