import DNSWire
import MulticastDNS
import NearbyBasics
import Testing

@testable import NearbyDiscovery
@testable import SystemDNSSD

/// The policies that bound the streams between the network and the application, each shown
/// with a consumer that does not read (no threads, no sleeps: the buffers are values).
@Suite("bounded event streams")
struct BoundedStreamTests {
    let type = try! ServiceType(parsing: "_openagents._tcp")
    let lan = NetworkInterface(index: 2, name: "lan1")

    func service(_ n: Int) -> DiscoveredService { DiscoveredService(name: "Box \(n)", type: type, interface: lan) }
    func resolved(_ n: Int, port: UInt16) -> ResolvedService {
        ResolvedService(service: service(n), host: try! DomainName(parsing: "box\(n).local."), port: port, addresses: [], info: DiscoveryInfo())
    }

    func drain(_ buffer: inout BrowseEventBuffer) -> [BrowseEvent] {
        var out: [BrowseEvent] = []
        while let event = buffer.pop() { out.append(event) }
        return out
    }

    @Test("browse events: 1,000 services each found and updated 20 times wait as 1,000 events, the newest resolution in each")
    func browseCoalescesPerService() {
        var buffer = BrowseEventBuffer()
        for round in 0..<20 {
            for n in 0..<1000 {
                buffer.push(round == 0 ? .found(service(n), resolved(n, port: 1)) : .updated(service(n), resolved(n, port: UInt16(round + 1))))
            }
        }
        #expect(buffer.count == 1000)
        #expect(buffer.merged == 19_000)
        let events = drain(&buffer)
        #expect(events.count == 1000)
        #expect(events.allSatisfy { $0.caseName == "found" && $0.resolved?.port == 20 })
        // First found, first read: the order of first arrival is kept.
        #expect(events.map { $0.service?.name } == (0..<1000).map { "Box \($0)" })
    }

    @Test("browse events: a service found and lost before it was read is never reported; one already read is reported lost")
    func browseFoundThenLost() {
        var buffer = BrowseEventBuffer()
        buffer.push(.found(service(1), nil))
        buffer.push(.lost(service(1)))
        #expect(buffer.count == 0)
        #expect(drain(&buffer).isEmpty)

        buffer.push(.found(service(2), nil))
        #expect(drain(&buffer).map(\.caseName) == ["found"])
        buffer.push(.updated(service(2), resolved(2, port: 5)))
        buffer.push(.lost(service(2)))
        #expect(drain(&buffer) == [.lost(service(2))])
    }

    @Test("browse events: a known service that leaves and comes back before it is read is found again; updates of a known one stay updates")
    func browseLostThenFound() {
        var buffer = BrowseEventBuffer()
        buffer.push(.found(service(1), resolved(1, port: 1)))
        _ = drain(&buffer)
        buffer.push(.lost(service(1)))
        buffer.push(.found(service(1), resolved(1, port: 2)))
        #expect(drain(&buffer) == [.found(service(1), resolved(1, port: 2))])
        buffer.push(.updated(service(1), resolved(1, port: 3)))
        buffer.push(.updated(service(1), resolved(1, port: 4)))
        #expect(drain(&buffer) == [.updated(service(1), resolved(1, port: 4))])
    }

    @Test("browse events: interrupted then restored cancel out; restored then interrupted leaves interrupted")
    func browseStatus() {
        var buffer = BrowseEventBuffer()
        let error = DiscoveryError(.daemonFailure, "the daemon stopped")
        buffer.push(.interrupted(error))
        buffer.push(.restored)
        #expect(drain(&buffer).isEmpty)
        buffer.push(.restored)
        buffer.push(.interrupted(error))
        #expect(drain(&buffer) == [.interrupted(error)])
    }

    @Test("browse events: a service flapping found/lost while nobody reads holds one place, not one per flap")
    func browseFlapIsBounded() {
        var buffer = BrowseEventBuffer()
        for _ in 0..<10_000 {
            buffer.push(.found(service(1), nil))
            buffer.push(.lost(service(1)))
        }
        buffer.push(.found(service(1), nil))
        #expect(buffer.count == 1)
        #expect(drain(&buffer) == [.found(service(1), nil)])
    }

    @Test("latest per key: one waiting event per key, the newest, in the order keys first arrived; a nil merge cancels both")
    func latestPerKey() {
        var buffer = LatestPerKeyBuffer<(String, Int), String>(key: { $0.0 }, merge: { old, new in new.1 < 0 ? nil : (new.0, old.1 + new.1) })
        buffer.push(("a", 1))
        buffer.push(("b", 1))
        buffer.push(("a", 2))
        #expect(buffer.count == 2)
        buffer.push(("b", -1))
        #expect(buffer.count == 1)
        #expect(buffer.merged == 3)
        #expect(buffer.pop().map { "\($0.0)\($0.1)" } == "a3")
        #expect(buffer.pop() == nil)
    }

    @Test("newest: beyond the limit the oldest waiting event is dropped and counted")
    func newest() {
        var buffer = NewestBuffer<Int>(limit: 3)
        for n in 1...10 { buffer.push(n) }
        #expect(buffer.count == 3)
        #expect(buffer.merged == 7)
        #expect([buffer.pop(), buffer.pop(), buffer.pop(), buffer.pop()] == [8, 9, 10, nil])
    }

    @Test("a stream whose consumer does not read holds what its policy keeps: 100 services, 100,000 events, 100 waiting")
    func streamUnread() async {
        let (stream, source) = EventStream<BrowseEvent>.makeStream(buffer: BrowseEventBuffer())
        for round in 0..<1000 {
            for n in 0..<100 { #expect(source.yield(round == 0 ? .found(service(n), nil) : .updated(service(n), resolved(n, port: 9)))) }
        }
        #expect(source.waiting == 100)
        #expect(source.merged == 99_900)
        source.finish()
        var read = 0
        for await event in stream {
            #expect(event.caseName == "found")
            read += 1
        }
        #expect(read == 100)
    }

    @Test("when the consumer goes away the producer learns it: yield says false and onTermination runs once")
    func streamTermination() async {
        let ended = Locked(0)
        // The consumer's stream lives only inside this closure.
        let source: EventStream<Int>.Source = {
            let (stream, source) = EventStream<Int>.makeStream(buffer: NewestBuffer(limit: 4))
            source.onTermination { ended.withLockedValue { $0 += 1 } }
            #expect(source.yield(1))
            _ = stream.makeAsyncIterator()
            return source
        }()
        #expect(ended.withLockedValue { $0 } == 1)
        #expect(!source.yield(2))
        source.finish()
        #expect(ended.withLockedValue { $0 } == 1)
    }

    @Test("a finished stream gives what waits, then ends; a stream's producer is cancelled when its consumer stops")
    func streamFinishAndProducer() async {
        let (stream, source) = EventStream<Int>.makeStream(buffer: NewestBuffer(limit: 8))
        source.yield(1)
        source.yield(2)
        source.finish()
        #expect(!source.yield(3))
        var got: [Int] = []
        for await n in stream { got.append(n) }
        #expect(got == [1, 2])

        // A producer that would run forever: reading two and stopping cancels it.
        let cancelled = Locked(false)
        let firstTwo = await { () async -> [Int] in
            let endless = EventStream<Int>(buffer: NewestBuffer(limit: 8)) { source in
                var n = 0
                while !Task.isCancelled {
                    n += 1
                    if !source.yield(n) { break }
                    await Task.yield()
                }
                cancelled.withLockedValue { $0 = true }
            }
            var firstTwo: [Int] = []
            for await n in endless {
                firstTwo.append(n)
                if firstTwo.count == 2 { break }
            }
            return firstTwo
        }()
        #expect(firstTwo.count == 2)
        // The producer sees the end at its next yield at the latest; wait for it without sleeping.
        while !cancelled.withLockedValue({ $0 }) { await Task.yield() }
        #expect(cancelled.withLockedValue { $0 })
    }

    // MARK: The engine's query streams (MulticastDNS), and any batch stream

    func record(_ n: Int) -> ResourceRecord {
        ResourceRecord(name: "_openagents._tcp.local.", data: .ptr(try! DomainName(parsing: "Box \(n)._openagents._tcp.local.")), ttl: 4500)
    }

    @Test("the engine's query group: a reader that falls behind reads one batch, the newest event per record and interface; a record that came and went reads as gone, never lost")
    func queryBatches() async {
        let (stream, source) = EventStream<[QueryEvent]>.makeStream(buffer: QueryBatchBuffer())
        // A fast link: 100 records, each announced and withdrawn five times and announced again
        // on one interface; record 0 also seen on a second, record 7 withdrawn at last; 1,100
        // batches of one event, then one of two.
        let other = NetworkInterface(index: 3, name: "lan2")
        for round in 0...10 {
            for n in 0..<100 {
                let event: QueryEvent = round % 2 == 1 ? .removed(record(n), lan) : .added(record(n), lan)
                #expect(source.yield([event]))
            }
        }
        #expect(source.yield([.added(record(0), other), .removed(record(7), lan)]))
        #expect(source.waiting == 101, "one per record and interface")
        source.finish()
        var batches: [[QueryEvent]] = []
        for await batch in stream { batches.append(batch) }
        #expect(batches.count == 1)
        let events = batches.first ?? []
        #expect(events.count == 101)
        #expect(events.first == .added(record(0), lan), "in the order the records first came")
        #expect(events.contains(.removed(record(7), lan)) && !events.contains(.added(record(7), lan)))
        #expect(events.contains(.added(record(0), other)))
    }

    @Test("the engine's single query: the same policy, one event per record and interface")
    func queryEvents() {
        var buffer = QueryEventBuffer()
        for _ in 0..<50 {
            buffer.push(.added(record(1), lan))
            buffer.push(.removed(record(1), lan))
        }
        #expect(buffer.count == 1 && buffer.merged == 99)
        #expect(buffer.pop() == .removed(record(1), lan))
        #expect(buffer.pop() == nil)
    }

    @Test("avahi's browse callbacks: 500 instances that come and go 40 times wait as their newest state; an add and a removal unread cancel out; a failure waits once")
    func daemonBrowseCallbacks() {
        var buffer = DNSSDBrowseEvent.buffer(\.self)
        func instance(_ n: Int) -> DNSSDInstance { DNSSDInstance(name: "Box \(n)", type: "_openagents._tcp.", domain: "local.", interfaceIndex: 2) }
        for round in 0..<40 {
            for n in 0..<500 {
                buffer.push(round.isMultiple(of: 2) ? .added(instance(n), moreComing: true) : .removed(instance(n), moreComing: true))
            }
        }
        // Twenty add-remove pairs each: nothing is left for a reader that never saw them.
        #expect(buffer.count == 0)
        buffer.push(.added(instance(1), moreComing: false))
        buffer.push(.failed(DNSSDError(code: -65537, operation: "DNSServiceBrowse")))
        buffer.push(.failed(DNSSDError(code: -65563, operation: "DNSServiceBrowse")))
        var events: [DNSSDBrowseEvent] = []
        while let event = buffer.pop() { events.append(event) }
        #expect(events == [.added(instance(1), moreComing: false), .failed(DNSSDError(code: -65563, operation: "DNSServiceBrowse"))])
        // A removal after the reader saw the add is delivered (it is never dropped).
        buffer.push(.removed(instance(1), moreComing: false))
        #expect(buffer.pop() == .removed(instance(1), moreComing: false))
    }

    @Test("avahi's record callbacks: one record seen 1,000 times with new TTLs waits once, the newest TTL; resolutions wait one per interface")
    func daemonRecordAndResolveCallbacks() {
        var records = DNSSDQueryEvent.buffer(\.identity)
        for ttl in 0..<1000 {
            records.push(.added(DNSSDRecord(name: "box.local.", type: 1, rdata: [198, 18, 1, 2], ttl: UInt32(ttl), interfaceIndex: 2), moreComing: false))
        }
        #expect(records.count == 1 && records.merged == 999)
        if case .added(let record, _)? = records.pop() { #expect(record.ttl == 999) } else { Issue.record("the record should wait") }
        var resolutions = DNSSDResolveEvent.buffer
        for port in 1...300 {
            for interface in [UInt32(2), 3] {
                resolutions.push(.resolved(DNSSDResolution(fullName: "Box._openagents._tcp.local.", host: "box.local.", port: UInt16(port), txt: [], interfaceIndex: interface)))
            }
        }
        #expect(resolutions.count == 2)
    }

    @Test("a source's observations for a driver that falls behind: 200 addresses added and removed 50 times, TXT changed 1,000 times, the link interrupted and restored, wait as the newest of each; ticks wait once")
    func observationsForASlowDriver() throws {
        var buffer = DiscoveryDriver.InputBuffer()
        let host = try DomainName(parsing: "box.local.")
        let instance = try DomainName(parsing: "Box._openagents._tcp.local.")
        for round in 0..<50 {
            let batch: [DiscoveryObservation] = (0..<200).map { n in
                let address = IPAddress.v4(IPv4Address(198, 18, 1, UInt8(n)))
                return round.isMultiple(of: 2) ? .addressAdded(host, lan, address) : .addressRemoved(host, lan, address)
            }
            buffer.push(.observed(batch))
            buffer.push(.tick)
        }
        for n in 0..<1000 { buffer.push(.observed([.txtAdded(instance, lan, try! TXTData(strings: [Array("n=\(n)".utf8)]))])) }
        buffer.push(.observed([.interrupted(DiscoveryError(.transportFailure, "the link went down")), .restored]))
        #expect(buffer.count <= 1000 + 2 + 1)
        var inputs: [DiscoveryDriver.Input] = []
        while let input = buffer.pop() { inputs.append(input) }
        // One batch (everything that waits, the newest of each thing), then one tick.
        #expect(inputs.count == 2)
        #expect(inputs.last == .tick)
        guard case .observed(let batch)? = inputs.first else { return }
        #expect(!batch.contains { if case .addressAdded = $0 { true } else if case .addressRemoved = $0 { true } else { false } })
        #expect(batch.last == .restored)
        #expect(batch.filter { if case .txtAdded = $0 { true } else { false } }.count == 1000)
    }
}
