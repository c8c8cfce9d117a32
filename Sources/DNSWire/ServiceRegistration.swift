/// A service to publish.
public struct ServiceRegistration: Sendable, Hashable {
    public var instance: String
    public var type: ServiceType
    public var port: UInt16
    public var txt: DiscoveryInfo
    /// Subtype labels (e.g. `_printer`) under which the service is also listed.
    public var subtypes: [String]
    /// A TTL for the service's own records (PTR, SRV, TXT) instead of RFC 6762's 120 s and
    /// 4500 s. Short TTLs make a service that vanishes without a goodbye disappear sooner from
    /// caches, at the cost of more refresh traffic; tests use them.
    public var ttl: UInt32?

    public init(
        instance: String, type: ServiceType, port: UInt16, txt: DiscoveryInfo = DiscoveryInfo(), subtypes: [String] = [],
        ttl: UInt32? = nil
    ) {
        self.instance = instance
        self.type = type.baseType
        self.port = port
        self.txt = txt
        self.subtypes = subtypes
        self.ttl = ttl
    }
}
