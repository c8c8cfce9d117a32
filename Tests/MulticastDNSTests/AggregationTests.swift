import DNSWire
import Testing

@testable import MulticastDNSCore

/// A host with many services: probes and announcements share packets, and a querier that
/// holds a unique answer does not ask for it (RFC 6762 §6, §7.1, §8.1).
@Suite("engine: many services in few packets")
struct AggregationTests {
    static let lan1 = NetworkInterface(index: 2, name: "lan1")

    static func probe(_ instance: String) -> OutgoingMessage {
        let name = instanceName(instance)
        let srv = ResourceRecord(name: name, data: .srv(SRVData(priority: 0, weight: 0, port: 9099, target: "alpha.local.")), ttl: 120)
        return OutgoingMessage(
            message: Message(questions: [Question(name: name, type: .any)], authorities: [srv]), destination: .multicast(.v4), interface: lan1)
    }

    static func announcement(_ instance: String, host: IPv4Address = IPv4Address(198, 18, 1, 1)) -> OutgoingMessage {
        let name = instanceName(instance)
        let srv = ResourceRecord(name: name, data: .srv(SRVData(priority: 0, weight: 0, port: 9099, target: "alpha.local.")), ttl: 120, cacheFlush: true)
        let ptr = ResourceRecord(name: agentType.domainName, data: .ptr(name), ttl: 4500)
        let address = ResourceRecord(name: "alpha.local.", data: .a(host), ttl: 120, cacheFlush: true)
        return OutgoingMessage(
            message: Message(header: .response, answers: [ptr, srv], additionals: [address]), destination: .multicast(.v4), interface: lan1)
    }

    @Test("300 probes go in a few packets under 1472 bytes, each name's question with its proposed records, nothing lost")
    func probesPacked() throws {
        let probes = (1...300).map { Self.probe("Service \($0)") }
        let packed = OutgoingMessage.packed(probes)
        #expect(packed.count < 30)
        for outgoing in packed {
            let bytes = try outgoing.message.encoded()
            #expect(bytes.count <= Message.defaultMaximumPacketSize)
            // Every question's proposal is in the same packet (the §8.2 tiebreak needs it).
            for question in outgoing.message.questions {
                #expect(outgoing.message.authorities.contains { $0.name == question.name })
            }
        }
        #expect(packed.flatMap(\.message.questions) == probes.flatMap(\.message.questions))
        #expect(packed.flatMap(\.message.authorities) == probes.flatMap(\.message.authorities))
    }

    @Test("announcements merge: each answer once, a host address once, an additional that is also an answer only as the answer")
    func responsesMerged() throws {
        var messages = (1...50).map { Self.announcement("Service \($0)") }
        // The host's own announcement, with its address as an answer.
        let address = ResourceRecord(name: "alpha.local.", data: .a(IPv4Address(198, 18, 1, 1)), ttl: 120, cacheFlush: true)
        messages.append(OutgoingMessage(message: Message(header: .response, answers: [address]), destination: .multicast(.v4), interface: Self.lan1))
        messages.append(Self.announcement("Service 1"))
        let packed = OutgoingMessage.packed(messages)
        try #require(packed.count == 1)
        let merged = packed[0].message
        #expect(merged.answers.count == 50 * 2 + 1)
        #expect(Set(merged.answers).count == merged.answers.count)
        #expect(merged.answers.contains(address))
        #expect(merged.additionals.isEmpty)
        // The encoder still splits it into packets of at most 1472 bytes, all of them responses.
        let packets = try merged.encodedPackets()
        #expect(packets.count > 1)
        for packet in packets {
            #expect(packet.count <= Message.defaultMaximumPacketSize)
            #expect(try Message(decoding: packet).header.isResponse)
        }
    }

    @Test("what must go alone goes alone: queries, unicast replies, legacy replies, truncated messages, other families and interfaces")
    func keptApart() {
        let query = OutgoingMessage(
            message: Message(questions: [Question(name: agentType.domainName, type: .ptr)]), destination: .multicast(.v4), interface: Self.lan1)
        var truncated = Self.probe("T")
        truncated.message.header.isTruncated = true
        var unicast = Self.announcement("U")
        unicast.destination = .unicast(SocketAddress(.v4(IPv4Address(198, 18, 1, 9)), port: 5353))
        var legacy = Self.announcement("L")
        legacy.message.header.id = 0x1234
        var v6 = Self.announcement("V6")
        v6.destination = .multicast(.v6)
        var other = Self.announcement("Other")
        other.interface = NetworkInterface(index: 3, name: "lan2")
        let messages = [query, query, truncated, Self.probe("P"), unicast, Self.announcement("A"), legacy, v6, other, Self.announcement("B")]
        let packed = OutgoingMessage.packed(messages)
        // A and B merge; everything else stays as it was, in order.
        #expect(packed.count == messages.count - 1)
        #expect(packed.filter { $0.message.header.isResponse && $0.destination == .multicast(.v4) && $0.interface == Self.lan1 && $0.message.header.id == 0 }
            .map(\.message.answers.count) == [4])
        #expect(packed.filter { !$0.message.header.isResponse }.count == 4)
    }

    @Test("a host publishing 200 services at once probes them together and announces them together, in a few packets each")
    func manyServicesOnTheWire() {
        let lan = SimulatedLAN()
        let a = lan.addHost("alpha")
        let b = lan.addHost("beta")
        _ = b.core.startQuery(name: agentType.domainName, type: .ptr)
        lan.run(for: .seconds(2))
        let start = lan.now
        for index in 1...200 { _ = a.core.register(registration("Service \(index)")) }
        lan.run(for: .seconds(4))
        #expect(a.registeredNames.count == 200)
        let sent = lan.sent(by: a, since: start)
        let probes = sent.filter(\.message.isProbe)
        let probeTimes = Set(lan.wire.filter { $0.from == "alpha" && $0.time >= start && $0.message.isProbe }.map(\.time))
        // Three rounds (the host name and the 200 services together), each a few packets.
        #expect(probeTimes.count == 3)
        #expect(probes.flatMap(\.message.questions).count == 3 * 201)
        let packets = probes.map { (try? $0.message.encodedPackets().count) ?? 0 }.reduce(0, +)
        #expect(packets <= 3 * 25, "\(packets) probe packets")
        // Two announcements, each one message (a few packets) with every service in it.
        let announcements = sent.filter { $0.message.header.isResponse && $0.message.answers.contains { $0.type == .srv } }
        #expect(announcements.count == 2)
        #expect(announcements.allSatisfy { $0.message.answers.filter { $0.type == .srv }.count == 200 })
        // The browser has every service, and the host's address from the same burst.
        #expect(b.core.cachedRecords(name: agentType.domainName, type: .ptr).count == 200)
        #expect(b.core.cachedRecords(name: "alpha.local.", type: .a).count == 1)
    }

    @Test("a querier holding a unique answer (cache-flush, more than half its TTL left) does not ask for it; shared and ANY questions are asked")
    func answeredQuestionsNotAsked() {
        let (lan, _, b) = SimulatedLAN.publishing("Box")
        let start = lan.now
        let skippedBefore = b.core.statistics.answeredQueriesSkipped
        _ = b.core.startQuery(name: instanceName("Box"), type: .srv)
        _ = b.core.startQuery(name: instanceName("Box"), type: .txt)
        lan.run(for: .seconds(8))
        let asked = lan.wire.filter { $0.from == "beta" && $0.time >= start && !$0.message.header.isResponse }.flatMap(\.message.questions)
        #expect(!asked.contains { $0.name == instanceName("Box") && ($0.type == .srv || $0.type == .txt) }, "\(asked)")
        #expect(b.core.statistics.answeredQueriesSkipped > skippedBefore)
        // The answers were reported from the cache all the same.
        #expect(b.events.contains { if case .recordAdded(_, let record, _) = $0 { record.type == .srv } else { false } })
        _ = b.core.startQuery(name: agentType.domainName, type: .ptr)
        _ = b.core.startQuery(name: instanceName("Box"), type: .any)
        lan.run(for: .milliseconds(10))
        let later = lan.wire.filter { $0.from == "beta" && $0.time >= start && !$0.message.header.isResponse }.flatMap(\.message.questions)
        #expect(later.contains { $0.name == agentType.domainName && $0.type == .ptr })
        #expect(later.contains { $0.name == instanceName("Box") && $0.type == .any })
    }

    @Test("the same question with nothing cached is asked as ever")
    func unansweredQuestionsAsked() {
        let lan = SimulatedLAN()
        lan.addHost("alpha")
        let b = lan.addHost("beta")
        lan.run(for: .seconds(1))
        _ = b.core.startQuery(name: instanceName("Nobody"), type: .srv)
        lan.run(for: .seconds(4))
        let asked = lan.wire.filter { $0.from == "beta" && !$0.message.header.isResponse }.flatMap(\.message.questions)
        #expect(asked.filter { $0.name == instanceName("Nobody") }.count == 3)  // at 0, 1 and 3 s
    }
}

extension AggregationTests {
    @Test("packets stay within a 1500-byte MTU: 1472 bytes of UDP payload over IPv4, 1452 over IPv6")
    func packetLimits() throws {
        var v6 = Self.probe("x")
        v6.destination = .multicast(.v6)
        #expect(v6.packetLimit == 1452)
        #expect(Self.probe("x").packetLimit == 1472)
        let probes = (1...300).map { index in
            var probe = Self.probe("Service \(index)")
            probe.destination = .multicast(.v6)
            return probe
        }
        for outgoing in OutgoingMessage.packed(probes) {
            #expect(try outgoing.message.encoded().count <= 1452)
        }
        var announcements = (1...100).map { Self.announcement("Service \($0)") }
        for index in announcements.indices { announcements[index].destination = .multicast(.v6) }
        let merged = try #require(OutgoingMessage.packed(announcements).first)
        for packet in try merged.message.encodedPackets(maximumPacketSize: merged.packetLimit) { #expect(packet.count <= 1452) }
    }
}
