import DNSWire
import MulticastDNS
import Testing

@testable import NearbyDiscovery

/// How the embedded engine's cache events become observations for the state machine.
@Suite("embedded observations")
struct ObservationMappingTests {
    let lan1 = NetworkInterface(index: 2, name: "lan1")
    let typeName = try! DomainName(parsing: "_openagents._tcp.local.")
    let box = try! DomainName(parsing: "Box._openagents._tcp.local.")
    let host = try! DomainName(parsing: "buildbox.local.")

    func map(_ event: QueryEvent, browsing: DomainName? = nil) -> DiscoveryObservation? {
        EmbeddedObservationSource.observation(event, browsing: browsing ?? typeName)
    }

    @Test("PTR, SRV, TXT, A and AAAA records map to instances, locations, info and addresses, both ways")
    func mapping() throws {
        let ptr = ResourceRecord(name: typeName, data: .ptr(box), ttl: 4500)
        #expect(map(.added(ptr, lan1)) == .instanceAdded(box, lan1))
        #expect(map(.removed(ptr, lan1)) == .instanceRemoved(box, lan1))
        let srv = SRVData(port: 9099, target: host)
        #expect(map(.added(ResourceRecord(name: box, data: .srv(srv), ttl: 120), lan1)) == .srvAdded(box, lan1, srv))
        let txt = try TXTData(strings: [Array("v=1".utf8)])
        #expect(map(.removed(ResourceRecord(name: box, data: .txt(txt), ttl: 4500), lan1)) == .txtRemoved(box, lan1, txt))
        let v4 = IPv4Address(198, 18, 1, 3)
        #expect(map(.added(ResourceRecord(name: host, data: .a(v4), ttl: 120), lan1)) == .addressAdded(host, lan1, .v4(v4)))
    }

    @Test("a link-local IPv6 address carries the interface it was learned on; a routable one does not")
    func ipv6Scope() throws {
        let linkLocal = try #require(IPv6Address("fe80::1"))
        let routable = try #require(IPv6Address("fd6e:6272:1::3"))
        #expect(map(.added(ResourceRecord(name: host, data: .aaaa(linkLocal), ttl: 120), lan1))
            == .addressAdded(host, lan1, .v6(linkLocal, scope: 2)))
        #expect(map(.added(ResourceRecord(name: host, data: .aaaa(routable), ttl: 120), lan1))
            == .addressAdded(host, lan1, .v6(routable, scope: nil)))
    }

    @Test("a PTR of another name, or one naming no service instance, is no instance of the browsed type")
    func foreignPTRs() throws {
        let other = try DomainName(parsing: "_http._tcp.local.")
        #expect(map(.added(ResourceRecord(name: other, data: .ptr(box), ttl: 4500), lan1)) == nil)
        #expect(map(.added(ResourceRecord(name: typeName, data: .ptr(host), ttl: 4500), lan1)) == nil)
        // A resolve by name browses nothing: PTRs are ignored altogether.
        #expect(EmbeddedObservationSource.observation(.added(ResourceRecord(name: typeName, data: .ptr(box), ttl: 4500), lan1), browsing: nil) == nil)
        // Records a discovery has no use for are dropped.
        #expect(map(.added(ResourceRecord(name: host, data: .cname(box), ttl: 120), lan1)) == nil)
    }
}
