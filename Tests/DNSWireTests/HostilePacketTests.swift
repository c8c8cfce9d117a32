import DNSWire
import Testing

/// Builds raw packets byte by byte, so tests can write what no encoder would.
struct PacketBytes {
    var bytes: [UInt8]

    init(id: UInt16 = 0, flags: UInt16 = 0x8400, questions: UInt16 = 0, answers: UInt16 = 0,
         authorities: UInt16 = 0, additionals: UInt16 = 0)
    {
        bytes = []
        for value in [id, flags, questions, answers, authorities, additionals] { u16(value) }
    }

    mutating func u16(_ value: UInt16) { bytes += [UInt8(value >> 8), UInt8(value & 0xFF)] }
    mutating func u32(_ value: UInt32) { u16(UInt16(value >> 16)); u16(UInt16(value & 0xFFFF)) }
    mutating func label(_ text: String) { bytes.append(UInt8(text.utf8.count)); bytes += Array(text.utf8) }
    mutating func name(_ labels: String...) { for l in labels { label(l) }; bytes.append(0) }
    mutating func pointer(to offset: Int) { u16(0xC000 | UInt16(offset)) }
    /// TYPE, CLASS, TTL and RDLENGTH after an owner name.
    mutating func fixed(type: UInt16, rdlength: UInt16, ttl: UInt32 = 120) {
        u16(type); u16(1); u32(ttl); u16(rdlength)
    }
    mutating func question(type: UInt16 = 12) { u16(type); u16(1) }
}

@Suite("Hostile packets")
struct HostilePacketTests {
    private func decodeError(_ bytes: [UInt8]) -> DNSWireError? {
        #expect(throws: DNSWireError.self) { try Message.decode(bytes) }
    }

    @Test("truncated header: 11 bytes")
    func truncatedHeader() {
        let error = decodeError(Array(repeating: 0, count: 11))
        #expect(error?.code == .truncated)
        #expect(error?.offset == 0)
        #expect(decodeError([])?.code == .truncated)
    }

    @Test("65535 claimed questions in a 12-byte packet fail before allocating")
    func claimedQuestions() {
        let packet = PacketBytes(flags: 0, questions: 0xFFFF)
        let error = decodeError(packet.bytes)
        #expect(error?.code == .countExceedsData)
        #expect(error?.description.contains("65535 questions") == true)
    }

    @Test("65535 claimed records of each kind in a small packet")
    func claimedRecords() {
        var packet = PacketBytes(answers: 0xFFFF, authorities: 0xFFFF, additionals: 0xFFFF)
        packet.bytes += Array(repeating: 0, count: 100)
        #expect(decodeError(packet.bytes)?.code == .countExceedsData)
    }

    @Test("a section count larger than the records present")
    func countBeyondData() {
        var packet = PacketBytes(answers: 2)
        packet.name("a", "local")
        packet.fixed(type: 1, rdlength: 4)
        packet.bytes += [198, 18, 0, 1]
        // Ten more bytes pass the header's minimum-size check (11 per record), but are a root
        // name and only nine of the ten fixed bytes a second record needs.
        packet.bytes += Array(repeating: 0, count: 10)
        #expect(decodeError(packet.bytes)?.code == .truncated)
    }

    @Test("self pointer")
    func selfPointer() {
        var packet = PacketBytes(flags: 0, questions: 1)
        packet.pointer(to: 12)
        packet.question()
        let error = decodeError(packet.bytes)
        #expect(error?.code == .selfPointer)
        #expect(error?.offset == 12)
    }

    @Test("pointer loop between two pointers")
    func pointerLoop() {
        var packet = PacketBytes(flags: 0, questions: 1)
        packet.pointer(to: 14)  // at 12
        packet.pointer(to: 12)  // at 14
        packet.question()
        #expect(decodeError(packet.bytes)?.code == .pointerLoop)
    }

    @Test("pointer loop through a label")
    func pointerLoopThroughLabel() {
        var packet = PacketBytes(flags: 0, questions: 1)
        packet.label("a")       // 12..13
        packet.pointer(to: 12)  // 14: back to the label, which leads here again
        packet.question()
        #expect(decodeError(packet.bytes)?.code == .pointerLoop)
    }

    @Test("pointer past the end of the packet")
    func pointerPastEnd() {
        var packet = PacketBytes(flags: 0, questions: 1)
        packet.pointer(to: 0x3FFF)
        packet.question()
        let error = decodeError(packet.bytes)
        #expect(error?.code == .pointerOutOfBounds)
    }

    @Test("a forward pointer is allowed")
    func forwardPointer() throws {
        var packet = PacketBytes(flags: 0, questions: 2)
        packet.pointer(to: 18)  // 12: question 1's name is the name at 18
        packet.question()       // 14..17
        packet.name("fwd", "local")  // 18: question 2
        packet.question()
        let message = try Message(decoding: packet.bytes)
        #expect(message.questions.map(\.name) == ["fwd.local.", "fwd.local."])
    }

    @Test("a 64-byte label cannot be expressed: its length byte is a reserved label type")
    func label64() {
        var packet = PacketBytes(flags: 0, questions: 1)
        packet.bytes.append(64)
        packet.bytes += Array(repeating: 0x61, count: 64)
        packet.bytes.append(0)
        packet.question()
        let error = decodeError(packet.bytes)
        #expect(error?.code == .reservedLabelType)
        #expect(error?.offset == 12)
    }

    @Test("reserved label type 0x80")
    func reservedLabel() {
        var packet = PacketBytes(flags: 0, questions: 1)
        packet.bytes += [0x80, 0x00]
        packet.question()
        #expect(decodeError(packet.bytes)?.code == .reservedLabelType)
    }

    @Test("a 256-octet name")
    func name256() {
        var packet = PacketBytes(flags: 0, questions: 1)
        // 5 labels of 50 bytes: 5 * 51 + 1 = 256 octets.
        for _ in 0..<5 { packet.label(String(repeating: "x", count: 50)) }
        packet.bytes.append(0)
        packet.question()
        #expect(decodeError(packet.bytes)?.code == .nameTooLong)
    }

    @Test("a 255-octet name is fine")
    func name255() throws {
        var packet = PacketBytes(flags: 0, questions: 1)
        for _ in 0..<4 { packet.label(String(repeating: "x", count: 50)) }
        packet.label(String(repeating: "y", count: 49))
        packet.bytes.append(0)
        packet.question()
        let message = try Message(decoding: packet.bytes)
        #expect(message.questions[0].name.wireLength == 255)
    }

    @Test("a name grown past 255 octets through compression pointers")
    func longNameThroughPointers() {
        var packet = PacketBytes(flags: 0, questions: 2)
        for _ in 0..<4 { packet.label(String(repeating: "x", count: 60)) }  // 12: 244 bytes
        packet.bytes.append(0)
        packet.question()
        packet.label(String(repeating: "z", count: 20))  // 21 + 244 + 1 > 255
        packet.pointer(to: 12)
        packet.question()
        #expect(decodeError(packet.bytes)?.code == .nameTooLong)
    }

    @Test("too many labels: 200 one-byte labels")
    func tooManyLabels() {
        var packet = PacketBytes(flags: 0, questions: 1)
        for _ in 0..<200 { packet.label("a") }
        packet.bytes.append(0)
        packet.question()
        let code = decodeError(packet.bytes)?.code
        #expect(code == .nameTooLong || code == .tooManyLabels)
    }

    @Test("a chain of pointers that never reaches a label")
    func pointerChain() {
        // Every pointer points at the next one: no loop, but no end either until the packet does.
        var packet = PacketBytes(flags: 0, questions: 1)
        for index in 0..<300 { packet.pointer(to: 12 + 2 * (index + 1)) }
        packet.question()
        let code = decodeError(packet.bytes)?.code
        #expect(code == .tooManyPointers || code == .truncated || code == .pointerOutOfBounds)
    }

    @Test("RDLENGTH overrun: the record claims more data than the packet has")
    func rdlengthOverrun() {
        var packet = PacketBytes(answers: 1)
        packet.name("a", "local")
        packet.fixed(type: 1, rdlength: 100)
        packet.bytes += [198, 18, 0, 1]
        let error = decodeError(packet.bytes)
        #expect(error?.code == .truncated)
        #expect(error?.description.contains("claims 100 bytes") == true)
    }

    @Test("RDLENGTH 0xFFFF at the end of a packet")
    func rdlengthMax() {
        var packet = PacketBytes(answers: 1)
        packet.name("a")
        packet.fixed(type: 16, rdlength: 0xFFFF)
        #expect(decodeError(packet.bytes)?.code == .truncated)
    }

    @Test("a record header cut short")
    func recordHeaderCut() {
        var packet = PacketBytes(answers: 1)
        packet.name("abcdef")  // long enough to pass the header's minimum-size check
        packet.bytes += [0, 1, 0, 1, 0, 0, 0]
        #expect(decodeError(packet.bytes)?.code == .truncated)
    }

    /// A packet with a bad record between two good ones.
    private func sandwich(_ bad: (inout PacketBytes) -> Void) -> [UInt8] {
        var packet = PacketBytes(answers: 3)
        packet.name("first", "local")
        packet.fixed(type: 1, rdlength: 4)
        packet.bytes += [198, 18, 0, 1]
        bad(&packet)
        packet.name("last", "local")
        packet.fixed(type: 1, rdlength: 4)
        packet.bytes += [198, 18, 0, 3]
        return packet.bytes
    }

    private func expectSkipped(_ bytes: [UInt8], type: RecordType) throws {
        let decoded = try Message.decode(bytes)
        #expect(decoded.message.answers.map(\.name) == ["first.local.", "last.local."])
        #expect(decoded.skippedRecords.count == 1)
        #expect(decoded.skippedRecords.first?.type == type)
        #expect(decoded.skippedRecords.first?.section == .answer)
    }

    @Test("an A record with 3 bytes of data is skipped; the rest survives")
    func shortA() throws {
        try expectSkipped(sandwich { p in p.name("bad"); p.fixed(type: 1, rdlength: 3); p.bytes += [1, 2, 3] }, type: .a)
    }

    @Test("an AAAA record with 4 bytes of data is skipped")
    func shortAAAA() throws {
        try expectSkipped(sandwich { p in p.name("bad"); p.fixed(type: 28, rdlength: 4); p.bytes += [1, 2, 3, 4] }, type: .aaaa)
    }

    @Test("an SRV target whose label runs past RDLENGTH is skipped")
    func srvTargetOverrun() throws {
        try expectSkipped(sandwich { p in
            p.name("bad")
            p.fixed(type: 33, rdlength: 8)
            p.u16(0); p.u16(0); p.u16(80)
            p.bytes += [5, 0x61]  // a 5-byte label with 1 byte inside RDLENGTH
        }, type: .srv)
    }

    @Test("a compression pointer cut in half at the end of RDATA is skipped")
    func halfPointer() throws {
        try expectSkipped(sandwich { p in
            p.name("bad")
            p.fixed(type: 12, rdlength: 1)
            p.bytes += [0xC0]
        }, type: .ptr)
    }

    @Test("an SRV record with data after its target is skipped")
    func srvTrailingBytes() throws {
        try expectSkipped(sandwich { p in
            p.name("bad")
            p.fixed(type: 33, rdlength: 10)
            p.u16(0); p.u16(0); p.u16(80)
            p.bytes += [1, 0x68, 0, 0xFF]  // "h." then one extra byte
        }, type: .srv)
    }

    @Test("a PTR whose target loops is skipped")
    func ptrLoop() throws {
        let bytes = sandwich { p in
            p.name("bad")
            p.fixed(type: 12, rdlength: 2)
            p.pointer(to: p.bytes.count)  // points at itself
        }
        try expectSkipped(bytes, type: .ptr)
    }

    @Test("a TXT string whose length runs past the record is skipped")
    func txtStringOverrun() throws {
        try expectSkipped(sandwich { p in
            p.name("bad")
            p.fixed(type: 16, rdlength: 4)
            p.bytes += [10, 0x61, 0x3D, 0x62]  // claims 10 bytes, has 3
        }, type: .txt)
    }

    @Test("a 65535-byte TXT record of 256 strings decodes")
    func hugeTXT() throws {
        var packet = PacketBytes(answers: 1)
        packet.name("big", "local")
        packet.fixed(type: 16, rdlength: 0xFFFF)
        // 255 strings of 255 bytes (65280 with length bytes) and one of 254: 65535 in all.
        var data: [UInt8] = []
        while data.count + 256 <= 0xFFFF {
            data.append(255)
            data += Array(repeating: 0x61, count: 255)
        }
        let rest = 0xFFFF - data.count
        data.append(UInt8(rest - 1))
        data += Array(repeating: 0x62, count: rest - 1)
        #expect(data.count == 0xFFFF)
        packet.bytes += data
        let message = try Message(decoding: packet.bytes)
        guard case .txt(let txt) = message.answers.first?.data else {
            Issue.record("expected a TXT record")
            return
        }
        #expect(txt.rdata.count == 0xFFFF)
        #expect(txt.strings.count == 256)
        // As discovery info, the repeated key "aaaa…" is kept once (first occurrence wins).
        let info = DiscoveryInfo(txt)
        #expect(info.entries.count == 2)
    }

    @Test("an NSEC with an empty or over-long bitmap is skipped")
    func nsecBadBitmap() throws {
        try expectSkipped(sandwich { p in
            p.name("bad")
            p.fixed(type: 47, rdlength: 5)
            p.bytes += [1, 0x68, 0]  // next name "h."
            p.bytes += [0, 0]        // window 0, bitmap length 0
        }, type: .nsec)
        try expectSkipped(sandwich { p in
            p.name("bad")
            p.fixed(type: 47, rdlength: 6)
            p.bytes += [1, 0x68, 0]
            p.bytes += [0, 33, 0xFF]  // bitmap length 33 > 32
        }, type: .nsec)
    }

    @Test("HINFO with one string is skipped")
    func hinfoOneString() throws {
        try expectSkipped(sandwich { p in
            p.name("bad")
            p.fixed(type: 13, rdlength: 3)
            p.bytes += [2, 0x61, 0x62]
        }, type: .hinfo)
    }

    @Test("deterministic mutation sweep: nothing traps and what decodes re-encodes to itself")
    func mutationSweep() throws {
        let seeds = [try sampleResponse().encoded()] + (try sampleQueries())
        var generator = SplitMix64(seed: 0x6E65_6172_6279)
        var decodedCount = 0
        for _ in 0..<20_000 {
            var bytes = seeds[Int(generator.next() % UInt64(seeds.count))]
            let mutations = 1 + Int(generator.next() % 4)
            for _ in 0..<mutations {
                let position = Int(generator.next() % UInt64(bytes.count))
                switch generator.next() % 4 {
                case 0: bytes[position] = UInt8(truncatingIfNeeded: generator.next())
                case 1: bytes[position] ^= 1 << UInt8(generator.next() % 8)
                case 2: bytes.removeSubrange(position...)
                default: bytes.insert(UInt8(truncatingIfNeeded: generator.next()), at: position)
                }
                if bytes.isEmpty { bytes = [0] }
            }
            guard let decoded = try? Message.decode(bytes) else { continue }
            decodedCount += 1
            guard let again = try? decoded.message.encoded() else { continue }
            let second = try Message.decode(again)
            #expect(second.message == decoded.message)
            #expect(second.skippedRecords.isEmpty)
        }
        #expect(decodedCount > 1000)
    }
}

private func sampleQueries() throws -> [[UInt8]] {
    let known = try sampleResponse().answers
    return [
        try Message(questions: [Question(name: "_openagents._tcp.local.", type: .ptr)], answers: known).encoded(),
        try Message(
            questions: [Question(name: "Build Box._openagents._tcp.local.", type: .any, unicastResponse: true)],
            authorities: Array(known.dropFirst())
        ).encoded(),
    ]
}
