import DNSWire
import NearbyBasics
import Testing

@testable import UnicastDNSSD

/// The policies that bound what a DNS server can make wait in the client: a flood of datagrams
/// for an exchange, a Push server pushing faster than the browse reads. Shown with a consumer
/// that does not read (the buffers are values: no sockets, no threads).
@Suite("unicast DNS: bounded inputs")
struct BoundedInputsTests {
    @Test("an exchange flooded with 10,000 datagrams keeps the newest 16 (the rest counted), every failure, and one tick")
    func exchangeFlood() {
        var buffer = DNSClient.InputBuffer()
        for n in 0..<10_000 { buffer.push(.received([UInt8(n & 0xff), UInt8(n >> 8)], .udp, 0)) }
        buffer.push(.failed(.udp, 1, "refused"))
        buffer.push(.tick)
        buffer.push(.tick)
        #expect(buffer.count == DNSClient.InputBuffer.limit + 2)
        #expect(buffer.merged == 10_000 - DNSClient.InputBuffer.limit)
        var inputs: [DNSClient.Input] = []
        while let input = buffer.pop() { inputs.append(input) }
        // The newest datagram (the real answer comes last in a flood) is there.
        #expect(inputs.contains(.received([0x0f, 0x27], .udp, 0)))
        #expect(inputs.suffix(2) == [.failed(.udp, 1, "refused"), .tick])
    }

    @Test("a Push server's changes for a browse that falls behind wait merged per record set: what the changes make together")
    func pushChangesMerge() throws {
        let key = RecordPoller.Key(try DomainName(parsing: "_openagents._tcp.example.test."), .ptr)
        let other = RecordPoller.Key(try DomainName(parsing: "box.example.test."), .a)
        func ptr(_ n: Int) throws -> RecordData { .ptr(try DomainName(parsing: "Box \(n)._openagents._tcp.example.test.")) }
        var buffer = PushSubscriber.Event.buffer()
        buffer.push(.subscribed(key))
        for n in 0..<1000 {
            buffer.push(.changed(key, added: [try ptr(n)], removed: n > 0 ? [try ptr(n - 1)] : [], removeAll: false))
        }
        buffer.push(.changed(other, added: [.a(IPv4Address(198, 18, 1, 2))], removed: [], removeAll: false))
        #expect(buffer.count == 3)
        #expect(buffer.pop() == .subscribed(key))
        // 1,000 changes, each adding one and removing the one before: the last one added, the
        // earlier ones removed (the browse never saw them, so removing them is harmless).
        guard case .changed(_, let added, _, let removeAll)? = buffer.pop() else {
            Issue.record("the record set's changes should wait as one")
            return
        }
        #expect(added == [try ptr(999)] && !removeAll)
        #expect(buffer.pop() == .changed(other, added: [.a(IPv4Address(198, 18, 1, 2))], removed: [], removeAll: false))
        // A remove-all replaces what waited; additions after it are kept with it.
        buffer.push(.changed(key, added: [try ptr(1)], removed: [], removeAll: false))
        buffer.push(.changed(key, added: [], removed: [], removeAll: true))
        buffer.push(.changed(key, added: [try ptr(2)], removed: [try ptr(7)], removeAll: false))
        #expect(buffer.pop() == .changed(key, added: [try ptr(2)], removed: [], removeAll: true))
        // The session's end waits once, the newest.
        buffer.push(.ended("closed", retryAfter: nil))
        buffer.push(.ended("reset", retryAfter: .seconds(5)))
        #expect(buffer.pop() == .ended("reset", retryAfter: .seconds(5)))
        #expect(buffer.pop() == nil)
    }
}
