import PacketCapture
import Testing

@Suite("IP and UDP")
struct IPTests {
    @Test("IPv4 header errors say what and where")
    func ipv4Errors() throws {
        let udp = Packet.udp(Packet.payload(12))
        #expect(try readOne(Link.ethernet(Packet.ipv4(headerWords: 3, udp))).content.undecodableText
            == "IPv4 header length 3 words (< 5), at byte 14 of the frame")
        #expect(try readOne(Link.ethernet(Packet.ipv4(totalLength: 12, udp))).content.undecodableText
            == "IPv4 total length 12 is less than its header length 20, at byte 14 of the frame")
        #expect(try readOne(Link.ethernet(Packet.ipv4(totalLength: 200, udp))).content.undecodableText
            == "IPv4 total length 200 exceeds the 40 bytes present, at byte 14 of the frame")
        #expect(try readOne(Link.ethernet(Array(Packet.ipv4(udp).prefix(19)))).content.undecodableText
            == "IPv4 header cut short: 20 bytes needed, 19 present, at byte 14 of the frame")
        #expect(try readOne(Link.ethernet(Array(Packet.ipv4(headerWords: 15, udp).prefix(40)))).content.undecodableText
            == "IPv4 header with options cut short: 60 bytes needed, 40 present, at byte 14 of the frame")
        // Options are skipped; trailing Ethernet padding beyond the total length is ignored.
        let withOptions = Packet.ipv4(options: [0x94, 0x04, 0, 0], udp)
        #expect(try readDatagram(Link.ethernet(withOptions) + [0, 0, 0, 0, 0, 0]).payload == Packet.payload(12))
    }

    @Test("UDP length: shorter than the IP payload wins, longer is refused, below 8 is refused")
    func udpLength() throws {
        let short = Packet.ipv4(Packet.udp(Packet.payload(12), length: 12) + [9, 9, 9])
        #expect(try readDatagram(Link.ethernet(short)).payload == Array(Packet.payload(12).prefix(4)))
        let long = Packet.ipv4(Packet.udp(Packet.payload(12), length: 100))
        #expect(try readOne(Link.ethernet(long)).content.undecodableText == "UDP length 100 exceeds the 20 bytes present, at byte 34 of the frame")
        let tiny = Packet.ipv4(Packet.udp([], length: 7))
        #expect(try readOne(Link.ethernet(tiny)).content.undecodableText == "UDP length 7 (< 8), at byte 34 of the frame")
        let header = Packet.ipv4([0x14, 0xE9, 0x14])
        #expect(try readOne(Link.ethernet(header)).content.undecodableText == "UDP header cut short: 8 bytes needed, 3 present, at byte 34 of the frame")
        let empty = try readDatagram(Link.ethernet(Packet.ipv4(Packet.udp([]))))
        #expect(empty.payload.isEmpty)
        let jumbo = Packet.ipv6(Packet.udp(Packet.payload(4), length: 0))
        #expect(try readOne(jumbo, linkType: 101).content.undecodableText == "UDP length 0 (a jumbogram) is not supported, at byte 40 of the frame")
    }

    @Test("what is not UDP is named in a few words")
    func otherProtocols() throws {
        let tcp = Packet.ipv4(destination: [198, 18, 1, 2], protocolNumber: 6, be16(9099) + be16(443) + [UInt8](repeating: 0, count: 16))
        #expect(try readOne(tcp, linkType: 101).content.otherText == "TCP 198.18.1.1:9099 → 198.18.1.2:443")
        let tcp6 = Packet.ipv6(next: 6, be16(1) + be16(2) + [UInt8](repeating: 0, count: 16))
        #expect(try readOne(tcp6, linkType: 101).content.otherText == "TCP [fe80::1]:1 → [ff02::fb]:2")
        #expect(try readOne(Packet.ipv4(protocolNumber: 1, [8, 0, 0, 0]), linkType: 101).content.otherText == "ICMP echo request")
        #expect(try readOne(Packet.ipv4(protocolNumber: 2, [0x22, 0]), linkType: 101).content.otherText == "IGMP")
        #expect(try readOne(Packet.ipv4(protocolNumber: 253, []), linkType: 101).content.otherText == "IP protocol 253")
        #expect(try readOne(Packet.ipv6(next: 58, [135, 0, 0, 0]), linkType: 101).content.otherText == "ICMPv6 neighbor solicitation")
    }

    @Test("IPv6 extension headers are walked to UDP; ESP, no-next-header and jumbograms are not")
    func ipv6ExtensionHeaders() throws {
        let udp = Packet.udp(Packet.payload(9))
        // hop-by-hop → routing → destination options → AH → UDP.
        let ah: [UInt8] = [17, 1, 0, 0] + [0, 0, 0, 1] + [0, 0, 0, 1]  // (1 + 2) * 4 = 12 bytes
        let packet = Packet.ipv6(next: 0,
            Packet.extensionHeader(next: 43,
                Packet.extensionHeader(next: 60,
                    Packet.extensionHeader(next: 51, units: 1, ah + udp))))
        #expect(try readDatagram(packet, linkType: 101).payload == Packet.payload(9))

        #expect(try readOne(Packet.ipv6(next: 50, [0, 0, 1, 0, 0, 0, 0, 1]), linkType: 101).content.otherText == "IPv6 ESP")
        #expect(try readOne(Packet.ipv6(next: 59, []), linkType: 101).content.otherText == "IPv6, no next header")
        let atomic = Packet.ipv6(next: 44, Packet.fragmentHeader(next: 17, offset: 0, more: false, identification: 9, udp))
        let datagram = try readDatagram(atomic, linkType: 101)
        #expect(datagram.payload == Packet.payload(9))
        #expect(datagram.fragmentFrames.isEmpty)

        // Payload length 0 with a Jumbo Payload option (type 0xC2) in hop-by-hop.
        let jumbo = Packet.ipv6(next: 0, payloadLength: 0, [17, 0, 0xC2, 4, 0, 1, 0, 0] + udp)
        #expect(try readOne(jumbo, linkType: 101).content.undecodableText
            == "IPv6 jumbogram (payload length 0 with a Jumbo Payload option) is not supported, at byte 0 of the frame")

        let overrun = Packet.ipv6(next: 60, [17, 4, 0, 0, 0, 0, 0, 0] + udp)  // claims 40 bytes, 25 follow
        #expect(try readOne(overrun, linkType: 101).content.undecodableText
            == "IPv6 destination options header cut short: 40 bytes needed, 25 present, at byte 40 of the frame")
        let long = Packet.ipv6(payloadLength: 500, udp)
        #expect(try readOne(long, linkType: 101).content.undecodableText == "IPv6 payload length 500 exceeds the 17 bytes present, at byte 0 of the frame")
        #expect(try readOne(Array(Packet.ipv6(udp).prefix(39)), linkType: 101).content.undecodableText
            == "IPv6 header cut short: 40 bytes needed, 39 present, at byte 0 of the frame")
    }

    @Test("endpoint text: dotted quad, RFC 5952 IPv6 in brackets")
    func endpointText() throws {
        func text(_ groups: [Int], port: UInt16 = 5353) throws -> String {
            let bytes = groups.flatMap { be16($0) }
            return try #require(IPEndpoint(address: bytes, port: port)).description
        }
        #expect(try text([0xFE80, 0, 0, 0, 0, 0, 0, 1]) == "[fe80::1]:5353")
        #expect(try text([0x2001, 0xDB8, 0, 0, 1, 0, 0, 1]) == "[2001:db8::1:0:0:1]:5353")
        #expect(try text([0x2001, 0xDB8, 0, 1, 1, 1, 1, 1]) == "[2001:db8:0:1:1:1:1:1]:5353")
        #expect(try text([1, 0, 0, 2, 0, 0, 0, 3]) == "[1:0:0:2::3]:5353")
        #expect(try text([1, 0, 0, 2, 3, 0, 0, 4]) == "[1::2:3:0:0:4]:5353")
        #expect(try text([0, 0, 0, 0, 0, 0, 0, 0], port: 0) == "[::]:0")
        #expect(try text([0, 0, 0, 0, 0, 0, 0, 1]) == "[::1]:5353")
        #expect(try text([1, 0, 0, 0, 0, 0, 0, 0]) == "[1::]:5353")
        #expect(try text([0, 0, 0, 0, 0, 0xFFFF, 0xC000, 0x0201]) == "[::ffff:c000:201]:5353")
        #expect(try text([0xABCD, 0xEF01, 0x2345, 0x6789, 0xABCD, 0xEF01, 0x2345, 0x6789], port: 65535)
            == "[abcd:ef01:2345:6789:abcd:ef01:2345:6789]:65535")
        let v4 = try #require(IPEndpoint(address: [255, 0, 10, 1], port: 80))
        #expect(v4.description == "255.0.10.1:80")
        #expect(v4.addressDescription == "255.0.10.1")
        #expect(v4.address == [255, 0, 10, 1])
        let v6Bytes: [UInt8] = [0x20, 0x01, 0x0D, 0xB8] + [UInt8](repeating: 0, count: 11) + [7]
        #expect(IPEndpoint(address: v6Bytes, port: 1)?.address == v6Bytes)
        #expect(IPEndpoint(address: [1, 2, 3], port: 1) == nil)
    }
}
