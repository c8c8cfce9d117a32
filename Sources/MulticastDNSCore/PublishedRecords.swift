public import DNSWire

/// The records a responder publishes, as pure functions of what is registered: the responder
/// builds its answers from them, and a dry run shows them without sending anything.
public enum PublishedRecords {
    /// A host name's A and AAAA records for `addresses` (cache-flush, TTL 120 s). Link-local
    /// IPv6 addresses are left out when a routable one exists.
    public static func host(_ name: DomainName, addresses: [IPAddress]) -> [ResourceRecord] {
        MDNSCore.publishedAddresses(addresses).map { address in
            switch address {
            case .v4(let v4):
                ResourceRecord(name: name, data: .a(v4), ttl: MDNSTiming.hostRecordTTL, cacheFlush: true)
            case .v6(let v6, _):
                ResourceRecord(name: name, data: .aaaa(v6), ttl: MDNSTiming.hostRecordTTL, cacheFlush: true)
            }
        }
    }

    /// A service instance's own records: SRV (pointing at `hostName`) and TXT, cache-flush; the
    /// registration's TTL, else 120 s for SRV and 4500 s for TXT (RFC 6762 §10).
    public static func service(_ registration: ServiceRegistration, instance: DomainName, hostName: DomainName) -> [ResourceRecord] {
        [
            ResourceRecord(
                name: instance, data: .srv(SRVData(port: registration.port, target: hostName)),
                ttl: registration.ttl ?? MDNSTiming.hostRecordTTL, cacheFlush: true),
            ResourceRecord(
                name: instance, data: .txt(registration.txt.txt), ttl: registration.ttl ?? MDNSTiming.otherRecordTTL,
                cacheFlush: true),
        ]
    }

    /// The shared records pointing at an instance: the type's PTR, subtype PTRs and the
    /// service-type enumeration PTR (RFC 6763 §4.1, §7.1, §9).
    public static func shared(_ registration: ServiceRegistration, instance: DomainName) -> [ResourceRecord] {
        let ttl = registration.ttl ?? MDNSTiming.otherRecordTTL
        var records = [ResourceRecord(name: registration.type.domainName, data: .ptr(instance), ttl: ttl)]
        for subtype in registration.subtypes {
            if let type = try? registration.type.withSubtype(subtype) {
                records.append(ResourceRecord(name: type.domainName, data: .ptr(instance), ttl: ttl))
            }
        }
        records.append(
            ResourceRecord(
                name: ServiceType.enumerationName(in: registration.type.domain),
                data: .ptr(registration.type.domainName), ttl: ttl))
        return records
    }

    /// Everything advertising `registration` as host `hostLabel` would publish first (before any
    /// rename after a conflict): shared PTRs, SRV and TXT, then the host's addresses.
    public static func advertisement(_ registration: ServiceRegistration, hostLabel: String, addresses: [IPAddress]) -> [ResourceRecord] {
        let instance = RecordSet.instanceName(registration, attempt: 1)
        let host = RecordSet.hostName(hostLabel, attempt: 1)
        return shared(registration, instance: instance) + service(registration, instance: instance, hostName: host)
            + self.host(host, addresses: addresses)
    }
}
