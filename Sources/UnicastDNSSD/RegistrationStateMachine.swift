import DNSWire
import NearbyBasics

/// What happens to a registration in a DNS zone. A closed enum, like every event of the package.
public enum RegistrationEvent: Sendable, Equatable, CustomStringConvertible {
    /// The records are in the zone, under this instance name.
    case registered(String)
    /// Someone else's records appeared under our name; we now go by this one.
    case renamed(String)
    /// The records under this name can no longer be refreshed (server unreachable, key
    /// refused), and why; retries go on.
    case interrupted(String, UnicastDNSError)
    /// A refresh of the records under this name succeeded again after an interruption.
    case restored(String)
    /// The registration cannot be made (no such zone, a refused key…), and why. Nothing is
    /// retried.
    case failed(UnicastDNSError)
    /// The records under this name were removed from the zone.
    case withdrawn(String)

    /// The case's name: `registered`, `renamed`, `interrupted`, `restored`, `failed` or `withdrawn`.
    public var caseName: String {
        switch self {
        case .registered: "registered"
        case .renamed: "renamed"
        case .interrupted: "interrupted"
        case .restored: "restored"
        case .failed: "failed"
        case .withdrawn: "withdrawn"
        }
    }

    public var description: String {
        switch self {
        case .registered(let name), .renamed(let name), .restored(let name), .withdrawn(let name): "\(caseName) \"\(name)\""
        case .interrupted(let name, let error): "interrupted \"\(name)\": \(error)"
        case .failed(let error): "failed: \(error)"
        }
    }
}

/// A service registered in a DNS zone by DNS UPDATE (RFC 2136), as a pure state machine: answers
/// and time in; questions, updates and events out. One request is outstanding at a time.
///
/// 1. The zone: the SOA of the service's domain (in the answer, or in the authority section of
///    a negative answer, RFC 2308).
/// 2. The server: `_dns-update._udp.<zone>` SRV, else the SOA's MNAME (RFC 2136 §4), and its
///    address; or the server the caller named.
/// 3. The host name `<label>.<domain>`, first come first served: its A/AAAA records go in if the
///    name is free, or replace ours if the host's owner TXT (`nearby-owner=…`) says it is ours;
///    else the next label (`label-2`, …) is tried.
/// 4. The service: SRV, TXT, the type's PTR, subtype PTRs and the service-type enumeration PTR
///    (RFC 6763 §9) in one UPDATE, if the instance name is free, or if its SRV is exactly ours
///    (a run of ours that died); else "Name (2)", … as on the link.
/// 5. Refreshed at 80 % of the TTL (which also follows address changes), withdrawn on request.
struct RegistrationStateMachine {
    struct Settings: Equatable {
        /// TTL of every record registered.
        var ttl: UInt32 = 30
        /// First wait before a failed refresh is tried again; doubles up to 60 s.
        var retry: Duration = .seconds(2)
        /// Names tried before giving up.
        var maximumAttempts = 20
    }

    enum Request: Equatable, Sendable {
        case query(DomainName, RecordType)
        case update(DNSUpdate)
    }

    enum Action: Equatable, Sendable {
        /// Ask or send; the answer (or the failure) comes back through ``handle(_:at:)``.
        case send(Request)
        case report(RegistrationEvent)
        /// Nothing more will happen.
        case finish
    }

    private enum Phase: Equatable {
        case idle
        case findingZone
        case findingUpdateService(zone: DomainName, primary: DomainName)
        case findingServerAddress(DomainName, port: UInt16, type: RecordType)
        case claimingHost(checkOwner: Bool)
        case claimingService(reclaim: Bool)
        /// Registered; `refreshing` while the refresh's updates are out.
        case registered
        case refreshingHost
        case refreshingService
        case withdrawing(step: Int)
        case done
    }

    private(set) var registration: ServiceRegistration
    let hostLabel: String
    let ownerToken: String
    /// Whether updates are signed (a REFUSED means something else without a key).
    let signed: Bool
    let settings: Settings
    private(set) var addresses: [IPAddress]
    private(set) var server: DNSServer?
    private(set) var zone: DomainName?
    private(set) var deadline: Duration?
    private var phase = Phase.idle
    private var hostAttempt = 1
    private var nameAttempt = 1
    private var isRegistered = false
    private var interrupted = false
    private var retry: Duration
    private var withdrawRequested = false
    private var lastReportedName: String?
    private(set) var name: String

    init(
        registration: ServiceRegistration, hostLabel: String, addresses: [IPAddress], ownerToken: String, server: DNSServer?,
        signed: Bool = true, settings: Settings = Settings()
    ) {
        self.signed = signed
        self.registration = registration
        self.hostLabel = hostLabel
        self.addresses = addresses
        self.ownerToken = ownerToken
        self.server = server
        self.settings = settings
        self.retry = settings.retry
        self.name = registration.instance
    }

    var domain: DomainName { registration.type.domain }

    var hostName: DomainName {
        let label = hostAttempt == 1 ? hostLabel : "\(hostLabel)-\(hostAttempt)"
        return (try? DomainName(labels: [Array(label.utf8)]).appending(domain)) ?? .root
    }

    var instanceName: DomainName {
        (try? ServiceInstanceName(name, type: registration.type).domainName) ?? .root
    }

    // MARK: - records

    private var ownerRecord: ResourceRecord {
        let txt = (try? TXTData(strings: [Array("nearby-owner=\(ownerToken)".utf8)])) ?? .empty
        return ResourceRecord(name: hostName, data: .txt(txt), ttl: settings.ttl)
    }

    private var addressRecords: [ResourceRecord] {
        addresses.map { address in
            switch address {
            case .v4(let v4): ResourceRecord(name: hostName, data: .a(v4), ttl: settings.ttl)
            case .v6(let v6, _): ResourceRecord(name: hostName, data: .aaaa(v6), ttl: settings.ttl)
            }
        }
    }

    private var srvRecord: ResourceRecord {
        ResourceRecord(name: instanceName, data: .srv(SRVData(port: registration.port, target: hostName)), ttl: settings.ttl)
    }

    /// SRV, TXT, the type's PTR, subtype PTRs, and the enumeration PTR.
    private var serviceRecords: [ResourceRecord] {
        let type = registration.type
        var records = [
            srvRecord,
            ResourceRecord(name: instanceName, data: .txt(registration.txt.txt), ttl: settings.ttl),
            ResourceRecord(name: type.domainName, data: .ptr(instanceName), ttl: settings.ttl),
        ]
        for subtype in registration.subtypes {
            if let name = try? type.withSubtype(subtype).domainName {
                records.append(ResourceRecord(name: name, data: .ptr(instanceName), ttl: settings.ttl))
            }
        }
        records.append(ResourceRecord(name: ServiceType.enumerationName(in: domain), data: .ptr(type.domainName), ttl: settings.ttl))
        return records
    }

    private func hostUpdate(checkOwner: Bool) -> DNSUpdate {
        var update = DNSUpdate(zone: zone ?? domain)
        if checkOwner {
            update.require(.recordSetEquals([ownerRecord]))
            update.deleteRecordSet(hostName, .a)
            update.deleteRecordSet(hostName, .aaaa)
        } else {
            update.require(.nameIsFree(hostName))
        }
        update.add(ownerRecord)
        for record in addressRecords { update.add(record) }
        return update
    }

    private func serviceUpdate(reclaim: Bool) -> DNSUpdate {
        var update = DNSUpdate(zone: zone ?? domain)
        if reclaim {
            update.require(.recordSetEquals([srvRecord]))
            update.deleteRecordSet(instanceName, .txt)
        } else {
            update.require(.nameIsFree(instanceName))
        }
        for record in serviceRecords { update.add(record) }
        return update
    }

    // MARK: - events

    mutating func start(at now: Duration) -> [Action] {
        guard phase == .idle else { return [] }
        phase = .findingZone
        return [.send(.query(domain, .soa))]
    }

    /// The answer to the outstanding request, or why there is none.
    mutating func handle(_ result: Result<Message, UnicastDNSError>, at now: Duration) -> [Action] {
        switch phase {
        case .findingZone:
            return foundZone(result)
        case .findingUpdateService(let zone, let primary):
            var target = primary
            var port: UInt16 = 53
            if case .success(let message) = result,
                let srv = message.answers.lazy.compactMap({ if case .srv(let srv) = $0.data { srv } else { nil } }).first
            {
                target = srv.target
                port = srv.port
            }
            _ = zone
            phase = .findingServerAddress(target, port: port, type: .a)
            return [.send(.query(target, .a))]
        case .findingServerAddress(let target, let port, let type):
            if case .success(let message) = result {
                for record in message.answers where record.name == target {
                    switch record.data {
                    case .a(let v4):
                        server = DNSServer(.v4(v4), port: port)
                    case .aaaa(let v6):
                        server = DNSServer(.v6(v6), port: port)
                    default: continue
                    }
                    break
                }
            }
            if server != nil { return claimHost(checkOwner: false) }
            if type == .a {
                phase = .findingServerAddress(target, port: port, type: .aaaa)
                return [.send(.query(target, .aaaa))]
            }
            return fail(UnicastDNSError(
                .noSuchZone, "the zone \(zoneText)'s primary server \(target.description.dropLast()) has no address; give the server with --server"))
        case .claimingHost(let checkOwner):
            return hostClaimed(result, checkedOwner: checkOwner, at: now)
        case .claimingService(let reclaim):
            return serviceClaimed(result, reclaimed: reclaim, at: now)
        case .refreshingHost, .refreshingService:
            if withdrawRequested { return withdrawStep(after: 0) }
            return refreshed(result, host: phase == .refreshingHost, at: now)
        case .withdrawing(let step):
            return withdrawStep(after: step)
        case .idle, .registered, .done:
            return []
        }
    }

    private mutating func refreshed(_ result: Result<Message, UnicastDNSError>, host: Bool, at now: Duration) -> [Action] {
        if host {
            switch result {
            case .success(let message) where message.responseCode == .noError:
                phase = .refreshingService
                return [.send(.update(serviceUpdate(reclaim: true)))]
            case .success(let message) where message.responseCode == .recordSetMissing:
                // The host's records are gone or someone else's: claim a host name again.
                return claimHost(checkOwner: false)
            default:
                return refreshFailed(result, at: now)
            }
        } else {
            switch result {
            case .success(let message) where message.responseCode == .noError:
                phase = .registered
                retry = settings.retry
                deadline = now + refreshInterval
                if interrupted {
                    interrupted = false
                    return [.report(.restored(name))]
                }
                return []
            case .success(let message) where message.responseCode == .recordSetMissing:
                // Our SRV is gone (removed by hand, or replaced): register the name again.
                phase = .claimingService(reclaim: false)
                return [.send(.update(serviceUpdate(reclaim: false)))]
            default:
                return refreshFailed(result, at: now)
            }
        }
    }

    /// Lets time pass: a refresh when it is due, or a retry.
    mutating func advance(to now: Duration) -> [Action] {
        guard let deadline, now >= deadline else { return [] }
        self.deadline = nil
        switch phase {
        case .registered:
            phase = .refreshingHost
            return [.send(.update(hostUpdate(checkOwner: true)))]
        default:
            return []
        }
    }

    /// New TXT: sent at once when registered, else with the next update.
    mutating func update(info: DiscoveryInfo, at now: Duration) -> [Action] {
        registration.txt = info
        return refreshNowIfIdle(at: now)
    }

    /// The host's addresses changed.
    mutating func update(addresses: [IPAddress], at now: Duration) -> [Action] {
        guard addresses != self.addresses else { return [] }
        self.addresses = addresses
        return refreshNowIfIdle(at: now)
    }

    /// Removes the records: the service's, the type's enumeration PTR when no instance of the
    /// type is left, and the host's when the owner TXT is ours.
    mutating func withdraw(at now: Duration) -> [Action] {
        withdrawRequested = true
        deadline = nil
        switch phase {
        case .registered:
            return withdrawStep(after: 0)
        case .idle, .findingZone, .findingUpdateService, .findingServerAddress:
            phase = .done
            return [.finish]
        case .withdrawing, .done:
            return []
        default:
            // An update is out: withdraw once its answer is in (handled in claimed/refresh paths).
            return []
        }
    }

    // MARK: - steps

    private var refreshInterval: Duration { .milliseconds(Int64(settings.ttl) * 800) }

    private var zoneText: String { (zone ?? domain).description.dropLast().description }

    private mutating func refreshNowIfIdle(at now: Duration) -> [Action] {
        guard phase == .registered else { return [] }
        deadline = now
        return advance(to: now)
    }

    private mutating func foundZone(_ result: Result<Message, UnicastDNSError>) -> [Action] {
        let message: Message
        switch result {
        case .failure(let error): return fail(error)
        case .success(let answer): message = answer
        }
        let soa = (message.answers + message.authorities).first { $0.type == .soa && domain.hasSuffix($0.name) }
        guard let soa, case .soa(let data) = soa.data else {
            return fail(UnicastDNSError(
                .noSuchZone,
                "no DNS zone holds \(domain.description.dropLast()) (the server answered \(message.responseCode) without an SOA): check the domain, or point --server at the zone's server",
                responseCode: message.responseCode))
        }
        zone = soa.name
        if server != nil { return claimHost(checkOwner: false) }
        phase = .findingUpdateService(zone: soa.name, primary: data.primary)
        let name = (try? DomainName(labels: ["_dns-update", "_udp"]).appending(soa.name)) ?? soa.name
        return [.send(.query(name, .srv))]
    }

    private mutating func claimHost(checkOwner: Bool) -> [Action] {
        if withdrawRequested && !isRegistered {
            phase = .done
            return [.finish]
        }
        phase = .claimingHost(checkOwner: checkOwner)
        return [.send(.update(hostUpdate(checkOwner: checkOwner)))]
    }

    private mutating func hostClaimed(_ result: Result<Message, UnicastDNSError>, checkedOwner: Bool, at now: Duration) -> [Action] {
        guard case .success(let message) = result else { return isRegistered ? refreshFailed(result, at: now) : fail(result) }
        switch message.responseCode {
        case .noError:
            if withdrawRequested && !isRegistered { return withdrawStep(after: 2) }
            phase = .claimingService(reclaim: false)
            return [.send(.update(serviceUpdate(reclaim: false)))]
        case .nameExists where !checkedOwner:
            return claimHost(checkOwner: true)
        case .recordSetMissing where checkedOwner:
            hostAttempt += 1
            guard hostAttempt <= settings.maximumAttempts else {
                return fail(UnicastDNSError(.nameTaken, "the host names \(hostLabel) to \(hostLabel)-\(settings.maximumAttempts) in \(zoneText) all belong to other hosts; choose another with --host"))
            }
            return claimHost(checkOwner: false)
        default:
            return isRegistered ? refreshFailed(result, at: now) : fail(result)
        }
    }

    private mutating func serviceClaimed(_ result: Result<Message, UnicastDNSError>, reclaimed: Bool, at now: Duration) -> [Action] {
        guard case .success(let message) = result else { return isRegistered ? refreshFailed(result, at: now) : fail(result) }
        switch message.responseCode {
        case .noError:
            let first = !isRegistered
            let renamed = isRegistered && name != lastReportedName
            isRegistered = true
            lastReportedName = name
            if withdrawRequested { return withdrawStep(after: 0) }
            phase = .registered
            deadline = now + refreshInterval
            retry = settings.retry
            var actions: [Action] = []
            if first { actions.append(.report(.registered(name))) }
            if renamed { actions.append(.report(.renamed(name))) }
            if interrupted {
                interrupted = false
                actions.append(.report(.restored(name)))
            }
            return actions
        case .nameExists where !reclaimed:
            phase = .claimingService(reclaim: true)
            return [.send(.update(serviceUpdate(reclaim: true)))]
        case .recordSetMissing where reclaimed:
            nameAttempt += 1
            guard nameAttempt <= settings.maximumAttempts else {
                return fail(UnicastDNSError(.nameTaken, "\"\(registration.instance)\" and its renamings up to (\(settings.maximumAttempts)) are all taken in \(zoneText)"))
            }
            name = registration.instance(attempt: nameAttempt)
            phase = .claimingService(reclaim: false)
            return [.send(.update(serviceUpdate(reclaim: false)))]
        default:
            return isRegistered ? refreshFailed(result, at: now) : fail(result)
        }
    }


    private mutating func refreshFailed(_ result: Result<Message, UnicastDNSError>, at now: Duration) -> [Action] {
        if withdrawRequested { return withdrawStep(after: 0) }
        phase = .registered
        deadline = now + retry
        retry = min(retry * 2, .seconds(60))
        guard !interrupted else { return [] }
        interrupted = true
        return [.report(.interrupted(name, Self.explain(result, zone: zoneText, signed: signed)))]
    }

    private mutating func fail(_ result: Result<Message, UnicastDNSError>) -> [Action] {
        fail(Self.explain(result, zone: zoneText, signed: signed))
    }

    private mutating func fail(_ error: UnicastDNSError) -> [Action] {
        phase = .done
        deadline = nil
        return [.report(.failed(error)), .finish]
    }

    /// Step 1 removes the service, 2 the type's enumeration PTR if no instance is left, 3 the
    /// host's records if they are ours; then done.
    private mutating func withdrawStep(after step: Int) -> [Action] {
        let type = registration.type
        switch step {
        case 0:
            phase = .withdrawing(step: 1)
            var update = DNSUpdate(zone: zone ?? domain)
            update.require(.recordSetEquals([srvRecord]))
            update.deleteName(instanceName)
            update.delete(ResourceRecord(name: type.domainName, data: .ptr(instanceName), ttl: 0))
            for subtype in registration.subtypes {
                if let name = try? type.withSubtype(subtype).domainName {
                    update.delete(ResourceRecord(name: name, data: .ptr(instanceName), ttl: 0))
                }
            }
            return [.send(.update(update))]
        case 1:
            phase = .withdrawing(step: 2)
            var update = DNSUpdate(zone: zone ?? domain)
            update.require(.recordSetIsAbsent(type.domainName, .ptr))
            update.delete(ResourceRecord(name: ServiceType.enumerationName(in: domain), data: .ptr(type.domainName), ttl: 0))
            return [.send(.update(update))]
        case 2:
            phase = .withdrawing(step: 3)
            var update = DNSUpdate(zone: zone ?? domain)
            update.require(.recordSetEquals([ownerRecord]))
            update.deleteName(hostName)
            return [.send(.update(update))]
        default:
            phase = .done
            return [.report(.withdrawn(name)), .finish]
        }
    }

    /// One line for a failed request.
    static func explain(_ result: Result<Message, UnicastDNSError>, zone: String, signed: Bool = true) -> UnicastDNSError {
        let message: Message
        switch result {
        case .failure(let error): return error
        case .success(let answer): message = answer
        }
        let code = message.responseCode
        switch code {
        case .refused where !signed:
            return UnicastDNSError(
                .refused, "the server refused an unsigned update of \(zone) (REFUSED): give the zone's key with --tsig KEYFILE", responseCode: code)
        case .refused:
            return UnicastDNSError(
                .refused, "the server refused to change \(zone) (REFUSED): this key is not allowed to update this zone (its update-policy)",
                responseCode: code)
        case .notAuthoritative:
            return UnicastDNSError(
                .notAuthorized, "the server is not authoritative for \(zone) or did not accept the key (NOTAUTH)", responseCode: code)
        case .notZone:
            return UnicastDNSError(.noSuchZone, "a name is outside the zone \(zone) (NOTZONE)", responseCode: code)
        case .notImplemented:
            return UnicastDNSError(.serverFailure, "the server does not take DNS UPDATEs (NOTIMP)", responseCode: code)
        default:
            return UnicastDNSError(.serverFailure, "the server answered \(code) for \(zone)", responseCode: code)
        }
    }
}
