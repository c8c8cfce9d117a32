import PacketCapture
import Testing

@Suite("Link layers")
struct LinkLayerTests {
    static let udp4 = Packet.ipv4(Packet.udp(Packet.payload(12)))
    static let udp6 = Packet.ipv6(Packet.udp(Packet.payload(13)))

    @Test("Ethernet: IPv4 and IPv6 UDP, endpoints and hop limit")
    func ethernet() throws {
        let v4 = try readDatagram(Link.ethernet(Packet.ipv4(ttl: 1, Packet.udp(source: 40000, destination: 5353, Packet.payload(12)))))
        #expect(v4.source.description == "198.18.1.1:40000")
        #expect(v4.source.port == 40000)
        #expect(!v4.source.isIPv6)
        #expect(v4.destination.address == [224, 0, 0, 251])
        #expect(v4.hopLimit == 1)
        #expect(v4.vlanTags.isEmpty && v4.fragmentFrames.isEmpty)

        let v6 = try readDatagram(Link.ethernet(Self.udp6, type: 0x86DD))
        #expect(v6.source.description == "[fe80::1]:5353")
        #expect(v6.destination.description == "[ff02::fb]:5353")
        #expect(v6.destination.isIPv6)
        #expect(v6.payload == Packet.payload(13))
        #expect(v6.hopLimit == 255)

        let mismatch = try readOne(Link.ethernet(Self.udp6, type: 0x0800))
        #expect(mismatch.content.undecodableText == "the link layer announces IPv4 but the IP version is 6, at byte 14 of the frame")
    }

    @Test("stacked VLAN tags (802.1ad, 802.1Q, 0x9100) are collected outermost first")
    func vlanStack() throws {
        let datagram = try readDatagram(Link.ethernet(Self.udp4, vlans: [(0x88A8, 100), (0x8100, 200)]))
        #expect(datagram.vlanTags == [100, 200])
        let triple = try readDatagram(Link.ethernet(Self.udp6, type: 0x86DD, vlans: [(0x9100, 7), (0x88A8, 4095), (0x8100, 1)]))
        #expect(triple.vlanTags == [7, 4095, 1])
        let arp = try readOne(Link.ethernet([0, 1, 8, 0], type: 0x0806, vlans: [(0x8100, 5)]))
        #expect(arp.content.otherText == "ARP")
        let cut = try readOne(Array(Link.ethernet(Self.udp4, vlans: [(0x8100, 5)]).prefix(16)))
        #expect(cut.content.undecodableText == "VLAN tag cut short: 4 bytes needed, 2 present, at byte 14 of the frame")
    }

    @Test("802.3 length with LLC/SNAP follows the type; other LLC and ethertypes are named")
    func llcAndEthertypes() throws {
        let snap = try readDatagram(Link.ieee8023(Link.snap(0x0800) + Self.udp4, padding: 6))
        #expect(snap.payload == Packet.payload(12))
        #expect(try readOne(Link.ieee8023([0x42, 0x42, 0x03, 0, 0, 0])).content.otherText == "STP")
        #expect(try readOne(Link.ieee8023([0x06, 0x06, 0x03, 1])).content.otherText == "LLC, DSAP 0x06")
        #expect(try readOne(Link.ieee8023([0xAA, 0xAA, 0x03, 0x00, 0x00, 0x0C, 0x20, 0x00])).content.otherText == "CDP")
        #expect(try readOne(Link.ethernet([1, 2, 3], type: 0x88CC)).content.otherText == "LLDP")
        #expect(try readOne(Link.ethernet([1, 2, 3], type: 0x88B5)).content.otherText == "ethertype 0x88b5")
        #expect(try readOne(Link.ethernet([1, 2, 3], type: 0x0806)).content.otherText == "ARP")
        #expect(try readOne(Link.ethernet([], type: 0x0600 - 2)).content.otherText == "ethertype 0x05fe (neither a length nor a type)")
        #expect(try readOne(Array(Link.ethernet(Self.udp4).prefix(13))).content.undecodableText
            == "Ethernet header cut short: 14 bytes needed, 13 present, at byte 0 of the frame")
    }

    @Test("Linux cooked v1 (protocol at 14) and v2 (protocol at 0)")
    func linuxCooked() throws {
        #expect(try readDatagram(Link.linuxCooked(Self.udp4), linkType: 113).payload == Packet.payload(12))
        #expect(try readDatagram(Link.linuxCooked(Self.udp6, protocolType: 0x86DD), linkType: 113).payload == Packet.payload(13))
        #expect(try readDatagram(Link.linuxCooked2(Self.udp4), linkType: 276).payload == Packet.payload(12))
        #expect(try readDatagram(Link.linuxCooked2(Self.udp6, protocolType: 0x86DD), linkType: 276).payload == Packet.payload(13))
        let tagged = try readDatagram(Link.linuxCooked2(be16(0x2000 | 42) + be16(0x0800) + Self.udp4, protocolType: 0x8100), linkType: 276)
        #expect(tagged.vlanTags == [42])
        let llc = try readDatagram(Link.linuxCooked(Link.snap(0x0800) + Self.udp4, protocolType: 0x0004), linkType: 113)
        #expect(llc.payload == Packet.payload(12))
        #expect(try readOne(Link.linuxCooked([1, 2], protocolType: 0x0806), linkType: 113).content.otherText == "ARP")
        #expect(try readOne(Link.linuxCooked([1, 2], protocolType: 16, hardware: 824), linkType: 113).content.otherText == "netlink")
        #expect(try readOne(Array(Link.linuxCooked2(Self.udp4).prefix(19)), linkType: 276).content.undecodableText
            == "Linux cooked v2 header cut short: 20 bytes needed, 19 present, at byte 0 of the frame")
    }

    @Test("NULL: the family in either byte order (2, and 10/24/28/30 for IPv6); LOOP: big-endian only")
    func loopback() throws {
        for little in [true, false] {
            #expect(try readDatagram(Link.null(Self.udp4, family: 2, little: little), linkType: 0).payload == Packet.payload(12))
            for family: UInt32 in [10, 24, 28, 30] {
                #expect(try readDatagram(Link.null(Self.udp6, family: family, little: little), linkType: 0).payload == Packet.payload(13))
            }
        }
        #expect(try readOne(Link.null([1, 2, 3], family: 7, little: true), linkType: 0).content.otherText == "loopback, address family 7")
        #expect(try readDatagram(Link.null(Self.udp4, family: 2, little: false), linkType: 108).payload == Packet.payload(12))
        #expect(try readDatagram(Link.null(Self.udp6, family: 24, little: false), linkType: 108).source.isIPv6)
        #expect(try readOne(Link.null(Self.udp4, family: 2, little: true), linkType: 108).content.otherText
            == "loopback, address family 33554432")
    }

    @Test("raw IP: 101, 12 and 14 by the version nibble; 228 and 229 insist on their version")
    func rawIP() throws {
        for linkType: UInt32 in [101, 12, 14] {
            #expect(try readDatagram(Self.udp4, linkType: linkType).payload == Packet.payload(12))
            #expect(try readDatagram(Self.udp6, linkType: linkType).payload == Packet.payload(13))
        }
        #expect(try readDatagram(Self.udp4, linkType: 228).payload == Packet.payload(12))
        #expect(try readDatagram(Self.udp6, linkType: 229).payload == Packet.payload(13))
        #expect(try readOne(Self.udp6, linkType: 228).content.undecodableText
            == "the link layer announces IPv4 but the IP version is 6, at byte 0 of the frame")
        #expect(try readOne([0x50] + Array(Self.udp4.dropFirst()), linkType: 101).content.undecodableText
            == "IP version 5 (neither 4 nor 6), at byte 0 of the frame")
        #expect(try readOne([], linkType: 101).content.undecodableText?.hasPrefix("IP header cut short") == true)
    }

    @Test("802.11 data frames: plain, QoS, four addresses, QoS with HT control, padded header")
    func ieee80211Data() throws {
        let body = Link.snap(0x0800) + Self.udp4
        #expect(try readDatagram(Link.wifiData(body), linkType: 105).payload == Packet.payload(12))
        #expect(try readDatagram(Link.wifiData(body, subtype: 8), linkType: 105).payload == Packet.payload(12))
        #expect(try readDatagram(Link.wifiData(body, toDS: true, fromDS: true), linkType: 105).payload == Packet.payload(12))
        #expect(try readDatagram(Link.wifiData(body, subtype: 8, toDS: true, fromDS: true), linkType: 105).payload == Packet.payload(12))
        #expect(try readDatagram(Link.wifiData(body, subtype: 8, order: true), linkType: 105).payload == Packet.payload(12))
        let v6 = Link.wifiData(Link.snap(0x86DD) + Self.udp6, subtype: 8, fromDS: true)
        #expect(try readDatagram(v6, linkType: 105).payload == Packet.payload(13))
        // The order bit on a non-QoS frame adds nothing.
        #expect(try readDatagram(Link.wifiData(body, order: true), linkType: 105).payload == Packet.payload(12))
    }

    @Test("802.11 frames that are not IP: protected, null data, A-MSDU, management, control")
    func ieee80211Other() throws {
        let body = Link.snap(0x0800) + Self.udp4
        #expect(try readOne(Link.wifiData(body, protected: true), linkType: 105).content.otherText == "802.11 data, encrypted (protected bit)")
        #expect(try readOne(Link.wifiData([], subtype: 4), linkType: 105).content.otherText == "802.11 null data")
        #expect(try readOne(Link.wifiData([], subtype: 12), linkType: 105).content.otherText == "802.11 null data")
        #expect(try readOne(Link.wifiData(body, subtype: 8, amsdu: true), linkType: 105).content.otherText
            == "802.11 A-MSDU (aggregated frames are not decoded)")
        let beacon: [UInt8] = [0x80, 0x00] + [UInt8](repeating: 0, count: 40)
        #expect(try readOne(beacon, linkType: 105).content.otherText == "802.11 beacon")
        let probe: [UInt8] = [0x40, 0x00] + [UInt8](repeating: 0, count: 30)
        #expect(try readOne(probe, linkType: 105).content.otherText == "802.11 probe request")
        #expect(try readOne([0xD4, 0x00, 0, 0, 1, 2, 3, 4, 5, 6], linkType: 105).content.otherText == "802.11 ACK")
        #expect(try readOne([0x74, 0x00, 0, 0], linkType: 105).content.otherText == "802.11 control")
        #expect(try readOne(Link.wifiData([0xAA, 0xAA]), linkType: 105).content.otherText == "802.11 data without a SNAP header")
        #expect(try readOne(Array(Link.wifiData(body).prefix(20)), linkType: 105).content.undecodableText
            == "802.11 data header cut short: 24 bytes needed, 20 present, at byte 0 of the frame")
    }

    @Test("radiotap: TSFT then Flags; FCS stripped, bad FCS refused, header padding, chained presence words")
    func radiotap() throws {
        let data = Link.wifiData(Link.snap(0x0800) + Packet.ipv4(totalLength: 0, Packet.udp(Packet.payload(12))))
        let fcs: [UInt8] = [0xDE, 0xAD, 0xBE, 0xEF]
        // Without the FCS flag the 4 bytes stay and (IP total length 0) the UDP length bounds them.
        #expect(try readDatagram(Link.radiotap(data, flags: 0x00), linkType: 127).payload == Packet.payload(12))
        // With it, stripped: a UDP length that claimed them no longer fits.
        let greedy = Link.wifiData(Link.snap(0x0800) + Packet.ipv4(totalLength: 0, Packet.udp(Packet.payload(12), length: 24)))
        #expect(try readDatagram(Link.radiotap(greedy + fcs, flags: 0x00), linkType: 127).payload.count == 16)
        #expect(try readOne(Link.radiotap(greedy + fcs, flags: 0x10), linkType: 127).content.undecodableText?
            .hasPrefix("UDP length 24 exceeds the 20 bytes present") == true)
        #expect(try readDatagram(Link.radiotap(data + fcs, flags: 0x10, tsft: false), linkType: 127).payload == Packet.payload(12))
        #expect(try readOne(Link.radiotap(data + fcs, flags: 0x50), linkType: 127).content.undecodableText == "bad FCS (radiotap flags)")
        #expect(try readDatagram(Link.radiotap(data, flags: nil, chained: true), linkType: 127).payload == Packet.payload(12))
        #expect(try readDatagram(Link.radiotap(data, flags: 0x00, chained: true), linkType: 127).payload == Packet.payload(12))
        // Flag 0x20: a QoS header (26 bytes) is padded to 28 before the body; without the flag
        // the padding would be read as LLC.
        let padded = Link.wifiData(Link.snap(0x0800) + Self.udp4, subtype: 8, padTo4: true)
        #expect(try readDatagram(Link.radiotap(padded, flags: 0x20), linkType: 127).payload == Packet.payload(12))
        #expect(try readOne(Link.radiotap(padded, flags: 0x00), linkType: 127).content.datagram == nil)
        let beacon = Link.radiotap([0x80, 0x00] + [UInt8](repeating: 0, count: 30), flags: 0)
        #expect(try readOne(beacon, linkType: 127).content.otherText == "802.11 beacon")

        var badVersion = Link.radiotap(data, flags: 0)
        badVersion[0] = 1
        #expect(try readOne(badVersion, linkType: 127).content.undecodableText == "radiotap version 1 (only 0 is known), at byte 0 of the frame")
        var badLength = Link.radiotap(data, flags: 0)
        badLength[2] = 0xFF
        badLength[3] = 0x7F
        #expect(try readOne(badLength, linkType: 127).content.undecodableText?.hasPrefix("radiotap header cut short") == true)
    }
}
