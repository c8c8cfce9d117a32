public import DNSWire

/// A question the proxy keeps asking on a link, with mDNS's continuous querying (RFC 6762
/// §5.2): a name under `local.` and a record type.
public struct LinkQuestion: Hashable, Sendable, CustomStringConvertible {
    public var name: DomainName
    public var type: RecordType

    public init(name: DomainName, type: RecordType) {
        self.name = name
        self.type = type
    }

    public var description: String { "\(name) \(type)" }
}

/// Which of the proxy's links a question is asked on: the index of its zone in the
/// configuration's list.
public struct LinkIndex: Hashable, Sendable, Comparable, CustomStringConvertible {
    public var rawValue: Int
    public init(_ rawValue: Int) { self.rawValue = rawValue }
    public static func < (lhs: LinkIndex, rhs: LinkIndex) -> Bool { lhs.rawValue < rhs.rawValue }
    public var description: String { "link \(rawValue)" }
}

/// A record as the proxy keeps it: the same record with another TTL, or heard again with
/// the cache-flush bit, is the same record.
struct RecordKey: Hashable {
    var name: DomainName
    var data: RecordData

    init(_ record: ResourceRecord) {
        name = record.name
        data = record.data
    }
}
