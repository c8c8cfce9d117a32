import DNSWire
import MulticastDNSCore
import Testing

/// The engine answering for another device (what an advertising proxy does with an SRP
/// registration): the device's host name with the addresses given and its services pointing
/// at it, probed like our own names, never renamed: a rival on the link makes it give up.
@Suite("Responder: records of another device (advertising proxy)")
struct ProxiedRecordsTests {
    static let device = try! DomainName(parsing: "boxed-container.local.")
    static let deviceAddress = IPAddress.v4(IPv4Address(198, 18, 3, 7))

    @Test("a proxied host and its service are probed, then announced: SRV names the device, A is the device's address; a PTR answer carries both")
    func announced() throws {
        let lan = SimulatedLAN()
        let proxy = lan.addHost("proxy")
        lan.run(for: .seconds(2))
        let start = lan.now
        let host = proxy.core.registerProxiedHost(Self.device, addresses: [Self.deviceAddress])
        let service = proxy.core.registerProxied(registration("Boxed"), host: Self.device)
        lan.run(for: .seconds(5))
        #expect(proxy.registeredNames.contains(Self.device))
        #expect(proxy.registeredNames.contains(instanceName("Boxed")))
        #expect(proxy.core.name(of: host) == Self.device && proxy.core.name(of: service) == instanceName("Boxed"))
        let announced = lan.sent(by: proxy, since: start).filter { $0.message.header.isResponse }.flatMap(\.message.allRecords)
        #expect(announced.contains { $0.name == instanceName("Boxed") && $0.data == .srv(SRVData(port: 9099, target: Self.device)) })
        #expect(announced.contains { $0.name == Self.device && $0.data == .a(IPv4Address(198, 18, 3, 7)) })
        // The proxy's own host name is not what the service points at, and is not woken by it.
        #expect(!announced.contains { $0.type == .srv && $0.name == instanceName("Boxed") && $0.data != .srv(SRVData(port: 9099, target: Self.device)) })

        // A browse by a host that joins now (its cache empty, so no known answer hides the PTR)
        // gets the PTR with SRV, TXT and the device's address as additionals.
        let asker = lan.addHost("asker")
        let asked = lan.now
        let query = asker.core.startQuery(name: agentType.domainName, type: .ptr)
        lan.run(for: .seconds(1))
        let reply = try #require(lan.sent(by: proxy, since: asked).last { $0.message.header.isResponse }?.message)
        #expect(reply.answers.contains { $0.data == .ptr(instanceName("Boxed")) })
        #expect(reply.additionals.contains { $0.name == Self.device && $0.type == .a })
        #expect(asker.liveRecords(query).contains { $0.data == .ptr(instanceName("Boxed")) })
    }

    @Test("a proxied name already held on the link is given up, never renamed, and nothing is announced under it")
    func conflictGivesUp() throws {
        let lan = SimulatedLAN()
        let holder = lan.addHost("holder")
        let proxy = lan.addHost("proxy")
        let held = holder.core.register(registration("Boxed", port: 1))
        lan.run(for: .seconds(4))
        let start = lan.now
        let service = proxy.core.registerProxied(registration("Boxed", port: 2), host: Self.device)
        lan.run(for: .seconds(4))
        #expect(proxy.events.contains(.conflicted(service, name: instanceName("Boxed"))))
        #expect(!proxy.events.contains { if case .renamed = $0 { true } else { false } })
        #expect(proxy.core.name(of: service) == nil)
        let announced = lan.sent(by: proxy, since: start).filter { $0.message.header.isResponse }.flatMap(\.message.answers)
        #expect(!announced.contains { $0.name == instanceName("Boxed") || $0.name == instanceName("Boxed (2)") })
        // The holder kept its name.
        #expect(holder.core.name(of: held) == instanceName("Boxed"))
    }

    @Test("withdrawing a proxied service and host sends goodbyes (TTL 0) for their records at once")
    func goodbyes() throws {
        let lan = SimulatedLAN()
        let proxy = lan.addHost("proxy")
        let host = proxy.core.registerProxiedHost(Self.device, addresses: [Self.deviceAddress])
        let service = proxy.core.registerProxied(registration("Boxed"), host: Self.device)
        lan.run(for: .seconds(5))
        let start = lan.now
        proxy.core.unregister(service)
        proxy.core.unregister(host)
        lan.run(for: .milliseconds(1))
        let goodbyes = lan.sent(by: proxy, since: start).flatMap(\.message.answers).filter { $0.ttl == 0 }
        #expect(goodbyes.contains { $0.name == instanceName("Boxed") && $0.type == .srv })
        #expect(goodbyes.contains { $0.data == .ptr(instanceName("Boxed")) })
        #expect(goodbyes.contains { $0.name == Self.device && $0.type == .a })
    }
}
