import DNSWire
import Testing

@testable import SystemDNSSD

@testable import DiscoveryProxy

/// What the host's daemon hands over (dns_sd records: a type, uncompressed RDATA, a TTL that
/// avahi always reports as 0) becomes a record the proxy can translate.
@Suite("discovery proxy: records from the system daemon")
struct LinkQuerierTests {
    static let question = LinkQuestion(name: "_ipp._tcp.local.", type: .ptr)

    /// A name in uncompressed wire form, as dns_sd hands it over.
    static func wire(_ name: DomainName) -> [UInt8] {
        name.labels.flatMap { [UInt8($0.count)] + $0 } + [0]
    }

    @Test("a PTR's uncompressed name is read through the codec; avahi's TTL of 0 becomes RFC 6762's default, 4500 s, and 120 s for host records")
    func daemonRecords() throws {
        let target: DomainName = "Zero Box._ipp._tcp.local."
        let ptr = DNSSDRecord(name: "_ipp._tcp.local", type: 12, rdata: Self.wire(target), ttl: 0, interfaceIndex: 2)
        #expect(SystemLinkQuerier.record(ptr, question: Self.question) == ResourceRecord(name: "_ipp._tcp.local.", data: .ptr(target), ttl: 4500))
        let address = DNSSDRecord(name: "zero.local", type: 1, rdata: [198, 18, 1, 3], ttl: 0, interfaceIndex: 2)
        let host = LinkQuestion(name: "zero.local.", type: .a)
        #expect(SystemLinkQuerier.record(address, question: host) == ResourceRecord(name: "zero.local.", data: .a(IPv4Address(198, 18, 1, 3)), ttl: 120))
        // A daemon that does report TTLs keeps them.
        let timed = DNSSDRecord(name: "zero.local", type: 1, rdata: [198, 18, 1, 3], ttl: 77, interfaceIndex: 2)
        #expect(SystemLinkQuerier.record(timed, question: host)?.ttl == 77)
    }

    @Test("data that is not what its type says is dropped, not trusted")
    func malformed() {
        let short = DNSSDRecord(name: "zero.local", type: 1, rdata: [198, 18, 1], ttl: 0, interfaceIndex: 2)
        #expect(SystemLinkQuerier.record(short, question: LinkQuestion(name: "zero.local.", type: .a)) == nil)
        // A compression pointer to itself (the data sits at offset 23 of the message it is read in).
        let loop = DNSSDRecord(name: "_ipp._tcp.local", type: 12, rdata: [0xC0, 23], ttl: 0, interfaceIndex: 2)
        #expect(SystemLinkQuerier.record(loop, question: Self.question) == nil)
        let huge = DNSSDRecord(name: "x.local", type: 16, rdata: [UInt8](repeating: 1, count: 70_000), ttl: 0, interfaceIndex: 2)
        #expect(SystemLinkQuerier.record(huge, question: LinkQuestion(name: "x.local.", type: .txt)) == nil)
    }
}
