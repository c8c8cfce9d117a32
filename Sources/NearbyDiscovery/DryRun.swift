public import DNSWire
import MulticastDNS
import MulticastDNSCore

/// What an advertisement would publish, worked out without sending anything (`--dry-run`).
public struct PlannedAdvertisement: Sendable {
    /// The instance's full name, e.g. `Build\032Box._openagents._tcp.local.`.
    public let instance: DomainName
    /// The host name the SRV record points at, e.g. `buildbox.local.`.
    public let hostName: DomainName
    /// The records, in the order a first announcement lists them: shared PTRs, SRV, TXT, then
    /// the host's A/AAAA records (the addresses of every interface it would run on).
    public let records: [ResourceRecord]
    /// The interfaces the embedded engine would run on.
    public let interfaces: [String]
}

extension NearbyDiscovery {
    /// What ``advertise(_:type:port:info:subtypes:ttl:)`` would publish on the embedded
    /// engine, as host `hostName` (default: this machine's name) on `interfaces` (default: every
    /// multicast interface that is up). Checks the same input as advertising does; opens no
    /// socket and sends nothing. On the system backend the daemon publishes the same service
    /// records under its own host name.
    /// - Throws: ``ServiceNameError`` for a bad instance name or subtype, ``DiscoveryError``
    ///   (`invalidInput`) for an interface that is not there.
    public static func plan(
        _ name: String, type: ServiceType, port: UInt16, info: DiscoveryInfo = DiscoveryInfo(), subtypes: [String] = [],
        ttl: UInt32? = nil, hostName: String? = nil, interfaces: [String]? = nil
    ) throws -> PlannedAdvertisement {
        _ = try ServiceInstanceName(name, type: type)
        for subtype in subtypes { _ = try type.withSubtype(subtype) }
        do {
            try MulticastDNSEngine.checkInterfaces(interfaces)
        } catch let error as TransportError {
            throw DiscoveryError(.invalidInput, error.description)
        }
        let found = MulticastTransport.interfaces(named: interfaces)
        let registration = ServiceRegistration(instance: name, type: type, port: port, txt: info, subtypes: subtypes, ttl: ttl)
        let label = hostName ?? MulticastDNSEngine.defaultHostLabel()
        let records = PublishedRecords.advertisement(registration, hostLabel: label, addresses: found.flatMap(\.addresses))
        let instance = records.first { if case .srv = $0.data { true } else { false } }?.name ?? .root
        let host = records.compactMap { if case .srv(let srv) = $0.data { srv.target } else { nil } }.first ?? .root
        return PlannedAdvertisement(instance: instance, hostName: host, records: records, interfaces: found.map(\.interface.name))
    }
}
