import DNSWire
import Testing

@testable import MulticastDNS

/// The bounded buffer between the sockets' receive thread and the engine: nothing grows without
/// bound under a flood, and nothing is dropped without being counted.
@Suite("datagram inbox")
struct DatagramInboxTests {
    func datagram(_ size: Int = 12, from last: UInt8 = 9) -> ReceivedDatagram {
        ReceivedDatagram(
            bytes: [UInt8](repeating: 0, count: size), source: SocketAddress(.v4(IPv4Address(198, 18, 1, last)), port: 5353),
            interfaceIndex: 2, family: .v4, toGroup: true)
    }

    @Test("datagrams come out in order, in batches of the size asked for")
    func batches() {
        let inbox = DatagramInbox()
        for index in 0..<10 { inbox.push(datagram(12 + index)) }
        #expect(inbox.take(upTo: 4).map(\.bytes.count) == [12, 13, 14, 15])
        #expect(inbox.take(upTo: 4).map(\.bytes.count) == [16, 17, 18, 19])
        #expect(inbox.take(upTo: 4).map(\.bytes.count) == [20, 21])
        #expect(inbox.isEmpty)
        #expect(inbox.counts.received == 10 && inbox.counts.dropped == 0)
    }

    @Test("a full inbox drops and counts what does not fit, by number and by bytes, and takes more once drained")
    func bounded() {
        let inbox = DatagramInbox()
        for _ in 0..<(DatagramInbox.capacity + 100) { inbox.push(datagram()) }
        #expect(inbox.counts.dropped == 100)
        #expect(inbox.take(upTo: .max).count == DatagramInbox.capacity)
        // By bytes: 9000-byte datagrams fill the 4 MiB long before 4096 of them.
        let fits = DatagramInbox.byteCapacity / 9000
        for _ in 0..<(fits + 5) { inbox.push(datagram(9000)) }
        #expect(inbox.counts.dropped == 105)
        #expect(inbox.take(upTo: .max).count == fits)
        inbox.push(datagram())
        #expect(inbox.take(upTo: .max).count == 1)
    }

    @Test("a turn of the receive thread is handed over whole when the inbox is empty, appended when not, and left empty")
    func pushTaking() {
        let inbox = DatagramInbox()
        var turn = (0..<5).map { datagram(12 + $0) }
        inbox.push(taking: &turn)
        #expect(turn.isEmpty)
        // Not empty now: the next turn is appended behind what waits.
        turn = (5..<8).map { datagram(12 + $0) }
        inbox.push(taking: &turn)
        #expect(turn.isEmpty)
        #expect(inbox.take(upTo: .max).map(\.bytes.count) == Array(12..<20))
        #expect(inbox.counts.received == 8 && inbox.counts.dropped == 0)
        // Over the limits: counted as dropped, by number and by bytes, as with single pushes.
        turn = (0..<(DatagramInbox.capacity + 7)).map { _ in datagram() }
        inbox.push(taking: &turn)
        #expect(inbox.counts.dropped == 7)
        #expect(inbox.take(upTo: 10).count == 10)
        #expect(inbox.take(upTo: .max).count == DatagramInbox.capacity - 10)
        turn = (0..<(DatagramInbox.byteCapacity / 9000 + 3)).map { _ in datagram(9000) }
        inbox.push(taking: &turn)
        #expect(inbox.counts.dropped == 10)
        #expect(inbox.take(upTo: .max).count == DatagramInbox.byteCapacity / 9000)
        #expect(inbox.isEmpty)
    }

    @Test("the engine is woken when the inbox goes from empty to not empty, not for every datagram")
    func wakeUps() async {
        let inbox = DatagramInbox()
        var iterator = inbox.wakeUps.makeAsyncIterator()
        for _ in 0..<50 { inbox.push(datagram()) }
        inbox.close()
        // One buffered wake-up for fifty datagrams, then the end (closed).
        #expect(await iterator.next() != nil)
        #expect(await iterator.next() == nil)
        // A closed inbox takes nothing more.
        inbox.push(datagram())
        #expect(inbox.take(upTo: .max).count == 50)
    }

    @Test("the receive thread does not pause after a quiet turn; after a busy one, for about 96 datagrams at the rate seen, 4 ms at most")
    func pacing() {
        // A lone query, or a few: read again at once.
        #expect(MulticastTransport.pause(afterTurnOf: 1, tookNanoseconds: 1_000_000) == 0)
        #expect(MulticastTransport.pause(afterTurnOf: 15, tookNanoseconds: 100_000) == 0)
        // 60 datagrams in 2 ms is 30,000 a second: 96 more take 3.2 ms.
        #expect(MulticastTransport.pause(afterTurnOf: 60, tookNanoseconds: 2_000_000) == 3_200_000)
        // 90,000 a second: about 1.07 ms, so the socket buffer is not overrun.
        #expect(MulticastTransport.pause(afterTurnOf: 180, tookNanoseconds: 2_000_000) == 1_066_666)
        // A slow trickle that happened to fill a turn: never more than 4 ms.
        #expect(MulticastTransport.pause(afterTurnOf: 16, tookNanoseconds: 1_000_000_000) == 4_000_000)
        // A clock that did not move is no rate at all.
        #expect(MulticastTransport.pause(afterTurnOf: 100, tookNanoseconds: 0) == 0)
    }
}
