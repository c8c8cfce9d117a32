// What ordinary (unicast) DNS adds to the codec: response codes, EDNS(0) and DNS UPDATE
// (RFC 2136). mDNS uses none of it; DNS-SD over a real DNS server (RFC 6763 §11) needs all of it.

/// A DNS response code: the header's 4 bits, extended by EDNS(0) (RFC 6891 §6.1.3) and by
/// TSIG's error field (RFC 8945 §5.3) to 12 or 16 bits.
public struct ResponseCode: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public var rawValue: UInt16
    public init(rawValue: UInt16) { self.rawValue = rawValue }
    public init(_ rawValue: UInt16) { self.rawValue = rawValue }

    public static let noError = ResponseCode(0)
    public static let formatError = ResponseCode(1)
    public static let serverFailure = ResponseCode(2)
    public static let nameError = ResponseCode(3)
    public static let notImplemented = ResponseCode(4)
    public static let refused = ResponseCode(5)
    /// UPDATE: a name that should not exist does (RFC 2136 §2.2).
    public static let nameExists = ResponseCode(6)
    /// UPDATE: a record set that should not exist does.
    public static let recordSetExists = ResponseCode(7)
    /// UPDATE: a record set that should exist does not.
    public static let recordSetMissing = ResponseCode(8)
    /// The server is not authoritative for the zone, or (with TSIG) the signature was not accepted.
    public static let notAuthoritative = ResponseCode(9)
    /// UPDATE: a name is outside the zone.
    public static let notZone = ResponseCode(10)
    /// TSIG: the signature does not verify (RFC 8945 §5.3.2).
    public static let badSignature = ResponseCode(16)
    /// TSIG: the server does not know the key (or its algorithm).
    public static let badKey = ResponseCode(17)
    /// TSIG: the signing time is outside the fudge window: the clocks disagree.
    public static let badTime = ResponseCode(18)
    /// TSIG: the MAC was truncated more than the server allows.
    public static let badTruncation = ResponseCode(22)

    /// The mnemonic of the RFCs (`NOERROR`, `NXDOMAIN`, `BADSIG`, …), `RCODE n` for others.
    public var description: String {
        switch self {
        case .noError: "NOERROR"
        case .formatError: "FORMERR"
        case .serverFailure: "SERVFAIL"
        case .nameError: "NXDOMAIN"
        case .notImplemented: "NOTIMP"
        case .refused: "REFUSED"
        case .nameExists: "YXDOMAIN"
        case .recordSetExists: "YXRRSET"
        case .recordSetMissing: "NXRRSET"
        case .notAuthoritative: "NOTAUTH"
        case .notZone: "NOTZONE"
        case .badSignature: "BADSIG"
        case .badKey: "BADKEY"
        case .badTime: "BADTIME"
        case .badTruncation: "BADTRUNC"
        default: "RCODE \(rawValue)"
        }
    }
}

extension Header {
    /// OPCODE 0: a standard query.
    public static let queryOpcode: UInt8 = 0
    /// OPCODE 5: a DNS UPDATE (RFC 2136).
    public static let updateOpcode: UInt8 = 5
}

extension Message {
    /// The UDP payload size Nearby offers in EDNS(0): the DNS flag day 2020 figure, which
    /// avoids IP fragmentation on every common path.
    public static let ednsPayloadSize: UInt16 = 1232

    /// A unicast DNS query for one question, with EDNS(0) advertising `payloadSize` bytes and
    /// recursion desired (a stub resolver's query, RFC 1035 §7).
    public static func unicastQuery(
        id: UInt16, name: DomainName, type: RecordType, payloadSize: UInt16 = Message.ednsPayloadSize
    ) -> Message {
        var header = Header(id: id)
        header.recursionDesired = true
        return Message(
            header: header, questions: [Question(name: name, type: type)],
            additionals: [ResourceRecord(name: .root, data: .opt([]), ttl: 0, class: RecordClass(payloadSize))])
    }

    /// The OPT pseudo-record (RFC 6891), if the message has one.
    public var optRecord: ResourceRecord? { additionals.first { $0.type == .opt } }

    /// The response code, extended by the OPT record's upper 8 bits when there is one.
    public var responseCode: ResponseCode {
        let low = UInt16(header.responseCode)
        guard let opt = optRecord else { return ResponseCode(low) }
        return ResponseCode(UInt16(opt.ttl >> 24) << 4 | low)
    }
}

/// A DNS UPDATE (RFC 2136): the zone, prerequisites that must hold, and changes made together
/// or not at all.
///
/// ```swift
/// var update = DNSUpdate(zone: "lab.example.test.")
/// update.require(.nameIsFree("Box._openagents._tcp.lab.example.test."))
/// update.add(ResourceRecord(name: "Box._openagents._tcp.lab.example.test.", data: .srv(srv), ttl: 30))
/// let bytes = try update.message(id: 0x1234).encoded()
/// ```
public struct DNSUpdate: Hashable, Sendable {
    /// The zone the update is for (the question section's single SOA entry).
    public var zone: DomainName
    /// Prerequisites (the answer section, RFC 2136 §2.4).
    public private(set) var prerequisites: [ResourceRecord] = []
    /// Changes (the authority section, RFC 2136 §2.5).
    public private(set) var changes: [ResourceRecord] = []

    public init(zone: DomainName) { self.zone = zone }

    /// What an update requires of the zone before it changes anything.
    public enum Prerequisite: Hashable, Sendable {
        /// No record of any type has this name (RFC 2136 §2.4.5).
        case nameIsFree(DomainName)
        /// Some record has this name (§2.4.4).
        case nameIsInUse(DomainName)
        /// No record of this name and type exists (§2.4.3).
        case recordSetIsAbsent(DomainName, RecordType)
        /// The record set of these records' name and type is exactly these records (§2.4.2).
        case recordSetEquals([ResourceRecord])
    }

    /// Adds a prerequisite.
    public mutating func require(_ prerequisite: Prerequisite) {
        switch prerequisite {
        case .nameIsFree(let name):
            prerequisites.append(ResourceRecord(name: name, data: .unknown(.any, []), ttl: 0, class: .none))
        case .nameIsInUse(let name):
            prerequisites.append(ResourceRecord(name: name, data: .unknown(.any, []), ttl: 0, class: .any))
        case .recordSetIsAbsent(let name, let type):
            prerequisites.append(ResourceRecord(name: name, data: .unknown(type, []), ttl: 0, class: .none))
        case .recordSetEquals(let records):
            prerequisites += records.map { ResourceRecord(name: $0.name, data: $0.data, ttl: 0, class: .internet) }
        }
    }

    /// Adds a record (a record already there with the same data just has its TTL updated).
    public mutating func add(_ record: ResourceRecord) {
        changes.append(ResourceRecord(name: record.name, data: record.data, ttl: record.ttl, class: .internet))
    }

    /// Deletes every record of this name and type (§2.5.2).
    public mutating func deleteRecordSet(_ name: DomainName, _ type: RecordType) {
        changes.append(ResourceRecord(name: name, data: .unknown(type, []), ttl: 0, class: .any))
    }

    /// Deletes every record of this name (§2.5.3).
    public mutating func deleteName(_ name: DomainName) {
        changes.append(ResourceRecord(name: name, data: .unknown(.any, []), ttl: 0, class: .any))
    }

    /// Deletes one record: the one with this name, type and data (§2.5.4).
    public mutating func delete(_ record: ResourceRecord) {
        changes.append(ResourceRecord(name: record.name, data: record.data, ttl: 0, class: .none))
    }

    /// The UPDATE message: OPCODE 5, the zone as its one question (type SOA).
    public func message(id: UInt16) -> Message {
        var header = Header(id: id)
        header.opcode = Header.updateOpcode
        return Message(
            header: header, questions: [Question(name: zone, type: .soa)], answers: prerequisites,
            authorities: changes)
    }
}
