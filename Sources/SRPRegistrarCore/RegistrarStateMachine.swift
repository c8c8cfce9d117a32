public import DNSWire

/// The SRP registrar (RFC 9665) as a pure machine: update datagrams and time in, replies and
/// what the LAN should be told out. No clock, no socket: the shell passes the time (a Duration
/// since an origin of its choosing), sends the replies, publishes and withdraws through the
/// engine, and calls ``expire(now:)`` at ``nextDeadline``.
///
/// Names are first come, first served (RFC 9665 §3.3.3): a host name and its instance names
/// belong to the KEY that registered them until that key's lease runs out; another key gets
/// YXDOMAIN, the same key may change or remove them. When a lease runs out the records are
/// withdrawn (goodbyes) and the names stay held; when the key lease runs out they come free.
public struct RegistrarStateMachine: Sendable {
    /// One host and everything it registered, published or only held.
    struct Entry: Hashable, Sendable {
        var host: SRPHost
        /// Published services, by instance name.
        var services: [DomainName: SRPService]
        /// Instance names the key holds that are not published (removed, or their lease ran out).
        var heldInstances: Set<DomainName>
        /// When the records go; nil while nothing is published.
        var leaseExpiry: Duration?
        /// When the names come free.
        var keyExpiry: Duration
        /// Where the last update came from (for the per-source limit); nil after a restore.
        var source: IPAddress?

        var published: Bool { leaseExpiry != nil }
        var instanceNames: [DomainName] { Array(services.keys) + Array(heldInstances) }

        /// The bytes of records this entry holds, as they go on the wire (the byte limits).
        var size: Int {
            RegistrarStateMachine.hostSize(name: host.name, addresses: host.addresses, key: host.key)
                + services.values.reduce(0) { $0 + RegistrarStateMachine.serviceSize(instance: $1.instance, type: $1.serviceType, subtypes: $1.subtypes, txt: $1.txt) }
        }
    }

    public let configuration: RegistrarConfiguration
    public private(set) var statistics = RegistrarStatistics()
    var entries: [DomainName: Entry] = [:]
    /// Every held name (host or instance) → the host entry that holds it.
    var owners: [DomainName: DomainName] = [:]
    private var limiter: SourceLimiter

    public init(configuration: RegistrarConfiguration) {
        self.configuration = configuration
        limiter = SourceLimiter(rate: configuration.limits.updateRate, capacity: configuration.limits.trackedSources)
    }

    // MARK: - Updates

    /// Handles one request from `source`: a reply (unless it cannot be answered at all) and, when
    /// accepted, what to publish or withdraw.
    public mutating func handle(_ bytes: [UInt8], from source: IPAddress, now: Duration) -> [RegistrarAction] {
        guard let request = SRPUpdate.header(of: bytes) else {
            statistics.dropped += 1
            return []
        }
        // The bucket first: everything after it (parsing, a signature check) costs more.
        guard limiter.admit(source, now: now) else {
            return refuse(RegistrarError(.rateLimited, "\(source) sent too many updates", responseCode: .refused), request)
        }
        let update: SRPUpdate
        switch SRPUpdate.validate(bytes, zones: configuration.zones, verifier: configuration.verifier) {
        case .failure(let error): return refuse(error, request)
        case .success(let valid): update = valid
        }
        return apply(update, from: source, now: now, request: request)
    }

    /// The refusal's reply, counted.
    private mutating func refuse(_ error: RegistrarError, _ request: RequestHeader) -> [RegistrarAction] {
        statistics.count(error)
        return [.reply(Self.reply(to: request, code: error.responseCode, lease: nil))]
    }

    /// A reply (RFC 2136 §3.8): the request's ID and OPCODE with QR set, the zone section
    /// echoed, and on success the lease granted (RFC 9664 §4).
    static func reply(to request: RequestHeader, code: ResponseCode, lease: UpdateLease?) -> Message {
        var header = Header(id: request.id)
        header.isResponse = true
        header.opcode = request.opcode
        header.responseCode = UInt8(truncatingIfNeeded: code.rawValue & 0x0F)
        return Message(
            header: header, questions: request.zone.map { [$0] } ?? [], additionals: lease.map { [$0.optRecord()] } ?? [])
    }

    private mutating func apply(_ update: SRPUpdate, from source: IPAddress, now: Duration, request: RequestHeader) -> [RegistrarAction] {
        for instruction in update.services {
            guard let description = instruction.description,
                let why = PeerIDBinding.mismatch(description.txt, key: update.key, instance: instruction.instance)
            else { continue }
            return refuse(RegistrarError(.wrongPeerID, why, responseCode: .notAuthoritative), request)
        }
        // First come, first served: every name the update touches must be free, or held by
        // this update's key.
        for name in update.names {
            if let owner = owners[name], let entry = entries[owner], !Self.sameKey(entry.host.key, update.key) {
                return refuse(
                    RegistrarError(.nameHeld, "\(name) is held by another key", responseCode: .nameExists), request)
            }
        }
        let limits = configuration.limits
        let existing = entries[update.hostName]
        if existing == nil {
            let fromSource = entries.values.reduce(0) { $0 + ($1.source == source ? 1 : 0) }
            guard entries.count < limits.registrations, fromSource < limits.registrationsPerSource else {
                return refuse(
                    RegistrarError(
                        .limitReached, "no room for another registration (\(entries.count) in all, \(fromSource) from \(source))",
                        responseCode: .refused), request)
            }
        }
        guard update.addresses.count <= limits.addressesPerHost else {
            return refuse(
                RegistrarError(.limitReached, "\(update.addresses.count) addresses; a host may register \(limits.addressesPerHost)", responseCode: .refused),
                request)
        }
        let keptServices = Set(existing?.services.keys.map { $0 } ?? [])
        let added = Set(update.services.filter { $0.description != nil }.map(\.instance))
        let removed = Set(update.services.filter { $0.description == nil }.map(\.instance))
        let serviceCount = keptServices.union(added).subtracting(removed).count
        guard update.lease.lease == 0 || serviceCount <= limits.servicesPerHost else {
            return refuse(
                RegistrarError(.limitReached, "\(serviceCount) services; a host may register \(limits.servicesPerHost)", responseCode: .refused),
                request)
        }

        if update.lease.lease != 0 {
            // What the registrar would hold for this host after the update, against what the
            // source and everyone already hold (the host's old records replaced by the new).
            var after = Self.hostSize(name: update.hostName, addresses: update.addresses, key: update.key)
            for service in existing.map({ Array($0.services.values) }) ?? [] where !added.contains(service.instance) && !removed.contains(service.instance) {
                after += Self.serviceSize(instance: service.instance, type: service.serviceType, subtypes: service.subtypes, txt: service.txt)
            }
            for instruction in update.services {
                guard let description = instruction.description else { continue }
                after += Self.serviceSize(instance: instruction.instance, type: instruction.serviceType, subtypes: instruction.subtypes, txt: description.txt)
            }
            var fromSource = 0
            var inAll = 0
            for (name, entry) in entries where name != update.hostName {
                let size = entry.size
                inAll += size
                if entry.source == source { fromSource += size }
            }
            guard fromSource + after <= limits.bytesPerSource, inAll + after <= limits.bytes else {
                return refuse(
                    RegistrarError(
                        .limitReached,
                        "no room for \(after) more bytes of records (\(inAll) held in all, of \(limits.bytes); \(fromSource) from \(source), of \(limits.bytesPerSource))",
                        responseCode: .refused), request)
            }
        }

        let granted = configuration.leases.grant(update.lease)
        statistics.accepted += 1
        var actions: [RegistrarAction] = [.reply(Self.reply(to: request, code: .noError, lease: granted))]
        let keyLease = granted.keyLease ?? granted.lease
        if granted.lease == 0 {
            statistics.removals += 1
            actions += remove(update, keyLease: keyLease, now: now, source: source)
        } else {
            actions += register(update, lease: granted.lease, keyLease: keyLease, now: now, source: source)
        }
        return actions
    }

    /// A registration or refresh: the host's addresses replaced, each instruction's service
    /// added, replaced or removed, services the update does not name left as they are.
    private mutating func register(
        _ update: SRPUpdate, lease: UInt32, keyLease: UInt32, now: Duration, source: IPAddress
    ) -> [RegistrarAction] {
        var actions: [RegistrarAction] = []
        // An instance this key registered under another of its host names moves here.
        for instruction in update.services {
            guard let owner = owners[instruction.instance], owner != update.hostName, var other = entries[owner] else { continue }
            if other.services.removeValue(forKey: instruction.instance) != nil {
                actions.append(.withdrawService(instruction.instance))
            }
            other.heldInstances.remove(instruction.instance)
            entries[owner] = other
            owners[instruction.instance] = nil
        }
        let host = SRPHost(
            name: update.hostName, zone: update.zone, addresses: update.addresses, key: update.key,
            ttl: min(update.hostTTL == 0 ? lease : update.hostTTL, lease))
        var entry =
            entries[update.hostName]
            ?? Entry(host: host, services: [:], heldInstances: [], leaseExpiry: nil, keyExpiry: now, source: source)
        if !entry.published || entry.host != host {
            actions.append(.publishHost(host))
        }
        entry.host = host
        for instruction in update.services {
            guard let description = instruction.description else {
                if entry.services.removeValue(forKey: instruction.instance) != nil {
                    actions.append(.withdrawService(instruction.instance))
                }
                entry.heldInstances.insert(instruction.instance)
                continue
            }
            let service = SRPService(
                instance: instruction.instance, zone: update.zone, serviceType: instruction.serviceType,
                subtypes: instruction.subtypes, srv: description.srv, txt: description.txt,
                ttl: min(description.ttl == 0 ? lease : description.ttl, lease))
            if entry.services[instruction.instance] != service {
                actions.append(.publishService(service))
            }
            entry.services[instruction.instance] = service
            entry.heldInstances.remove(instruction.instance)
        }
        entry.leaseExpiry = now + .seconds(Int64(lease))
        entry.keyExpiry = now + .seconds(Int64(keyLease))
        entry.source = source
        entries[update.hostName] = entry
        for name in [update.hostName] + entry.instanceNames { owners[name] = update.hostName }
        return actions
    }

    /// A removal (lease 0, RFC 9665 §3.2.5.5): goodbyes for everything the host published; its
    /// names stay held for the key lease, or come free at once when that is 0 too.
    private mutating func remove(_ update: SRPUpdate, keyLease: UInt32, now: Duration, source: IPAddress) -> [RegistrarAction] {
        var actions: [RegistrarAction] = []
        var entry =
            entries[update.hostName]
            ?? Entry(
                host: SRPHost(name: update.hostName, zone: update.zone, addresses: [], key: update.key, ttl: 0), services: [:],
                heldInstances: [], leaseExpiry: nil, keyExpiry: now, source: source)
        actions += withdrawAll(&entry)
        entry.heldInstances.formUnion(update.services.map(\.instance))
        if keyLease == 0 {
            release(entry)
            entries[update.hostName] = nil
        } else {
            entry.keyExpiry = now + .seconds(Int64(keyLease))
            entry.source = source
            entries[update.hostName] = entry
            for name in [update.hostName] + entry.instanceNames { owners[name] = update.hostName }
        }
        return actions
    }

    /// Goodbyes for an entry's services, then its host; the services' names stay held.
    private func withdrawAll(_ entry: inout Entry) -> [RegistrarAction] {
        var actions: [RegistrarAction] = []
        for instance in entry.services.keys.sorted(by: { $0.description < $1.description }) {
            actions.append(.withdrawService(instance))
            entry.heldInstances.insert(instance)
        }
        entry.services = [:]
        if entry.published { actions.append(.withdrawHost(entry.host.name)) }
        entry.leaseExpiry = nil
        return actions
    }

    private mutating func release(_ entry: Entry) {
        for name in [entry.host.name] + entry.instanceNames where owners[name] == entry.host.name {
            owners[name] = nil
        }
    }

    static func sameKey(_ a: KEYData, _ b: KEYData) -> Bool {
        a.algorithm == b.algorithm && a.publicKey == b.publicKey
    }

    // MARK: - The link

    /// A name of `host`'s registration is already in use on the link (the advertising proxy's
    /// probe met a rival): nothing of it may be advertised, and the name is not this key's to
    /// hold. Everything the host published is withdrawn and its names released; the shell
    /// answers the update it was holding with YXDOMAIN (the advertising proxy draft's choice:
    /// refuse rather than rename, since the name is the requestor's to change).
    public mutating func conflictOnLink(_ host: DomainName) -> [RegistrarAction] {
        guard var entry = entries[host] else { return [] }
        statistics.linkConflicts += 1
        let actions = withdrawAll(&entry)
        release(entry)
        entries[host] = nil
        return actions
    }

    // MARK: - Time

    /// The next time something runs out; nil when nothing is registered.
    public var nextDeadline: Duration? {
        entries.values.map { $0.leaseExpiry ?? $0.keyExpiry }.min()
    }

    /// Withdraws what ran out at `now`: records whose lease ended (names still held), and names
    /// whose key lease ended (released).
    public mutating func expire(now: Duration) -> [RegistrarAction] {
        var actions: [RegistrarAction] = []
        for name in entries.keys.sorted(by: { $0.description < $1.description }) {
            guard var entry = entries[name] else { continue }
            if let leaseExpiry = entry.leaseExpiry, leaseExpiry <= now {
                actions += withdrawAll(&entry)
                statistics.leasesExpired += 1
            }
            if entry.keyExpiry <= now {
                release(entry)
                entries[name] = nil
                statistics.keyLeasesExpired += 1
            } else {
                entries[name] = entry
            }
        }
        return actions
    }

    // MARK: - What is held

    /// The hosts whose records are on the LAN, with their services.
    public var publishedHosts: [(host: SRPHost, services: [SRPService])] {
        entries.values.filter(\.published).sorted { $0.host.name.description < $1.host.name.description }.map { entry in
            (entry.host, entry.services.values.sorted { $0.instance.description < $1.instance.description })
        }
    }

    /// The key that holds `name` (a host or instance name), if any.
    public func holder(of name: DomainName) -> KEYData? {
        owners[name].flatMap { entries[$0] }?.host.key
    }

    /// How many hosts are registered or hold names.
    public var registrationCount: Int { entries.count }

    /// Source addresses whose update rate is being tracked.
    public var trackedSources: Int { limiter.trackedSources }
}

extension RegistrarStateMachine {
    /// About the bytes of a host's records on the wire: an address record each, and its KEY.
    static func hostSize(name: DomainName, addresses: [IPAddress], key: KEYData) -> Int {
        let perRecord = name.wireLength + 10  // owner, type, class, TTL, RDLENGTH
        let addressBytes = addresses.reduce(0) { total, address in
            if case .v4 = address { return total + perRecord + 4 }
            return total + perRecord + 16
        }
        return addressBytes + perRecord + 4 + key.publicKey.count
    }

    /// About the bytes of a service's records on the wire (names in full, the SRV target as a
    /// compression pointer): PTR under its type and each subtype, SRV, TXT.
    static func serviceSize(instance: DomainName, type: DomainName, subtypes: [DomainName], txt: TXTData) -> Int {
        let pointers = ([type] + subtypes).reduce(0) { $0 + $1.wireLength + 10 + instance.wireLength }
        return pointers + (instance.wireLength + 10 + 6 + 2) + (instance.wireLength + 10 + txt.rdata.count)
    }
}
