import DNSWire
import Testing

@testable import nearby

/// A pcap file with one Ethernet/IPv4/UDP frame carrying `payload`.
private func pcap(payload: [UInt8], source: [UInt8] = [198, 18, 1, 1], destination: [UInt8] = [224, 0, 0, 251]) -> [UInt8] {
    func le32(_ value: Int) -> [UInt8] { (0..<4).map { UInt8((value >> (8 * $0)) & 0xFF) } }
    let udpLength = 8 + payload.count
    let udp: [UInt8] = [0x14, 0xE9, 0x14, 0xE9, UInt8(udpLength >> 8), UInt8(udpLength & 0xFF), 0, 0] + payload
    let ipLength = 20 + udp.count
    let ip: [UInt8] = [0x45, 0, UInt8(ipLength >> 8), UInt8(ipLength & 0xFF), 0, 0, 0, 0, 255, 17, 0, 0] + source + destination
    let frame: [UInt8] = Array(repeating: 0xAA, count: 12) + [0x08, 0x00] + ip + udp
    let header: [UInt8] = [0xD4, 0xC3, 0xB2, 0xA1, 2, 0, 4, 0] + le32(0) + le32(0) + le32(65535) + le32(1)
    return header + le32(1_700_000_000) + le32(250_000) + le32(frame.count) + le32(frame.count) + frame
}

@Suite("nearby decode output")
struct DecodeOutputTests {
    let announcement = Message(
        header: .response,
        answers: [
            ResourceRecord(name: "_openagents._tcp.local.", data: .ptr("Build\\032Box._openagents._tcp.local."), ttl: 4500),
            ResourceRecord(
                name: "Build\\032Box._openagents._tcp.local.",
                data: .txt(try! DiscoveryInfo(["version=0.2.2", "tls", "bin=\u{7}"]).txt), ttl: 0, cacheFlush: true),
        ])

    @Test("pcap frames yield their UDP payloads with addresses")
    func pcapDatagrams() throws {
        let bytes = try announcement.encoded()
        let datagrams = try Pcap.datagrams(in: pcap(payload: bytes))
        #expect(datagrams.count == 1)
        #expect(datagrams.first?.payload == bytes)
        #expect(datagrams.first?.source == "198.18.1.1:5353")
        #expect(datagrams.first?.destination == "224.0.0.251:5353")
        #expect(Pcap.isPcap(pcap(payload: bytes)))
        #expect(!Pcap.isPcap(bytes))
        #expect(throws: PcapError.self) { try Pcap.datagrams(in: [0xD4, 0xC3, 0xB2, 0xA1, 0]) }
    }

    @Test("text output names the kind, aligns records and quotes TXT strings")
    func text() throws {
        let decoded = try Message.decode(try announcement.encoded())
        let text = PacketText.packet(decoded, datagram: CapturedDatagram(time: 1.5, source: "198.18.1.1:5353", destination: "224.0.0.251:5353", payload: try announcement.encoded()), number: 3)
        let lines = text.split(separator: "\n").map(String.init)
        #expect(lines[0].hasPrefix("packet 3  t=1.500 s  198.18.1.1:5353 → 224.0.0.251:5353  response, authoritative"))
        #expect(lines[1].contains("PTR  4500") && lines[1].hasSuffix(#"Build\032Box._openagents._tcp.local."#))
        #expect(lines[2].contains("TXT  0 flush") && lines[2].hasSuffix(#""version=0.2.2" "tls" "bin=\007""#))
        #expect(lines.allSatisfy { !$0.hasSuffix(" ") })
    }

    @Test("a packet whose answers all have TTL 0 is a goodbye; queries count their known answers")
    func kinds() throws {
        var goodbye = announcement
        goodbye.answers = goodbye.answers.map { var record = $0; record.ttl = 0; return record }
        let decoded = try Message.decode(try goodbye.encoded())
        #expect(PacketText.packet(decoded, datagram: CapturedDatagram(time: 0, source: "", destination: "", payload: []), number: 1).contains("goodbye"))
        let query = Message(questions: [Question(name: "_openagents._tcp.local.", type: .ptr)], answers: [announcement.answers[0]])
        let text = PacketText.packet(try Message.decode(try query.encoded()), datagram: CapturedDatagram(time: 0, source: "", destination: "", payload: []), number: 1)
        #expect(text.contains("query with 1 known answer "))
    }

    @Test("JSON output keeps its keys in order and shows TXT the CLI's way")
    func json() throws {
        let decoded = try Message.decode(try announcement.encoded())
        let line = JSONText.object(PacketJSON.packet(decoded, datagram: CapturedDatagram(time: 0, source: "", destination: "", payload: [1, 2]), number: 1, file: "x.bin"))
        #expect(line.hasPrefix(#"{"packet":1,"file":"x.bin","size":2,"id":0,"response":true"#))
        #expect(line.contains(#""txt":{"version":"0.2.2","tls":true,"bin":"\u0007"}"#))
        #expect(txtJSON(DiscoveryInfo(wireStrings: [Array("k=".utf8) + [0xFF, 0xFE]])).isBase64(of: [0xFF, 0xFE]))
        #expect(Base64.encode(Array("Nearby!".utf8)) == "TmVhcmJ5IQ==")
    }
}

extension OutputValue {
    fileprivate func isBase64(of bytes: [UInt8]) -> Bool {
        guard case .object(let members) = self, case .object(let inner)? = members.first?.1,
            case .string(let text)? = inner.first?.1
        else { return false }
        return inner.first?.0 == "base64" && text == Base64.encode(bytes)
    }
}
