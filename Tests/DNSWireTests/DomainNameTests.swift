import DNSWire
import Testing

@Suite("Domain names")
struct DomainNameTests {
    @Test("presentation format round-trips dns-sd escapes")
    func presentationEscapes() throws {
        let name = try DomainName(parsing: #"Build\032Box._openagents._tcp.local."#)
        #expect(name.labels.first == Array("Build Box".utf8))
        #expect(name.labelCount == 4)
        #expect(name.description == #"Build\032Box._openagents._tcp.local."#)

        let dotted = try DomainName(labels: ["a.b\\c", "local"])
        #expect(dotted.description == #"a\.b\\c.local."#)
        #expect(try DomainName(parsing: dotted.description) == dotted)
        #expect(try DomainName(parsing: #"a\.b\\c.local"#).labels == dotted.labels)
    }

    @Test("UTF-8 labels print as they are; bytes that are not UTF-8 print as \\DDD")
    func utf8AndBinaryLabels() throws {
        let name = try DomainName(labels: ["Café Ünïcode ☕", "local"])
        #expect(name.description == #"Café\032Ünïcode\032☕.local."#)
        #expect(try DomainName(parsing: name.description) == name)

        let binary = try DomainName(labels: [[0xFF, 0x41, 0x00, 0x7F]])
        #expect(binary.description == #"\255A\000\127."#)
        #expect(try DomainName(parsing: binary.description).labels == binary.labels)
    }

    @Test("root and trailing dots")
    func root() throws {
        #expect(try DomainName(parsing: ".") == .root)
        #expect(try DomainName(parsing: "") == .root)
        #expect(DomainName.root.description == ".")
        #expect(try DomainName(parsing: "local") == DomainName(parsing: "local."))
    }

    @Test("comparison and hashing ignore ASCII case only")
    func caseInsensitivity() throws {
        let lower: DomainName = "_http._tcp.local."
        let upper: DomainName = "_HTTP._TCP.Local."
        #expect(lower == upper)
        #expect(Set([lower, upper]).count == 1)
        // Longer names too (hashed eight bytes at a time), and names that differ in one byte.
        let long: DomainName = "Some-Long-Instance-Name._openagents._tcp.local."
        let longLower: DomainName = "some-long-instance-name._OPENAGENTS._tcp.LOCAL."
        #expect(long == longLower && long.hashValue == longLower.hashValue)
        #expect(long != ("some-long-instance-namf._openagents._tcp.local." as DomainName))
        #expect(Set([long, longLower, "x.local."]).count == 2)
        // Non-ASCII letters are compared as bytes.
        #expect(try DomainName(labels: ["É"]) != DomainName(labels: ["é"]))
    }

    @Test("names sort label by label, case folded, a shorter label first; equal names in no order")
    func ordering() throws {
        let names: [DomainName] = ["b.local.", "A.local.", "ab.local.", "a.b.local.", "a.local.x."]
        let sorted = names.sorted { $0.precedes($1) }
        #expect(sorted.map(\.description) == ["a.b.local.", "A.local.", "a.local.x.", "ab.local.", "b.local."])
        let upper: DomainName = "A.LOCAL."
        #expect(!upper.precedes("a.local.") && !("a.local." as DomainName).precedes(upper))
        #expect(DomainName.root.precedes("a.") && !("a." as DomainName).precedes(.root))
    }

    @Test(
        "malformed presentation names are refused with a reason",
        arguments: ["a..b", ".a", #"a\"#, #"a\25"#, #"a\256"#, String(repeating: "x", count: 64) + ".local"])
    func malformed(text: String) {
        #expect(throws: DNSWireError.self) { try DomainName(parsing: text) }
    }

    @Test("limits: 63-byte labels and 255-byte names")
    func limits() throws {
        let label63 = String(repeating: "a", count: 63)
        #expect(throws: Never.self) { try DomainName(labels: [label63]) }
        let error = #expect(throws: DNSWireError.self) {
            try DomainName(labels: [label63 + "a"])
        }
        #expect(error?.code == .labelTooLong)
        // 4 labels of 63 bytes: 4 * 64 + 1 = 257 bytes on the wire.
        let tooLong = #expect(throws: DNSWireError.self) {
            try DomainName(labels: Array(repeating: label63, count: 4))
        }
        #expect(tooLong?.code == .nameTooLong)
        // 3 * 64 + 62 + 1 = 255 bytes exactly.
        let longest = try DomainName(labels: Array(repeating: label63, count: 3) + [String(repeating: "b", count: 61)])
        #expect(longest.wireLength == 255)
    }

    @Test("parent, prepending and suffix checks walk label boundaries")
    func structure() throws {
        let name: DomainName = "Box._openagents._tcp.local."
        #expect(name.parent == "_openagents._tcp.local.")
        #expect(name.hasSuffix("local."))
        #expect(name.hasSuffix("_TCP.local."))
        #expect(!name.hasSuffix("cal."))
        #expect(try name.parent.prepending(Array("Box".utf8)) == name)
        #expect(try DomainName(parsing: "Box").appending("_openagents._tcp.local.") == name)
    }
}

@Suite("IP addresses")
struct IPAddressTests {
    @Test("IPv4 text")
    func ipv4() {
        #expect(IPv4Address("198.18.1.2")?.bytes == [198, 18, 1, 2])
        #expect(IPv4Address(198, 18, 1, 2).description == "198.18.1.2")
        #expect(IPv4Address("169.254.9.9")?.isLinkLocal == true)
        for bad in ["1.2.3", "1.2.3.256", "1.2.3.4.5", "a.b.c.d", "", "1..2.3"] {
            #expect(IPv4Address(bad) == nil, "\(bad)")
        }
    }

    @Test("IPv6 text follows RFC 5952", arguments: [
        ("fe80::1", "fe80::1"),
        ("FD6E:6272:0001:0000:0000:0000:0000:0002", "fd6e:6272:1::2"),
        ("2001:db8:0:0:1:0:0:1", "2001:db8::1:0:0:1"),
        ("::", "::"),
        ("::1", "::1"),
        ("1::", "1::"),
        ("2001:db8:1:2:3:4:5:6", "2001:db8:1:2:3:4:5:6"),
        ("::ffff:192.0.2.1", "::ffff:c000:201"),
        ("1:0:2:3:4:5:6:7", "1:0:2:3:4:5:6:7"),
    ])
    func ipv6(input: String, canonical: String) throws {
        let address = try #require(IPv6Address(input))
        #expect(address.description == canonical)
        #expect(IPv6Address(canonical) == address)
        #expect(IPv6Address(bytes: address.bytes) == address)
    }

    @Test("invalid IPv6 text is refused", arguments: [
        "", ":", "1:2", "1::2::3", "12345::", "1:2:3:4:5:6:7:8:9", "g::", "fe80::1%eth0", "1:2:3:4:5:6:7::8",
    ])
    func badIPv6(input: String) {
        #expect(IPv6Address(input) == nil)
    }

    @Test("addresses from bytes: 4 or 16 of them; only IPv6 link-local ones take the interface as scope")
    func addressFromBytes() throws {
        #expect(IPAddress(bytes: [198, 18, 1, 2], linkScope: 3) == .v4(IPv4Address(198, 18, 1, 2)))
        let linkLocal = try #require(IPv6Address("fe80::1"))
        #expect(IPAddress(bytes: linkLocal.bytes, linkScope: 3) == .v6(linkLocal, scope: 3))
        let routable = try #require(IPv6Address("fd6e:6272:1::2"))
        #expect(IPAddress(bytes: routable.bytes, linkScope: 3) == .v6(routable, scope: nil))
        for count in [0, 3, 5, 15, 17] { #expect(IPAddress(bytes: [UInt8](repeating: 1, count: count), linkScope: nil) == nil) }
    }

    @Test("link-local detection")
    func linkLocal() {
        #expect(IPv6Address("fe80::1")?.isLinkLocal == true)
        #expect(IPv6Address("febf::1")?.isLinkLocal == true)
        #expect(IPv6Address("fec0::1")?.isLinkLocal == false)
    }

    @Test("wire form from a daemon: exactly one uncompressed name, or an error")
    func wireForm() throws {
        let name = try DomainName(wire: [4, 95, 97, 98, 99, 4, 95, 116, 99, 112, 5, 108, 111, 99, 97, 108, 0])
        #expect(name == "_abc._tcp.local.")
        #expect(try DomainName(wire: [0]) == .root)
        for bad: [UInt8] in [[], [3, 97, 98], [3, 97, 98, 99], [3, 97, 98, 99, 0, 0], [0xC0, 0x0C], [1, 97, 0, 1]] {
            #expect(throws: DNSWireError.self) { try DomainName(wire: bad) }
        }
    }
}
