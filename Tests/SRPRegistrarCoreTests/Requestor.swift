import DNSWire
import PeerTrust
import SRPRegistrarCore

/// An SRP requestor for tests: a fresh P-256 identity, and updates built as RFC 9665 says and
/// signed for real with SIG(0), so the registrar's verification is the real one.
struct Requestor {
    let identity: PeerIdentity
    let key: KEYData
    var host: String
    var zone: DomainName = "default.service.arpa."
    var addresses: [IPAddress] = [.v4(IPv4Address(192, 0, 2, 10)), .v6(IPv6Address("2001:db8::10")!)]

    struct Service {
        var instance: String
        var type: String = "_openagents._tcp"
        var port: UInt16 = 9099
        var txt: [String] = ["version=0.2.2"]
        var subtypes: [String] = []
        /// True to remove the service instead of adding it.
        var removing = false
    }

    init(host: String = "box") throws {
        identity = try PeerIdentity.generate(displayName: host)
        key = .p256(try identity.rawPublicKey())
        self.host = host
    }

    var hostName: DomainName { DomainName("\(host).\(zone)")! }

    func instanceName(_ service: Service) -> DomainName {
        try! DomainName(labels: [service.instance]).appending(DomainName("\(service.type).\(zone)")!)
    }

    /// The update as a message, before it is signed.
    func message(
        services: [Service] = [Service(instance: "Build Box")], lease: UpdateLease? = UpdateLease(lease: 7200, keyLease: 604_800),
        id: UInt16 = 0x2024, hostDescription: Bool = true, keyOnHost: KEYData? = nil
    ) -> Message {
        var records: [ResourceRecord] = []
        for service in services {
            let type = DomainName("\(service.type).\(zone)")!
            let instance = instanceName(service)
            let `class`: RecordClass = service.removing ? .none : .internet
            records.append(ResourceRecord(name: type, data: .ptr(instance), ttl: service.removing ? 0 : 7200, class: `class`))
            for subtype in service.subtypes {
                let owner = DomainName("\(subtype)._sub.\(service.type).\(zone)")!
                records.append(ResourceRecord(name: owner, data: .ptr(instance), ttl: 7200, class: `class`))
            }
        }
        for service in services {
            let instance = instanceName(service)
            records.append(ResourceRecord(name: instance, data: .unknown(.any, []), ttl: 0, class: .any))
            guard !service.removing else { continue }
            records.append(ResourceRecord(name: instance, data: .srv(SRVData(port: service.port, target: hostName)), ttl: 7200))
            let txt = try! TXTData(strings: service.txt.map { Array($0.utf8) })
            records.append(ResourceRecord(name: instance, data: .txt(txt), ttl: 7200))
        }
        if hostDescription {
            records.append(ResourceRecord(name: hostName, data: .unknown(.any, []), ttl: 0, class: .any))
            for address in addresses {
                switch address {
                case .v4(let v4): records.append(ResourceRecord(name: hostName, data: .a(v4), ttl: 7200))
                case .v6(let v6, _): records.append(ResourceRecord(name: hostName, data: .aaaa(v6), ttl: 7200))
                }
            }
            records.append(ResourceRecord(name: hostName, data: (keyOnHost ?? key).recordData, ttl: 7200))
        }
        var header = Header(id: id)
        header.opcode = Header.updateOpcode
        return Message(
            header: header, questions: [Question(name: zone, type: .soa)], authorities: records,
            additionals: lease.map { [$0.optRecord()] } ?? [])
    }

    /// Signs an encoded message with SIG(0) (RFC 2931 §3.1): the SIG's RDATA without the
    /// signature, then the message, signed with the identity's key; the SIG appended last.
    func sign(_ bytes: [UInt8], keyTag: UInt16? = nil) throws -> [UInt8] {
        var sig = SIGData(expiration: 1_800_000_000, inception: 1_700_000_000, keyTag: keyTag ?? key.keyTag, signerName: hostName)
        sig.signature = try identity.signRaw(sig.signedBytes(unsignedMessage: bytes))
        return sig.appended(to: bytes)
    }

    /// A signed SRP update.
    func update(
        services: [Service] = [Service(instance: "Build Box")], lease: UpdateLease? = UpdateLease(lease: 7200, keyLease: 604_800),
        id: UInt16 = 0x2024
    ) throws -> [UInt8] {
        try sign(try message(services: services, lease: lease, id: id).encoded())
    }
}

/// The verifier a registrar's shell gives it: PeerTrust's OpenSSL, for real.
let openSSLVerifier = SIG0Verifier { key, bytes, signature in P256Signature.verify(publicKey: key, message: bytes, signature: signature) }

let source = IPAddress.v4(IPv4Address(192, 0, 2, 10))

func makeRegistrar(limits: RegistrarLimits = RegistrarLimits(), leases: LeasePolicy = LeasePolicy()) -> RegistrarStateMachine {
    RegistrarStateMachine(configuration: RegistrarConfiguration(leases: leases, limits: limits, verifier: openSSLVerifier))
}

extension Array where Element == RegistrarAction {
    /// The reply among the actions.
    var reply: Message? {
        for action in self { if case .reply(let message) = action { return message } }
        return nil
    }

    var rcode: ResponseCode? { reply.map { ResponseCode(UInt16($0.header.responseCode)) } }

    /// The lease the reply grants.
    var grantedLease: UpdateLease? { try? reply?.updateLease() }

    /// Everything but the reply: what the LAN is told.
    var lan: [RegistrarAction] { filter { if case .reply = $0 { return false } else { return true } } }
}

extension Duration {
    static func hours(_ value: Int64) -> Duration { .seconds(value * 3600) }
    static func days(_ value: Int64) -> Duration { .seconds(value * 86400) }
}
