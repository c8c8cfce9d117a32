import DNSWire
import NearbyBasics
import Testing

/// An SRP-shaped update without its signature, for the codec's tests.
private func sampleUpdate(lease: UpdateLease = UpdateLease(lease: 7200, keyLease: 604_800)) throws -> Message {
    let zone: DomainName = "default.service.arpa."
    let host: DomainName = "box.default.service.arpa."
    let key = KEYData.p256([UInt8](repeating: 0xAB, count: 64))
    var update = DNSUpdate(zone: zone)
    update.deleteName(host)
    update.add(ResourceRecord(name: host, data: .a(IPv4Address(192, 0, 2, 7)), ttl: 120))
    update.add(ResourceRecord(name: host, data: key.recordData, ttl: 120))
    var message = update.message(id: 0x5150)
    message.additionals = [lease.optRecord()]
    return message
}

@Suite("SIG(0), KEY and the Update Lease option on the wire")
struct SIG0Tests {
    @Test("a KEY's RDATA round-trips, and its key tag is RFC 4034 appendix B's checksum")
    func keyRoundTrip() throws {
        let key = KEYData.p256(Array(0..<64))
        #expect(key.rdata.count == 68)
        #expect(Array(key.rdata.prefix(4)) == [0, 0, 3, 13])
        #expect(KEYData(rdata: key.rdata) == key)
        #expect(key.isP256)
        #expect(KEYData(rdata: [0, 0, 3]) == nil)
        // Golden: even bytes count high, odd bytes low, the carry folded back once.
        #expect(KEYData.keyTag(rdata: [0x01, 0x02, 0x03, 0x04]) == 0x0406)
        #expect(KEYData.keyTag(rdata: [0xFF, 0xFF, 0xFF, 0xFF]) == 0xFFFF)  // 0x1FFFE → 0xFFFE + 1
        // RFC 4034 §5.4's example DNSKEY (flags 256, protocol 3, algorithm 5) has key tag 60485.
        let exampleKey = try #require(bytes(fromBase64: "AQOeiiR0GOMYkDshWoSKz9XzfwJr1AYtsmx3TGkJaNXVbfi/2pHm822aJ5iI9BMzNXxeYCmZDRD99WYwYqUSdjMmmAphXdvxegXd/M5+X7OrzKBaMbCVdFLUUh6DhweJBjEVv5f2wwjM9XzcnOf+EPbtG9DMBmADjFDc2w/rljwvFw=="))
        #expect(KEYData(flags: 256, algorithm: DNSSECAlgorithm(5), publicKey: exampleKey).keyTag == 60485)
    }

    @Test("a SIG(0) appended to an update splits back off: the same bytes signed, the same fields")
    func sigRoundTrip() throws {
        let unsigned = try sampleUpdate().encoded()
        let sig = SIGData(
            expiration: 1_700_000_300, inception: 1_700_000_000, keyTag: 0x1234, signerName: "Box.Default.Service.Arpa.",
            signature: [UInt8](repeating: 7, count: 64))
        let signed = sig.appended(to: unsigned)
        let split = try #require(try SIGData.split(signed))
        #expect(split.unsigned == unsigned)
        #expect(split.record == sig)
        #expect(split.record.isSIG0)
        // What is signed: the RDATA less the signature (signer in lower case), then the message.
        let input = sig.signedBytes(unsignedMessage: unsigned)
        #expect(Array(input.prefix(18)) == [0, 0, 13, 0, 0, 0, 0, 0] + [0x65, 0x53, 0xF2, 0x2C] + [0x65, 0x53, 0xF1, 0x00] + [0x12, 0x34])
        let signer: DomainName = "box.default.service.arpa."
        #expect(Array(input[18..<(18 + 26)]) == signer.canonicalWire)
        #expect(Array(input.suffix(unsigned.count)) == unsigned)
        // The decoder sees the SIG as the last additional record, kept byte for byte.
        let message = try Message(decoding: signed)
        #expect(message.additionals.last?.type == .sig)
        #expect(SIGData(rdata: sig.rdata) == sig)
        // A message whose last record is not a SIG has none to split.
        #expect(try SIGData.split(unsigned) == nil)
    }

    @Test("UPDATE deletions decode: class ANY with no data is 'delete all RRsets' or 'delete an RRset' of any type")
    func updateDeleteForms() throws {
        var update = DNSUpdate(zone: "default.service.arpa.")
        update.deleteName("box.default.service.arpa.")
        update.deleteRecordSet("box.default.service.arpa.", .a)
        update.delete(ResourceRecord(name: "_x._tcp.default.service.arpa.", data: .ptr("A._x._tcp.default.service.arpa."), ttl: 0))
        let decoded = try Message.decode(update.message(id: 1).encoded())
        #expect(decoded.skippedRecords.isEmpty)
        let changes = decoded.message.authorities
        #expect(changes.count == 3)
        #expect(changes[0].class == .any && changes[0].data == .unknown(.any, []) && changes[0].ttl == 0)
        #expect(changes[1].class == .any && changes[1].data == .unknown(.a, []))
        #expect(changes[2].class == .none && changes[2].data == .ptr("A._x._tcp.default.service.arpa."))
        #expect(decoded.message.header.opcode == Header.updateOpcode)
        // The same bytes as a query: an A record without its four bytes is malformed there.
        var query = try update.message(id: 1).encoded()
        query[2] &= 0x87
        #expect(try Message.decode(query).skippedRecords.count == 1)
    }

    @Test("the Update Lease option: 4- and 8-byte forms round-trip, other lengths and cut options throw")
    func updateLease() throws {
        let long = UpdateLease(lease: 7200, keyLease: 1_209_600)
        #expect(long.option == [0, 2, 0, 8, 0, 0, 0x1C, 0x20, 0, 0x12, 0x75, 0])
        #expect(try UpdateLease(options: long.option) == long)
        let short = UpdateLease(lease: 30)
        #expect(short.option == [0, 2, 0, 4, 0, 0, 0, 30])
        #expect(try UpdateLease(options: [0, 10, 0, 2, 9, 9] + short.option) == short)  // after a COOKIE-like option
        #expect(try UpdateLease(options: []) == nil)
        #expect(throws: DNSWireError.self) { try UpdateLease(options: [0, 2, 0, 6, 0, 0, 0, 1, 0, 0]) }
        #expect(throws: DNSWireError.self) { try UpdateLease(options: [0, 2, 0, 8, 0, 0]) }
        #expect(throws: DNSWireError.self) { try UpdateLease(options: [0, 2]) }
        let message = try Message(decoding: try sampleUpdate(lease: long).encoded())
        #expect(try message.updateLease() == long)
    }

    @Test("hostile SIG records and mutated signed updates never trap: every byte flipped, every length cut")
    func hostileSignedUpdates() throws {
        let sig = SIGData(expiration: 2, inception: 1, keyTag: 9, signerName: "box.default.service.arpa.", signature: [UInt8](repeating: 1, count: 64))
        let signed = sig.appended(to: try sampleUpdate().encoded())
        for length in 0..<signed.count {
            _ = try? SIGData.split(Array(signed.prefix(length)))
            _ = try? Message.decode(Array(signed.prefix(length)))
        }
        for index in signed.indices {
            for value: UInt8 in [0x00, 0xFF, 0xC0, signed[index] ^ 0x01] {
                var mutated = signed
                mutated[index] = value
                _ = try? SIGData.split(mutated)
                _ = try? Message.decode(mutated).message.updateLease()
            }
        }
        // A SIG whose RDATA is too short for its fixed fields throws rather than reading past it.
        var short = try sampleUpdate().encoded()
        short[11] += 1
        short += [0, 0, 24, 0, 255, 0, 0, 0, 0, 0, 4, 1, 2, 3, 4]
        #expect(throws: DNSWireError.self) { try SIGData.split(short) }
        #expect(SIGData(rdata: [1, 2, 3]) == nil)
    }
}
