import DNSWire
import NearbyCrypto
import PeerTrust
import SRPRegistrarCore
import Testing

/// The requestor's side Nearby ships (`SRPRequest`, what `nearby advertise --registrar` sends),
/// checked by the registrar's machine; and a name the link already uses.
@Suite("SRP requestor: SRPRequest through the registrar")
struct RequestBuilderTests {
    func request(_ identity: PeerIdentity, lease: UInt32 = 3600, id: String? = nil) throws -> SRPRequest {
        let type = try #require(ServiceType("_openagents._tcp"))
        var info = DiscoveryInfo()
        try info.set("version", to: "0.2.2")
        if let id { try info.set("id", to: id) }
        return SRPRequest(
            hostLabel: "boxed", addresses: [.v4(IPv4Address(198, 18, 2, 6))], key: .p256(try identity.rawPublicKey()),
            services: [SRPRequest.Service(instance: "Boxed", type: type, port: 9099, info: info, subtypes: ["_bridge"])],
            lease: UpdateLease(lease: lease, keyLease: 86_400))
    }

    func signed(_ request: SRPRequest, _ identity: PeerIdentity, id: UInt16 = 7) throws -> [UInt8] {
        try request.signed(id: id, now: 1_800_000_000) { (bytes: [UInt8]) throws(PeerTrustError) -> [UInt8] in try identity.signRaw(bytes) }
    }

    @Test("an SRPRequest signed with a peer's identity is accepted: host, service and subtype published, the lease granted; lease 0 withdraws them")
    func accepted() throws {
        let identity = try PeerIdentity.generate(displayName: "boxed")
        var registrar = makeRegistrar()
        let actions = registrar.handle(try signed(try request(identity), identity), from: source, now: .zero)
        #expect(actions.rcode == .noError)
        #expect(actions.grantedLease == UpdateLease(lease: 3600, keyLease: 86_400))
        let hosts = actions.lan.compactMap { if case .publishHost(let host) = $0 { host } else { nil } }
        let services = actions.lan.compactMap { if case .publishService(let service) = $0 { service } else { nil } }
        #expect(hosts.map(\.name) == ["boxed.default.service.arpa."])
        #expect(services.map(\.instance) == [try DomainName(parsing: "Boxed._openagents._tcp.default.service.arpa.")])
        #expect(services.first?.subtypes == [try DomainName(parsing: "_bridge._sub._openagents._tcp.default.service.arpa.")])
        #expect(services.first?.srv.port == 9099)
        let removal = registrar.handle(try signed(try request(identity, lease: 0), identity, id: 8), from: source, now: .seconds(1))
        #expect(removal.rcode == .noError)
        #expect(removal.lan.contains(.withdrawHost("boxed.default.service.arpa.")))
    }

    @Test("a name in use on the link gives the registration up: withdrawn, its names free for another key")
    func conflictOnLink() throws {
        let identity = try PeerIdentity.generate(displayName: "boxed")
        var registrar = makeRegistrar()
        _ = registrar.handle(try signed(try request(identity), identity), from: source, now: .zero)
        let withdrawn = registrar.conflictOnLink("boxed.default.service.arpa.")
        #expect(withdrawn.contains(.withdrawHost("boxed.default.service.arpa.")))
        #expect(registrar.holder(of: "boxed.default.service.arpa.") == nil)
        #expect(registrar.statistics.linkConflicts == 1)
        let other = try PeerIdentity.generate(displayName: "other")
        #expect(registrar.handle(try signed(try request(other), other), from: source, now: .seconds(1)).rcode == .noError)
    }

    @Test("the KEY's peer ID is the identity's: the SHA-256 of the same SubjectPublicKeyInfo")
    func peerIDOfKey() throws {
        let identity = try PeerIdentity.generate(displayName: "boxed")
        #expect(PeerIDBinding.peerID(of: .p256(try identity.rawPublicKey())) == identity.peerID)
        #expect(PeerIDBinding.peerID(of: KEYData(algorithm: DNSSECAlgorithm(8), publicKey: [1, 2, 3])) == nil)
    }

    @Test("a TXT id is accepted only from the peer it names: its own ID passes, another peer's or garbage is NOTAUTH, counted, nothing published")
    func peerIDBoundToKey() throws {
        let identity = try PeerIdentity.generate(displayName: "boxed")
        let other = try PeerIdentity.generate(displayName: "other")
        var registrar = makeRegistrar()
        let own = registrar.handle(try signed(try request(identity, id: identity.peerID.description), identity), from: source, now: .zero)
        #expect(own.rcode == .noError)
        let impostor = registrar.handle(try signed(try request(other, id: identity.peerID.description), other, id: 9), from: source, now: .seconds(1))
        #expect(impostor.rcode == .notAuthoritative)
        #expect(impostor.lan.isEmpty)
        let garbage = registrar.handle(try signed(try request(other, id: "not-a-peer"), other, id: 10), from: source, now: .seconds(2))
        #expect(garbage.rcode == .notAuthoritative)
        #expect(registrar.statistics.wrongPeerID == 2)
    }
}
