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

extension ServiceRegistration {
    /// The instance name for the `attempt`-th try at a free name: the name as asked for, then
    /// "Name (2)", "Name (3)"… with the base trimmed on a character boundary so the label stays
    /// within 63 bytes. mDNS (RFC 6762 §9) and DNS UPDATE registrations rename the same way.
    package func instance(attempt: Int) -> String {
        guard attempt > 1 else { return instance }
        var base = instance
        let suffix = " (\(attempt))"
        while base.utf8.count + suffix.utf8.count > DomainName.maximumLabelLength {
            base.removeLast()
        }
        return base + suffix
    }
}
