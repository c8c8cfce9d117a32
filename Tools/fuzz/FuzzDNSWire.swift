// libFuzzer target for the DNSWire codec. Tools/fuzz/build compiles this file into the SAME
// module as Sources/DNSWire/*.swift, so it may use internal API.
//
// It checks properties, not only "does not crash". Every failed property calls `fail`, which
// traps with a message saying which property broke and what differed; libFuzzer then saves the
// input under .build-fuzz/crashes/. The properties:
//
//  P1 decode never traps; both decode overloads agree; a thrown error is a decoding error
//     whose offset lies inside the packet.
//  P2 decode -> encoded() -> decode is a fixed point: encoded() throws only .cannotEncode,
//     otherwise its bytes decode, with no skipped records, to an EQUAL Message, and encoding
//     that message again yields the very same bytes.
//  P3 encodedPackets(maximumPacketSize: 1472) throws only .cannotEncode, otherwise every
//     packet decodes with no skipped records, is <= 1472 bytes unless it holds a single entry
//     (then <= 9000), is never empty for a non-empty message, keeps the header (TC aside, set
//     on all but the last packet of a multi-packet query), and the sections concatenated
//     equal the message's.
//  P4 every name in the message (owner names and names inside RDATA) round-trips through
//     presentation format byte for byte: DomainName(parsing: name.description) == name with
//     identical .labels; DomainName(labels: name.labels) likewise.
//  P5 the input read as TXT RDATA: DiscoveryInfo(rdata:) never traps,
//     DiscoveryInfo(rdata: info.rdata) == info, DiscoveryInfo(wireStrings: info.wireStrings)
//     == info, and info.encodedLength == info.rdata.count.
//
//     Decoded TXT record data also round-trips: TXTData(strings: txt.strings) == txt and
//     TXTData(rdata: txt.rdata) == txt; and DiscoveryInfo(info.txt) == info.
//  P6 the input read as a DSO message (RFC 8490/8765): decoding never traps; what decodes
//     re-encodes to bytes that decode to an equal message, and encode to the same bytes again.
// Plus smoke coverage (no trap, no property): DiscoveryInfo from decoded TXT records and
// ServiceType / ServiceInstanceName from decoded PTR data.

import NearbyBasics

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ start: UnsafeRawPointer?, _ count: Int) -> CInt {
    let input = UnsafeRawBufferPointer(start: count == 0 ? nil : start, count: count)
    FuzzDNSWire(input: input).run()
    return 0
}

extension FuzzDNSWire {
    /// P6: the input read as a DSO message (RFC 8490, with DNS Push's TLVs): decoding never
    /// traps; what decodes encodes, and that decodes to an equal message whose encoding is the
    /// same bytes again.
    func checkDSO() {
        let message: DSOMessage
        do {
            message = try DSOMessage(decoding: bytes)
        } catch {
            return
        }
        let encoded: [UInt8]
        do {
            encoded = try message.encoded()
        } catch {
            fail("P6", "a decoded DSO message does not encode: \(error)")
        }
        guard let again = try? DSOMessage(decoding: encoded) else { fail("P6", "a DSO message's encoding does not decode") }
        if again != message { fail("P6", "DSO decode(encode(m)) != m: \(again) vs \(message)") }
        if (try? again.encoded()) != encoded { fail("P6", "DSO encoding is not stable") }
    }
}

struct FuzzDNSWire {
    static let maximumPacketSize = 1472
    static let absoluteMaximumPacketSize = 9000

    let input: UnsafeRawBufferPointer
    let bytes: [UInt8]

    init(input: UnsafeRawBufferPointer) {
        self.input = input
        self.bytes = Array(input)
    }

    func run() {
        checkDiscoveryInfo()  // P5: independent of whether the input is a message
        checkDSO()            // P6: the input read as a DSO message

        // P1
        let decoded: DecodedMessage
        do throws(DNSWireError) {
            decoded = try Message.decode(input)
        } catch {
            checkDecodeError(error, in: bytes.count, what: "decode(input)")
            let again = Result { () throws(DNSWireError) -> DecodedMessage in try Message.decode(bytes) }
            guard case .failure(let other) = again, other == error else {
                fail("P1", "decode(UnsafeRawBufferPointer) threw \(error) but decode([UInt8]) gave \(again)")
            }
            return
        }
        let viaArray = Result { () throws(DNSWireError) -> DecodedMessage in try Message.decode(bytes) }
        guard case .success(let same) = viaArray, same == decoded else {
            fail("P1", "decode(UnsafeRawBufferPointer) succeeded but decode([UInt8]) gave \(viaArray)")
        }
        for skipped in decoded.skippedRecords {
            checkDecodeError(skipped.error, in: bytes.count, what: "skipped \(skipped.type) record")
            checkName(skipped.name, "skipped record name")
        }

        let message = decoded.message
        checkNames(in: message)        // P4
        checkEncoded(message)          // P2
        checkPackets(message)          // P3
        exerciseHigherLayers(message)  // smoke
    }

    // MARK: P1

    func checkDecodeError(_ error: DNSWireError, in count: Int, what: String) {
        if error.code == .cannotEncode || error.code == .badPresentationName {
            fail("P1", "\(what): decoding produced the non-decoding error code \(error.code): \(error)")
        }
        if let offset = error.offset, !(0...count).contains(offset) {
            fail("P1", "\(what): error offset \(offset) is outside the \(count)-byte packet: \(error)")
        }
    }

    // MARK: P2

    func checkEncoded(_ message: Message) {
        let first: [UInt8]
        do throws(DNSWireError) {
            first = try message.encoded()
        } catch {
            guard error.code == .cannotEncode else {
                fail("P2", "encoded() threw \(error.code), not cannotEncode: \(error)")
            }
            return
        }
        let again: DecodedMessage
        do throws(DNSWireError) {
            again = try Message.decode(first)
        } catch {
            fail("P2", "encoded() bytes do not decode: \(error)\nencoded: \(hexString(first))")
        }
        guard again.skippedRecords.isEmpty else {
            fail("P2", "encoded() bytes decode with skipped records \(again.skippedRecords)\nencoded: \(hexString(first))")
        }
        guard again.message == message else {
            fail("P2", "decode(encoded()) != message: \(difference(message, again.message))\nencoded: \(hexString(first))")
        }
        // Equality ignores ASCII case; the encoder must also keep every name's bytes exactly.
        for ((before, what), (after, _)) in zip(names(in: message), names(in: again.message))
        where before.labels != after.labels {
            fail("P2", "\(what) \(before) came back as \(after)\nencoded: \(hexString(first))")
        }
        let second: [UInt8]
        do throws(DNSWireError) {
            second = try again.message.encoded()
        } catch {
            fail("P2", "re-encoding the re-decoded message threw \(error)\nencoded: \(hexString(first))")
        }
        guard second == first else {
            fail("P2", "encoding is not a fixed point:\nfirst:  \(hexString(first))\nsecond: \(hexString(second))")
        }
    }

    // MARK: P3

    func checkPackets(_ message: Message) {
        let packets: [[UInt8]]
        do throws(DNSWireError) {
            packets = try message.encodedPackets(maximumPacketSize: Self.maximumPacketSize)
        } catch {
            guard error.code == .cannotEncode else {
                fail("P3", "encodedPackets threw \(error.code), not cannotEncode: \(error)")
            }
            return
        }
        guard !packets.isEmpty else { fail("P3", "encodedPackets returned no packets") }
        let entryTotal =
            message.questions.count + message.answers.count + message.authorities.count
            + message.additionals.count
        var joined = Message(header: message.header)
        for (index, packet) in packets.enumerated() {
            let decoded: DecodedMessage
            do throws(DNSWireError) {
                decoded = try Message.decode(packet)
            } catch {
                fail("P3", "packet \(index) of \(packets.count) does not decode: \(error)\npacket: \(hexString(packet))")
            }
            guard decoded.skippedRecords.isEmpty else {
                fail("P3", "packet \(index) decodes with skipped records \(decoded.skippedRecords)")
            }
            let part = decoded.message
            let entries =
                part.questions.count + part.answers.count + part.authorities.count + part.additionals.count
            if packet.count > Self.maximumPacketSize {
                guard entries == 1, packet.count <= Self.absoluteMaximumPacketSize else {
                    fail(
                        "P3",
                        "packet \(index) of \(packets.count) is \(packet.count) bytes with \(entries) entries "
                            + "(over \(Self.maximumPacketSize) is allowed only for a single entry, up to 9000)")
                }
            }
            if entryTotal > 0 && entries == 0 {
                fail("P3", "packet \(index) of \(packets.count) is empty although the message has \(entryTotal) entries")
            }
            // The header is kept; only TC may change, and only for a query split over packets.
            let isLast = index == packets.count - 1
            var expected = message.header
            if !message.header.isResponse && !isLast { expected.isTruncated = true }
            guard part.header == expected else {
                fail(
                    "P3",
                    "packet \(index) of \(packets.count) has header \(part.header), expected \(expected)")
            }
            joined.questions += part.questions
            joined.answers += part.answers
            joined.authorities += part.authorities
            joined.additionals += part.additionals
        }
        guard joined.questions == message.questions, joined.answers == message.answers,
            joined.authorities == message.authorities, joined.additionals == message.additionals
        else {
            fail("P3", "packets joined != message (\(packets.count) packets): \(difference(message, joined))")
        }
    }

    // MARK: P4

    /// Every name in a message, with what it is, in message order.
    func names(in message: Message) -> [(DomainName, String)] {
        var result = message.questions.map { ($0.name, "question name") }
        for record in message.allRecords {
            result.append((record.name, "\(record.type) owner name"))
            switch record.data {
            case .ptr(let name), .cname(let name), .ns(let name):
                result.append((name, "\(record.type) target"))
            case .srv(let srv):
                result.append((srv.target, "SRV target"))
            case .nsec(let nsec):
                result.append((nsec.nextName, "NSEC next name"))
            default:
                break
            }
        }
        return result
    }

    func checkNames(in message: Message) {
        for (name, what) in names(in: message) { checkName(name, what) }
    }

    func checkName(_ name: DomainName, _ what: String) {
        let labels = name.labels
        // Internal invariant: storage is well formed.
        guard labels.allSatisfy({ (1...DomainName.maximumLabelLength).contains($0.count) }),
            name.wireLength <= DomainName.maximumWireLength,
            labels.count == name.labelCount
        else {
            fail("P4", "\(what): malformed name storage \(hexString(name.storage))")
        }
        let text = name.description
        let parsed: DomainName
        do throws(DNSWireError) {
            parsed = try DomainName(parsing: text)
        } catch {
            fail("P4", "\(what): DomainName(parsing: \(quoted(text))) threw \(error); labels \(hexLabels(labels))")
        }
        guard parsed == name, parsed.labels == labels else {
            fail(
                "P4",
                "\(what): presentation round trip changed the name: \(quoted(text)) parsed to "
                    + "\(hexLabels(parsed.labels)), original \(hexLabels(labels))")
        }
        guard let rebuilt = try? DomainName(labels: labels), rebuilt.storage == name.storage else {
            fail("P4", "\(what): DomainName(labels: name.labels) does not rebuild \(hexLabels(labels))")
        }
    }

    // MARK: P5

    func checkDiscoveryInfo() {
        let info = DiscoveryInfo(rdata: bytes)
        let rdata = info.rdata
        let again = DiscoveryInfo(rdata: rdata)
        guard again == info else {
            fail("P5", "DiscoveryInfo(rdata: info.rdata) != info:\ninfo:  \(info.entries)\nagain: \(again.entries)")
        }
        let fromStrings = DiscoveryInfo(wireStrings: info.wireStrings)
        guard fromStrings == info else {
            fail("P5", "DiscoveryInfo(wireStrings: info.wireStrings) != info: \(fromStrings.entries) vs \(info.entries)")
        }
        guard DiscoveryInfo(info.txt) == info else {
            fail("P5", "DiscoveryInfo(info.txt) != info: \(info.entries)")
        }
        guard info.encodedLength == rdata.count else {
            fail("P5", "info.encodedLength \(info.encodedLength) != info.rdata.count \(rdata.count)")
        }
    }

    // MARK: smoke

    func exerciseHigherLayers(_ message: Message) {
        for record in message.allRecords {
            switch record.data {
            case .txt(let txt):
                // TXT data is kept in wire form; its strings must rebuild it exactly.
                guard let rebuilt = try? TXTData(strings: txt.strings), rebuilt == txt,
                    TXTData(rdata: txt.rdata) == txt
                else {
                    fail("P5", "TXT data \(hexString(txt.rdata)) does not round-trip through its strings")
                }
                let info = DiscoveryInfo(txt)
                _ = info.description
                _ = info.warnings
            case .ptr(let target):
                _ = try? ServiceInstanceName(domainName: target)
                _ = try? ServiceType(domainName: record.name)
            default:
                break
            }
        }
    }

    // MARK: reporting

    func fail(_ property: String, _ detail: String) -> Never {
        fuzzFailure("DNSWire", property, detail, input: bytes)
    }

    func difference(_ expected: Message, _ actual: Message) -> String {
        if expected.header != actual.header { return "header \(expected.header) vs \(actual.header)" }
        func compare<T: Equatable>(_ name: String, _ a: [T], _ b: [T]) -> String? {
            if a.count != b.count { return "\(name): \(a.count) entries vs \(b.count)" }
            for index in a.indices where a[index] != b[index] {
                return "\(name)[\(index)]: \(a[index]) vs \(b[index])"
            }
            return nil
        }
        return compare("questions", expected.questions, actual.questions)
            ?? compare("answers", expected.answers, actual.answers)
            ?? compare("authorities", expected.authorities, actual.authorities)
            ?? compare("additionals", expected.additionals, actual.additionals)
            ?? "no difference found"
    }
}

func hexLabels(_ labels: [[UInt8]]) -> String {
    "[" + labels.map { hexString($0) }.joined(separator: ",") + "]"
}

