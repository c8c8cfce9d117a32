/// A DNS resource record type (RFC 1035 §3.2.2 and later RFCs). Any 16-bit value is allowed;
/// the named ones are those Nearby reads.
public struct RecordType: RawRepresentable, Hashable, Sendable, Comparable, CustomStringConvertible {
    public var rawValue: UInt16
    public init(rawValue: UInt16) { self.rawValue = rawValue }
    public init(_ rawValue: UInt16) { self.rawValue = rawValue }

    public static let a = RecordType(1)
    public static let ns = RecordType(2)
    public static let cname = RecordType(5)
    public static let soa = RecordType(6)
    public static let ptr = RecordType(12)
    public static let hinfo = RecordType(13)
    public static let txt = RecordType(16)
    public static let aaaa = RecordType(28)
    public static let srv = RecordType(33)
    public static let opt = RecordType(41)
    public static let nsec = RecordType(47)
    /// A transaction signature (RFC 8945), the last record of a signed message.
    public static let tsig = RecordType(250)
    /// Only in questions: every type.
    public static let any = RecordType(255)

    public var description: String {
        switch self {
        case .a: "A"
        case .ns: "NS"
        case .cname: "CNAME"
        case .soa: "SOA"
        case .ptr: "PTR"
        case .hinfo: "HINFO"
        case .txt: "TXT"
        case .aaaa: "AAAA"
        case .srv: "SRV"
        case .opt: "OPT"
        case .nsec: "NSEC"
        case .sig: "SIG"
        case .key: "KEY"
        case .tsig: "TSIG"
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
    /// In DNS UPDATE (RFC 2136 §2.4, §2.5): "this record must not exist" or "delete this record".
    public static let none = RecordClass(254)
    /// Only in questions, and in DNS UPDATE's "any record" prerequisites and deletions: every class.
    public static let any = RecordClass(255)

    public var description: String {
        switch self {
        case .internet: "IN"
        case .none: "NONE"
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

/// SOA record data (RFC 1035 §3.3.13): who is the primary of a zone, and its timers. The last
/// field, ``minimum``, is the TTL of negative answers (RFC 2308 §4).
public struct SOAData: Hashable, Sendable {
    /// The primary name server (MNAME), where DNS UPDATEs go when nothing says otherwise
    /// (RFC 2136 §4).
    public var primary: DomainName
    /// The mailbox of whoever runs the zone (RNAME), as a name.
    public var mailbox: DomainName
    public var serial: UInt32
    public var refresh: UInt32
    public var retry: UInt32
    public var expire: UInt32
    public var minimum: UInt32

    public init(
        primary: DomainName, mailbox: DomainName, serial: UInt32, refresh: UInt32, retry: UInt32, expire: UInt32,
        minimum: UInt32
    ) {
        self.primary = primary
        self.mailbox = mailbox
        self.serial = serial
        self.refresh = refresh
        self.retry = retry
        self.expire = expire
        self.minimum = minimum
    }
}

/// NSEC record data in the restricted form mDNS uses (RFC 6762 §6.1): which types exist for a
/// name. Decoding accepts any window blocks; encoding writes standard windowed bitmaps.
public struct NSECData: Hashable, Sendable {
    /// In mDNS, the record's own name.
    public var nextName: DomainName
    // Types 0–255 (all mDNS ever uses) as an inline bitmap, so decoding allocates nothing;
    // higher types, rare, in a sorted list.
    private var low: (UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0)
    private var high: [RecordType] = []

    public init(nextName: DomainName, types: [RecordType]) {
        self.nextName = nextName
        for type in types { insert(type) }
    }

    /// The types that exist, in ascending order without repeats.
    public var types: [RecordType] {
        var result: [RecordType] = []
        let words = [low.0, low.1, low.2, low.3]
        for (index, word) in words.enumerated() where word != 0 {
            for bit in 0..<64 where word & (1 << UInt64(bit)) != 0 {
                result.append(RecordType(UInt16(index * 64 + bit)))
            }
        }
        return result + high
    }

    /// True if `type` is listed.
    public func contains(_ type: RecordType) -> Bool {
        guard type.rawValue < 256 else { return high.contains(type) }
        let bit = UInt64(1) << UInt64(type.rawValue & 63)
        switch type.rawValue >> 6 {
        case 0: return low.0 & bit != 0
        case 1: return low.1 & bit != 0
        case 2: return low.2 & bit != 0
        default: return low.3 & bit != 0
        }
    }

    mutating func insert(_ type: RecordType) {
        guard type.rawValue < 256 else {
            if let index = high.firstIndex(where: { $0 >= type }) {
                if high[index] != type { high.insert(type, at: index) }
            } else {
                high.append(type)
            }
            return
        }
        let bit = UInt64(1) << UInt64(type.rawValue & 63)
        switch type.rawValue >> 6 {
        case 0: low.0 |= bit
        case 1: low.1 |= bit
        case 2: low.2 |= bit
        default: low.3 |= bit
        }
    }

    public static func == (lhs: NSECData, rhs: NSECData) -> Bool {
        lhs.nextName == rhs.nextName && lhs.low == rhs.low && lhs.high == rhs.high
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(nextName)
        hasher.combine(low.0)
        hasher.combine(low.1)
        hasher.combine(low.2)
        hasher.combine(low.3)
        hasher.combine(high)
    }
}

/// TXT record data: one or more character-strings (RFC 1035 §3.3.14), kept in wire form so
/// decoding costs one copy. ``DiscoveryInfo`` gives the strings their DNS-SD meaning.
public struct TXTData: Hashable, Sendable {
    /// The RDATA: each string behind its length byte. An empty record is one zero byte
    /// (RFC 6763 §6.1), so this is never empty.
    public private(set) var rdata: [UInt8]

    /// The empty TXT record.
    public static let empty = TXTData(validatedRDATA: [0])

    /// Makes TXT data from strings.
    /// - Throws: ``DNSWireError`` when a string is longer than 255 bytes.
    public init(strings: [[UInt8]]) throws(DNSWireError) {
        guard !strings.isEmpty else {
            self = .empty
            return
        }
        var rdata: [UInt8] = []
        rdata.reserveCapacity(strings.reduce(0) { $0 + 1 + $1.count })
        for string in strings {
            guard string.count <= 255 else {
                throw DNSWireError(
                    .cannotEncode, "TXT string of \(string.count) bytes is over the 255-byte limit")
            }
            rdata.append(UInt8(string.count))
            rdata.append(contentsOf: string)
        }
        self.init(validatedRDATA: rdata)
    }

    /// Interprets RDATA; nil if a string's length byte runs past the end.
    public init?(rdata: [UInt8]) {
        var index = 0
        while index < rdata.count {
            index += 1 + Int(rdata[index])
        }
        guard index == rdata.count else { return nil }
        self.init(validatedRDATA: rdata)
    }

    init(validatedRDATA rdata: [UInt8]) {
        // A zero-length RDATA is not allowed in DNS-SD; treat it as the empty record.
        self.rdata = rdata.isEmpty ? [0] : rdata
    }

    /// The character-strings. The empty record has none.
    public var strings: [[UInt8]] {
        if rdata == [0] { return [] }
        return splitLengthPrefixed(rdata[...]).pieces
    }

    /// True for the empty record.
    public var isEmpty: Bool { rdata == [0] }
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
    case soa(SOAData)
    case srv(SRVData)
    case txt(TXTData)
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
        case .soa: .soa
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

/// Splits bytes made of length-prefixed pieces: TXT character-strings, or the labels of a name
/// in wire form. Stops before a piece that would run past the end; `complete` is false then.
func splitLengthPrefixed(_ bytes: ArraySlice<UInt8>) -> (pieces: [[UInt8]], complete: Bool) {
    var pieces: [[UInt8]] = []
    var index = bytes.startIndex
    while index < bytes.endIndex {
        let end = index + 1 + Int(bytes[index])
        guard end <= bytes.endIndex else { return (pieces, false) }
        pieces.append(Array(bytes[(index + 1)..<end]))
        index = end
    }
    return (pieces, true)
}
