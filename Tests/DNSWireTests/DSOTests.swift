import Testing

@testable import DNSWire

/// DNS Stateful Operations (RFC 8490) and DNS Push's TLVs (RFC 8765): bytes checked by hand
/// against the RFCs' layouts, round trips, and hostile input.
@Suite("DSO and DNS Push messages")
struct DSOTests {
    @Test("a Keepalive request is OPCODE 6 with zero counts and one TLV: type 1, length 8, two 32-bit millisecond values")
    func keepaliveBytes() throws {
        let message = DSOMessage(id: 0x1234, tlvs: [.keepalive(inactivityTimeout: 15_000, keepaliveInterval: 3_600_000)])
        let bytes = try message.encoded()
        #expect(bytes == [
            0x12, 0x34, 0x30, 0x00, 0, 0, 0, 0, 0, 0, 0, 0,  // ID, QR 0, OPCODE 6, counts 0
            0x00, 0x01, 0x00, 0x08, 0x00, 0x00, 0x3A, 0x98, 0x00, 0x36, 0xEE, 0x80,
        ])
        #expect(try DSOMessage(decoding: bytes) == message)
    }

    @Test("SUBSCRIBE carries the name in full (no compression), its type and class")
    func subscribeBytes() throws {
        let message = DSOMessage(id: 7, tlvs: [.subscribe(name: "_ipp._tcp.lan1.example.test.", type: .ptr, class: .internet)])
        let bytes = try message.encoded()
        let data = Array(bytes[16...])
        #expect(Array(bytes[12..<16]) == [0x00, 0x40, 0x00, UInt8(data.count)])
        #expect(data == [4] + Array("_ipp".utf8) + [4] + Array("_tcp".utf8) + [4] + Array("lan1".utf8) + [7] + Array("example".utf8) + [4] + Array("test".utf8) + [0, 0, 12, 0, 1])
        #expect(try DSOMessage(decoding: bytes) == message)
    }

    @Test("PUSH: an addition keeps its TTL, a removal says 0xFFFFFFFF, a record set or a name 0xFFFFFFFE with no data; class ANY is sent with type 0")
    func pushBytes() throws {
        let ptr = ResourceRecord(name: "_ipp._tcp.lan1.example.test.", data: .ptr("P._ipp._tcp.lan1.example.test."), ttl: 4500)
        let changes: [PushChange] = [
            .add(ptr),
            .remove(ResourceRecord(name: ptr.name, data: ptr.data, ttl: 0)),
            .removeRecordSet(name: "P._ipp._tcp.lan1.example.test.", type: .srv, class: .internet),
            .removeName(name: "p.lan1.example.test.", class: .internet),
            .removeName(name: "q.lan1.example.test.", class: .any),
        ]
        let message = DSOMessage(id: 0, tlvs: [.push(changes)])
        let bytes = try message.encoded()
        #expect(try DSOMessage(decoding: bytes) == message)
        // The TTL fields, in the order of the changes.
        var ttls: [UInt32] = []
        var typesAndClasses: [(UInt16, UInt16)] = []
        var data = Array(bytes[16...])
        while !data.isEmpty {
            var position = 0
            _ = try DSOTLV.readName(data, at: &position, tlvOffset: 0)
            typesAndClasses.append((UInt16(data[position]) << 8 | UInt16(data[position + 1]), UInt16(data[position + 2]) << 8 | UInt16(data[position + 3])))
            ttls.append(data[(position + 4)..<(position + 8)].reduce(0) { $0 << 8 | UInt32($1) })
            let length = Int(data[position + 8]) << 8 | Int(data[position + 9])
            data.removeFirst(position + 10 + length)
        }
        #expect(ttls == [4500, 0xFFFF_FFFF, 0xFFFF_FFFE, 0xFFFF_FFFE, 0xFFFF_FFFE])
        #expect(typesAndClasses.map(\.0) == [12, 12, 33, 255, 0])
        #expect(typesAndClasses.map(\.1) == [1, 1, 1, 1, 255])
    }

    @Test("UNSUBSCRIBE, Retry Delay, padding, RECONFIRM, an unknown type and a DSOTYPENI response round-trip")
    func otherTLVs() throws {
        let reconfirm = ResourceRecord(name: "p.lan1.example.test.", data: .a(IPv4Address(198, 18, 1, 9)), ttl: 0)
        let message = DSOMessage(id: 0, tlvs: [.unsubscribe(messageID: 7), .retryDelay(5000), .encryptionPadding(13), .reconfirm(reconfirm), .unknown(type: 0xF000, data: [1, 2, 3])])
        #expect(try DSOMessage(decoding: message.encoded()) == message)
        let refusal = DSOMessage(id: 9, isResponse: true, responseCode: .dsoTypeNotImplemented, tlvs: [])
        let bytes = try refusal.encoded()
        #expect(bytes[2] == 0xB0 && bytes[3] == 0x0B)
        #expect(try DSOMessage(decoding: bytes) == refusal)
    }

    static let header: [UInt8] = [0, 1, 0x30, 0, 0, 0, 0, 0, 0, 0, 0, 0]

    static func code(_ bytes: [UInt8]) -> DNSWireError.Code? {
        do {
            _ = try DSOMessage(decoding: bytes)
            return nil
        } catch {
            return error.code
        }
    }

    @Test("hostile DSO input is refused with its reason, never a trap", arguments: [
        ([0, 1, 0x30], "truncated"),                                                      // short header
        ([0, 1, 0x00, 0, 0, 0, 0, 0, 0, 0, 0, 0], "badDSO"),                             // OPCODE 0
        ([0, 1, 0x30, 0, 0, 1, 0, 0, 0, 0, 0, 0], "badDSO"),                             // a question count
        (header + [0, 1, 0, 8, 0, 0], "truncated"),                                       // TLV longer than the message
        (header + [0, 1, 0, 7, 0, 0, 0, 0, 0, 0, 0], "badDSO"),                          // Keepalive of 7 bytes
        (header + [0, 0x40, 0, 6, 0xC0, 0x0C, 0, 12, 0, 1], "badDSO"),                   // SUBSCRIBE with a pointer
        (header + [0, 0x40, 0, 3, 1, 0x61, 0], "badDSO"),                                // SUBSCRIBE without type and class
        (header + [0, 0x41, 0, 0], "badDSO"),                                            // PUSH with no change
        (header + [0, 0x41, 0, 11, 0, 0, 1, 0, 1, 0x80, 0, 0, 0, 0, 0], "badDSO"),       // reserved TTL
        (header + [0, 0x41, 0, 12, 0, 0, 1, 0, 1, 0xFF, 0xFF, 0xFF, 0xFE, 0, 1, 9], "badDSO"),  // collective removal with data
        (header + [0, 0x41, 0, 14, 0, 0, 1, 0, 1, 0, 0, 0, 10, 0, 3, 1, 2, 3], "badDSO"), // an A record of 3 bytes
        (header + [0, 0x41, 0, 11, 0, 0, 1, 0, 1, 0, 0, 0, 10, 0, 9], "truncated"),      // data past the TLV
    ])
    func hostile(_ example: (bytes: [UInt8], expected: String)) {
        #expect(Self.code(example.bytes)?.description == example.expected, "\(example.bytes)")
    }

    @Test("a PUSH addition with a TTL over 0x7FFFFFFF cannot be encoded")
    func additionTTL() {
        let record = ResourceRecord(name: "a.example.", data: .a(IPv4Address(1, 2, 3, 4)), ttl: 0x8000_0000)
        #expect(throws: DNSWireError.self) { try DSOMessage(id: 0, tlvs: [.push([.add(record)])]).encoded() }
    }
}
