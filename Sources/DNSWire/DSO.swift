// DNS Stateful Operations (RFC 8490) and the TLVs of DNS Push Notifications (RFC 8765): the
// messages of a long-lived DNS session over TCP or TLS. A DSO message is a DNS header with
// OPCODE 6 and all four section counts zero, followed by TLVs (type, length, data). Names in
// DSO TLVs are written in full: there is nothing for a compression pointer to point at.

/// One DSO message.
public struct DSOMessage: Hashable, Sendable {
    /// OPCODE 6 (RFC 8490 §10.1).
    public static let opcode: UInt8 = 6

    /// The message ID: non-zero for a request and its response, zero for a unidirectional
    /// message (RFC 8490 §5.4.2).
    public var id: UInt16
    public var isResponse: Bool
    /// The header's 4-bit RCODE (DSO has no OPT record to extend it).
    public var responseCode: ResponseCode
    /// The TLVs in order: in a request or unidirectional message the first is the primary TLV,
    /// the rest additional TLVs.
    public var tlvs: [DSOTLV]

    public init(id: UInt16, isResponse: Bool = false, responseCode: ResponseCode = .noError, tlvs: [DSOTLV]) {
        self.id = id
        self.isResponse = isResponse
        self.responseCode = responseCode
        self.tlvs = tlvs
    }

    /// The primary TLV (the first), if any.
    public var primary: DSOTLV? { tlvs.first }

    /// The message on the wire, without TCP's 2-byte length.
    /// - Throws: ``DNSWireError`` (`cannotEncode`) when a TLV or the message exceeds 65,535 bytes,
    ///   or a PUSH change's TTL is outside 0…0x7FFFFFFF.
    public func encoded() throws(DNSWireError) -> [UInt8] {
        var header = Header(id: id)
        header.isResponse = isResponse
        header.opcode = Self.opcode
        header.responseCode = UInt8(responseCode.rawValue & 0xF)
        var writer = WireWriter(header: header)
        for tlv in tlvs {
            let data = try tlv.encodedData()
            guard data.count <= Int(UInt16.max) else {
                throw DNSWireError(.cannotEncode, "a DSO \(tlv.typeName) TLV of \(data.count) bytes exceeds 65535")
            }
            writer.appendUInt16(tlv.typeCode)
            writer.appendUInt16(UInt16(data.count))
            writer.bytes.append(contentsOf: data)
        }
        let size = writer.bytes.count
        guard size <= Int(UInt16.max) else {
            throw DNSWireError(.cannotEncode, "a DSO message of \(size) bytes exceeds 65535")
        }
        return writer.bytes
    }

    /// Reads a DSO message, treating it as hostile.
    /// - Throws: ``DNSWireError``: `truncated` (a header or TLV cut short), `badDSO` (not
    ///   OPCODE 6, section counts that are not zero, a TLV whose data does not match its type,
    ///   a compressed name, a reserved TTL).
    public init(decoding bytes: [UInt8]) throws(DNSWireError) {
        guard bytes.count >= 12 else {
            throw DNSWireError(.truncated, "a DSO message needs a 12-byte header, got \(bytes.count) bytes", at: 0)
        }
        let header = Header(id: UInt16(bytes[0]) << 8 | UInt16(bytes[1]), flags: UInt16(bytes[2]) << 8 | UInt16(bytes[3]))
        guard header.opcode == Self.opcode else {
            throw DNSWireError(.badDSO, "OPCODE \(header.opcode) is not DSO (6)", at: 2)
        }
        guard bytes[4..<12].allSatisfy({ $0 == 0 }) else {
            throw DNSWireError(.badDSO, "a DSO message must have no questions or records (its counts are not zero)", at: 4)
        }
        id = header.id
        isResponse = header.isResponse
        responseCode = ResponseCode(UInt16(header.responseCode))
        var tlvs: [DSOTLV] = []
        var offset = 12
        while offset < bytes.count {
            guard offset + 4 <= bytes.count else {
                throw DNSWireError(.truncated, "a DSO TLV header is cut short", at: offset)
            }
            let type = UInt16(bytes[offset]) << 8 | UInt16(bytes[offset + 1])
            let length = Int(UInt16(bytes[offset + 2]) << 8 | UInt16(bytes[offset + 3]))
            let start = offset + 4
            guard start + length <= bytes.count else {
                throw DNSWireError(.truncated, "a DSO TLV of type \(type) claims \(length) bytes; \(bytes.count - start) remain", at: offset + 2)
            }
            tlvs.append(try DSOTLV(type: type, data: Array(bytes[start..<(start + length)]), at: start))
            offset = start + length
        }
        self.tlvs = tlvs
    }
}

extension ResponseCode {
    /// DSOTYPENI: the DSO TLV type of a request is not implemented (RFC 8490 §10.2).
    public static let dsoTypeNotImplemented = ResponseCode(11)
}

/// A TLV of a DSO message.
public enum DSOTLV: Hashable, Sendable {
    /// Keepalive (RFC 8490 §7.1): the inactivity timeout and the keepalive interval, in
    /// milliseconds (0xFFFFFFFF: infinite).
    case keepalive(inactivityTimeout: UInt32, keepaliveInterval: UInt32)
    /// Retry Delay (§7.2): how long the client should wait before trying again, in ms.
    case retryDelay(UInt32)
    /// Encryption Padding (§7.3): this many bytes of padding (their value is ignored).
    case encryptionPadding(Int)
    /// SUBSCRIBE (RFC 8765 §6.2): the name, type and class to be told about.
    case subscribe(name: DomainName, type: RecordType, class: RecordClass)
    /// PUSH (RFC 8765 §6.3): changes to subscribed records.
    case push([PushChange])
    /// UNSUBSCRIBE (RFC 8765 §6.4): the message ID of the SUBSCRIBE to end.
    case unsubscribe(messageID: UInt16)
    /// RECONFIRM (RFC 8765 §6.5): a record the client believes is gone.
    case reconfirm(ResourceRecord)
    /// A type this codec does not know, kept as it came.
    case unknown(type: UInt16, data: [UInt8])

    public static let keepaliveType: UInt16 = 0x0001
    public static let retryDelayType: UInt16 = 0x0002
    public static let encryptionPaddingType: UInt16 = 0x0003
    public static let subscribeType: UInt16 = 0x0040
    public static let pushType: UInt16 = 0x0041
    public static let unsubscribeType: UInt16 = 0x0042
    public static let reconfirmType: UInt16 = 0x0043

    /// The DSO-TYPE on the wire.
    public var typeCode: UInt16 {
        switch self {
        case .keepalive: Self.keepaliveType
        case .retryDelay: Self.retryDelayType
        case .encryptionPadding: Self.encryptionPaddingType
        case .subscribe: Self.subscribeType
        case .push: Self.pushType
        case .unsubscribe: Self.unsubscribeType
        case .reconfirm: Self.reconfirmType
        case .unknown(let type, _): type
        }
    }

    /// The TLV's name as the RFCs spell it (`Keepalive`, `SUBSCRIBE`, …).
    public var typeName: String {
        switch self {
        case .keepalive: "Keepalive"
        case .retryDelay: "Retry Delay"
        case .encryptionPadding: "Encryption Padding"
        case .subscribe: "SUBSCRIBE"
        case .push: "PUSH"
        case .unsubscribe: "UNSUBSCRIBE"
        case .reconfirm: "RECONFIRM"
        case .unknown(let type, _): "type \(type)"
        }
    }

    func encodedData() throws(DNSWireError) -> [UInt8] {
        var writer = WireWriter()
        switch self {
        case .keepalive(let inactivity, let interval):
            writer.appendUInt32(inactivity)
            writer.appendUInt32(interval)
        case .retryDelay(let delay):
            writer.appendUInt32(delay)
        case .encryptionPadding(let count):
            writer.bytes.append(contentsOf: repeatElement(0, count: max(0, min(count, Int(UInt16.max)))))
        case .subscribe(let name, let type, let recordClass):
            writer.write(name)
            writer.appendUInt16(type.rawValue)
            writer.appendUInt16(recordClass.rawValue)
        case .push(let changes):
            for change in changes { try change.write(to: &writer) }
        case .unsubscribe(let id):
            writer.appendUInt16(id)
        case .reconfirm(let record):
            writer.write(record.name)
            writer.appendUInt16(record.type.rawValue)
            writer.appendUInt16(record.class.rawValue)
            try writer.writeData(record.data, of: record.name)
        case .unknown(_, let data):
            writer.bytes = data
        }
        return writer.bytes
    }

    /// Reads the data of a TLV of `type`; `at` is its offset in the message, for errors.
    init(type: UInt16, data: [UInt8], at offset: Int) throws(DNSWireError) {
        func fixed(_ count: Int) throws(DNSWireError) {
            guard data.count == count else {
                throw DNSWireError(.badDSO, "a DSO TLV of type \(type) must hold \(count) bytes, not \(data.count)", at: offset)
            }
        }
        func u32(_ at: Int) -> UInt32 {
            UInt32(data[at]) << 24 | UInt32(data[at + 1]) << 16 | UInt32(data[at + 2]) << 8 | UInt32(data[at + 3])
        }
        switch type {
        case Self.keepaliveType:
            try fixed(8)
            self = .keepalive(inactivityTimeout: u32(0), keepaliveInterval: u32(4))
        case Self.retryDelayType:
            try fixed(4)
            self = .retryDelay(u32(0))
        case Self.encryptionPaddingType:
            self = .encryptionPadding(data.count)
        case Self.unsubscribeType:
            try fixed(2)
            self = .unsubscribe(messageID: UInt16(data[0]) << 8 | UInt16(data[1]))
        case Self.subscribeType:
            var position = 0
            let name = try DSOTLV.readName(data, at: &position, tlvOffset: offset)
            guard data.count == position + 4 else {
                throw DNSWireError(.badDSO, "a SUBSCRIBE TLV must end with its type and class after the name", at: offset)
            }
            let type = RecordType(UInt16(data[position]) << 8 | UInt16(data[position + 1]))
            let recordClass = RecordClass(UInt16(data[position + 2]) << 8 | UInt16(data[position + 3]))
            self = .subscribe(name: name, type: type, class: recordClass)
        case Self.pushType:
            var changes: [PushChange] = []
            var position = 0
            while position < data.count {
                changes.append(try PushChange.read(data, at: &position, tlvOffset: offset))
            }
            guard !changes.isEmpty else {
                throw DNSWireError(.badDSO, "a PUSH TLV holds no change", at: offset)
            }
            self = .push(changes)
        case Self.reconfirmType:
            var position = 0
            let name = try DSOTLV.readName(data, at: &position, tlvOffset: offset)
            guard data.count >= position + 4 else {
                throw DNSWireError(.truncated, "a RECONFIRM TLV ends before its type and class", at: offset)
            }
            let type = RecordType(UInt16(data[position]) << 8 | UInt16(data[position + 1]))
            let recordClass = RecordClass(UInt16(data[position + 2]) << 8 | UInt16(data[position + 3]))
            let rdata = Array(data[(position + 4)...])
            let record = try DSOTLV.record(name: name, type: type, class: recordClass, ttl: 0, rdata: rdata, tlvOffset: offset)
            self = .reconfirm(record)
        default:
            self = .unknown(type: type, data: data)
        }
    }

    /// A name written in full at `position` of a TLV's data; compression pointers are refused
    /// (a DSO TLV has nothing to point at).
    static func readName(_ data: [UInt8], at position: inout Int, tlvOffset: Int) throws(DNSWireError) -> DomainName {
        var labels: [[UInt8]] = []
        var index = position
        while true {
            guard index < data.count else {
                throw DNSWireError(.truncated, "a name in a DSO TLV ends before its zero byte", at: tlvOffset + index)
            }
            let length = Int(data[index])
            if length == 0 { break }
            guard length <= DomainName.maximumLabelLength else {
                throw DNSWireError(.badDSO, "a name in a DSO TLV is compressed or has a label over 63 bytes (length byte \(length))", at: tlvOffset + index)
            }
            guard index + 1 + length <= data.count else {
                throw DNSWireError(.truncated, "a label in a DSO TLV runs past its data", at: tlvOffset + index)
            }
            labels.append(Array(data[(index + 1)...(index + length)]))
            index += 1 + length
        }
        position = index + 1
        return try DomainName(labels: labels)
    }

    /// A record from its parts, its data read through the codec's hardened reader.
    static func record(
        name: DomainName, type: RecordType, class recordClass: RecordClass, ttl: UInt32, rdata: [UInt8], tlvOffset: Int
    ) throws(DNSWireError) -> ResourceRecord {
        do {
            return ResourceRecord(name: name, data: try RecordData(type: type, rdata: rdata), ttl: ttl, class: recordClass)
        } catch {
            throw DNSWireError(.badDSO, "the \(type) data in a DSO TLV does not read: \(error)", at: tlvOffset)
        }
    }
}

/// One change in a PUSH TLV (RFC 8765 §6.3.1), told by its TTL field.
public enum PushChange: Hashable, Sendable {
    /// A record added (or refreshed), with its TTL (0…0x7FFFFFFF).
    case add(ResourceRecord)
    /// That exact record removed (TTL 0xFFFFFFFF); the record's own TTL is not sent.
    case remove(ResourceRecord)
    /// Every record of the name, type and class removed (TTL 0xFFFFFFFE, no data).
    case removeRecordSet(name: DomainName, type: RecordType, class: RecordClass)
    /// Every record of the name in the class removed (type ANY); with class ANY, every record
    /// of the name (sent with type 0).
    case removeName(name: DomainName, class: RecordClass)

    static let removeRecordTTL: UInt32 = 0xFFFF_FFFF
    static let removeCollectiveTTL: UInt32 = 0xFFFF_FFFE

    func write(to writer: inout WireWriter) throws(DNSWireError) {
        func header(_ name: DomainName, _ type: RecordType, _ recordClass: RecordClass, _ ttl: UInt32) {
            writer.write(name)
            writer.appendUInt16(type.rawValue)
            writer.appendUInt16(recordClass.rawValue)
            writer.appendUInt32(ttl)
        }
        switch self {
        case .add(let record), .remove(let record):
            var ttl = Self.removeRecordTTL
            if case .add = self {
                guard record.ttl <= 0x7FFF_FFFF else {
                    throw DNSWireError(.cannotEncode, "a PUSH addition's TTL must be at most 0x7FFFFFFF, got \(record.ttl)")
                }
                ttl = record.ttl
            }
            header(record.name, record.type, record.class, ttl)
            let data = try record.data.uncompressedBytes()
            guard data.count <= Int(UInt16.max) else { throw DNSWireError(.cannotEncode, "record data of \(data.count) bytes") }
            writer.appendUInt16(UInt16(data.count))
            writer.bytes.append(contentsOf: data)
        case .removeRecordSet(let name, let type, let recordClass):
            header(name, type, recordClass, Self.removeCollectiveTTL)
            writer.appendUInt16(0)
        case .removeName(let name, let recordClass):
            header(name, recordClass == .any ? RecordType(0) : .any, recordClass, Self.removeCollectiveTTL)
            writer.appendUInt16(0)
        }
    }

    static func read(_ data: [UInt8], at position: inout Int, tlvOffset: Int) throws(DNSWireError) -> PushChange {
        let name = try DSOTLV.readName(data, at: &position, tlvOffset: tlvOffset)
        guard data.count >= position + 10 else {
            throw DNSWireError(.truncated, "a PUSH change ends before its type, class, TTL and length", at: tlvOffset + position)
        }
        func u16(_ at: Int) -> UInt16 { UInt16(data[at]) << 8 | UInt16(data[at + 1]) }
        let type = RecordType(u16(position))
        let recordClass = RecordClass(u16(position + 2))
        let ttl = UInt32(u16(position + 4)) << 16 | UInt32(u16(position + 6))
        let length = Int(u16(position + 8))
        let start = position + 10
        guard start + length <= data.count else {
            throw DNSWireError(.truncated, "a PUSH change claims \(length) bytes of data; \(data.count - start) remain", at: tlvOffset + position + 8)
        }
        position = start + length
        let rdata = Array(data[start..<(start + length)])
        switch ttl {
        case removeCollectiveTTL:
            guard length == 0 else {
                throw DNSWireError(.badDSO, "a PUSH removal of a record set carries \(length) bytes of data; it must carry none", at: tlvOffset + start)
            }
            if recordClass == .any { return .removeName(name: name, class: .any) }
            if type == .any { return .removeName(name: name, class: recordClass) }
            return .removeRecordSet(name: name, type: type, class: recordClass)
        case removeRecordTTL:
            return .remove(try DSOTLV.record(name: name, type: type, class: recordClass, ttl: 0, rdata: rdata, tlvOffset: tlvOffset))
        case 0...0x7FFF_FFFF:
            return .add(try DSOTLV.record(name: name, type: type, class: recordClass, ttl: ttl, rdata: rdata, tlvOffset: tlvOffset))
        default:
            throw DNSWireError(.badDSO, "a PUSH change has the reserved TTL \(ttl)", at: tlvOffset + position)
        }
    }
}
