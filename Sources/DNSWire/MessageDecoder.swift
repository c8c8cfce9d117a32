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

extension RecordData {
    /// Reads record data of `type` on its own, as a DNS-SD daemon or a DSO TLV hands it over:
    /// names written in full (a compression pointer could only point inside `rdata`), every
    /// type through the same hardened reader as a message's records.
    /// - Throws: ``DNSWireError`` saying what is wrong with the data.
    public init(type: RecordType, rdata: [UInt8]) throws(DNSWireError) {
        guard rdata.count <= Int(UInt16.max) else {
            throw DNSWireError(.badRecordData, "\(type) data of \(rdata.count) bytes; a record holds at most 65535")
        }
        let result = rdata.withUnsafeBytes { raw in
            Result { () throws(DNSWireError) -> RecordData in
                try WireReader.reading(raw) { (reader) throws(DNSWireError) in try reader.readData(type: type, from: 0, to: rdata.count) }
            }
        }
        self = try result.get()
    }
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
        try WireReader.reading(bytes) { (reader) throws(DNSWireError) in try reader.readMessage() }
    }
}

/// Bounds-checked reading of one packet. Every read checks its bounds and throws; nothing traps.
struct WireReader {
    /// Fewest bytes a question can take: root name (1) + type + class.
    static let minimumQuestionLength = 5
    /// Fewest bytes a record can take: root name (1) + type + class + TTL + RDLENGTH.
    static let minimumRecordLength = 11

    let bytes: UnsafeRawBufferPointer
    /// Room to gather one name's labels from the pieces its pointers lead to.
    let scratch: UnsafeMutableRawBufferPointer
    var position = 0
    /// True while reading a DNS UPDATE (OPCODE 5), whose prerequisites and deletions carry
    /// class ANY or NONE with no data whatever their type (RFC 2136 §2.4, §2.5.2, §2.5.3).
    var readingUpdate = false
    /// Pointer targets visited while reading the current name from its third jump on (the first
    /// two are held in locals); reused across names, so it allocates at most once per decode.
    private var visited: [Int] = []
    /// Names already decoded, by the offset they start at. A compression pointer to one of them
    /// reuses it, so a name that is only a pointer (most owner names) costs no allocation.
    /// Held on the stack for the duration of one decode; when full, further names are not
    /// remembered (pointers to them then copy their labels again).
    private let decodedNames: UnsafeMutableBufferPointer<DecodedName>
    private var decodedNameCount = 0
    /// How many names one decode remembers: 32 entries stay within what Swift keeps on the stack.
    static let decodedNameCapacity = 32

    struct DecodedName {
        var offset: Int
        var labels: Int
        var name: DomainName
    }

    /// Runs `body` with a reader of `bytes` whose scratch space is on the stack.
    static func reading<T>(
        _ bytes: UnsafeRawBufferPointer, _ body: (inout WireReader) throws(DNSWireError) -> T
    ) throws(DNSWireError) -> T {
        let result = withUnsafeTemporaryAllocation(byteCount: DomainName.maximumWireLength, alignment: 1) { scratch in
            withUnsafeTemporaryAllocation(of: DecodedName.self, capacity: decodedNameCapacity) { names in
                var reader = WireReader(bytes, scratch: scratch, names: names)
                let result = Result { () throws(DNSWireError) -> T in try body(&reader) }
                _ = UnsafeMutableBufferPointer(rebasing: names[0..<reader.decodedNameCount]).deinitialize()
                return result
            }
        }
        return try result.get()
    }

    /// `scratch` must hold at least ``DomainName/maximumWireLength`` bytes; `names` is room for
    /// the names to remember, and ``reading(_:_:)`` deinitializes those it holds.
    private init(
        _ bytes: UnsafeRawBufferPointer, scratch: UnsafeMutableRawBufferPointer,
        names: UnsafeMutableBufferPointer<DecodedName>
    ) {
        self.bytes = bytes
        self.scratch = scratch
        self.decodedNames = names
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
        readingUpdate = header.opcode == Header.updateOpcode
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
            let data: RecordData
            if readingUpdate && length == 0 && type != .opt
                && (rawClass == RecordClass.any.rawValue || rawClass == RecordClass.none.rawValue)
            {
                // "Delete an RRset", "delete all RRsets from a name" and the prerequisites:
                // the type names what is meant, and there is no data to read as that type.
                data = .unknown(type, [])
            } else {
                data = try readData(type: type, from: dataStart, to: dataEnd)
            }
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
            return .txt(TXTData(validatedRDATA: copy(from: start, to: end)))
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
                    // Only the bits that are set: the most significant is the window's
                    // type offset * 8 (RFC 4034 §4.1.2).
                    var bits = byte(index + 2 + offset)
                    while bits != 0 {
                        let bit = bits.leadingZeroBitCount
                        nsec.insert(RecordType(UInt16(window << 8 | offset << 3 | bit)))
                        bits &= ~(0x80 >> UInt8(bit))
                    }
                }
                index += 2 + bitmapLength
            }
            return .nsec(nsec)
        case .opt:
            return .opt(copy(from: start, to: end))
        default:
            return .unknown(type, copy(from: start, to: end))
        }
    }

    /// The bytes from `start` to `end`, which the caller has checked, in an array of their own.
    func copy(from start: Int, to end: Int) -> [UInt8] {
        Array(UnsafeRawBufferPointer(rebasing: bytes[start..<end]))
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
    ///
    /// Two passes: the first follows the name through its pointers and checks every rule,
    /// counting its bytes; the second copies the labels into storage of exactly that size. A
    /// name that is only a pointer to a name decoded before shares that name's storage, and a
    /// name whose tail is one copies it from there, so most names in a packet cost at most one
    /// allocation and many none.
    mutating func readName(at start: Int, limit: Int) throws(DNSWireError) -> (DomainName, Int) {
        var index = start
        var bound = limit
        var end = -1
        var labels = 0
        // Bytes of labels (length bytes included), without the final zero.
        var total = 0
        // The cached name this one ends in, if the walk met a pointer to one.
        var tail: DomainName? = nil
        // Pointer targets followed so far; the first two are held here, the rest in `visited`.
        var firstTarget = -1
        var secondTarget = -1
        var jumps = 0
        walk: while true {
            guard index < bound else {
                throw DNSWireError(.truncated, "name starting at \(start) is cut short", at: index)
            }
            let length = byte(index)
            switch length & 0xC0 {
            case 0x00:
                if length == 0 {
                    if end < 0 { end = index + 1 }
                    break walk
                }
                let next = index + 1 + Int(length)
                guard next <= bound else {
                    throw DNSWireError(
                        .truncated, "label of \(length) bytes runs past the end of its data",
                        at: index)
                }
                labels += 1
                guard labels <= DomainName.maximumLabelCount else {
                    throw DNSWireError(.tooManyLabels, "name has more than 128 labels", at: index)
                }
                total += 1 + Int(length)
                guard total + 1 <= DomainName.maximumWireLength else {
                    throw DNSWireError(.nameTooLong, "name is longer than the 255-byte limit", at: index)
                }
                index = next
            case 0xC0:
                guard index + 1 < bound else {
                    throw DNSWireError(.truncated, "compression pointer is cut short", at: index)
                }
                let target = Int(length & 0x3F) << 8 | Int(byte(index + 1))
                if end < 0 { end = index + 2 }
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
                    if total == 0 { return (known.name, end) }
                    guard labels + known.labels <= DomainName.maximumLabelCount else {
                        throw DNSWireError(.tooManyLabels, "name has more than 128 labels", at: index)
                    }
                    guard total + known.name.storage.count + 1 <= DomainName.maximumWireLength else {
                        throw DNSWireError(.nameTooLong, "name is longer than the 255-byte limit", at: index)
                    }
                    labels += known.labels
                    tail = known.name
                    break walk
                }
                let seen: Bool
                switch jumps {
                case 0: seen = false
                case 1: seen = target == firstTarget
                case 2: seen = target == firstTarget || target == secondTarget
                default: seen = target == firstTarget || target == secondTarget || visited.contains(target)
                }
                guard !seen else {
                    throw DNSWireError(
                        .pointerLoop,
                        "compression pointer to \(target) loops back into the same name", at: index)
                }
                guard jumps < DomainName.maximumLabelCount else {
                    throw DNSWireError(
                        .tooManyPointers, "name follows more than 128 compression pointers",
                        at: index)
                }
                switch jumps {
                case 0: firstTarget = target
                case 1: secondTarget = target
                case 2:
                    visited.removeAll(keepingCapacity: true)
                    visited.append(target)
                default: visited.append(target)
                }
                jumps += 1
                index = target
                bound = count
            default:
                throw DNSWireError(
                    .reservedLabelType,
                    "label type 0x\(String(length & 0xC0, radix: 16)) is reserved", at: index)
            }
        }
        let tailCount = tail?.storage.count ?? 0
        let name: DomainName
        if total == 0 && tailCount == 0 {
            name = .root
        } else if jumps == 0 && tailCount == 0 {
            // All in place: one copy straight from the packet.
            name = DomainName(uncheckedStorage: Array(UnsafeRawBufferPointer(rebasing: bytes[start..<(start + total)])))
        } else {
            // Gather the pieces in the scratch space (a name is at most 255 bytes), then copy
            // once. The walk above checked every byte this reads.
            var from = start
            var to = 0
            while to < total {
                let length = Int(bytes[from])
                if length & 0xC0 == 0xC0 {
                    from = (length & 0x3F) << 8 | Int(bytes[from + 1])
                    continue
                }
                let run = 1 + length
                UnsafeMutableRawBufferPointer(rebasing: scratch[to..<(to + run)])
                    .copyMemory(from: UnsafeRawBufferPointer(rebasing: bytes[from..<(from + run)]))
                to += run
                from += run
            }
            if let tail {
                tail.storage.withUnsafeBytes { source in
                    UnsafeMutableRawBufferPointer(rebasing: scratch[total..<(total + tailCount)])
                        .copyMemory(from: source)
                }
            }
            name = DomainName(uncheckedStorage: Array(UnsafeRawBufferPointer(rebasing: scratch[0..<(total + tailCount)])))
        }
        // A name with labels is kept for the pointers that may point at its start; one that is
        // only a pointer returned above, and is found through its target.
        if total > 0 && start <= 0x3FFF {
            if decodedNameCount < decodedNames.count {
                decodedNames.initializeElement(
                    at: decodedNameCount, to: DecodedName(offset: start, labels: labels, name: name))
                decodedNameCount += 1
            }
        }
        return (name, end)
    }

    private func decodedName(at offset: Int) -> (name: DomainName, labels: Int)? {
        for index in 0..<decodedNameCount where decodedNames[index].offset == offset {
            return (decodedNames[index].name, decodedNames[index].labels)
        }
        return nil
    }
}
