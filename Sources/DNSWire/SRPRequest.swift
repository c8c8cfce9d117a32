/// An SRP registration as a requestor sends it (RFC 9665 §3.2): one DNS UPDATE for the zone
/// holding, for each service, a service discovery instruction (the PTR under its type and
/// subtypes) and a service description instruction (the instance's RRsets deleted, SRV and TXT
/// added), then the host description instruction (the host's RRsets deleted, its addresses and
/// its KEY added), the Update Lease option, and last the SIG(0) made with the KEY's private key.
///
/// The codec builds the bytes; the signature comes from the caller (``signed(id:now:sign:)``
/// hands it the bytes SIG(0) covers), so the codec stays free of cryptography.
public struct SRPRequest: Hashable, Sendable {
    /// A service of the host.
    public struct Service: Hashable, Sendable {
        /// The instance name, e.g. `Build Box`.
        public var instance: String
        /// The service type, e.g. `_openagents._tcp` (its domain is replaced by the zone).
        public var type: ServiceType
        public var port: UInt16
        public var info: DiscoveryInfo
        /// Subtype labels (e.g. `_printer`) under which the service is also listed.
        public var subtypes: [String]

        public init(instance: String, type: ServiceType, port: UInt16, info: DiscoveryInfo = DiscoveryInfo(), subtypes: [String] = []) {
            self.instance = instance
            self.type = type
            self.port = port
            self.info = info
            self.subtypes = subtypes
        }
    }

    /// The host label, e.g. `buildbox`: the host is `buildbox.<zone>`.
    public var hostLabel: String
    /// The zone registered in: `default.service.arpa.` unless the network names another.
    public var zone: DomainName
    /// The addresses the host is reached at.
    public var addresses: [IPAddress]
    /// The public key that holds the names (and whose private key signs).
    public var key: KEYData
    public var services: [Service]
    /// The lease asked for (RFC 9664): 0 removes the records (and, with a key lease of 0, the names).
    public var lease: UpdateLease
    /// The TTL of the records (RFC 9665 asks for one no longer than the lease).
    public var ttl: UInt32

    /// `default.service.arpa.`, the zone RFC 9665 reserves for SRP.
    public static let defaultZone: DomainName = "default.service.arpa."

    public init(
        hostLabel: String, zone: DomainName = SRPRequest.defaultZone, addresses: [IPAddress], key: KEYData, services: [Service],
        lease: UpdateLease, ttl: UInt32? = nil
    ) {
        self.hostLabel = hostLabel
        self.zone = zone
        self.addresses = addresses
        self.key = key
        self.services = services
        self.lease = lease
        self.ttl = ttl ?? min(lease.lease == 0 ? 7200 : lease.lease, 7200)
    }

    /// The host's name in the zone.
    public func hostName() throws(DNSWireError) -> DomainName {
        try DomainName(labels: [hostLabel]).appending(zone)
    }

    /// A service's type (and a subtype's) in the zone.
    func typeName(_ service: Service, subtype: String? = nil) throws(DNSWireError) -> DomainName {
        let type = service.type.baseType.inDomain(zone)
        guard let subtype else { return type.domainName }
        do {
            return try type.withSubtype(subtype).domainName
        } catch {
            throw DNSWireError(.badPresentationName, "\"\(subtype)\" is not a subtype label: \(error)")
        }
    }

    /// A service's instance name in the zone.
    public func instanceName(_ service: Service) throws(DNSWireError) -> DomainName {
        try DomainName(labels: [service.instance]).appending(try typeName(service))
    }

    /// The update before it is signed. A lease of 0 asks for removal: the service discovery
    /// instructions delete their PTRs (class NONE) and the descriptions add nothing.
    public func unsignedMessage(id: UInt16) throws(DNSWireError) -> Message {
        let host = try hostName()
        let removing = lease.lease == 0
        var records: [ResourceRecord] = []
        for service in services {
            let instance = try instanceName(service)
            let `class`: RecordClass = removing ? .none : .internet
            let ptrTTL: UInt32 = removing ? 0 : ttl
            records.append(ResourceRecord(name: try typeName(service), data: .ptr(instance), ttl: ptrTTL, class: `class`))
            for subtype in service.subtypes {
                records.append(ResourceRecord(name: try typeName(service, subtype: subtype), data: .ptr(instance), ttl: ptrTTL, class: `class`))
            }
        }
        for service in services {
            let instance = try instanceName(service)
            records.append(ResourceRecord(name: instance, data: .unknown(.any, []), ttl: 0, class: .any))
            guard !removing else { continue }
            records.append(ResourceRecord(name: instance, data: .srv(SRVData(port: service.port, target: host)), ttl: ttl))
            records.append(ResourceRecord(name: instance, data: .txt(service.info.txt), ttl: ttl))
        }
        records.append(ResourceRecord(name: host, data: .unknown(.any, []), ttl: 0, class: .any))
        if !removing {
            for address in addresses {
                switch address {
                case .v4(let v4): records.append(ResourceRecord(name: host, data: .a(v4), ttl: ttl))
                case .v6(let v6, _): records.append(ResourceRecord(name: host, data: .aaaa(v6), ttl: ttl))
                }
            }
        }
        records.append(ResourceRecord(name: host, data: key.recordData, ttl: removing ? 0 : ttl))
        var header = Header(id: id)
        header.opcode = Header.updateOpcode
        return Message(header: header, questions: [Question(name: zone, type: .soa)], authorities: records, additionals: [lease.optRecord()])
    }

    /// The signed update: `sign` gets the bytes SIG(0) covers (RFC 2931 §3.1) and returns the
    /// signature (r ‖ s for ECDSA P-256). `now` is seconds since 1970: the SIG is valid from five
    /// minutes before it to a day after (a registrar without a clock ignores both).
    public func signed<Failure: Error>(
        id: UInt16, now: UInt32, sign: ([UInt8]) throws(Failure) -> [UInt8]
    ) throws(SRPRequestError<Failure>) -> [UInt8] {
        let bytes: [UInt8]
        var sig: SIGData
        do {
            bytes = try unsignedMessage(id: id).encoded()
            sig = SIGData(expiration: now &+ 86_400, inception: now &- 300, keyTag: key.keyTag, signerName: try hostName())
        } catch {
            throw .encoding(error)
        }
        do {
            sig.signature = try sign(sig.signedBytes(unsignedMessage: bytes))
        } catch {
            throw .signing(error)
        }
        return sig.appended(to: bytes)
    }
}

/// Why an SRP request could not be made: its names do not encode, or the signer failed.
public enum SRPRequestError<Failure: Error>: Error {
    case encoding(DNSWireError)
    case signing(Failure)
}
