public import DNSWire

/// One link's zone: the subdomain a discovery proxy answers for (RFC 8766 §5.1), with the SOA
/// and NS records it serves at the zone's apex.
///
/// Names under the zone stand for names under `local.` on the link: `Build Box._ipp._tcp.lan1.example.test.`
/// is `Build Box._ipp._tcp.local.`, and `printer.lan1.example.test.` is `printer.local.`.
public struct ProxyZone: Hashable, Sendable, CustomStringConvertible {
    /// The subdomain, e.g. `lan1.example.test.`.
    public var name: DomainName
    /// The zone's name servers (the NS records at its apex): every proxy on the link (RFC 8766
    /// §6.2). Their names should be outside the zone, in the parent (`proxy1.example.test.`,
    /// with its address there), so that resolvers find them without glue; a name inside the zone
    /// is served with the addresses given here.
    public var nameServers: [NameServer]
    /// Where mail about the zone goes, in the SOA's RNAME form (`hostmaster.example.test.`).
    public var mailbox: DomainName
    /// The TTL of answers to one-shot queries, and the cap on every record's TTL in them
    /// (RFC 8766 §5.5.1: a client that cannot be told of changes asks again this soon).
    public var oneShotTTL: UInt32
    /// The negative-caching TTL (the SOA's MINIMUM, RFC 2308): how long a resolver may remember
    /// that a name had no records. Kept as short as ``oneShotTTL``, so that a service that
    /// appears is seen as soon as it would be if it had been there.
    public var negativeTTL: UInt32

    /// A name server of the zone: its name, and the addresses the zone serves for it when the
    /// name is inside the zone.
    public struct NameServer: Hashable, Sendable {
        public var name: DomainName
        public var addresses: [IPAddress]
        public init(name: DomainName, addresses: [IPAddress]) {
            self.name = name
            self.addresses = addresses
        }
    }

    /// The suffix that the link's names end with.
    public static let linkDomain: DomainName = "local."

    /// A zone for `name`, served by `nameServers`.
    /// - Throws: ``ProxyError`` (`invalidInput`) when the name is the root, under `local.`, or
    ///   the zone has no name server.
    public init(
        _ name: DomainName, nameServers: [NameServer], mailbox: DomainName? = nil, oneShotTTL: UInt32 = 10,
        negativeTTL: UInt32 = 10
    ) throws(ProxyError) {
        guard !name.isRoot else { throw ProxyError(.invalidInput, "a proxy's zone cannot be the root; give a subdomain such as lan1.example.test") }
        guard !name.hasSuffix(Self.linkDomain) else {
            throw ProxyError(.invalidInput, "\(name) is under local., which is the link's own domain; give a subdomain of a real zone, such as lan1.example.test")
        }
        guard !nameServers.isEmpty else { throw ProxyError(.invalidInput, "the zone \(name) needs at least one name server") }
        self.name = name
        self.nameServers = nameServers
        let fallback = (try? name.prepending(Array("hostmaster".utf8))) ?? name
        self.mailbox = mailbox ?? fallback
        self.oneShotTTL = oneShotTTL
        self.negativeTTL = negativeTTL
    }

    public var description: String { name.description }

    /// `_dns-push-tls._tcp.<zone>`: where a DNS Push client looks for the zone's Push server
    /// (RFC 8765 §6.1).
    public var pushServiceName: DomainName {
        (try? name.prepending(Array("_tcp".utf8)).prepending(Array("_dns-push-tls".utf8))) ?? name
    }

    /// `_dnssd-srp._udp.<zone>`: where an SRP requestor looks for the zone's registrar
    /// (RFC 9665 §3.1).
    public var registrarServiceName: DomainName {
        (try? name.prepending(Array("_udp".utf8)).prepending(Array("_dnssd-srp".utf8))) ?? name
    }

    /// True when `candidate` is the zone's name or a name under it.
    public func contains(_ candidate: DomainName) -> Bool { candidate.hasSuffix(name) }

    /// The SOA record at the apex, as RFC 8766 §6.1 gives it: the first name server as MNAME,
    /// serial 0 (a proxy's zone is live, not a file, and is never transferred), refresh 7200,
    /// retry 3600, expire 86400, and the negative TTL as MINIMUM.
    public var soaRecord: ResourceRecord {
        let primary = nameServers.first?.name ?? name
        let soa = SOAData(
            primary: primary, mailbox: mailbox, serial: 0, refresh: 7200, retry: 3600, expire: 86_400, minimum: negativeTTL)
        return ResourceRecord(name: name, data: .soa(soa), ttl: negativeTTL)
    }

    /// The NS records at the apex.
    public var nsRecords: [ResourceRecord] {
        nameServers.map { ResourceRecord(name: name, data: .ns($0.name), ttl: oneShotTTL) }
    }

    /// The address records of the name servers whose names are inside the zone (the glue the
    /// parent holds too), for the additional section of an NS answer, and to answer for
    /// those names themselves.
    public var glueRecords: [ResourceRecord] {
        nameServers.filter { contains($0.name) }.flatMap { server in
            server.addresses.map { address in
                switch address {
                case .v4(let v4): ResourceRecord(name: server.name, data: .a(v4), ttl: oneShotTTL)
                case .v6(let v6, _): ResourceRecord(name: server.name, data: .aaaa(v6), ttl: oneShotTTL)
                }
            }
        }
    }

    /// The link's name for a name under the zone: the zone's labels replaced by `local.`.
    /// Nil for the zone's apex (which has no name on the link) and for names outside the zone.
    public func linkName(for zoneName: DomainName) -> DomainName? {
        guard contains(zoneName), zoneName.labelCount > name.labelCount else { return nil }
        let keep = zoneName.labels.prefix(zoneName.labelCount - name.labelCount)
        return try? DomainName(labels: keep + Self.linkDomain.labels)
    }

    /// The zone's name for a name under `local.` on the link. Nil for names outside `local.`, and
    /// for a name that would be too long once `local.` is replaced by a longer zone name.
    public func zoneName(for linkName: DomainName) -> DomainName? {
        guard linkName.hasSuffix(Self.linkDomain), linkName.labelCount > Self.linkDomain.labelCount else { return nil }
        let keep = linkName.labels.prefix(linkName.labelCount - Self.linkDomain.labelCount)
        return try? DomainName(labels: keep + name.labels)
    }
}
