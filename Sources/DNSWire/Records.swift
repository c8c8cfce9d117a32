/// A DNS resource record type (RFC 1035 §3.2.2 and later RFCs). Any 16-bit value is allowed;
/// the named ones are those Nearby reads.
public struct RecordType: RawRepresentable, Hashable, Sendable, Comparable, CustomStringConvertible {
    public var rawValue: UInt16
    public init(rawValue: UInt16) { self.rawValue = rawValue }
    public init(_ rawValue: UInt16) { self.rawValue = rawValue }

    public static let a = RecordType(1)
    public static let ns = RecordType(2)
    public static let cname = RecordType(5)
    public static let ptr = RecordType(12)
    public static let hinfo = RecordType(13)
    public static let txt = RecordType(16)
    public static let aaaa = RecordType(28)
    public static let srv = RecordType(33)
    public static let opt = RecordType(41)
    public static let nsec = RecordType(47)
    /// Only in questions: every type.
    public static let any = RecordType(255)

    public var description: String {
        switch self {
        case .a: "A"
        case .ns: "NS"
        case .cname: "CNAME"
        case .ptr: "PTR"
        case .hinfo: "HINFO"
        case .txt: "TXT"
        case .aaaa: "AAAA"
        case .srv: "SRV"
        case .opt: "OPT"
        case .nsec: "NSEC"
        case .any: "ANY"
        default: "TYPE\(rawValue)"  // RFC 3597 §5
        }
    }

    public static func < (lhs: RecordType, rhs: RecordType) -> Bool { lhs.rawValue < rhs.rawValue }
}

/// A DNS class, without the mDNS top bit (which is the cache-flush bit on records and the
/// unicast-response bit on questions, kept separately).
public struct RecordClass: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public var rawValue: UInt16
    public init(rawValue: UInt16) { self.rawValue = rawValue }
    public init(_ rawValue: UInt16) { self.rawValue = rawValue }

    /// IN, the only class mDNS uses.
    public static let internet = RecordClass(1)
    /// Only in questions: every class.
    public static let any = RecordClass(255)

    public var description: String {
        switch self {
        case .internet: "IN"
        case .any: "ANY"
        default: "CLASS\(rawValue)"
        }
    }
}

/// SRV record data (RFC 2782): where an instance of a service runs.
public struct SRVData: Hashable, Sendable {
    public var priority: UInt16
    public var weight: UInt16
    public var port: UInt16
    /// The host that offers the service, e.g. `buildbox.local.`.
    public var target: DomainName

    public init(priority: UInt16 = 0, weight: UInt16 = 0, port: UInt16, target: DomainName) {
        self.priority = priority
        self.weight = weight
        self.port = port
        self.target = target
    }
}

/// NSEC record data in the restricted form mDNS uses (RFC 6762 §6.1): which types exist for a
/// name. Decoding accepts any window blocks; encoding writes standard windowed bitmaps.
public struct NSECData: Hashable, Sendable {
    /// In mDNS, the record's own name.
    public var nextName: DomainName
    /// The types that exist, in ascending order without repeats.
    public var types: [RecordType]

    public init(nextName: DomainName, types: [RecordType]) {
        self.nextName = nextName
        self.types = Array(Set(types)).sorted()
    }
}

/// HINFO record data (RFC 1035 §3.3.2): two character-strings.
public struct HINFOData: Hashable, Sendable {
    public var cpu: [UInt8]
    public var os: [UInt8]

    public init(cpu: [UInt8], os: [UInt8]) {
        self.cpu = cpu
        self.os = os
    }
}

/// The data of a resource record. The case decides the record's type, so a record can never
/// claim one type and carry another's data.
public enum RecordData: Hashable, Sendable {
    case a(IPv4Address)
    case aaaa(IPv6Address)
    case ptr(DomainName)
    case cname(DomainName)
    case ns(DomainName)
    case srv(SRVData)
    /// TXT character-strings (each at most 255 bytes). An empty TXT record has no strings here
    /// and is one zero byte on the wire (RFC 6763 §6.1).
    case txt([[UInt8]])
    case nsec(NSECData)
    case hinfo(HINFOData)
    /// The EDNS(0) OPT pseudo-record's options, passed through untouched.
    case opt([UInt8])
    /// Any other type, kept as raw RDATA so it round-trips byte for byte.
    case unknown(RecordType, [UInt8])

    /// The record type this data belongs to.
    public var type: RecordType {
        switch self {
        case .a: .a
        case .aaaa: .aaaa
        case .ptr: .ptr
        case .cname: .cname
        case .ns: .ns
        case .srv: .srv
        case .txt: .txt
        case .nsec: .nsec
        case .hinfo: .hinfo
        case .opt: .opt
        case .unknown(let type, _): type
        }
    }
}

/// A resource record.
public struct ResourceRecord: Hashable, Sendable {
    public var name: DomainName
    public var `class`: RecordClass
    /// The mDNS cache-flush bit (RFC 6762 §10.2): this record replaces every other record of the
    /// same name, type and class that the receiver has cached for more than a second.
    public var cacheFlush: Bool
    /// Seconds the record may be cached; 0 is a goodbye (RFC 6762 §10.1).
    public var ttl: UInt32
    public var data: RecordData

    public init(
        name: DomainName, data: RecordData, ttl: UInt32, class: RecordClass = .internet,
        cacheFlush: Bool = false
    ) {
        self.name = name
        self.data = data
        self.ttl = ttl
        self.class = `class`
        self.cacheFlush = cacheFlush
    }

    /// The record's type, taken from its data.
    public var type: RecordType { data.type }

    /// True for a goodbye announcement (TTL 0).
    public var isGoodbye: Bool { ttl == 0 }
}

/// A question.
public struct Question: Hashable, Sendable {
    public var name: DomainName
    public var type: RecordType
    public var `class`: RecordClass
    /// The mDNS unicast-response ("QU") bit (RFC 6762 §5.4).
    public var unicastResponse: Bool

    public init(
        name: DomainName, type: RecordType, class: RecordClass = .internet,
        unicastResponse: Bool = false
    ) {
        self.name = name
        self.type = type
        self.class = `class`
        self.unicastResponse = unicastResponse
    }
}
