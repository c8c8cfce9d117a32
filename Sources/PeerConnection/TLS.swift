import NearbyBasics
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import NIOSSL
import PeerTrust

/// What the TLS handshake learned about the peer, kept for the layers above. Touched only on
/// the connection's event loop.
final class PeerProof {
    /// The chain the peer presented, leaf first (parsed), once it arrived.
    var presented: [Certificate] = []
    /// Our policy's verdict on it.
    var verdict: TrustVerdict?
    /// Why we refused the peer in the TLS handshake, if we did.
    var refusal: PeerConnectionError?

    var peerID: PeerID? { presented.first?.peerID }
}

/// TLS 1.3 with a certificate on each side; the peer's chain is judged by PeerTrust, not by
/// BoringSSL's own verifier.
enum TLS {
    /// The TLS context a configuration asks for: nil when it is insecure (plain `ws://`).
    static func context(for configuration: PeerConnectionConfiguration, server: Bool) throws(PeerConnectionError) -> NIOSSLContext? {
        if configuration.insecure { return nil }
        guard let identity = configuration.identity else {
            throw PeerConnectionError(.invalidInput, "a secure \(server ? "listener" : "connection") needs an identity (or the insecure option, for ws://)")
        }
        return try context(identity: identity, server: server)
    }

    /// Contexts made so far, per identity and side: a context is immutable and thread-safe, and
    /// making one parses the certificate chain and the key again.
    private struct ContextKey: Hashable {
        var chain: [[UInt8]]
        /// A digest of the private key, so that the key itself is not kept a second time.
        var key: [UInt8]
        var server: Bool
    }
    private static let contexts = Locked<[ContextKey: NIOSSLContext]>([:])

    static func context(identity: PeerIdentity, server: Bool) throws(PeerConnectionError) -> NIOSSLContext {
        let key = ContextKey(chain: identity.certificateChain.map(\.der), key: sha256(identity.privateKeyPKCS8), server: server)
        if let made = contexts.withLockedValue({ $0[key] }) { return made }
        let made = try makeContext(identity: identity, server: server)
        contexts.withLockedValue { contexts in
            if contexts.count >= 16 { contexts.removeAll() }
            contexts[key] = made
        }
        return made
    }

    private static func makeContext(identity: PeerIdentity, server: Bool) throws(PeerConnectionError) -> NIOSSLContext {
        do {
            let chain = try identity.certificateChain.map { NIOSSLCertificateSource.certificate(try NIOSSLCertificate(bytes: $0.der, format: .der)) }
            let key = NIOSSLPrivateKeySource.privateKey(try NIOSSLPrivateKey(bytes: identity.privateKeyPKCS8, format: .der))
            var configuration =
                server
                ? TLSConfiguration.makeServerConfiguration(certificateChain: chain, privateKey: key)
                : TLSConfiguration.makeClientConfiguration()
            if !server {
                configuration.certificateChain = chain
                configuration.privateKey = key
            }
            configuration.minimumTLSVersion = .tlsv13
            configuration.maximumTLSVersion = .tlsv13
            // Require the peer's certificate; who it is, the verification callback decides.
            configuration.certificateVerification = .noHostnameVerification
            // PeerTrust judges chains, so BoringSSL needs no roots of its own: the default would
            // parse the whole system bundle for every context (milliseconds per connection).
            configuration.trustRoots = .certificates([])
            return try NIOSSLContext(configuration: configuration)
        } catch {
            throw PeerConnectionError(.invalidInput, "this identity cannot be used for TLS: \(error)")
        }
    }

    /// The verification callback for one connection.
    /// - Parameters:
    ///   - role: the peer's role, as PeerTrust names it (`.connecting`: we connect to it).
    ///   - requireTrust: refuse chains the policy rejects (else only record the verdict, for
    ///     invitations and pairing, which decide later).
    static func verifier(
        configuration: PeerConnectionConfiguration, role: PeerRole, expected: PeerID?, requireTrust: Bool,
        proof: NIOLoopBound<PeerProof>
    ) -> NIOSSLCustomVerificationCallback {
        let ownID = configuration.identity?.peerID
        return { certificates, promise in
            let eventLoop = promise.futureResult.eventLoop
            let work: EventLoopFuture<([Certificate], TrustVerdict)>
            if let known = rememberedVerdict(certificates, configuration: configuration, expected: expected, role: role) {
                // Judged before, in this validity interval: memory look-ups only, no hop.
                work = eventLoop.makeSucceededFuture(known)
            } else {
                work = NIOThreadPool.singleton.runIfActive(eventLoop: eventLoop) { () -> ([Certificate], TrustVerdict) in
                    let chain = try certificates.map { try Certificate(der: try $0.toDERBytes()) }
                    guard !chain.isEmpty else { return ([], .rejected([TrustReason(.noCertificate, "the peer sent no certificate")])) }
                    return (chain, configuration.verdict(chain: chain, expected: expected, role: role))
                }
            }
            work.whenComplete { outcome in
                let record = proof.value
                switch outcome {
                case .failure(let error):
                    record.refusal = PeerConnectionError(.untrusted, "the peer's certificate could not be read: \(error)")
                    promise.succeed(.failed)
                case .success((let chain, let verdict)):
                    record.presented = chain
                    record.verdict = verdict
                    if let ownID, chain.first?.peerID == ownID {
                        record.refusal = PeerConnectionError(.untrusted, "this is a connection to ourselves (the peer has our own identity, \(ownID.short))")
                        promise.succeed(.failed)
                    } else if case .rejected(let reasons) = verdict, requireTrust || reasons.contains(where: { $0.code == .peerIDMismatch }) {
                        record.refusal = PeerConnectionError(.untrusted, "the peer's certificate is not trusted", reasons: reasons, peerID: chain.first?.peerID)
                        promise.succeed(.failed)
                    } else {
                        promise.succeed(.certificateVerified)
                    }
                }
            }
        }
    }
}

/// The verdict on a presented chain when the configuration's evaluator remembers it (see
/// PeerTrust's memo): nil when judging needs OpenSSL, the system's roots, or the app's own
/// `judge` (which may read files), all of which run off the event loop.
private func rememberedVerdict(
    _ certificates: [NIOSSLCertificate], configuration: PeerConnectionConfiguration, expected: PeerID?, role: PeerRole
) -> ([Certificate], TrustVerdict)? {
    guard configuration.judge == nil, !certificates.isEmpty else { return nil }
    var chain: [Certificate] = []
    for certificate in certificates {
        guard let der = try? certificate.toDERBytes(), let known = Certificate.remembered(der: der) else { return nil }
        chain.append(known)
    }
    return configuration.trust.rememberedVerdict(chain: chain, expectedPeerID: expected, role: role).map { (chain, $0) }
}
