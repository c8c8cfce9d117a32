import DNSWire
import Testing

/// A DNS-SD answer as a responder sends it: PTR, SRV, TXT, A, AAAA and NSEC records.
func sampleResponse(instance: String = "Build Box") throws -> Message {
    let type = try ServiceType(parsing: "_openagents._tcp")
    let name = try ServiceInstanceName(instance, type: type).domainName
    let host: DomainName = "buildbox.local."
    var info = DiscoveryInfo()
    try info.set("version", to: "0.2.2")
    try info.set("mode", to: "bridge")
    try info.setFlag("beta")
    try info.set("empty", to: "")
    return Message(
        header: .response,
        answers: [
            ResourceRecord(name: type.domainName, data: .ptr(name), ttl: 4500),
            ResourceRecord(
                name: name, data: .srv(SRVData(port: 9099, target: host)), ttl: 120, cacheFlush: true),
            ResourceRecord(name: name, data: .txt(info.txt), ttl: 4500, cacheFlush: true),
        ],
        additionals: [
            ResourceRecord(name: host, data: .a(IPv4Address(198, 18, 1, 2)), ttl: 120, cacheFlush: true),
            ResourceRecord(
                name: host, data: .aaaa(try #require(IPv6Address("fe80::1:2"))), ttl: 120, cacheFlush: true),
            ResourceRecord(
                name: name, data: .nsec(NSECData(nextName: name, types: [.txt, .srv])), ttl: 4500,
                cacheFlush: true),
            ResourceRecord(
                name: host, data: .nsec(NSECData(nextName: host, types: [.a, .aaaa])), ttl: 120,
                cacheFlush: true),
        ])
}

@Suite("Codec round trips")
struct CodecTests {
    @Test("a DNS-SD response encodes, compresses and decodes to the same value")
    func responseRoundTrip() throws {
        let message = try sampleResponse()
        let bytes = try message.encoded()
        let decoded = try Message.decode(bytes)
        #expect(decoded.skippedRecords.isEmpty)
        #expect(decoded.message == message)
        // Compression: the service type and host names are written once each.
        let uncompressed = message.allRecords.reduce(12) { total, record in
            total + record.name.wireLength + 10
        }
        #expect(bytes.count < uncompressed)
        #expect(bytes.count < 300)
    }

    @Test("header fields and flag bits")
    func headerBits() throws {
        var header = Header(id: 0x1234)
        header.isResponse = true
        header.isAuthoritative = true
        header.opcode = 5
        header.responseCode = 3
        header.recursionDesired = true
        #expect(header.flags == 0x8000 | 0x0400 | (5 << 11) | 3 | 0x0100)
        let message = Message(header: header)
        let decoded = try Message(decoding: try message.encoded())
        #expect(decoded.header == header)
        #expect(decoded.header.opcode == 5 && decoded.header.responseCode == 3)
        #expect(Header.response.isResponse && Header.response.isAuthoritative)

        // Clearing a bit leaves the others; a value too wide for its field is cut to the field.
        header.isAuthoritative = false
        header.isTruncated = true
        header.recursionAvailable = true
        header.opcode = 0x1F
        #expect(header.flags == 0x8000 | 0x0200 | 0x0080 | (0xF << 11) | 3 | 0x0100)
        header.responseCode = 0
        header.isResponse = false
        #expect(header.flags == 0x0200 | 0x0080 | (0xF << 11) | 0x0100)
        #expect(header.isTruncated && header.recursionAvailable && header.recursionDesired && !header.isResponse)
    }

    @Test("QU bit on questions and cache-flush bit on records survive the wire")
    func mdnsBits() throws {
        let message = Message(
            questions: [
                Question(name: "_openagents._tcp.local.", type: .ptr, unicastResponse: true),
                Question(name: "buildbox.local.", type: .any),
            ],
            answers: [
                ResourceRecord(name: "buildbox.local.", data: .a(IPv4Address(198, 18, 0, 1)), ttl: 120, cacheFlush: true)
            ])
        let bytes = try message.encoded()
        // Class field of the first question: 0x8001.
        #expect(Array(bytes[(12 + 24)..<(12 + 28)]) == [0x00, 0x0C, 0x80, 0x01])
        let decoded = try Message(decoding: bytes)
        #expect(decoded.questions[0].unicastResponse)
        #expect(!decoded.questions[1].unicastResponse)
        #expect(decoded.answers[0].cacheFlush)
        #expect(decoded.answers[0].class == .internet)
    }

    @Test("an empty TXT record is one zero byte and decodes as no strings")
    func emptyTXT() throws {
        let record = ResourceRecord(name: "a.local.", data: .txt(.empty), ttl: 4500)
        let bytes = try Message(header: .response, answers: [record]).encoded()
        #expect(Array(bytes.suffix(3)) == [0x00, 0x01, 0x00])  // RDLENGTH 1, one zero byte
        #expect(try Message(decoding: bytes).answers == [record])
    }

    @Test("unknown types, OPT and HINFO pass through")
    func passThrough() throws {
        let opt = ResourceRecord(name: .root, data: .opt([0, 4, 0, 2, 0xAB, 0xCD]), ttl: 0x0000_8000, class: RecordClass(1440))
        let bigOpt = ResourceRecord(name: .root, data: .opt([]), ttl: 0, class: RecordClass(0xFFFF))
        let unknown = ResourceRecord(name: "x.local.", data: .unknown(RecordType(65280), [1, 2, 3]), ttl: 7)
        let hinfo = ResourceRecord(
            name: "x.local.", data: .hinfo(HINFOData(cpu: Array("X86_64".utf8), os: Array("LINUX".utf8))), ttl: 120)
        let message = Message(header: .response, answers: [unknown, hinfo], additionals: [opt, bigOpt])
        let decoded = try Message(decoding: try message.encoded())
        #expect(decoded == message)
        #expect(decoded.additionals[1].class.rawValue == 0xFFFF)
        #expect(!decoded.additionals[1].cacheFlush)
        #expect(RecordType(65280).description == "TYPE65280")
    }

    @Test("NSEC bitmaps use windows and sort types")
    func nsecBitmap() throws {
        let data = NSECData(nextName: "a.local.", types: [.srv, .a, RecordType(300), .txt, .a])
        #expect(data.types == [.a, .txt, .srv, RecordType(300)])
        let record = ResourceRecord(name: "a.local.", data: .nsec(data), ttl: 120)
        let bytes = try Message(header: .response, answers: [record]).encoded()
        let decoded = try Message(decoding: bytes)
        #expect(decoded.answers == [record])
        // The restricted mDNS form for A + AAAA is window 0, 4 bytes: 0x40 0 0 0x08.
        let mdns = ResourceRecord(name: "h.local.", data: .nsec(NSECData(nextName: "h.local.", types: [.a, .aaaa])), ttl: 120)
        let wire = try Message(header: .response, answers: [mdns]).encoded()
        #expect(Array(wire.suffix(6)) == [0x00, 0x04, 0x40, 0x00, 0x00, 0x08])
    }

    @Test("names in SRV, PTR and NSEC data are compressed against earlier names")
    func rdataCompression() throws {
        let message = try sampleResponse()
        let bytes = try message.encoded()
        // "buildbox" appears once as a label, however many records name the host.
        let needle = Array("buildbox".utf8)
        let occurrences = (0...(bytes.count - needle.count)).filter { Array(bytes[$0..<($0 + needle.count)]) == needle }
        #expect(occurrences.count == 1)
    }

    @Test("a message too large for one packet is split; a query's packets carry TC but the last")
    func splitQuery() throws {
        let type: DomainName = "_openagents._tcp.local."
        let knownAnswers = try (0..<60).map { index in
            ResourceRecord(
                name: type,
                data: .ptr(try DomainName(labels: ["Instance number \(index) with a long name", "_openagents", "_tcp", "local"])),
                ttl: 4500)
        }
        let query = Message(questions: [Question(name: type, type: .ptr)], answers: knownAnswers)
        let packets = try query.encodedPackets(maximumPacketSize: 1472)
        #expect(packets.count > 1)
        var reassembled: [ResourceRecord] = []
        for (index, packet) in packets.enumerated() {
            #expect(packet.count <= 1472)
            let decoded = try Message(decoding: packet)
            #expect(decoded.header.isTruncated == (index < packets.count - 1))
            #expect(decoded.questions.count == (index == 0 ? 1 : 0))
            reassembled += decoded.answers
        }
        #expect(reassembled == knownAnswers)
    }

    @Test("a split response never sets TC")
    func splitResponse() throws {
        var message = try sampleResponse()
        message.answers = try (0..<200).map { index in
            ResourceRecord(
                name: "_openagents._tcp.local.",
                data: .ptr(try DomainName(labels: ["Peer \(index)", "_openagents", "_tcp", "local"])), ttl: 4500)
        }
        let packets = try message.encodedPackets()
        #expect(packets.count > 1)
        var answers: [ResourceRecord] = []
        var additionals: [ResourceRecord] = []
        for packet in packets {
            #expect(packet.count <= Message.defaultMaximumPacketSize)
            let decoded = try Message(decoding: packet)
            #expect(!decoded.header.isTruncated)
            #expect(decoded.header.isResponse)
            answers += decoded.answers
            additionals += decoded.additionals
        }
        #expect(answers == message.answers)
        #expect(additionals == message.additionals)
    }

    @Test("a record larger than the packet limit goes alone, up to 9000 bytes; beyond, an error")
    func oversizeRecord() throws {
        let big = ResourceRecord(name: "big.local.", data: .txt(try TXTData(strings: Array(repeating: Array(repeating: 0x61, count: 255), count: 10))), ttl: 4500)
        let small = ResourceRecord(name: "small.local.", data: .a(IPv4Address(198, 18, 0, 9)), ttl: 120)
        let packets = try Message(header: .response, answers: [small, big, small]).encodedPackets(maximumPacketSize: 1472)
        #expect(packets.count == 3)
        #expect(packets[1].count > 1472 && packets[1].count <= 9000)

        let huge = ResourceRecord(name: "huge.local.", data: .txt(try TXTData(strings: Array(repeating: Array(repeating: 0x61, count: 255), count: 40))), ttl: 4500)
        let error = #expect(throws: DNSWireError.self) {
            try Message(header: .response, answers: [huge]).encodedPackets()
        }
        #expect(error?.code == .cannotEncode)
        #expect(error?.description.contains("9000") == true)
    }

    @Test("a TXT string over 255 bytes is refused; TXT RDATA must parse into strings")
    func txtStringTooLong() throws {
        let error = #expect(throws: DNSWireError.self) { try TXTData(strings: [Array(repeating: 0x61, count: 256)]) }
        #expect(error?.code == .cannotEncode)
        #expect(TXTData(rdata: [3, 0x61]) == nil)
        #expect(TXTData(rdata: []) == .empty)
        #expect(try TXTData(strings: []) == .empty)
        #expect(try TXTData(strings: [[]]) == .empty)
        #expect(try TXTData(strings: [Array("a=1".utf8), []]).strings == [Array("a=1".utf8), []])
    }

    @Test("compression keeps each name's case (found by the fuzzer)")
    func compressionPreservesCase() throws {
        // Two A records whose owners differ only in case, as the fuzzer wrote them.
        let bytes = hexBytes(
            "000084000000000200000000055f68747470045f746370056c6f63616c000001000100000078000400000000"
                + "055f48545450045f746370054c6f63616c000001000100000078000400000000")
        let message = try Message(decoding: bytes)
        let again = try Message(decoding: try message.encoded())
        #expect(again.answers.map { $0.name.labels } == message.answers.map { $0.name.labels })
        #expect(again.answers[1].name.description == "_HTTP._tcp.Local.")
    }

    @Test("trailing padding after the last record is ignored")
    func padding() throws {
        let bytes = try sampleResponse().encoded() + [0, 0, 0, 0]
        #expect(try Message(decoding: bytes) == sampleResponse())
    }
}

/// Bytes from a hex string (test fixtures only).
func hexBytes(_ hex: String) -> [UInt8] {
    var bytes: [UInt8] = []
    var iterator = hex.makeIterator()
    while let high = iterator.next(), let low = iterator.next() {
        if let byte = UInt8(String([high, low]), radix: 16) { bytes.append(byte) }
    }
    return bytes
}
