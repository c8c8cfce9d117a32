import Foundation
import PeerConnection

@testable import PeerTrust

/// Identities and trust for loopback tests, made with PeerTrust's own certificate maker.
enum Peers {
    static let year: TimeInterval = 365 * 86_400

    /// A self-signed identity (like `nearby identity create`).
    static func identity(_ name: String) throws -> PeerIdentity {
        try PeerIdentity.generate(displayName: name)
    }

    struct Authority {
        let certificate: Certificate
        let key: [UInt8]
    }

    /// A CA certificate, valid around now.
    static func authority(_ name: String, issuedBy issuer: Authority? = nil) throws -> Authority {
        let key = try OpenSSL.generateP256()
        let der = try OpenSSL.makeCertificate(
            template(name, from: Date() - 5 * year, until: Date() + 5 * year, ca: true, usage: 0), subjectKey: key,
            issuer: issuer?.certificate.der, issuerKey: issuer?.key ?? key)
        return Authority(certificate: try Certificate(der: der), key: key)
    }

    /// A leaf issued by `issuer`, presented with `intermediates` after it.
    /// - Parameter usage: extended key usage bits: 1 server, 2 client, 3 both.
    static func issued(
        _ name: String, by issuer: Authority, presenting intermediates: [Certificate], usage: Int32 = 3,
        from start: Date = Date() - year, until end: Date = Date() + year
    ) throws -> PeerIdentity {
        let key = try OpenSSL.generateP256()
        let der = try OpenSSL.makeCertificate(
            template(name, from: start, until: end, ca: false, usage: usage), subjectKey: key, issuer: issuer.certificate.der,
            issuerKey: issuer.key)
        return try PeerIdentity(certificateChain: [try Certificate(der: der)] + intermediates, privateKey: PrivateKey(pkcs8: key), displayName: name)
    }

    private static func template(_ name: String, from start: Date, until end: Date, ca: Bool, usage: Int32) -> OpenSSL.Template {
        OpenSSL.Template(
            commonName: name, organization: "Loopback Test", serial: UInt64.random(in: 1...UInt64(Int64.max)),
            notBefore: Int64(start.timeIntervalSince1970), notAfter: Int64(end.timeIntervalSince1970),
            basicConstraints: true, isCA: ca, pathLength: -1, extendedKeyUsage: usage)
    }

    /// A configuration that trusts exactly `pinned` (by peer ID), with short timeouts.
    static func configuration(_ identity: PeerIdentity?, pinning pinned: [PeerIdentity] = [], version: String = "0.2.2") -> PeerConnectionConfiguration {
        var configuration = PeerConnectionConfiguration(
            identity: identity, trust: TrustEvaluator(policy: .pinned(Set(pinned.map(\.peerID)))),
            protocolVersion: ProtocolVersion(version) ?? ProtocolVersion(major: 0))
        configuration.setupTimeout = .seconds(5)
        configuration.requestTimeout = .seconds(5)
        return configuration
    }

    static func configuration(_ identity: PeerIdentity, anchors: [Certificate]) -> PeerConnectionConfiguration {
        var configuration = configuration(identity)
        configuration.trust = TrustEvaluator(policy: .anchors(anchors))
        return configuration
    }
}

/// A listener that answers `ping` ({}) and `echo` (its params), as `nearby serve` does, and
/// keeps what it rejected.
final class EchoServer: Sendable {
    let listener: PeerListener
    private let rejections: AsyncStream<PeerListener.Rejection>
    /// The pairings the listener reported.
    let pairings: AsyncStream<PairingResult>
    /// What happened to each attempt at one of the listener's invitations.
    let invitations: AsyncStream<InvitationAttempt>
    private let task: Task<Void, Never>

    init(
        _ configuration: PeerConnectionConfiguration, accept: PeerListener.AcceptPolicy = .trusted, pairing: PeerListener.PairingOffer? = nil,
        invitations: PeerListener.InvitationOffer? = nil
    ) async throws {
        listener = try await PeerListener.listen(
            host: "127.0.0.1", port: 0, configuration: configuration, accept: accept, pairing: pairing, invitations: invitations)
        let (invitations, invited) = AsyncStream.makeStream(of: InvitationAttempt.self)
        self.invitations = invitations
        let (rejections, continuation) = AsyncStream.makeStream(of: PeerListener.Rejection.self)
        let (pairings, paired) = AsyncStream.makeStream(of: PairingResult.self)
        self.rejections = rejections
        self.pairings = pairings
        task = Task { [listener] in
            await withDiscardingTaskGroup { group in
                for await event in listener.events {
                    switch event {
                    case .rejected(let rejection):
                        continuation.yield(rejection)
                    case .connected(let connection):
                        group.addTask { await EchoServer.serve(connection) }
                    case .paired(let result):
                        paired.yield(result)
                    case .invitation(let attempt):
                        invited.yield(attempt)
                    case .strangers:
                        break
                    }
                }
            }
            continuation.finish()
            paired.finish()
            invited.finish()
        }
    }

    var port: Int { listener.port }

    static func serve(_ connection: PeerConnection) async {
        for await message in connection.incoming {
            switch message.method {
            case "ping": message.respond(with: JSONValue.object([:]))
            case "echo": message.respond(with: message.params ?? .null)
            case "slow": break  // never answered
            default:
                if case .request(_, let method, _) = message.message {
                    message.respond(withError: JSONRPCError(JSONRPCError.methodNotFound, "no method \"\(method)\""))
                }
            }
        }
    }

    /// The next rejection the listener reported.
    func nextRejection() async -> PeerListener.Rejection? {
        for await rejection in rejections { return rejection }
        return nil
    }

    func stop() async {
        await listener.close()
        task.cancel()
    }
}
