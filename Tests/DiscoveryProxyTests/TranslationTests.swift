import DNSWire
import Testing

@testable import DiscoveryProxyCore

/// The zone's names and the link's (RFC 8766 §5.5): `.local` ⇄ the zone, in owner names and in
/// record data, and what never leaves the link.
@Suite("discovery proxy: names and records")
struct TranslationTests {
    static let zone = try! ProxyZone(
        "lan1.example.test.",
        nameServers: [.init(name: "proxy-lan1.example.test.", addresses: [.v4(IPv4Address("198.18.1.5")!)])])

    @Test("a name under the zone is the same name under local., and back; case is kept as written")
    func namesMove() {
        let zone = Self.zone
        #expect(zone.linkName(for: "Build Box._ipp._tcp.lan1.example.test.") == "Build Box._ipp._tcp.local.")
        #expect(zone.linkName(for: "printer.LAN1.Example.TEST.")?.description == "printer.local.")
        #expect(zone.zoneName(for: "Build Box._ipp._tcp.local.")?.description == "Build\\032Box._ipp._tcp.lan1.example.test.")
        #expect(zone.zoneName(for: "printer.LOCAL.") == "printer.lan1.example.test.")
    }

    @Test("the apex, names outside the zone, and names outside local. have no counterpart")
    func noCounterpart() {
        let zone = Self.zone
        #expect(zone.linkName(for: "lan1.example.test.") == nil)
        #expect(zone.linkName(for: "lan2.example.test.") == nil)
        #expect(zone.linkName(for: "xlan1.example.test.") == nil)
        #expect(zone.linkName(for: "example.test.") == nil)
        #expect(zone.zoneName(for: "printer.example.test.") == nil)
        #expect(zone.zoneName(for: "local.") == nil)
    }

    @Test("a link name that would pass 255 bytes once in the zone has no zone name (no trap)")
    func tooLong() throws {
        let label = [UInt8](repeating: 0x61, count: 60)
        var name: DomainName = "local."
        for _ in 0..<3 { name = try name.prepending(label) }
        let zone = try ProxyZone(
            try DomainName(labels: [String](repeating: "z", count: 30) + ["example", "test"]),
            nameServers: [.init(name: "ns.example.test.", addresses: [])])
        #expect(zone.zoneName(for: name) == nil)
    }

    @Test("a zone cannot be the root, under local., or without a name server; each refusal says what to give")
    func zoneRefusals() {
        #expect(throws: ProxyError.self) { try ProxyZone(.root, nameServers: [.init(name: "ns.example.test.", addresses: [])]) }
        do {
            _ = try ProxyZone("lan1.local.", nameServers: [.init(name: "ns.example.test.", addresses: [])])
            Issue.record("a zone under local. was accepted")
        } catch {
            #expect(error.code == .invalidInput)
            #expect(error.message.contains("under local."))
        }
        #expect(throws: ProxyError.self) { try ProxyZone("lan1.example.test.", nameServers: []) }
    }

    @Test("the SOA follows RFC 8766 §6.1: serial 0, refresh 7200, retry 3600, expire 86400, minimum 10")
    func soa() throws {
        let record = Self.zone.soaRecord
        guard case .soa(let soa) = record.data else {
            Issue.record("not an SOA: \(record)")
            return
        }
        #expect(record.name == "lan1.example.test.")
        #expect(soa.primary == "proxy-lan1.example.test.")
        #expect(soa.mailbox == "hostmaster.lan1.example.test.")
        #expect([soa.serial, soa.refresh, soa.retry, soa.expire, soa.minimum] == [0, 7200, 3600, 86_400, 10])
        #expect(record.ttl == 10)
    }

    static let translation = RecordTranslation(zone: zone)

    @Test("PTR: owner and target move into the zone, the TTL is capped, cache-flush is cleared")
    func ptr() {
        let link = ResourceRecord(name: "_ipp._tcp.local.", data: .ptr("Printer._ipp._tcp.local."), ttl: 4500, cacheFlush: true)
        #expect(Self.translation.translate(link, ttlCap: 10) == .record(ResourceRecord(name: "_ipp._tcp.lan1.example.test.", data: .ptr("Printer._ipp._tcp.lan1.example.test."), ttl: 10)))
        // Told of changes (DNS Push), a client gets the record's own TTL.
        #expect(Self.translation.translate(link, ttlCap: nil) == .record(ResourceRecord(name: "_ipp._tcp.lan1.example.test.", data: .ptr("Printer._ipp._tcp.lan1.example.test."), ttl: 4500)))
    }

    @Test("SRV: the target host moves into the zone; priority, weight and port stay")
    func srv() {
        let link = ResourceRecord(name: "Printer._ipp._tcp.local.", data: .srv(SRVData(priority: 1, weight: 2, port: 631, target: "printer.local.")), ttl: 120, cacheFlush: true)
        let expected = ResourceRecord(name: "Printer._ipp._tcp.lan1.example.test.", data: .srv(SRVData(priority: 1, weight: 2, port: 631, target: "printer.lan1.example.test.")), ttl: 5)
        #expect(Self.translation.translate(link, ttlCap: 5) == .record(expected))
    }

    @Test("a name in record data outside local. is a real name and stays as it is; a shorter TTL stays")
    func realNamesStay() {
        let link = ResourceRecord(name: "Printer._ipp._tcp.local.", data: .srv(SRVData(port: 631, target: "printer.example.com.")), ttl: 3)
        guard case .record(let out) = Self.translation.translate(link, ttlCap: 10), case .srv(let srv) = out.data else {
            Issue.record("not translated")
            return
        }
        #expect(srv.target == "printer.example.com.")
        #expect(out.ttl == 3)
    }

    @Test("TXT and routable addresses pass unchanged but for the owner name")
    func dataStays() throws {
        let txt = try TXTData(strings: [Array("rp=ipp/print".utf8)])
        #expect(Self.translation.translate(ResourceRecord(name: "P._ipp._tcp.local.", data: .txt(txt), ttl: 4500), ttlCap: 10)
            == .record(ResourceRecord(name: "P._ipp._tcp.lan1.example.test.", data: .txt(txt), ttl: 10)))
        #expect(Self.translation.translate(ResourceRecord(name: "printer.local.", data: .a(IPv4Address("198.18.1.9")!), ttl: 120), ttlCap: 10)
            == .record(ResourceRecord(name: "printer.lan1.example.test.", data: .a(IPv4Address("198.18.1.9")!), ttl: 10)))
        #expect(Self.translation.translate(ResourceRecord(name: "printer.local.", data: .aaaa(IPv6Address("fd6e:6272:1::9")!), ttl: 120), ttlCap: 10)
            == .record(ResourceRecord(name: "printer.lan1.example.test.", data: .aaaa(IPv6Address("fd6e:6272:1::9")!), ttl: 10)))
    }

    @Test("a record whose data names a .local name too long for the zone is left out, never given with a name outside the zone")
    func unmovableData() throws {
        let label = [UInt8](repeating: 0x61, count: 60)
        var long: DomainName = "local."
        for _ in 0..<4 { long = try long.prepending(label) }  // 251 bytes under local., 264 in the zone
        let zone = try ProxyZone("lan1.example.test.", nameServers: [.init(name: "ns.example.test.", addresses: [])])
        let translation = RecordTranslation(zone: zone)
        #expect(zone.zoneName(for: long) == nil)
        #expect(translation.translate(ResourceRecord(name: "_ipp._tcp.local.", data: .ptr(long), ttl: 4500), ttlCap: 10) == .suppressed(.outsideLink))
        #expect(translation.translate(ResourceRecord(name: "P._ipp._tcp.local.", data: .srv(SRVData(port: 1, target: long)), ttl: 120), ttlCap: 10) == .suppressed(.outsideLink))
    }

    @Test("link-local addresses (169.254/16, fe80::/10), NSEC, goodbyes and names outside local. are left out, each with its reason")
    func suppressed() {
        let t = Self.translation
        #expect(t.translate(ResourceRecord(name: "printer.local.", data: .a(IPv4Address("169.254.7.1")!), ttl: 120), ttlCap: 10) == .suppressed(.linkLocalAddress))
        #expect(t.translate(ResourceRecord(name: "printer.local.", data: .aaaa(IPv6Address("fe80::1")!), ttl: 120), ttlCap: 10) == .suppressed(.linkLocalAddress))
        #expect(t.translate(ResourceRecord(name: "printer.local.", data: .aaaa(IPv6Address("febf::1")!), ttl: 120), ttlCap: 10) == .suppressed(.linkLocalAddress))
        #expect(t.translate(ResourceRecord(name: "printer.local.", data: .aaaa(IPv6Address("fec0::1")!), ttl: 120), ttlCap: 10) != .suppressed(.linkLocalAddress))
        #expect(t.translate(ResourceRecord(name: "printer.local.", data: .nsec(NSECData(nextName: "printer.local.", types: [.a])), ttl: 120), ttlCap: 10) == .suppressed(.nsec))
        #expect(t.translate(ResourceRecord(name: "printer.local.", data: .a(IPv4Address("198.18.1.9")!), ttl: 0), ttlCap: 10) == .suppressed(.goodbye))
        #expect(t.translate(ResourceRecord(name: "printer.example.com.", data: .a(IPv4Address("198.18.1.9")!), ttl: 120), ttlCap: 10) == .suppressed(.outsideLink))
    }
}
