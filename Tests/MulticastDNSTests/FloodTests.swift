import DNSWire
import Testing

@testable import MulticastDNSCore

/// A responder and a querier under a flood of queries: every group still gets its answers,
/// nobody else's known answers silence them, and a querier holding what the flood asks for
/// keeps up (RFC 6762 §6, §7.2, §10.5).
@Suite("engine under a flood")
struct FloodTests {
    static let flooder = SocketAddress(.v4(IPv4Address(198, 18, 1, 2)), port: 5353)
    static let ptrQuestion = Question(name: agentType.domainName, type: .ptr)

    @Test("under a flood of queries over IPv4, a dual-stack responder answers on both groups once a second: IPv6 is not starved (§6)")
    func bothFamiliesAnsweredUnderAFlood() throws {
        let lan = SimulatedLAN()
        let a = lan.addHost("alpha")
        let six = try #require(IPv6Address("fd6e:6272:1::1"))
        a.core.setInterfaces([a.interface: [.v4(a.address), .v6(six, scope: nil)]])
        _ = a.core.register(registration("Box"))
        lan.run(for: .seconds(40))
        let start = lan.now
        for _ in 0..<300 {  // one query every 10 ms for 3 s
            lan.inject(Message(questions: [Self.ptrQuestion]), to: a, from: Self.flooder)
            lan.run(for: .milliseconds(10))
        }
        let end = lan.now
        for family in [IPFamily.v4, .v6] {
            let times = lan.wire.filter {
                $0.from == "alpha" && $0.time >= start && $0.time < end && $0.destination == .multicast(family)
                    && $0.message.answers.contains { $0.type == .ptr && $0.name == agentType.domainName }
            }.map(\.time)
            // 20–120 ms after the first query, then once a second: three within the 3 s.
            #expect(times.count >= 3, "\(family): \(times.count) answers during the flood")
            for (earlier, later) in zip(times, times.dropFirst()) { #expect(later - earlier >= .seconds(1)) }
        }
    }

    @Test("known answers listed by another host do not strike the answer someone else is waiting for (§7.2)")
    func othersKnownAnswersStrikeNothing() throws {
        let lan = SimulatedLAN()
        let a = lan.addHost("alpha")
        _ = a.core.register(registration("Box"))
        lan.run(for: .seconds(40))
        let ptr = ResourceRecord(name: agentType.domainName, data: .ptr(instanceName("Box")), ttl: 4500)
        let asker = SocketAddress(.v4(IPv4Address(198, 18, 1, 50)), port: 5353)
        let start = lan.now
        // The asker's question: a shared record, answered after 20–120 ms...
        lan.inject(Message(questions: [Self.ptrQuestion]), to: a, from: asker)
        // ...while another host lists the answer as known: alone, as the rest of a TC query
        // would, and with a question of its own.
        lan.inject(Message(answers: [ptr]), to: a, from: Self.flooder)
        lan.inject(Message(questions: [Self.ptrQuestion], answers: [ptr]), to: a, from: Self.flooder)
        lan.run(for: .seconds(1))
        #expect(lan.sent(by: a, since: start).contains { $0.destination == .multicast(.v4) && $0.message.answers.contains(ptr) })
    }

    @Test("a querier holding the record a flood asks for keeps a few times for failure detection, not one per query (§10.5)")
    func floodedQuerierKeepsFewMarks() throws {
        let (lan, _, b) = SimulatedLAN.publishing("Box")
        #expect(!b.core.cachedRecords(name: agentType.domainName, type: .ptr).isEmpty)
        let start = lan.now
        for index in 0..<5_000 {  // 10,000 queries a second for half a second
            b.core.receive(
                ReceivedMessage(message: Message(questions: [Self.ptrQuestion]), source: Self.flooder, interface: b.interface, family: .v4),
                at: start + .microseconds(100 * index))
        }
        // One time per 100 ms at most: 5, where there were 5,000 (each copied with its list).
        #expect(b.core.cache.unansweredQueryMarks <= 6, "\(b.core.cache.unansweredQueryMarks) times held")
    }
}
