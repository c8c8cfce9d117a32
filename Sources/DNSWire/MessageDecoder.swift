/// A record that was dropped while decoding because its data was malformed, although its
/// length was sound, so the rest of the packet could still be read.
public struct SkippedRecord: Hashable, Sendable {
    public var section: MessageSection
    public var name: DomainName
    public var type: RecordType
    public var error: DNSWireError
}

/// A decoded message plus the records that had to be dropped on the way.
public struct DecodedMessage: Hashable, Sendable {
    public var message: Message
    public var skippedRecords: [SkippedRecord]
}

extension Message {
    /// Decodes a packet, treating it as hostile. Records whose data is malformed but whose length
    /// is sound are dropped (see ``decode(_:)-(UnsafeRawBufferPointer)`` to learn which).
    ///
    /// - Throws: ``DNSWireError`` saying what was wrong at which offset when the header, a
    ///   question, or a record's name or length cannot be read.
    public init(decoding bytes: [UInt8]) throws(DNSWireError) {
        self = try Message.decode(bytes).message
    }

    /// Decodes a packet and reports the records it had to skip.
    public static func decode(_ bytes: [UInt8]) throws(DNSWireError) -> DecodedMessage {
        let result = bytes.withUnsafeBytes { raw in
            Result { () throws(DNSWireError) -> DecodedMessage in try decode(raw) }
        }
        return try result.get()
    }

    /// Decodes a packet held in memory the caller owns for the duration of the call.
    public static func decode(_ bytes: UnsafeRawBufferPointer) throws(DNSWireError) -> DecodedMessage {
        var reader = WireReader(bytes)
        return try reader.readMessage()
    }
}

/// Bounds-checked reading of one packet. Every read checks its bounds and throws; nothing traps.
struct WireReader {
    /// Fewest bytes a question can take: root name (1) + type + class.
    static let minimumQuestionLength = 5
    /// Fewest bytes a record can take: root name (1) + type + class + TTL + RDLENGTH.
    static let minimumRecordLength = 11

    let bytes: UnsafeRawBufferPointer
    var position = 0
    /// Pointer targets visited while reading the current name; reused so names allocate once.
    private var visited: [Int] = []
    /// Names already decoded, by the offset they start at. A compression pointer to one of them
    /// reuses it, so a name that is only a pointer (most owner names) costs no allocation.
    private var decodedNames: [DecodedName] = []

    struct DecodedName {
        var offset: Int
        var labels: Int
        var name: DomainName
    }

    init(_ bytes: UnsafeRawBufferPointer) {
        self.bytes = bytes
    }

    var count: Int { bytes.count }

    @inline(__always)
    func byte(_ offset: Int) -> UInt8 { bytes[offset] }

    @inline(__always)
    func uint16(_ offset: Int) -> UInt16 { UInt16(bytes[offset]) << 8 | UInt16(bytes[offset + 1]) }

    @inline(__always)
    func uint32(_ offset: Int) -> UInt32 {
        UInt32(bytes[offset]) << 24 | UInt32(bytes[offset + 1]) << 16
            | UInt32(bytes[offset + 2]) << 8 | UInt32(bytes[offset + 3])
    }

    mutating func readMessage() throws(DNSWireError) -> DecodedMessage {
        let count = count
        guard count >= 12 else {
            throw DNSWireError(
                .truncated, "packet of \(count) bytes is shorter than the 12-byte DNS header", at: 0)
        }
        let header = Header(id: uint16(0), flags: uint16(2))
        let questionCount = Int(uint16(4))
        let answerCount = Int(uint16(6))
        let authorityCount = Int(uint16(8))
        let additionalCount = Int(uint16(10))
        let recordCount = answerCount + authorityCount + additionalCount
        // Fail fast, before allocating anything in proportion to what the header claims.
        let needed =
            12 + questionCount * Self.minimumQuestionLength + recordCount * Self.minimumRecordLength
        guard needed <= count else {
            throw DNSWireError(
                .countExceedsData,
                "header claims \(questionCount) questions and \(recordCount) records, "
                    + "which need at least \(needed) bytes, but the packet has \(count)",
                at: 4)
        }
        position = 12
        var questions: [Question] = []
        if questionCount > 0 {
            questions.reserveCapacity(questionCount)
            for _ in 0..<questionCount { questions.append(try readQuestion()) }
        }
        var skipped: [SkippedRecord] = []
        let answers = try readSection(.answer, count: answerCount, skipped: &skipped)
        let authorities = try readSection(.authority, count: authorityCount, skipped: &skipped)
        let additionals = try readSection(.additional, count: additionalCount, skipped: &skipped)
        // Bytes after the last record are ignored: some stacks pad their packets.
        let message = Message(
            header: header, questions: questions, answers: answers, authorities: authorities,
            additionals: additionals)
        return DecodedMessage(message: message, skippedRecords: skipped)
    }

    mutating func readSection(_ section: MessageSection, count: Int, skipped: inout [SkippedRecord])
        throws(DNSWireError) -> [ResourceRecord]
    {
        var records: [ResourceRecord] = []
        guard count > 0 else { return records }
        records.reserveCapacity(count)
        for _ in 0..<count { try readRecord(into: &records, section: section, skipped: &skipped) }
        return records
    }

    mutating func readQuestion() throws(DNSWireError) -> Question {
        let start = position
        let (name, end) = try readName(at: position, limit: count)
        guard end + 4 <= count else {
            throw DNSWireError(.truncated, "question for \(name) ends before its type and class", at: start)
        }
        let type = RecordType(uint16(end))
        let rawClass = uint16(end + 2)
        position = end + 4
        return Question(
            name: name, type: type, class: RecordClass(rawClass & 0x7FFF),
            unicastResponse: rawClass & 0x8000 != 0)
    }

    /// Reads one record. A broken name or length is fatal for the packet (the next record's
    /// start is unknown); broken data inside a sound length is noted in `skipped`.
    mutating func readRecord(
        into records: inout [ResourceRecord], section: MessageSection,
        skipped: inout [SkippedRecord]
    ) throws(DNSWireError) {
        let start = position
        let (name, end) = try readName(at: position, limit: count)
        guard end + 10 <= count else {
            throw DNSWireError(
                .truncated, "record for \(name) ends before its type, class, TTL and length",
                at: start)
        }
        let type = RecordType(uint16(end))
        let rawClass = uint16(end + 2)
        let ttl = uint32(end + 4)
        let length = Int(uint16(end + 8))
        let dataStart = end + 10
        let dataEnd = dataStart + length
        guard dataEnd <= count else {
            let remaining = count - dataStart
            throw DNSWireError(
                .truncated,
                "\(type) record for \(name) claims \(length) bytes of data but only "
                    + "\(remaining) remain",
                at: end + 8)
        }
        position = dataEnd
        do {
            let data = try readData(type: type, from: dataStart, to: dataEnd)
            records.append(
                ResourceRecord(
                    name: name, data: data, ttl: ttl,
                    // OPT's class is the sender's UDP payload size: all 16 bits are its own.
                    class: RecordClass(type == .opt ? rawClass : rawClass & 0x7FFF),
                    cacheFlush: type != .opt && rawClass & 0x8000 != 0))
        } catch {
            skipped.append(SkippedRecord(section: section, name: name, type: type, error: error))
        }
    }

    mutating func readData(type: RecordType, from start: Int, to end: Int) throws(DNSWireError) -> RecordData {
        let length = end - start
        func requireLength(_ expected: Int) throws(DNSWireError) {
            guard length == expected else {
                throw DNSWireError(
                    .badRecordData,
                    "\(type) data must be \(expected) bytes, RDLENGTH says \(length)", at: start)
            }
        }
        switch type {
        case .a:
            try requireLength(4)
            return .a(IPv4Address(uint32(start)))
        case .aaaa:
            try requireLength(16)
            var high: UInt64 = 0
            var low: UInt64 = 0
            for index in 0..<8 {
                high = high << 8 | UInt64(byte(start + index))
                low = low << 8 | UInt64(byte(start + 8 + index))
            }
            return .aaaa(IPv6Address(high: high, low: low))
        case .ptr, .cname, .ns:
            let target = try readNameFilling(from: start, to: end, in: type)
            switch type {
            case .ptr: return .ptr(target)
            case .cname: return .cname(target)
            default: return .ns(target)
            }
        case .soa:
            let (primary, primaryEnd) = try readName(at: start, limit: end)
            let (mailbox, mailboxEnd) = try readName(at: primaryEnd, limit: end)
            guard mailboxEnd + 20 == end else {
                throw DNSWireError(
                    .badRecordData, "SOA data must end with five 32-bit numbers, 20 bytes; \(end - mailboxEnd) remain",
                    at: mailboxEnd)
            }
            return .soa(
                SOAData(
                    primary: primary, mailbox: mailbox, serial: uint32(mailboxEnd), refresh: uint32(mailboxEnd + 4),
                    retry: uint32(mailboxEnd + 8), expire: uint32(mailboxEnd + 12), minimum: uint32(mailboxEnd + 16)))
        case .srv:
            guard length >= 7 else {
                throw DNSWireError(
                    .badRecordData, "SRV data of \(length) bytes is too short", at: start)
            }
            let target = try readNameFilling(from: start + 6, to: end, in: type)
            return .srv(
                SRVData(
                    priority: uint16(start), weight: uint16(start + 2), port: uint16(start + 4),
                    target: target))
        case .txt:
            var index = start
            while index < end {
                index += 1 + Int(byte(index))
            }
            guard index == end else {
                throw DNSWireError(
                    .badRecordData, "a TXT string runs past the record's end", at: start)
            }
            return .txt(TXTData(validatedRDATA: Array(bytes[start..<end])))
        case .hinfo:
            var strings: [[UInt8]] = []
            var index = start
            while index < end && strings.count < 2 {
                let stringLength = Int(byte(index))
                guard index + 1 + stringLength <= end else {
                    throw DNSWireError(
                        .badRecordData, "HINFO string runs past the record's end", at: index)
                }
                strings.append(Array(bytes[(index + 1)..<(index + 1 + stringLength)]))
                index += 1 + stringLength
            }
            guard strings.count == 2, index == end else {
                throw DNSWireError(
                    .badRecordData, "HINFO data must be exactly two character-strings", at: start)
            }
            return .hinfo(HINFOData(cpu: strings[0], os: strings[1]))
        case .nsec:
            let (next, nameEnd) = try readName(at: start, limit: end)
            var nsec = NSECData(nextName: next, types: [])
            var index = nameEnd
            var lastWindow = -1
            while index < end {
                guard index + 2 <= end else {
                    throw DNSWireError(.badRecordData, "NSEC bitmap header is cut short", at: index)
                }
                let window = Int(byte(index))
                let bitmapLength = Int(byte(index + 1))
                guard window > lastWindow, (1...32).contains(bitmapLength),
                    index + 2 + bitmapLength <= end
                else {
                    throw DNSWireError(
                        .badRecordData,
                        "NSEC window \(window) with a \(bitmapLength)-byte bitmap is malformed",
                        at: index)
                }
                lastWindow = window
                for offset in 0..<bitmapLength {
                    let bits = byte(index + 2 + offset)
                    if bits == 0 { continue }
                    for bit in 0..<8 where bits & (0x80 >> UInt8(bit)) != 0 {
                        nsec.insert(RecordType(UInt16(window << 8 | offset << 3 | bit)))
                    }
                }
                index += 2 + bitmapLength
            }
            return .nsec(nsec)
        case .opt:
            return .opt(Array(bytes[start..<end]))
        default:
            return .unknown(type, Array(bytes[start..<end]))
        }
    }

    /// Reads a name that must end exactly at `end`.
    mutating func readNameFilling(from start: Int, to end: Int, in type: RecordType) throws(DNSWireError)
        -> DomainName
    {
        let (name, nameEnd) = try readName(at: start, limit: end)
        guard nameEnd == end else {
            throw DNSWireError(
                .badRecordData,
                "\(type) data has \(end - nameEnd) bytes after its name", at: nameEnd)
        }
        return name
    }

    /// Reads a possibly compressed name starting at `start`.
    ///
    /// `limit` bounds the bytes read in place (a name inside RDATA must not run past it);
    /// after a compression pointer the whole packet may be read. Returns the name and the
    /// offset just after its in-place part.
    mutating func readName(at start: Int, limit: Int) throws(DNSWireError) -> (DomainName, Int) {
        let (name, labels, end) = try readNameUncached(at: start, limit: limit)
        if start <= 0x3FFF && !name.isRoot {
            if decodedNames.isEmpty { decodedNames.reserveCapacity(16) }
            decodedNames.append(DecodedName(offset: start, labels: labels, name: name))
        }
        return (name, end)
    }

    private func decodedName(at offset: Int) -> (name: DomainName, labels: Int)? {
        for entry in decodedNames where entry.offset == offset { return (entry.name, entry.labels) }
        return nil
    }

    private mutating func readNameUncached(at start: Int, limit: Int) throws(DNSWireError)
        -> (DomainName, Int, Int)
    {
        var storage: [UInt8] = []
        var index = start
        var bound = limit
        var end: Int? = nil
        var labels = 0
        visited.removeAll(keepingCapacity: true)
        while true {
            guard index < bound else {
                throw DNSWireError(.truncated, "name starting at \(start) is cut short", at: index)
            }
            let length = byte(index)
            switch length & 0xC0 {
            case 0x00:
                if length == 0 {
                    if end == nil { end = index + 1 }
                    if storage.isEmpty { return (.root, 0, end ?? index + 1) }
                    return (DomainName(uncheckedStorage: storage), labels, end ?? index + 1)
                }
                let next = index + 1 + Int(length)
                guard next <= bound else {
                    throw DNSWireError(
                        .truncated, "label of \(length) bytes runs past the end of its data",
                        at: index)
                }
                labels += 1
                guard labels <= DomainName.maximumLabelCount else {
                    throw DNSWireError(
                        .tooManyLabels, "name has more than 128 labels", at: index)
                }
                guard storage.count + 1 + Int(length) + 1 <= DomainName.maximumWireLength else {
                    throw DNSWireError(
                        .nameTooLong, "name is longer than the 255-byte limit", at: index)
                }
                if storage.isEmpty { storage.reserveCapacity(64) }
                storage.append(contentsOf: UnsafeRawBufferPointer(rebasing: bytes[index..<next]))
                index = next
            case 0xC0:
                guard index + 1 < bound else {
                    throw DNSWireError(.truncated, "compression pointer is cut short", at: index)
                }
                let target = Int(length & 0x3F) << 8 | Int(byte(index + 1))
                if end == nil { end = index + 2 }
                guard target != index else {
                    throw DNSWireError(.selfPointer, "compression pointer points at itself", at: index)
                }
                guard target < count else {
                    let count = count
                    throw DNSWireError(
                        .pointerOutOfBounds,
                        "compression pointer to \(target) is beyond the \(count)-byte packet",
                        at: index)
                }
                if let known = decodedName(at: target) {
                    // The rest of this name was decoded before, loop-free by construction.
                    let pointerEnd = end ?? index + 2
                    if storage.isEmpty { return (known.name, known.labels, pointerEnd) }
                    guard labels + known.labels <= DomainName.maximumLabelCount else {
                        throw DNSWireError(.tooManyLabels, "name has more than 128 labels", at: index)
                    }
                    guard storage.count + known.name.storage.count + 1 <= DomainName.maximumWireLength
                    else {
                        throw DNSWireError(
                            .nameTooLong, "name is longer than the 255-byte limit", at: index)
                    }
                    storage.append(contentsOf: known.name.storage)
                    return (DomainName(uncheckedStorage: storage), labels + known.labels, pointerEnd)
                }
                guard !visited.contains(target) else {
                    throw DNSWireError(
                        .pointerLoop,
                        "compression pointer to \(target) loops back into the same name", at: index)
                }
                guard visited.count < DomainName.maximumLabelCount else {
                    throw DNSWireError(
                        .tooManyPointers, "name follows more than 128 compression pointers",
                        at: index)
                }
                visited.append(target)
                index = target
                bound = count
            default:
                throw DNSWireError(
                    .reservedLabelType,
                    "label type 0x\(String(length & 0xC0, radix: 16)) is reserved", at: index)
            }
        }
    }
}
