extension Message {
    /// The largest UDP payload that fits a 1500-byte Ethernet MTU over IPv4 (RFC 6762 §17).
    public static let defaultMaximumPacketSize = 1472
    /// The absolute upper bound for an mDNS packet (RFC 6762 §17).
    public static let absoluteMaximumPacketSize = 9000

    /// Encodes the message into one packet, with name compression.
    ///
    /// - Throws: ``DNSWireError`` when a value does not fit its field (a TXT string over 255
    ///   bytes, RDATA over 65535 bytes) or the packet would exceed 65535 bytes.
    public func encoded() throws(DNSWireError) -> [UInt8] {
        var writer = WireWriter(header: header)
        for question in questions { try writer.write(question) }
        for record in answers { try writer.write(record) }
        for record in authorities { try writer.write(record) }
        for record in additionals { try writer.write(record) }
        writer.setCounts(questions.count, answers.count, authorities.count, additionals.count)
        guard writer.bytes.count <= Int(UInt16.max),
            [questions.count, answers.count, authorities.count, additionals.count]
                .allSatisfy({ $0 <= Int(UInt16.max) })
        else {
            let size = writer.bytes.count
            throw DNSWireError(
                .cannotEncode,
                "message of \(size) bytes does not fit one DNS message; "
                    + "use encodedPackets(maximumPacketSize:)")
        }
        return writer.bytes
    }

    /// Encodes the message into as many packets as needed to keep each under
    /// `maximumPacketSize` bytes, filling each packet in section order.
    ///
    /// For a query whose questions and known answers do not fit one packet, every packet but the
    /// last has the TC bit set, telling responders that more known answers follow
    /// (RFC 6762 §7.2). Responses never set TC (RFC 6762 §18.5). A single record too large for
    /// `maximumPacketSize` goes alone into a packet of up to 9000 bytes.
    ///
    /// - Throws: ``DNSWireError`` when one question or record alone exceeds 9000 bytes.
    public func encodedPackets(maximumPacketSize: Int = Message.defaultMaximumPacketSize)
        throws(DNSWireError) -> [[UInt8]]
    {
        let limit = max(maximumPacketSize, 12 + WireReader.minimumRecordLength)
        var packets: [[UInt8]] = []
        var writer = WireWriter(header: header)
        var counts = [0, 0, 0, 0]

        func finishPacket(moreFollow: Bool) {
            writer.setCounts(counts[0], counts[1], counts[2], counts[3])
            if !header.isResponse && moreFollow { writer.setTruncated() }
            packets.append(writer.bytes)
            writer = WireWriter(header: header)
            counts = [0, 0, 0, 0]
        }

        func add(section: Int, _ write: (inout WireWriter) throws(DNSWireError) -> Void) throws(DNSWireError) {
            let mark = writer.mark
            try write(&writer)
            if writer.bytes.count > limit && counts.reduce(0, +) > 0 {
                writer.rollBack(to: mark)
                finishPacket(moreFollow: true)
                try write(&writer)
            }
            guard writer.bytes.count <= Self.absoluteMaximumPacketSize, counts[section] < Int(UInt16.max)
            else {
                let size = writer.bytes.count
                throw DNSWireError(
                    .cannotEncode,
                    "a \(MessageSection.allInOrder[section]) entry needs a packet of "
                        + "\(size) bytes, over the 9000-byte mDNS limit")
            }
            counts[section] += 1
        }

        for question in questions { try add(section: 0) { w throws(DNSWireError) in try w.write(question) } }
        for record in answers { try add(section: 1) { w throws(DNSWireError) in try w.write(record) } }
        for record in authorities { try add(section: 2) { w throws(DNSWireError) in try w.write(record) } }
        for record in additionals { try add(section: 3) { w throws(DNSWireError) in try w.write(record) } }
        finishPacket(moreFollow: false)
        return packets
    }
}

extension MessageSection {
    static let allInOrder: [MessageSection] = [.question, .answer, .authority, .additional]
}

/// A suffix of a name's wire storage, used as a key for name compression without copying.
///
/// Matching is exact, not case-insensitive: `_HTTP._tcp.Local.` after `_http._tcp.local.` is
/// written out rather than pointed at, so every name keeps the case its owner gave it
/// (RFC 1035 §2.3.3, RFC 6762 §16).
struct NameSuffix: Hashable {
    let storage: [UInt8]
    let start: Int

    static func == (lhs: NameSuffix, rhs: NameSuffix) -> Bool {
        lhs.storage[lhs.start...] == rhs.storage[rhs.start...]
    }

    func hash(into hasher: inout Hasher) {
        // Length plus the first bytes is selective enough for the few names of one packet,
        // and keeps hashing cost flat for long names; equality settles the rest.
        let length = storage.count - start
        hasher.combine(length)
        var packed: UInt64 = 0
        var index = start
        let end = min(storage.count, start + 8)
        while index < end {
            packed = packed << 8 | UInt64(storage[index])
            index += 1
        }
        hasher.combine(packed)
    }
}

/// Writes one packet, remembering where each name suffix went for compression.
struct WireWriter {
    var bytes: [UInt8]
    private var offsets: [NameSuffix: Int] = [:]
    private var added: [NameSuffix] = []
    /// False to write every name in full (RDATA on its own has nothing to point at).
    private var compressNames = true

    /// A writer for bare RDATA: no header, no compression.
    init() {
        bytes = []
        compressNames = false
    }

    init(header: Header) {
        bytes = []
        bytes.reserveCapacity(512)
        appendUInt16(header.id)
        appendUInt16(header.flags & ~0x0200)  // TC is decided when the packet is finished
        bytes.append(contentsOf: repeatElement(0, count: 8))
        if header.isTruncated { setTruncated() }
    }

    struct Mark {
        var byteCount: Int
        var addedCount: Int
    }

    var mark: Mark { Mark(byteCount: bytes.count, addedCount: added.count) }

    /// Undoes everything written since `mark`, compression entries included.
    mutating func rollBack(to mark: Mark) {
        bytes.removeSubrange(mark.byteCount...)
        for key in added[mark.addedCount...] { offsets[key] = nil }
        added.removeSubrange(mark.addedCount...)
    }

    mutating func setCounts(_ questions: Int, _ answers: Int, _ authorities: Int, _ additionals: Int) {
        for (index, value) in [questions, answers, authorities, additionals].enumerated() {
            let clamped = UInt16(clamping: value)
            bytes[4 + 2 * index] = UInt8(clamped >> 8)
            bytes[5 + 2 * index] = UInt8(truncatingIfNeeded: clamped)
        }
    }

    mutating func setTruncated() { bytes[2] |= 0x02 }

    @inline(__always)
    mutating func appendUInt16(_ value: UInt16) {
        bytes.append(UInt8(value >> 8))
        bytes.append(UInt8(truncatingIfNeeded: value))
    }

    @inline(__always)
    mutating func appendUInt32(_ value: UInt32) {
        bytes.append(UInt8(value >> 24))
        bytes.append(UInt8(truncatingIfNeeded: value >> 16))
        bytes.append(UInt8(truncatingIfNeeded: value >> 8))
        bytes.append(UInt8(truncatingIfNeeded: value))
    }

    /// Writes a name, pointing at an earlier copy of its longest already-written suffix.
    mutating func write(_ name: DomainName) {
        let compress = compressNames
        let storage = name.storage
        var index = 0
        while index < storage.count {
            let length = Int(storage[index])
            if compress {
                let key = NameSuffix(storage: storage, start: index)
                if let offset = offsets[key] {
                    appendUInt16(0xC000 | UInt16(offset))
                    return
                }
                if bytes.count <= 0x3FFF {
                    offsets[key] = bytes.count
                    added.append(key)
                }
            }
            bytes.append(contentsOf: storage[index..<(index + 1 + length)])
            index += 1 + length
        }
        bytes.append(0)
    }

    mutating func write(_ question: Question) throws(DNSWireError) {
        write(question.name)
        appendUInt16(question.type.rawValue)
        appendUInt16(question.class.rawValue & 0x7FFF | (question.unicastResponse ? 0x8000 : 0))
    }

    mutating func write(_ record: ResourceRecord) throws(DNSWireError) {
        write(record.name)
        appendUInt16(record.type.rawValue)
        let flush: UInt16 = record.cacheFlush && record.type != .opt ? 0x8000 : 0
        appendUInt16(record.type == .opt ? record.class.rawValue : record.class.rawValue & 0x7FFF | flush)
        appendUInt32(record.ttl)
        let lengthOffset = bytes.count
        appendUInt16(0)
        try writeData(record.data, of: record.name)
        let length = bytes.count - lengthOffset - 2
        guard length <= Int(UInt16.max) else {
            throw DNSWireError(
                .cannotEncode,
                "\(record.type) data for \(record.name) is \(length) bytes; at most 65535 fit")
        }
        bytes[lengthOffset] = UInt8(length >> 8)
        bytes[lengthOffset + 1] = UInt8(truncatingIfNeeded: length)
    }

    private mutating func writeCharacterString(_ string: [UInt8], in type: RecordType, of name: DomainName)
        throws(DNSWireError)
    {
        guard string.count <= 255 else {
            throw DNSWireError(
                .cannotEncode,
                "\(type) string of \(string.count) bytes for \(name) is over the 255-byte limit")
        }
        bytes.append(UInt8(string.count))
        bytes.append(contentsOf: string)
    }

    mutating func writeData(_ data: RecordData, of name: DomainName) throws(DNSWireError) {
        switch data {
        case .a(let address):
            appendUInt32(address.value)
        case .aaaa(let address):
            for shift in stride(from: 56, through: 0, by: -8) {
                bytes.append(UInt8(truncatingIfNeeded: address.high >> UInt64(shift)))
            }
            for shift in stride(from: 56, through: 0, by: -8) {
                bytes.append(UInt8(truncatingIfNeeded: address.low >> UInt64(shift)))
            }
        case .ptr(let target), .cname(let target), .ns(let target):
            write(target)
        case .soa(let soa):
            write(soa.primary)
            write(soa.mailbox)
            for value in [soa.serial, soa.refresh, soa.retry, soa.expire, soa.minimum] { appendUInt32(value) }
        case .srv(let srv):
            appendUInt16(srv.priority)
            appendUInt16(srv.weight)
            appendUInt16(srv.port)
            write(srv.target)
        case .txt(let txt):
            bytes.append(contentsOf: txt.rdata)
        case .hinfo(let hinfo):
            try writeCharacterString(hinfo.cpu, in: .hinfo, of: name)
            try writeCharacterString(hinfo.os, in: .hinfo, of: name)
        case .nsec(let nsec):
            // RFC 6762 §18.14 lets mDNS compress the Next Domain Name.
            write(nsec.nextName)
            writeTypeBitmaps(nsec.types)
        case .opt(let raw), .unknown(_, let raw):
            bytes.append(contentsOf: raw)
        }
    }

    private mutating func writeTypeBitmaps(_ types: [RecordType]) {
        var index = 0
        let sorted = types.sorted()
        while index < sorted.count {
            let window = sorted[index].rawValue >> 8
            var bitmap = [UInt8](repeating: 0, count: 32)
            var used = 0
            while index < sorted.count && sorted[index].rawValue >> 8 == window {
                let low = Int(sorted[index].rawValue & 0xFF)
                bitmap[low >> 3] |= 0x80 >> UInt8(low & 7)
                used = max(used, (low >> 3) + 1)
                index += 1
            }
            bytes.append(UInt8(window))
            bytes.append(UInt8(used))
            bytes.append(contentsOf: bitmap[0..<used])
        }
    }
}

extension RecordData {
    /// The RDATA as it goes on the wire with every name written in full, for comparisons such
    /// as the simultaneous-probe tiebreak of RFC 6762 §8.2.
    public func uncompressedBytes() throws(DNSWireError) -> [UInt8] {
        var writer = WireWriter()
        try writer.writeData(self, of: .root)
        return writer.bytes
    }
}
