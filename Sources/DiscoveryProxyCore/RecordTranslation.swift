public import DNSWire

/// How a record learned on the link becomes a record in the zone (RFC 8766 §5.5): names in the
/// owner name and in the data move from `local.` to the zone, addresses that only mean
/// something on the link are left out, and mDNS's own flags and records stay behind.
public struct RecordTranslation: Sendable {
    public let zone: ProxyZone

    public init(zone: ProxyZone) { self.zone = zone }

    /// Why a link record was not given out.
    public enum Suppression: String, Sendable, Hashable, CaseIterable {
        /// An IPv4 link-local address (169.254.0.0/16, RFC 3927) or an IPv6 one (fe80::/10):
        /// useless, and misleading, off the link (RFC 8766 §5.5.2).
        case linkLocalAddress
        /// An NSEC record: in mDNS it says which types a name lacks (RFC 6762 §6.1); in a
        /// unicast zone it would be a DNSSEC denial the proxy cannot sign (RFC 8766 §5.5.3).
        case nsec
        /// A goodbye (TTL 0): the record is leaving.
        case goodbye
        /// The owner name is not under `local.`, or it or a name in the data is too long once
        /// moved into the zone.
        case outsideLink
        /// An mDNS-only or meta type (OPT, TSIG) that has no place in a zone.
        case metaType
    }

    /// The zone's form of `record`, with its TTL capped at `ttlCap` (the zone's one-shot TTL
    /// for ordinary queries; the record's own TTL for subscribers told of changes), or why it
    /// is left out.
    public func translate(_ record: ResourceRecord, ttlCap: UInt32?) -> Translated {
        if record.isGoodbye { return .suppressed(.goodbye) }
        guard let owner = zone.zoneName(for: record.name) else { return .suppressed(.outsideLink) }
        let data: RecordData
        switch record.data {
        case .a(let address) where address.isLinkLocal: return .suppressed(.linkLocalAddress)
        case .aaaa(let address) where address.isLinkLocal: return .suppressed(.linkLocalAddress)
        case .nsec: return .suppressed(.nsec)
        case .opt, .soa: return .suppressed(.metaType)
        case .unknown(let type, _) where type == .tsig: return .suppressed(.metaType)
        case .ptr(let target):
            guard let target = moved(target) else { return .suppressed(.outsideLink) }
            data = .ptr(target)
        case .cname(let target):
            guard let target = moved(target) else { return .suppressed(.outsideLink) }
            data = .cname(target)
        case .ns(let target):
            guard let target = moved(target) else { return .suppressed(.outsideLink) }
            data = .ns(target)
        case .srv(var srv):
            guard let target = moved(srv.target) else { return .suppressed(.outsideLink) }
            srv.target = target
            data = .srv(srv)
        case .a, .aaaa, .txt, .hinfo, .unknown: data = record.data
        }
        let ttl = ttlCap.map { min($0, record.ttl) } ?? record.ttl
        // The cache-flush bit is mDNS's (RFC 6762 §10.2); in unicast DNS that bit of the class
        // does not exist, so the class is plain IN.
        return .record(ResourceRecord(name: owner, data: data, ttl: ttl, class: record.class, cacheFlush: false))
    }

    /// A name in a record's data: moved into the zone when it is under `local.` (a service
    /// instance, a host), left as it is otherwise (a name in a real zone means the same
    /// everywhere). Nil for a name under `local.` that would be too long in the zone: the
    /// record is then left out rather than point outside the zone.
    public func moved(_ name: DomainName) -> DomainName? {
        guard name.hasSuffix(ProxyZone.linkDomain) else { return name }
        return zone.zoneName(for: name)
    }

    /// A link record in the zone's form, or why it was left out.
    public enum Translated: Sendable, Hashable {
        case record(ResourceRecord)
        case suppressed(Suppression)
    }
}
