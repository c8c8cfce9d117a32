public import DNSWire

/// A host as the registrar holds it: its name in the zone, its addresses, the KEY that holds
/// its names, and the services it registered.
public struct SRPHost: Hashable, Sendable {
    public var name: DomainName
    public var zone: DomainName
    public var addresses: [IPAddress]
    public var key: KEYData
    /// The TTL for the host's records on the LAN: the requestor's, never more than the lease.
    public var ttl: UInt32
}

/// A service instance as the registrar holds it.
public struct SRPService: Hashable, Sendable {
    public var instance: DomainName
    public var zone: DomainName
    /// The type it is listed under (its PTR record's owner), e.g. `_openagents._tcp.zone.`.
    public var serviceType: DomainName
    public var subtypes: [DomainName]
    /// Port, priority and weight; the target is the host's name.
    public var srv: SRVData
    public var txt: TXTData
    /// The TTL for the service's records on the LAN: the requestor's, never more than the lease.
    public var ttl: UInt32
}

/// What the registrar asks of its shell. The shell sends replies and turns the rest into mDNS
/// through the engine (or avahi): records moved from the zone to `local.`, probed, announced,
/// and said goodbye to.
public enum RegistrarAction: Hashable, Sendable {
    /// Send this reply to the update's source.
    case reply(Message)
    /// Publish (or replace) the host's address records.
    case publishHost(SRPHost)
    /// Publish (or replace) a service: PTR under its type and subtypes, SRV, TXT.
    case publishService(SRPService)
    /// Say goodbye to a service's records.
    case withdrawService(DomainName)
    /// Say goodbye to a host's address records.
    case withdrawHost(DomainName)
}

/// Counters of what the registrar did and refused, for logs and metrics.
public struct RegistrarStatistics: Hashable, Sendable {
    /// Updates accepted (registrations, refreshes and removals).
    public var accepted = 0
    /// Updates that removed their records (lease 0).
    public var removals = 0
    /// FORMERR and NOTZONE.
    public var malformed = 0
    /// REFUSED: a zone this registrar does not serve.
    public var zoneNotServed = 0
    /// NOTAUTH: no SIG(0), or one that does not verify.
    public var badSignature = 0
    /// YXDOMAIN: a name held by another key.
    public var nameHeld = 0
    /// NOTAUTH: a TXT id that names another peer than the key that signed.
    public var wrongPeerID = 0
    /// REFUSED: a registration or service count limit.
    public var limitReached = 0
    /// REFUSED: more updates per second than a source may send.
    public var rateLimited = 0
    /// NOTIMP: not an UPDATE.
    public var notImplemented = 0
    /// Requests too short to answer, or responses: dropped without a reply.
    public var dropped = 0
    /// Leases that ran out (records withdrawn, names still held).
    public var leasesExpired = 0
    /// Key leases that ran out (names released).
    public var keyLeasesExpired = 0
    /// Registrations given up because a name was already in use on the link (YXDOMAIN).
    public var linkConflicts = 0

    public init() {}

    /// Every refusal, of whatever kind.
    public var refused: Int { malformed + zoneNotServed + badSignature + wrongPeerID + nameHeld + limitReached + rateLimited + notImplemented }

    mutating func count(_ error: RegistrarError) {
        switch error.code {
        case .malformed, .outsideZone: malformed += 1
        case .zoneNotServed: zoneNotServed += 1
        case .badSignature: badSignature += 1
        case .wrongPeerID: wrongPeerID += 1
        case .nameHeld: nameHeld += 1
        case .limitReached: limitReached += 1
        case .rateLimited: rateLimited += 1
        case .notImplemented: notImplemented += 1
        default: malformed += 1
        }
    }
}

/// The registrar's limits. Each one refuses with REFUSED and is counted.
public struct RegistrarLimits: Sendable, Hashable {
    /// Hosts registered (or holding names) from one source address.
    public var registrationsPerSource: Int
    /// Hosts registered (or holding names) in all.
    public var registrations: Int
    /// Services one host may register.
    public var servicesPerHost: Int
    /// Addresses one host may register.
    public var addressesPerHost: Int
    /// Updates per second from one source address.
    public var updateRate: UpdateRate
    /// Source addresses whose update rate is tracked at once.
    public var trackedSources: Int
    /// Bytes of records held for one source address (names, addresses, keys, SRV and TXT, as
    /// they go on the wire): what one sender can make the registrar keep and the LAN carry.
    public var bytesPerSource: Int
    /// Bytes of records held in all.
    public var bytes: Int

    public init(
        registrationsPerSource: Int = 32, registrations: Int = 4096, servicesPerHost: Int = 32, addressesPerHost: Int = 16,
        updateRate: UpdateRate = UpdateRate(perSecond: 5, burst: 20), trackedSources: Int = 4096, bytesPerSource: Int = 256 << 10,
        bytes: Int = 16 << 20
    ) {
        self.bytesPerSource = bytesPerSource
        self.bytes = bytes
        self.registrationsPerSource = registrationsPerSource
        self.registrations = registrations
        self.servicesPerHost = servicesPerHost
        self.addressesPerHost = addressesPerHost
        self.updateRate = updateRate
        self.trackedSources = trackedSources
    }
}

/// What a registrar is set up with.
public struct RegistrarConfiguration: Sendable {
    /// The zones updates may name (RFC 9665 §3.1: `default.service.arpa.` unless the network
    /// says otherwise).
    public var zones: [DomainName]
    public var leases: LeasePolicy
    public var limits: RegistrarLimits
    public var verifier: SIG0Verifier

    /// `default.service.arpa.`, the zone RFC 9665 reserves for SRP when a network names none.
    public static let defaultZone: DomainName = "default.service.arpa."

    public init(
        zones: [DomainName] = [RegistrarConfiguration.defaultZone], leases: LeasePolicy = LeasePolicy(),
        limits: RegistrarLimits = RegistrarLimits(), verifier: SIG0Verifier
    ) {
        self.zones = zones
        self.leases = leases
        self.limits = limits
        self.verifier = verifier
    }
}
