import DNSWire
import Testing

@testable import UnicastDNSSD

/// Watching record sets by asking again as the TTLs say, driven by hand.
@Suite("unicast DNS: the record poller")
struct RecordPollerTests {
    static let list = RecordPoller.Key("_openagents._tcp.lab.example.test.", .ptr)
    static let srv = RecordPoller.Key("Box._openagents._tcp.lab.example.test.", .srv)

    static func answer(_ key: RecordPoller.Key, _ records: [(RecordData, UInt32)], code: UInt8 = 0, soa: (ttl: UInt32, minimum: UInt32)? = nil) -> Message {
        var header = Header(id: 1)
        header.isResponse = true
        header.responseCode = code
        let authority = soa.map {
            [ResourceRecord(
                name: "lab.example.test.",
                data: .soa(SOAData(primary: "ns.lab.example.test.", mailbox: "hostmaster.lab.example.test.", serial: 1, refresh: 3600, retry: 600, expire: 86400, minimum: $0.minimum)),
                ttl: $0.ttl)]
        } ?? []
        return Message(
            header: header, questions: [Question(name: key.name, type: key.type)],
            answers: records.map { ResourceRecord(name: key.name, data: $0.0, ttl: $0.1) }, authorities: authority)
    }

    static func ptr(_ label: String) -> RecordData { .ptr(try! DomainName(parsing: "\(label)._openagents._tcp.lab.example.test")) }

    @Test("a watch asks at once; what an answer adds or drops comes out as changes, in a stable order")
    func changes() {
        var poller = RecordPoller()
        #expect(poller.watch(Self.list, isList: true, at: .zero) == [.query(Self.list)])
        #expect(poller.watch(Self.list, isList: true, at: .zero).isEmpty)
        let first = poller.answered(Self.list, with: Self.answer(Self.list, [(Self.ptr("B"), 30), (Self.ptr("A"), 30)]), at: .milliseconds(2))
        #expect(first == [.added(Self.list, Self.ptr("A")), .added(Self.list, Self.ptr("B"))])
        // In its first 10 s a list is asked every second.
        #expect(poller.advance(to: .milliseconds(1001)).isEmpty)
        #expect(poller.advance(to: .milliseconds(1002)) == [.query(Self.list)])
        let second = poller.answered(Self.list, with: Self.answer(Self.list, [(Self.ptr("B"), 30), (Self.ptr("C"), 30)]), at: .seconds(2))
        #expect(second == [.removed(Self.list, Self.ptr("A")), .added(Self.list, Self.ptr("C"))])
    }

    @Test("a list is asked every second for its first 10 s, then every 5 s (or at 80 % of its TTL when that is sooner)")
    func listWarmUp() {
        var poller = RecordPoller()
        _ = poller.watch(Self.list, isList: true, at: .zero)
        var asked: [Duration] = []
        var now = Duration.zero
        _ = poller.answered(Self.list, with: Self.answer(Self.list, [(Self.ptr("A"), 30)]), at: now)
        while now < .seconds(30) {
            now += .milliseconds(100)
            if poller.advance(to: now) == [.query(Self.list)] {
                asked.append(now)
                _ = poller.answered(Self.list, with: Self.answer(Self.list, [(Self.ptr("A"), 30)]), at: now)
            }
        }
        #expect(asked == (1...10).map { Duration.seconds($0) } + [.seconds(15), .seconds(20), .seconds(25), .seconds(30)])
        var short = RecordPoller()
        _ = short.watch(Self.list, isList: true, at: .zero)
        _ = short.answered(Self.list, with: Self.answer(Self.list, [(Self.ptr("A"), 2)]), at: .seconds(20))
        #expect(short.nextDeadline == .milliseconds(21600))
    }

    @Test("a record set is asked again at 80 % of its smallest TTL, never sooner than 1 s, never later than an hour")
    func refreshAtTTL() {
        var poller = RecordPoller()
        _ = poller.watch(Self.srv, at: .zero)
        let srv = RecordData.srv(SRVData(port: 9099, target: "box.lab.example.test."))
        _ = poller.answered(Self.srv, with: Self.answer(Self.srv, [(srv, 30)]), at: .zero)
        #expect(poller.nextDeadline == .seconds(24))
        #expect(poller.advance(to: .seconds(23)).isEmpty)
        #expect(poller.advance(to: .seconds(24)) == [.query(Self.srv)])
        _ = poller.answered(Self.srv, with: Self.answer(Self.srv, [(srv, 0)]), at: .seconds(24))
        #expect(poller.nextDeadline == .seconds(24))  // the TTL-0 record expires at once
        #expect(poller.advance(to: .seconds(24)) == [.removed(Self.srv, srv)])
        #expect(poller.nextDeadline == .seconds(25))
        _ = poller.advance(to: .seconds(25))
        _ = poller.answered(Self.srv, with: Self.answer(Self.srv, [(srv, 86400)]), at: .seconds(25))
        #expect(poller.nextDeadline == .seconds(25 + 3600))
    }

    @Test("a negative answer is asked again after the SOA minimum (RFC 2308), capped by the list interval for lists")
    func negative() {
        var poller = RecordPoller()
        _ = poller.watch(Self.srv, at: .zero)
        #expect(poller.answered(Self.srv, with: Self.answer(Self.srv, [], code: 3, soa: (30, 20)), at: .zero).isEmpty)
        #expect(poller.nextDeadline == .seconds(20))
        _ = poller.watch(Self.list, isList: true, at: .zero)
        _ = poller.answered(Self.list, with: Self.answer(Self.list, [], soa: (30, 20)), at: .seconds(10))
        #expect(poller.advance(to: .seconds(15)) == [.query(Self.list)])
    }

    @Test("when the server stops answering, records stay until their TTL runs out, then are removed; retries back off")
    func failures() {
        var poller = RecordPoller()
        _ = poller.watch(Self.list, isList: true, at: .zero)
        _ = poller.answered(Self.list, with: Self.answer(Self.list, [(Self.ptr("A"), 12)]), at: .seconds(10))
        #expect(poller.advance(to: .seconds(15)) == [.query(Self.list)])
        #expect(poller.failed(Self.list, at: .seconds(17)).isEmpty)
        #expect(poller.advance(to: .seconds(19)) == [.query(Self.list)])
        _ = poller.failed(Self.list, at: .seconds(21))
        #expect(poller.advance(to: .seconds(22)) == [.removed(Self.list, Self.ptr("A"))])
        #expect(poller.advance(to: .seconds(25)) == [.query(Self.list)])
    }

    @Test("of many watches, each is asked when its own TTL says and no sooner; a due time moved earlier or later is kept, the old one ignored")
    func agenda() {
        var poller = RecordPoller()
        let keys = (1...300).map { RecordPoller.Key(try! DomainName(parsing: "s\($0)._openagents._tcp.lab.example.test"), .srv) }
        for (index, key) in keys.enumerated() {
            _ = poller.watch(key, at: .zero)
            let srv = RecordData.srv(SRVData(port: UInt16(9000 + index), target: "box.lab.example.test."))
            _ = poller.answered(key, with: Self.answer(key, [(srv, UInt32(10 + index))]), at: .zero)
        }
        #expect(poller.nextDeadline == .seconds(8))
        // s3's answer comes again with a longer TTL before it was due: its old time is stale.
        let srv3 = RecordData.srv(SRVData(port: 9002, target: "box.lab.example.test."))
        _ = poller.answered(keys[2], with: Self.answer(keys[2], [(srv3, 100)]), at: .seconds(1))
        var asked: [RecordPoller.Key] = []
        var now = Duration.zero
        while now < .seconds(20) {
            now += .milliseconds(100)
            for case .query(let key) in poller.advance(to: now) { asked.append(key) }
        }
        // TTL 10 + i is asked at 80 %: 8 s, 8.8 s, … up to 20 s: indexes 0, 1, 3…15 (not 2).
        let expected = (0...15).filter { $0 != 2 }.map { keys[$0] }
        #expect(asked == expected)
    }

    @Test("a CNAME in the answer is followed; records of other names or types are not taken")
    func aliases() {
        let answers = [
            ResourceRecord(name: "box.lab.example.test.", data: .cname("real.lab.example.test."), ttl: 30),
            ResourceRecord(name: "real.lab.example.test.", data: .a(IPv4Address(198, 18, 1, 1)), ttl: 30),
            ResourceRecord(name: "other.lab.example.test.", data: .a(IPv4Address(6, 6, 6, 6)), ttl: 30),
        ]
        let found = RecordPoller.records(answering: .init("box.lab.example.test.", .a), in: answers)
        #expect(found.map(\.data) == [.a(IPv4Address(198, 18, 1, 1))])
    }

    @Test("an unwatched set is forgotten: its answer changes nothing and it is never asked again")
    func unwatch() {
        var poller = RecordPoller()
        _ = poller.watch(Self.list, isList: true, at: .zero)
        poller.unwatch(Self.list)
        #expect(poller.answered(Self.list, with: Self.answer(Self.list, [(Self.ptr("A"), 30)]), at: .zero).isEmpty)
        #expect(poller.nextDeadline == nil && poller.watchCount == 0)
    }
}
