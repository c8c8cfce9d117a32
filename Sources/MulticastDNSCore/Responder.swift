public import DNSWire

/// A name this engine claims, with the records it owns under that name and the shared records
/// that point to it: the host name (A/AAAA) or a service instance (SRV/TXT, and PTRs).
final class RecordSet {
    enum Kind {
        case host(label: String)
        case service(ServiceRegistration)
        /// A host answered for on behalf of another device (an advertising proxy): its
        /// addresses as given, the same on every interface.
        case proxiedHost(addresses: [IPAddress])
    }

    enum State: Equatable {
        /// The host name before anything is advertised: not probed, announced or defended
        /// (a process that only browses claims no name).
        case dormant
        case probing(step: Int)
        case announcing(step: Int)
        case established
        case withdrawn
    }

    let id: Int
    var kind: Kind { didSet { version += 1 } }
    /// The unique name being claimed: `host.local.` or `Instance._type._tcp.local.`.
    var name: DomainName { didSet { version += 1 } }
    /// Bumped when the name or the kind (a TXT update) changes: the records below are made
    /// again only then, not for every query a busy link asks.
    private(set) var version = 0
    var ownedCache: [NetworkInterface: (stamp: RecordStamp, records: [ResourceRecord])] = [:]
    var sharedCache: (version: Int, records: [ResourceRecord])?
    /// 1 for the name as requested, 2 for "Name (2)" and so on.
    var attempt = 1
    var state: State = .probing(step: 0)
    /// Bumped whenever probing restarts, so that steps scheduled before are ignored.
    var generation = 0
    /// For a service of another device: the host its SRV names (nil: this machine's).
    let target: DomainName?
    /// Whether a conflict renames the set ("Name (2)"); a set answered for on behalf of
    /// another device is given up instead (``EngineEvent/conflicted(_:name:)``): its name is
    /// its owner's to change.
    let renames: Bool

    init(id: Int, kind: Kind, name: DomainName, target: DomainName? = nil, renames: Bool = true) {
        self.id = id
        self.kind = kind
        self.name = name
        self.target = target
        self.renames = renames
    }

    static func hostName(_ label: String, attempt: Int) -> DomainName {
        let text = attempt == 1 ? label : "\(label)-\(attempt)"
        return (try? DomainName(labels: [text, "local"])) ?? .root
    }

    static func instanceName(_ registration: ServiceRegistration, attempt: Int) -> DomainName {
        (try? ServiceInstanceName(registration.instance(attempt: attempt), type: registration.type).domainName) ?? .root
    }

    /// Claimed or being claimed: neither dormant nor withdrawn.
    var isActive: Bool { state != .withdrawn && state != .dormant }

    var isService: Bool {
        if case .service = kind { return true }
        return false
    }

    /// A service or a proxied host: something an owner registered and may withdraw.
    var isRegistration: Bool {
        if case .host = kind { return false }
        return true
    }
}

/// What a record set's records were made from: they are made again when any of it changes.
struct RecordStamp: Equatable {
    /// The engine's interfaces and host-name ownership (``MDNSCore/recordsEpoch``).
    var epoch: Int
    var version: Int
    /// The host name's version: a service's SRV points at it.
    var hostVersion: Int
}

extension MDNSCore {
    // MARK: Registering

    /// Publishes a service: probes its name, renames on conflict, then announces it.
    public func register(_ registration: ServiceRegistration) -> RegistrationID {
        let id = allocateID()
        let set = RecordSet(id: id, kind: .service(registration), name: RecordSet.instanceName(registration, attempt: 1))
        recordSets[id] = set
        // The first advertisement wakes the host name: its A/AAAA records are what SRV points to.
        if let host = hostSetID.flatMap({ recordSets[$0] }), host.state == .dormant {
            restartProbing(host, delay: true)
        }
        restartProbing(set, delay: true)
        return RegistrationID(rawValue: id)
    }

    /// Publishes a service of another device (an advertising proxy): its SRV names `host`
    /// (published with ``registerProxiedHost(_:addresses:)``), and a conflict gives the name
    /// up instead of renaming it (``EngineEvent/conflicted(_:name:)``).
    public func registerProxied(_ registration: ServiceRegistration, host: DomainName) -> RegistrationID {
        let id = allocateID()
        let set = RecordSet(
            id: id, kind: .service(registration), name: RecordSet.instanceName(registration, attempt: 1), target: host, renames: false)
        recordSets[id] = set
        restartProbing(set, delay: true)
        return RegistrationID(rawValue: id)
    }

    /// Publishes the address records of another device's host `name` (an advertising proxy):
    /// probed like our own name, never renamed (a conflict gives it up).
    public func registerProxiedHost(_ name: DomainName, addresses: [IPAddress]) -> RegistrationID {
        let id = allocateID()
        let set = RecordSet(id: id, kind: .proxiedHost(addresses: addresses), name: name, renames: false)
        recordSets[id] = set
        restartProbing(set, delay: true)
        return RegistrationID(rawValue: id)
    }

    /// Withdraws a service (or a proxied host), sending goodbyes (TTL 0) for its records.
    public func unregister(_ id: RegistrationID) {
        guard let set = recordSets[id.rawValue], set.isRegistration else { return }
        let wasPublic = !isProbing(set)
        set.state = .withdrawn
        set.generation += 1
        recordSets[id.rawValue] = nil
        guard wasPublic else { return }
        // A shared record another registration still publishes (the type's enumeration PTR,
        // say) gets no goodbye: it is still true.
        let stillShared = Set(recordSets.values.filter { $0.isActive && !isProbing($0) }.flatMap { sharedRecords(of: $0) })
        for interface in interfaces.keys.sorted(by: { $0.index < $1.index }) {
            let leaving = ownedRecords(of: set, on: interface) + sharedRecords(of: set).filter { !stillShared.contains($0) }
            let goodbyes = leaving.map { record in
                var goodbye = record
                goodbye.ttl = 0
                return goodbye
            }
            sendMulticast(Message(header: .response, answers: goodbyes), on: interface)
        }
    }

    /// Sends goodbyes for everything and forgets all registrations (shutting down).
    public func unregisterAll() {
        for id in recordSets.keys.sorted() where recordSets[id]?.isRegistration == true {
            unregister(RegistrationID(rawValue: id))
        }
        // The host name goes too (§10.1), unless another responder here owns its records.
        guard let host = hostSetID.flatMap({ recordSets[$0] }), host.isActive else { return }
        let wasPublic = !isProbing(host)
        host.state = .dormant
        host.generation += 1
        guard wasPublic else { return }
        for interface in sortedInterfaces {
            let goodbyes = ownedRecords(of: host, on: interface).map { record in
                var goodbye = record
                goodbye.ttl = 0
                return goodbye
            }
            if !goodbyes.isEmpty { sendMulticast(Message(header: .response, answers: goodbyes), on: interface) }
        }
    }

    /// Replaces a service's TXT record and announces the new one.
    public func updateTXT(_ id: RegistrationID, _ txt: DiscoveryInfo) {
        guard let set = recordSets[id.rawValue], case .service(var registration) = set.kind else { return }
        registration.txt = txt
        set.kind = .service(registration)
        if !isProbing(set) {
            set.generation += 1
            set.state = .announcing(step: 0)
            scheduler.schedule(.announce(set.id, generation: set.generation), at: now)
        }
    }

    /// The name a registration currently holds or is probing.
    public func name(of id: RegistrationID) -> DomainName? { recordSets[id.rawValue]?.name }

    func isProbing(_ set: RecordSet) -> Bool {
        if case .probing = set.state { return true }
        return false
    }

    // MARK: Records

    /// The addresses a host publishes on one interface: all of them, except IPv6 link-local
    /// ones when the interface has a routable IPv6 address. That is avahi-daemon's rule too, so
    /// when both run on one machine under one host name their address records agree instead
    /// of conflicting; and a routable address is what a peer should use anyway.
    static func publishedAddresses(_ addresses: [IPAddress]) -> [IPAddress] {
        let hasRoutableIPv6 = addresses.contains { if case .v6(let v6, _) = $0 { !v6.isLinkLocal } else { false } }
        guard hasRoutableIPv6 else { return addresses }
        return addresses.filter { if case .v6(let v6, _) = $0 { !v6.isLinkLocal } else { true } }
    }

    /// The records `set` owns uniquely (cache-flush on announce) as they are on `interface`.
    func ownedRecords(of set: RecordSet, on interface: NetworkInterface) -> [ResourceRecord] {
        let stamp = RecordStamp(
            epoch: recordsEpoch, version: set.version, hostVersion: hostSetID.flatMap { recordSets[$0]?.version } ?? 0)
        if let cached = set.ownedCache[interface], cached.stamp == stamp { return cached.records }
        let records = makeOwnedRecords(of: set, on: interface)
        set.ownedCache[interface] = (stamp, records)
        return records
    }

    private func makeOwnedRecords(of set: RecordSet, on interface: NetworkInterface) -> [ResourceRecord] {
        switch set.kind {
        case .host:
            if hostNameOwnedElsewhere { return [] }
            return PublishedRecords.host(set.name, addresses: interfaces[interface] ?? [])
        case .service(let registration):
            return PublishedRecords.service(registration, instance: set.name, hostName: set.target ?? hostName)
        case .proxiedHost(let addresses):
            return PublishedRecords.host(set.name, addresses: addresses)
        }
    }

    /// The shared records pointing at `set`: the type's PTR, subtype PTRs and the service-type
    /// enumeration PTR (RFC 6763 §4.1, §7.1, §9).
    func sharedRecords(of set: RecordSet) -> [ResourceRecord] {
        if let cached = set.sharedCache, cached.version == set.version { return cached.records }
        let records = makeSharedRecords(of: set)
        set.sharedCache = (set.version, records)
        return records
    }

    private func makeSharedRecords(of set: RecordSet) -> [ResourceRecord] {
        guard case .service(let registration) = set.kind else { return [] }
        return PublishedRecords.shared(registration, instance: set.name)
    }

    /// Records that belong in the additional section after `answers` (RFC 6763 §12).
    func additionalRecords(for answers: [ResourceRecord], on interface: NetworkInterface) -> [ResourceRecord] {
        var result: [ResourceRecord] = []
        func add(_ records: [ResourceRecord]) {
            for record in records where !answers.contains(record) && !result.contains(record) {
                result.append(record)
            }
        }
        for answer in answers {
            switch answer.data {
            case .ptr(let target):
                if let set = publicSet(named: target) {
                    let owned = ownedRecords(of: set, on: interface)
                    add(owned)
                    // The host the SRV names: ours, or the device's a proxied service runs on.
                    for case .srv(let srv) in owned.map(\.data) {
                        if let host = publicSet(named: srv.target) { add(ownedRecords(of: host, on: interface)) }
                    }
                }
            case .srv(let srv):
                if let host = publicSet(named: srv.target) { add(ownedRecords(of: host, on: interface)) }
            case .a, .aaaa:
                // The other family's addresses of the same host (RFC 6762 §6.2).
                if let host = publicSet(named: answer.name) { add(ownedRecords(of: host, on: interface)) }
            default:
                break
            }
        }
        return result
    }

    /// A record set that has finished probing and answers for `name`.
    func publicSet(named name: DomainName) -> RecordSet? {
        recordSets.values.first { $0.name == name && $0.isActive && !isProbing($0) }
    }

    var sortedInterfaces: [NetworkInterface] { interfaces.keys.sorted { $0.index < $1.index } }

    func sendMulticast(_ message: Message, on interface: NetworkInterface) {
        for family in familiesOn(interface) {
            outbox.append(OutgoingMessage(message: message, destination: .multicast(family), interface: interface))
            if message.header.isResponse {
                responses.noteMulticast(message.answers + message.additionals, on: interface, family: family, at: now)
            }
        }
    }

    /// The families to multicast on: those the interface has addresses of.
    func familiesOn(_ interface: NetworkInterface) -> [IPFamily] {
        families[interface] ?? []
    }

    // MARK: Receiving

    /// Handles a message that arrived (already decoded) at `time`.
    public func receive(_ received: ReceivedMessage, at time: Duration) {
        advance(to: time)
        let message = received.message
        // RFC 6762 §18.3, §18.11: ignore non-zero opcodes and response codes.
        guard message.header.opcode == 0, message.header.responseCode == 0 else { return }
        guard interfaces[received.interface] != nil else { return }
        // §14: our own packet, heard again through another of our interfaces on this link.
        if isOwnPacket(received) { return }
        if message.header.isResponse {
            guard !received.isLegacyUnicast else { return }  // §6: responses come from port 5353
            // §6 and §11: a response sent to us alone is taken only from the link, and only when
            // we asked for unicast replies in the last two seconds.
            if !received.destinationIsMulticast {
                guard received.sourceIsOnLink, let asked = lastUnicastRequest, now - asked <= .seconds(2) else {
                    statistics.unicastResponsesRefused += 1
                    return
                }
            }
            noticeLocalResponder(received)
            detectConflicts(in: message, on: received.interface)
            if received.destinationIsMulticast { suppressDuplicateAnswers(message, on: received.interface, family: received.family) }
            cacheResponse(received)
        } else {
            if message.isProbe { handleProbe(received) }
            answer(received)
            noteQuery(received)
            suppressDuplicateQuestions(received)
        }
    }

    /// Answers a query (§6): unique records at once, shared ones after 20–120 ms, everything
    /// after 400–500 ms when the query says more known answers follow (TC); QU questions by
    /// unicast unless the record went out by multicast lately; legacy queries by unicast with
    /// short TTLs, and only to on-link sources.
    func answer(_ received: ReceivedMessage) {
        let query = received.message
        let interface = received.interface
        // Known answers carried by this packet (the rest of a TC query, §7.2, or a query of
        // its own) also strike records from answers still waiting to go to this asker alone.
        if !query.answers.isEmpty { suppressPending(knownAnswers: query.answers, on: interface, from: received.source) }
        var answers: [ResourceRecord] = []
        var unicastAnswers: [ResourceRecord] = []
        var anyShared = false
        // This runs for every query on the link, a flood's included: no allocation but the
        // answer lists, and the rate-limit lookup only for QU questions, which need it.
        func consider(_ record: ResourceRecord, for question: Question) {
            guard matches(question, record) else { return }
            // Known-answer suppression: they have it with at least half its TTL (§7.1).
            if query.answers.contains(where: { $0.name == record.name && $0.data == record.data && $0.ttl >= record.ttl / 2 }) {
                statistics.knownAnswersSuppressed += 1
                return
            }
            if !record.cacheFlush { anyShared = true }
            // §5.4: a QU question is answered by unicast when the record was multicast within
            // a quarter of its TTL (the link has it; only the asker lacks it), and by multicast
            // when it was not (so every cache on the link is renewed). A source off the link
            // gets no unicast at all (§11).
            if question.unicastResponse && received.sourceIsOnLink && !received.isLegacyUnicast
                && responses.wasMulticastRecently(record, on: interface, family: received.family, at: now)
            {
                if !unicastAnswers.contains(record) { unicastAnswers.append(record) }
            } else if !answers.contains(record) {
                answers.append(record)
            }
        }
        for question in query.questions {
            for set in recordSets.values where set.isActive && !isProbing(set) {
                // A set's own records all bear its name: another name needs no look at them.
                if set.name == question.name {
                    for record in ownedRecords(of: set, on: interface) { consider(record, for: question) }
                }
                for record in sharedRecords(of: set) { consider(record, for: question) }
            }
        }
        guard !answers.isEmpty || !unicastAnswers.isEmpty else { return }
        if received.isLegacyUnicast {
            guard received.sourceIsOnLink else { return }  // never answer off-link sources
            let key = PendingResponseKey(interface: interface, destination: .unicast(received.source), legacyID: query.header.id)
            if responses.queue(answers, for: key, family: received.family, due: now, legacyQuestions: query.questions) {
                scheduler.scheduleOnce(.respond(key), at: now)
            }
            return
        }
        var delay: Duration = anyShared ? random.duration(in: MDNSTiming.sharedResponseDelay) : .zero
        if query.header.isTruncated { delay = random.duration(in: MDNSTiming.truncatedQueryDelay) }
        if !unicastAnswers.isEmpty {
            let key = PendingResponseKey(interface: interface, destination: .unicast(received.source), legacyID: nil)
            queue(unicastAnswers, key: key, family: received.family, at: now + delay, askers: .one(received.source))
        }
        if !answers.isEmpty {
            for family in familiesOn(interface) {
                let key = PendingResponseKey(interface: interface, destination: .multicast(family), legacyID: nil)
                queue(answers, key: key, family: family, at: now + delay, askers: .one(received.source))
            }
        }
    }

    /// §7.4 duplicate answer suppression: another responder multicast a record we were about
    /// to multicast to the same group, with a TTL no lower than ours: ours counts as sent there.
    func suppressDuplicateAnswers(_ response: Message, on interface: NetworkInterface, family: IPFamily) {
        statistics.duplicateAnswersSuppressed += responses.strikeDuplicates(
            response.answers + response.additionals, on: interface, family: family, at: now)
    }

    private func suppressPending(knownAnswers: [ResourceRecord], on interface: NetworkInterface, from source: SocketAddress) {
        responses.strikeKnownAnswers(knownAnswers, on: interface, from: source)
    }

    private func queue(_ records: [ResourceRecord], key: PendingResponseKey, family: IPFamily, at due: Duration, askers: Askers) {
        // The scheduler is searched only when this makes the response due sooner.
        if responses.queue(records, for: key, family: family, due: due, askers: askers) {
            scheduler.scheduleOnce(.respond(key), at: due)
        }
    }

    func matches(_ question: Question, _ record: ResourceRecord) -> Bool {
        question.name == record.name && (question.type == .any || question.type == record.type)
            && (question.class == .any || question.class == record.class)
    }

    func sendPendingResponse(_ key: PendingResponseKey) {
        guard var pending = responses.take(key) else { return }
        // Known answers in further TC packets may have removed entries meanwhile.
        pending.answers.removeAll { record in !stillOwned(record, on: key.interface) }
        guard !pending.answers.isEmpty else { return }
        if let id = key.legacyID {
            let answers = pending.answers.map { record in
                var copy = record
                copy.ttl = min(copy.ttl, MDNSTiming.legacyUnicastMaximumTTL)
                copy.cacheFlush = false
                return copy
            }
            var header = Header.response
            header.id = id
            outbox.append(OutgoingMessage(
                message: Message(header: header, questions: pending.legacyQuestions, answers: answers),
                destination: key.destination, interface: key.interface))
            return
        }
        if case .multicast(let family) = key.destination {
            // §6: at most once a second per record on each multicast group (IPv4's and IPv6's
            // apart). What may not go yet is owed, not dropped: it goes as soon as its second is up.
            let (fresh, owed, owedUntil) = responses.split(pending.answers, on: key.interface, family: family, at: now)
            if let owedUntil {
                statistics.multicastAnswersDeferred += owed.count
                queue(owed, key: key, family: pending.family, at: owedUntil, askers: pending.askers)
            }
            guard !fresh.isEmpty else { return }
            let trimmed = Message(header: .response, answers: fresh, additionals: additionalRecords(for: fresh, on: key.interface))
            outbox.append(OutgoingMessage(message: trimmed, destination: key.destination, interface: key.interface))
            responses.noteMulticast(trimmed.answers + trimmed.additionals, on: key.interface, family: family, at: now)
        } else {
            let additionals = additionalRecords(for: pending.answers, on: key.interface)
            let message = Message(header: .response, answers: pending.answers, additionals: additionals)
            outbox.append(OutgoingMessage(message: message, destination: key.destination, interface: key.interface))
        }
    }

    private func stillOwned(_ record: ResourceRecord, on interface: NetworkInterface) -> Bool {
        recordSets.values.contains { set in
            set.isActive && !isProbing(set)
                && (ownedRecords(of: set, on: interface) + sharedRecords(of: set)).contains(record)
        }
    }
}

extension ResourceRecord {
    /// The address of an A or AAAA record.
    var addressValue: IPAddress? {
        switch data {
        case .a(let address): .v4(address)
        case .aaaa(let address): .v6(address, scope: nil)
        default: nil
        }
    }
}
