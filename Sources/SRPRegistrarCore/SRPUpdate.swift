public import DNSWire

/// Checks an ECDSA P-256 signature in DNSSEC's raw forms: `publicKey` is x ‖ y, `signature`
/// r ‖ s, both 64 bytes (RFC 6605 §4); true when `signature` signs `signedBytes`. The core does
/// no cryptography itself (it imports no crypto library): the shell gives it PeerTrust's
/// `P256Signature.verify`, tests may give it anything.
public struct SIG0Verifier: Sendable {
    public let verify: @Sendable (_ publicKey: [UInt8], _ signedBytes: [UInt8], _ signature: [UInt8]) -> Bool

    public init(_ verify: @escaping @Sendable (_ publicKey: [UInt8], _ signedBytes: [UInt8], _ signature: [UInt8]) -> Bool) {
        self.verify = verify
    }
}

/// One service an SRP update adds or removes: its service discovery instruction (the PTR
/// records naming it under its type and subtypes) and its service description instruction
/// (delete the instance's RRsets, then add SRV and TXT; RFC 9665 §3.3.1.1 and §3.3.1.2).
public struct ServiceInstruction: Hashable, Sendable {
    /// The instance's name, e.g. `Box._openagents._tcp.default.service.arpa.`.
    public var instance: DomainName
    /// The service type the instance is listed under (the owner of its PTR record).
    public var serviceType: DomainName
    /// Subtype names it is also listed under (`_printer._sub._ipp._tcp.zone.`).
    public var subtypes: [DomainName]
    /// What the instance becomes; nil when the instruction removes it.
    public var description: ServiceDescription?
}

/// An instance's SRV and TXT as registered.
public struct ServiceDescription: Hashable, Sendable {
    public var srv: SRVData
    public var txt: TXTData
    /// The smallest TTL the requestor gave its records.
    public var ttl: UInt32
}

/// An SRP update that passed every check of RFC 9665 §3.3 but first come, first served and the
/// limits, which depend on the registrar's state.
public struct SRPUpdate: Hashable, Sendable {
    public var id: UInt16
    public var zone: DomainName
    /// The host description instruction's name (RFC 9665 §3.3.1.3).
    public var hostName: DomainName
    /// The KEY every instruction carries: who holds the names.
    public var key: KEYData
    public var addresses: [IPAddress]
    /// The smallest TTL the requestor gave its host's records.
    public var hostTTL: UInt32
    public var services: [ServiceInstruction]
    /// The lease asked for (not yet bounded by the registrar's ``LeasePolicy``).
    public var lease: UpdateLease
    public var signature: SIGData

    /// Every name the update touches: the host and each instance.
    public var names: [DomainName] { [hostName] + services.map(\.instance) }
}

/// What is known of a request before it proves to be an SRP update: enough to answer it.
public struct RequestHeader: Hashable, Sendable {
    public var id: UInt16
    public var opcode: UInt8
    /// The zone question, when there was one that read.
    public var zone: Question?
}

extension SRPUpdate {
    /// Reads and checks an SRP update (RFC 9665 §3.3): the zone is one of `zones`; there are no
    /// prerequisites; the update section is exactly service discovery, service description and
    /// one host description instruction; every KEY is the same P-256 key; the last record is a
    /// SIG(0) that `verifier` accepts with that key; the Update Lease option is present.
    ///
    /// The checks run from cheap to dear, so a malformed update never costs a signature check.
    /// Refusals carry their RCODE (see ``RegistrarError``):
    /// - FORMERR for any breach of form, a missing host description or lease;
    /// - NOTZONE for a name outside the zone (RFC 2136 §3.4.1.3);
    /// - REFUSED for a zone not served: RFC 2136 §3.1.1 would allow NOTAUTH, but SRP uses
    ///   NOTAUTH for a signature that fails, and a requestor should be able to tell "wrong
    ///   registrar" from "wrong key";
    /// - NOTAUTH for a missing or failing SIG(0), or a key that is not ECDSA P-256. RFC 2931
    ///   puts BADSIG (16) in a SIG's error field, but a registrar cannot sign its reply with
    ///   the requestor's key, and 16 as an extended RCODE in OPT means BADVERS (RFC 6891), so
    ///   the header's NOTAUTH is the one code that reaches the requestor unambiguously, as
    ///   TSIG does for BADSIG (RFC 8945 §5.3.2).
    public static func validate(
        _ bytes: [UInt8], zones: [DomainName], verifier: SIG0Verifier
    ) -> Result<SRPUpdate, RegistrarError> {
        do {
            return .success(try read(bytes, zones: zones, verifier: verifier))
        } catch {
            return .failure(error)
        }
    }

    /// The id, opcode and zone of a request, for a reply; nil when not even the 12-byte header
    /// is there, or the request is itself a response (never answered, so two servers cannot
    /// answer each other for ever).
    public static func header(of bytes: [UInt8]) -> RequestHeader? {
        guard bytes.count >= 12, bytes[2] & 0x80 == 0 else { return nil }
        let header = Header(id: UInt16(bytes[0]) << 8 | UInt16(bytes[1]), flags: UInt16(bytes[2]) << 8 | UInt16(bytes[3]))
        let zone = (try? Message(decoding: bytes))?.questions.first
        return RequestHeader(id: header.id, opcode: header.opcode, zone: zone)
    }

    private static func read(_ bytes: [UInt8], zones: [DomainName], verifier: SIG0Verifier) throws(RegistrarError) -> SRPUpdate {
        let decoded: DecodedMessage
        do {
            decoded = try Message.decode(bytes)
        } catch {
            throw RegistrarError(.malformed, "the update does not parse: \(error)")
        }
        let message = decoded.message
        guard message.header.opcode == Header.updateOpcode else {
            throw RegistrarError(.notImplemented, "OPCODE \(message.header.opcode) is not UPDATE", responseCode: .notImplemented)
        }
        if let skipped = decoded.skippedRecords.first {
            throw RegistrarError(.malformed, "the \(skipped.type) record of \(skipped.name) is malformed: \(skipped.error)")
        }
        // Zone section (RFC 2136 §3.1.1): one SOA question of class IN.
        guard message.questions.count == 1, let zoneQuestion = message.questions.first, zoneQuestion.type == .soa,
            zoneQuestion.class == .internet
        else {
            throw RegistrarError(.malformed, "an update names exactly one zone (ZOCOUNT 1, type SOA, class IN)")
        }
        let zone = zoneQuestion.name
        guard zones.contains(zone) else {
            throw RegistrarError(.zoneNotServed, "this registrar does not serve \(zone)", responseCode: .refused)
        }
        // RFC 9665 §3.3: an SRP update has no prerequisites.
        guard message.answers.isEmpty else {
            throw RegistrarError(.malformed, "an SRP update has no prerequisites; this one has \(message.answers.count)")
        }
        let lease: UpdateLease
        do {
            guard let found = try message.updateLease() else {
                throw RegistrarError(.malformed, "the update has no Update Lease option (RFC 9664)")
            }
            lease = found
        } catch let error as RegistrarError {
            throw error
        } catch {
            throw RegistrarError(.malformed, "the OPT record is malformed: \(error)")
        }
        var update = try instructions(message.authorities, zone: zone)
        update.id = message.header.id
        update.lease = lease
        guard lease.lease == 0 || !update.addresses.isEmpty else {
            throw RegistrarError(.malformed, "the host description of \(update.hostName) adds no address")
        }
        // The signature last: RFC 2931 §3.1, the SIG(0) is the last record.
        guard let last = message.additionals.last, last.type == .sig else {
            throw RegistrarError(.badSignature, "the update is not signed (no SIG(0) as its last record)", responseCode: .notAuthoritative)
        }
        // The SIG's owner, class and TTL are outside what it signs; RFC 2931 §3 fixes them (the
        // root, ANY, 0), so anything else is a tampered or foreign record.
        guard last.name.isRoot, last.class == .any, !last.cacheFlush, last.ttl == 0 else {
            throw RegistrarError(
                .badSignature, "the SIG(0) record must be owned by the root, of class ANY, with TTL 0", responseCode: .notAuthoritative)
        }
        let split: (unsigned: [UInt8], record: SIGData)?
        do {
            split = try SIGData.split(bytes)
        } catch {
            throw RegistrarError(.badSignature, "the SIG(0) record is malformed: \(error)", responseCode: .notAuthoritative)
        }
        guard let (unsigned, sig) = split else {
            throw RegistrarError(.badSignature, "the update is not signed (no SIG(0) as its last record)", responseCode: .notAuthoritative)
        }
        guard sig.isSIG0, sig.algorithm == .ecdsaP256SHA256, sig.signature.count == SIGData.p256SignatureLength else {
            throw RegistrarError(
                .badSignature, "the SIG is not a SIG(0) with ECDSAP256SHA256 and a 64-byte signature", responseCode: .notAuthoritative)
        }
        guard sig.keyTag == update.key.keyTag else {
            throw RegistrarError(
                .badSignature, "the SIG(0) names key tag \(sig.keyTag), the update's KEY has \(update.key.keyTag)",
                responseCode: .notAuthoritative)
        }
        // Inception and expiration are not checked: SRP requestors (Thread devices) often
        // have no clock, and the registrar's core has none either. A replayed update can only
        // repeat what its key's holder once asked for.
        guard verifier.verify(update.key.publicKey, sig.signedBytes(unsignedMessage: unsigned), sig.signature) else {
            throw RegistrarError(
                .badSignature, "the SIG(0) does not verify with the update's KEY", responseCode: .notAuthoritative)
        }
        update.signature = sig
        return update
    }

    /// Sorts the update section into instructions (RFC 9665 §3.3.1).
    private static func instructions(_ records: [ResourceRecord], zone: DomainName) throws(RegistrarError) -> SRPUpdate {
        // First the service discovery instructions: their targets tell instances from the host
        // among the "delete all RRsets" records (RFC 9665 §3.3.1.1).
        struct Listing {
            var baseType: DomainName?
            var subtypes: [DomainName] = []
            var adds = false
            var deletes = false
        }
        var listings: [DomainName: Listing] = [:]
        var instanceOrder: [DomainName] = []
        for record in records {
            // The decoder reads a class's top bit as mDNS's cache-flush bit; in unicast DNS it
            // is part of the class, and no class SRP uses has it.
            guard !record.cacheFlush else {
                throw RegistrarError(.malformed, "the \(record.type) record of \(record.name) has class \(record.class.rawValue | 0x8000)")
            }
            guard record.name.hasSuffix(zone) else {
                throw RegistrarError(.outsideZone, "\(record.name) is outside the zone \(zone)", responseCode: .notZone)
            }
            guard case .ptr(let instance) = record.data else { continue }
            guard record.class == .internet || record.class == .none else {
                throw RegistrarError(.malformed, "a PTR record of class \(record.class) belongs to no instruction")
            }
            let owner = record.name
            let relative = owner.labelCount - zone.labelCount
            let labels = owner.labels
            let isSubtype = relative == 4 && labels.count > 1 && labels[1] == Array("_sub".utf8)
            guard relative == 2 || isSubtype else {
                throw RegistrarError(.malformed, "\(owner) is not a service type (_service._proto) or subtype in \(zone)")
            }
            let baseType = isSubtype ? owner.parent.parent : owner
            guard instance.parent == baseType, instance.labelCount == baseType.labelCount + 1 else {
                throw RegistrarError(.malformed, "the instance \(instance) is not an instance of \(baseType)")
            }
            var listing = listings[instance] ?? Listing()
            if listings[instance] == nil { instanceOrder.append(instance) }
            if isSubtype {
                listing.subtypes.append(owner)
            } else {
                guard listing.baseType == nil else {
                    throw RegistrarError(.malformed, "\(instance) is listed twice under its type")
                }
                listing.baseType = owner
            }
            if record.class == .none { listing.deletes = true } else { listing.adds = true }
            listings[instance] = listing
        }
        // Then the other records, each to its instruction.
        struct Description {
            var deletesAll = false
            var srv: [SRVData] = []
            var txt: [TXTData] = []
            var ttl = UInt32.max
        }
        var descriptions: [DomainName: Description] = [:]
        var hostName: DomainName?
        var hostDeletesAll = false
        var addresses: [IPAddress] = []
        var hostTTL = UInt32.max
        var key: KEYData?
        func note(_ found: KEYData) throws(RegistrarError) {
            guard found.isP256 else {
                throw RegistrarError(
                    .badSignature, "the KEY is \(found.algorithm) with a \(found.publicKey.count)-byte key; SRP needs ECDSAP256SHA256",
                    responseCode: .notAuthoritative)
            }
            if let key, key.publicKey != found.publicKey || key.algorithm != found.algorithm {
                throw RegistrarError(.malformed, "the instructions carry different KEYs (RFC 9665 §3.3.1 requires one)")
            }
            key = found
        }
        func host(_ name: DomainName) throws(RegistrarError) {
            if let hostName, hostName != name {
                throw RegistrarError(.malformed, "two host descriptions (\(hostName) and \(name)); an update has one")
            }
            hostName = name
        }
        for record in records {
            if record.type == .ptr { continue }
            let name = record.name
            let isInstance = listings[name] != nil
            switch (record.class, record.data) {
            case (.any, .unknown(.any, let data)) where data.isEmpty && record.ttl == 0:
                // "Delete all RRsets from a name" (RFC 2136 §2.5.3).
                if isInstance {
                    descriptions[name, default: Description()].deletesAll = true
                } else {
                    try host(name)
                    hostDeletesAll = true
                }
            case (.internet, .srv(let srv)) where isInstance:
                descriptions[name, default: Description()].srv.append(srv)
                descriptions[name, default: Description()].ttl = min(descriptions[name, default: Description()].ttl, record.ttl)
            case (.internet, .txt(let txt)) where isInstance:
                descriptions[name, default: Description()].txt.append(txt)
                descriptions[name, default: Description()].ttl = min(descriptions[name, default: Description()].ttl, record.ttl)
            case (.internet, .unknown(.key, let rdata)):
                guard let found = KEYData(rdata: rdata) else {
                    throw RegistrarError(.malformed, "the KEY record of \(name) is shorter than its fixed fields")
                }
                try note(found)
                if !isInstance {
                    try host(name)
                    hostTTL = min(hostTTL, record.ttl)
                }
            case (.internet, .a(let address)) where !isInstance:
                try host(name)
                addresses.append(.v4(address))
                hostTTL = min(hostTTL, record.ttl)
            case (.internet, .aaaa(let address)) where !isInstance:
                try host(name)
                addresses.append(.v6(address))
                hostTTL = min(hostTTL, record.ttl)
            default:
                throw RegistrarError(
                    .malformed, "the \(record.type) record (class \(record.class)) of \(name) belongs to no SRP instruction")
            }
        }
        // RFC 9665 §3.3.1.3 and §3.3.2: exactly one host description, deleting the host's RRsets and adding
        // one KEY.
        guard let hostName, hostDeletesAll else {
            throw RegistrarError(.malformed, "the update has no host description instruction (delete the host's RRsets, add its KEY)")
        }
        guard let key else {
            throw RegistrarError(.malformed, "the host description of \(hostName) has no KEY")
        }
        guard hostName != zone else {
            throw RegistrarError(.malformed, "the host name cannot be the zone itself")
        }
        var services: [ServiceInstruction] = []
        for instance in instanceOrder {
            guard let listing = listings[instance], let baseType = listing.baseType else {
                throw RegistrarError(.malformed, "\(instance) is listed under a subtype but not under its type")
            }
            guard listing.adds != listing.deletes else {
                throw RegistrarError(.malformed, "\(instance)'s PTR records both add and delete it")
            }
            let found = descriptions[instance] ?? Description()
            guard found.deletesAll else {
                throw RegistrarError(
                    .malformed, "\(instance) has no service description instruction (delete its RRsets, add SRV and TXT)")
            }
            var description: ServiceDescription?
            if listing.adds {
                guard found.srv.count == 1, found.txt.count == 1, let srv = found.srv.first, let txt = found.txt.first else {
                    throw RegistrarError(
                        .malformed, "\(instance) adds \(found.srv.count) SRV and \(found.txt.count) TXT records; a service has one of each")
                }
                guard srv.target == hostName else {
                    throw RegistrarError(.malformed, "\(instance)'s SRV points at \(srv.target), not at the host \(hostName)")
                }
                description = ServiceDescription(srv: srv, txt: txt, ttl: found.ttl)
            } else {
                guard found.srv.isEmpty, found.txt.isEmpty else {
                    throw RegistrarError(.malformed, "\(instance) is removed from its type but given SRV or TXT records")
                }
            }
            services.append(ServiceInstruction(instance: instance, serviceType: baseType, subtypes: listing.subtypes, description: description))
        }
        return SRPUpdate(
            id: 0, zone: zone, hostName: hostName, key: key, addresses: addresses, hostTTL: hostTTL == .max ? 0 : hostTTL,
            services: services, lease: UpdateLease(lease: 0), signature: SIGData(expiration: 0, inception: 0, keyTag: 0, signerName: .root))
    }
}
