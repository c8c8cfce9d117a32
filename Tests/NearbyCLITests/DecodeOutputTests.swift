import DNSWire
import PacketCapture
import Testing

@testable import nearby

@Suite("nearby decode output")
struct DecodeOutputTests {
    let announcement = Message(
        header: .response,
        answers: [
            ResourceRecord(name: "_openagents._tcp.local.", data: .ptr("Build\\032Box._openagents._tcp.local."), ttl: 4500),
            ResourceRecord(
                name: "Build\\032Box._openagents._tcp.local.",
                data: .txt(try! TXTData(strings: [Array("version=0.2.2".utf8), Array("tls".utf8), [], Array("tls".utf8), Array("bin=\u{7}".utf8)])),
                ttl: 0, cacheFlush: true),
        ])

    func shown(_ payload: [UInt8], frame: Int = 1, relative: Double? = nil, source: String = "", destination: String = "") -> Shown {
        Shown(
            frame: frame, time: relative.map { CaptureTime(seconds: 1_700_000_000 + Int64($0), nanoseconds: 5) }, relative: relative,
            source: source, destination: destination, vlan: [], fragments: [], payload: payload)
    }

    @Test("a frame earlier than the capture's first says so with a minus sign")
    func negativeTime() throws {
        let bytes = try announcement.encoded()
        #expect(text(try Message.decode(bytes), shown(bytes, frame: 2, relative: -1.5)).hasPrefix("frame 2  t=-1.500 s"))
    }

    func text(_ decoded: DecodedMessage, _ shown: Shown) -> String {
        var sink = OutputSink(collecting: true)
        PacketText.write(decoded, shown: shown, into: &sink)
        return sink.collected
    }

    @Test("text output names the frame and kind, aligns records and quotes TXT strings")
    func textOutput() throws {
        let bytes = try announcement.encoded()
        let output = text(try Message.decode(bytes), shown(bytes, frame: 3, relative: 1.5, source: "198.18.1.1:5353", destination: "224.0.0.251:5353"))
        let lines = output.split(separator: "\n").map(String.init)
        #expect(lines[0].hasPrefix("frame 3  t=1.500 s  198.18.1.1:5353 → 224.0.0.251:5353  response, authoritative"))
        #expect(lines[1].contains("PTR  4500") && lines[1].hasSuffix(#"Build\032Box._openagents._tcp.local."#))
        #expect(lines[2].contains("TXT  0 flush") && lines[2].hasSuffix(#""version=0.2.2" "tls" "" "tls" "bin=\007""#))
        #expect(lines[1].firstIndex(of: "P").map { lines[1].distance(from: lines[1].startIndex, to: $0) }
            == lines[2].firstIndex(of: "T").map { lines[2].distance(from: lines[2].startIndex, to: $0) }, "columns line up")
        #expect(lines.allSatisfy { !$0.hasSuffix(" ") })
    }

    @Test("a packet whose answers all have TTL 0 is a goodbye; queries count their known answers")
    func kinds() throws {
        var goodbye = announcement
        goodbye.answers = goodbye.answers.map { var record = $0; record.ttl = 0; return record }
        #expect(text(try Message.decode(try goodbye.encoded()), shown([])).contains("goodbye"))
        let query = Message(questions: [Question(name: "_openagents._tcp.local.", type: .ptr)], answers: [announcement.answers[0]])
        #expect(text(try Message.decode(try query.encoded()), shown([])).contains("query with 1 known answer "))
    }

    @Test("JSON carries frame, time, endpoints; names as shown and as labels with the instance, service and domain; TXT as strings and as key/value")
    func json() throws {
        let bytes = try announcement.encoded()
        let decoded = try Message.decode(bytes)
        let line = JSONText.object(PacketJSON.packet(decoded, shown: shown(bytes, frame: 7, relative: 2, source: "198.18.1.1:5353", destination: "224.0.0.251:5353"), file: "x.pcap"))
        #expect(line.hasPrefix(#"{"frame":7,"file":"x.pcap","time":1700000002.000000005,"timestamp":"2023-11-14T22:13:22.000000005Z","relative":2,"source":"198.18.1.1:5353","destination":"224.0.0.251:5353","size":"#), "\(line)")
        #expect(line.contains(#""name":"_openagents._tcp.local.","labels":["_openagents","_tcp","local"],"service":"_openagents._tcp","domain":"local","type":"PTR","class":"IN""#), "\(line)")
        #expect(line.contains(#""target":"Build\\032Box._openagents._tcp.local.","targetLabels":["Build Box","_openagents","_tcp","local"]"#), "\(line)")
        #expect(line.contains(#""labels":["Build Box","_openagents","_tcp","local"],"instance":"Build Box","service":"_openagents._tcp","domain":"local","type":"TXT""#), "\(line)")
        #expect(line.contains(#""strings":["version=0.2.2","tls","","tls","bin=\u0007"],"txt":{"version":"0.2.2","tls":true,"bin":"\u0007"}"#), "\(line)")
        #expect(txtJSON(DiscoveryInfo(wireStrings: [Array("k=".utf8) + [0xFF, 0xFE]])).isBase64(of: [0xFF, 0xFE]))
        #expect(Base64.encode(Array("Nearby!".utf8)) == "TmVhcmJ5IQ==")
    }

    @Test("OPT shows as EDNS: payload size, extended rcode, version, DO and each option, never as a class and TTL")
    func edns() throws {
        let owner: [UInt8] = [0, 4, 0, 8, 0, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77]
        let opt = ResourceRecord(name: DomainName.root, data: .opt(owner), ttl: 0x0100_8000, class: RecordClass(1440))
        let query = Message(questions: [Question(name: "_openagents._tcp.local.", type: .ptr)], additionals: [opt])
        let decoded = try Message.decode(try query.encoded())
        let line = JSONText.object(PacketJSON.packet(decoded, shown: shown([]), file: "q.bin"))
        #expect(line.contains(#""type":"OPT","payloadSize":1440,"extendedRcode":1,"version":0,"dnssecOK":true,"options":[{"code":4,"name":"Owner","data":"0011223344556677"}]"#), "\(line)")
        #expect(line.contains(#""edns":{"payloadSize":1440"#), "\(line)")
        #expect(!line.contains(#""ttl":16809984"#))
        let row = text(decoded, shown([])).split(separator: "\n").first { $0.contains("OPT") } ?? ""
        #expect(row.hasPrefix("  additional") && row.hasSuffix("OPT      payload 1440, version 0, DO, extended rcode 1, Owner 0011223344556677"), "\(row)")
    }

    @Test("names that are not service names get labels only; a subtype name gets its subtype")
    func nameViews() throws {
        let host = JSONText.object(PacketJSON.name("build-box.local."))
        #expect(host == #"{"name":"build-box.local.","labels":["build-box","local"]}"#)
        let subtype = JSONText.object(PacketJSON.name("_printer._sub._http._tcp.local."))
        #expect(subtype.contains(#""subtype":"_printer","service":"_http._tcp","domain":"local""#), "\(subtype)")
        // DNS names compare without regard to ASCII case.
        let shouted = JSONText.object(PacketJSON.name("Box._HTTP._TCP.local."))
        #expect(shouted.contains(#""instance":"Box","service":"_HTTP._TCP","domain":"local""#), "\(shouted)")
        #expect(isLabel(Array("_Tcp".utf8), "_tcp") && !isLabel(Array("_tc".utf8), "_tcp") && !isLabel(Array("_tcq".utf8), "_tcp"))
    }

    @Test("shown by default: port 5353 either side, and port 53 messages about services (DNS-SD in a DNS zone), not other DNS")
    func defaultSelection() throws {
        func datagram(_ sourcePort: UInt16, _ destinationPort: UInt16) throws -> UDPDatagram {
            UDPDatagram(
                source: try #require(IPEndpoint(address: [198, 18, 2, 6], port: sourcePort)),
                destination: try #require(IPEndpoint(address: [198, 18, 2, 53], port: destinationPort)), payload: [])
        }
        let both = try datagram(5353, 5353), toMDNS = try datagram(40000, 5353), fromMDNS = try datagram(5353, 40000), dns = try datagram(53, 40000)
        #expect(Decode.isMulticastDNS(both) && Decode.isMulticastDNS(toMDNS) && Decode.isMulticastDNS(fromMDNS) && !Decode.isMulticastDNS(dns))
        let browse = Message(questions: [Question(name: "_openagents._tcp.lab.example.test.", type: .ptr)])
        let address = Message(questions: [Question(name: "ns.lab.example.test.", type: .a)])
        let enumeration = Message(questions: [Question(name: "b._dns-sd._udp.lab.example.test.", type: .ptr)])
        let query = try datagram(40000, 53), other = try datagram(40000, 5300)
        #expect(Decode.isServiceDiscovery(query, browse) && Decode.isServiceDiscovery(dns, enumeration))
        #expect(!Decode.isServiceDiscovery(query, address) && !Decode.isServiceDiscovery(other, browse))
    }

    @Test("the summary says what was shown and what was not, and why")
    func summary() {
        #expect(Decode.summary(frames: 0, shown: 0, failed: 0, notShown: 0, notUDP: 0, fragments: 0, undecodable: 0, all: false)
            == "the capture holds no frames")
        #expect(Decode.summary(frames: 14, shown: 0, failed: 0, notShown: 0, notUDP: 14, fragments: 0, undecodable: 0, all: false)
            == "14 frames, no mDNS/DNS-SD packets, 14 frames not UDP")
        #expect(Decode.summary(frames: 50, shown: 30, failed: 1, notShown: 3, notUDP: 11, fragments: 4, undecodable: 2, all: false)
            == "50 frames, 30 mDNS/DNS-SD packets shown (1 did not decode), 3 other UDP datagrams not shown (--all shows them), 11 frames not UDP, 4 IP fragments reassembled, 2 frames that cannot be read")
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
