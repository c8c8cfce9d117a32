public import NearbyBasics
#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif

/// Which side of a connection the peer being judged is on.
public enum PeerRole: String, Sendable, CaseIterable {
    /// We connect to the peer: its certificate must be fit for a TLS server.
    case connecting
    /// The peer connected to us: its certificate must be fit for a TLS client.
    case accepting

    var purpose: OpenSSL.Purpose { self == .connecting ? .server : .client }
    var fitness: String { self == .connecting ? "a TLS server" : "a TLS client" }
}

/// What makes a peer's certificate trusted. Policies compose.
public indirect enum TrustPolicy: Sendable, Hashable {
    /// The chain must lead, through intermediates the peer sent, to one of these anchors and
    /// to nothing else. An anchor may be an intermediate CA (the chain may end there).
    case anchors([Certificate])
    /// The system's trust store (OpenSSL's default paths, e.g. /etc/ssl/certs).
    case systemRoots
    /// The leaf's peer ID is one of these (trust on first use, after a person said yes).
    case pinned(Set<PeerID>)
    /// The leaf's peer ID is pinned in this store, read at each evaluation (cheaply: the file
    /// is read again only when it changed): pins made or removed while a listener or a broker
    /// runs (by an invitation, a pairing, `nearby trust pin` in another shell) apply at once.
    case pinnedInStore(TrustStore)
    /// Trusted when any of the policies trusts.
    case anyOf([TrustPolicy])
    /// Trusted when every policy trusts.
    case allOf([TrustPolicy])
}

/// A peer that passed.
public struct TrustedPeer: Hashable, Sendable {
    public var peerID: PeerID
    /// The leaf's common name (what the peer calls itself).
    public var displayName: String
    /// The validated chain, leaf first, ending at the anchor (or the pinned leaf alone).
    public var chain: [Certificate]
}

/// The outcome of an evaluation.
public enum TrustVerdict: Hashable, Sendable {
    case trusted(TrustedPeer)
    /// Every reason found, not only the first.
    case rejected([TrustReason])

    public var isTrusted: Bool {
        if case .trusted = self { return true }
        return false
    }
}

/// Decides whether a peer's certificate chain is trusted, with OpenSSL's X.509 path
/// validation (strict mode, partial chains allowed so an anchor may be an intermediate).
///
/// Always checked: the validity period of every certificate at the given time, signatures,
/// basic constraints, key usage and extended key usage for the role when present, at most
/// ``maximumIntermediates`` intermediates, keys and signature digests of at least 112-bit
/// security everywhere in the chain (unless ``allowsWeakKeys``), revocation by the
/// ``revocationLists`` for anchored chains, and — when discovery announced a peer ID — that the
/// leaf's key hashes to it.
public struct TrustEvaluator: Sendable {
    public var policy: TrustPolicy
    /// Intermediate CAs allowed between leaf and anchor (OpenSSL's verify depth).
    public var maximumIntermediates: Int
    /// CRLs to check anchored chains against (``TrustPolicy/anchors(_:)``, ``TrustPolicy/systemRoots``):
    /// each certificate whose issuer has a list here is checked against it. See ``RevocationList``.
    public var revocationLists: [RevocationList]
    /// Accept keys and signatures below 112-bit security (NIST SP 800-57; OpenSSL's security
    /// level 2): RSA and DSA keys under 2048 bits, elliptic curves under 224 bits, and
    /// certificates signed with MD5 or SHA-1. Off by default: such a chain is rejected with
    /// `weakKey` or `weakSignature` (`TrustReason.code`). (A root's signature on
    /// itself proves nothing and is not judged.) Only for a deployment that must accept old
    /// devices it cannot re-issue.
    public var allowsWeakKeys: Bool

    public init(policy: TrustPolicy, maximumIntermediates: Int = 8, revocationLists: [RevocationList] = [], allowsWeakKeys: Bool = false) {
        self.policy = policy
        self.maximumIntermediates = maximumIntermediates
        self.revocationLists = revocationLists
        self.allowsWeakKeys = allowsWeakKeys
    }

    /// OpenSSL's authentication level for the settings: 2 (112-bit security), or none.
    var authenticationLevel: Int32 { allowsWeakKeys ? -1 : 2 }

    /// The most certificates a peer may present: beyond it the chain is rejected unread.
    var maximumPresented: Int { max(Certificate.maximumChainLength, maximumIntermediates + 2) }

    /// Judges `chain` (leaf first, then the intermediates the peer sent).
    /// - Parameters:
    ///   - chain: the certificates the peer presented, leaf first.
    ///   - expectedPeerID: the peer ID discovery announced, if any.
    ///   - role: `.connecting` when we connect to the peer, `.accepting` when it connected to us.
    ///   - time: the time to judge validity at (now by default).
    public func evaluate(
        chain: [Certificate], expectedPeerID: PeerID? = nil, role: PeerRole, at time: Date = Date()
    ) -> TrustVerdict {
        evaluate(chain: chain, expectedPeerID: expectedPeerID, role: role, at: time, rememberedOnly: false) ?? .rejected([])
    }

    /// The verdict on `chain` when every verification it needs was done before in this process
    /// for this time's validity interval (memory look-ups only, cheap enough for an event loop);
    /// nil when OpenSSL would have to run, or the system's roots be read.
    package func rememberedVerdict(chain: [Certificate], expectedPeerID: PeerID?, role: PeerRole, at time: Date = Date()) -> TrustVerdict? {
        evaluate(chain: chain, expectedPeerID: expectedPeerID, role: role, at: time, rememberedOnly: true)
    }

    private func evaluate(chain: [Certificate], expectedPeerID: PeerID?, role: PeerRole, at time: Date, rememberedOnly: Bool) -> TrustVerdict? {
        guard let leaf = chain.first else { return .rejected([TrustReason(.noCertificate, "the peer sent no certificate")]) }
        guard chain.count <= maximumPresented else {
            return .rejected([TrustReason(
                .chainTooLong,
                "the chain is longer than allowed: \(chain.count) certificates were presented, at most \(maximumPresented) are read (and at most \(maximumIntermediates) intermediate CA certificate\(maximumIntermediates == 1 ? "" : "s") may lie between leaf and anchor)")])
        }
        var reasons: [TrustReason] = []
        if let expectedPeerID, leaf.peerID != expectedPeerID {
            reasons.append(TrustReason(
                .peerIDMismatch, "peer ID mismatch: discovery announced \(expectedPeerID.short), the certificate's key is \(leaf.peerID)"))
        }
        switch judge(policy, chain: chain, role: role, time: time, rememberedOnly: rememberedOnly) {
        case .success(let validated):
            guard reasons.isEmpty else { return .rejected(reasons) }
            return .trusted(TrustedPeer(
                peerID: leaf.peerID, displayName: leaf.commonName.isEmpty ? leaf.subject : leaf.commonName, chain: validated))
        case .failure(let failure):
            if failure.notRemembered { return nil }
            return .rejected(reasons + failure.reasons)
        }
    }

    static let nothingTrustedMessage = "nothing is trusted yet: no anchors and no pinned peers (nearby trust anchor add FILE, nearby trust pin PEER-ID)"

    struct Failure: Error {
        var reasons: [TrustReason]
        /// Remembered-only evaluation: a verification was not remembered (no verdict yet).
        var notRemembered = false
    }

    private func judge(_ policy: TrustPolicy, chain: [Certificate], role: PeerRole, time: Date, rememberedOnly: Bool) -> Result<[Certificate], Failure> {
        let leaf = chain[0]
        switch policy {
        case .anchors(let anchors):
            guard !anchors.isEmpty else { return .failure(Failure(reasons: [TrustReason(.noAnchors, "no trusted anchors are configured")])) }
            return verify(
                chain, anchors: anchors, systemRoots: false, role: role, time: time, checkSelfSignature: false, crls: revocationLists,
                rememberedOnly: rememberedOnly)
        case .systemRoots:
            return verify(
                chain, anchors: [], systemRoots: true, role: role, time: time, checkSelfSignature: false, crls: revocationLists,
                rememberedOnly: rememberedOnly)
        case .pinned(let pins):
            guard pins.contains(leaf.peerID) else {
                return .failure(Failure(reasons: [TrustReason(
                    .notPinned, "not pinned: peer ID \(leaf.peerID) is not among the \(pins.count) pinned peer\(pins.count == 1 ? "" : "s")")]))
            }
            // The pinned key stands for itself: the leaf alone is the chain, but its dates,
            // its usage for the role and (when it names itself as issuer) its own signature
            // still count.
            return verify(
                [leaf], anchors: [leaf], systemRoots: false, role: role, time: time, checkSelfSignature: leaf.subject == leaf.issuer,
                crls: [], rememberedOnly: rememberedOnly)
        case .pinnedInStore(let store):
            // Reading the store is file I/O: never from the remembered-only path (an event loop).
            if rememberedOnly { return .failure(Failure(reasons: [], notRemembered: true)) }
            let pins: [Pin]
            do {
                pins = try store.pins()
            } catch {
                return .failure(Failure(reasons: [TrustReason(.other, "the pins cannot be read: \(error.message)")]))
            }
            return judge(.pinned(Set(pins.map(\.peerID))), chain: chain, role: role, time: time, rememberedOnly: false)
        case .anyOf(let policies):
            var reasons: [TrustReason] = []
            for policy in policies {
                switch judge(policy, chain: chain, role: role, time: time, rememberedOnly: rememberedOnly) {
                case .success(let validated): return .success(validated)
                case .failure(let failure) where failure.notRemembered: return .failure(failure)
                case .failure(let failure): reasons += failure.reasons
                }
            }
            return .failure(Failure(reasons: reasons.isEmpty ? [TrustReason(.nothingTrusted, Self.nothingTrustedMessage)] : reasons))
        case .allOf(let policies):
            var reasons: [TrustReason] = []
            var first: [Certificate]?
            for policy in policies {
                switch judge(policy, chain: chain, role: role, time: time, rememberedOnly: rememberedOnly) {
                case .success(let validated): first = first ?? validated
                case .failure(let failure) where failure.notRemembered: return .failure(failure)
                case .failure(let failure): reasons += failure.reasons
                }
            }
            if reasons.isEmpty, let first { return .success(first) }
            return .failure(Failure(reasons: reasons.isEmpty ? [TrustReason(.nothingTrusted, Self.nothingTrustedMessage)] : reasons))
        }
    }

    private func verify(
        _ chain: [Certificate], anchors: [Certificate], systemRoots: Bool, role: PeerRole, time: Date, checkSelfSignature: Bool,
        crls: [RevocationList], rememberedOnly: Bool
    ) -> Result<[Certificate], Failure> {
        let outcome: OpenSSL.Verification
        let key = OpenSSLMemo.VerificationKey(
            leaf: chain[0].der, untrusted: chain.dropFirst().map(\.der), anchors: anchors.map(\.der), purpose: role.purpose.rawValue,
            maximumIntermediates: maximumIntermediates, checkSelfSignature: checkSelfSignature, crls: crls.map(\.der),
            authenticationLevel: authenticationLevel)
        if rememberedOnly {
            guard !systemRoots, let known = OpenSSLMemo.shared.rememberedVerification(key, at: Int64(time.timeIntervalSince1970.rounded(.down))),
                case .trusted(let ders) = known, let validated = Optional(ders.compactMap { Certificate.remembered(der: $0) }),
                validated.count == ders.count
            else {
                return .failure(Failure(reasons: [], notRemembered: true))
            }
            return .success(validated)
        }
        do {
            let seconds = Int64(time.timeIntervalSince1970.rounded(.down))
            let run = { () throws(PeerTrustError) -> OpenSSL.Verification in
                try OpenSSL.verify(
                    leaf: chain[0].der, untrusted: chain.dropFirst().map(\.der), anchors: anchors.map(\.der), systemRoots: systemRoots,
                    purpose: role.purpose, time: seconds, maximumIntermediates: maximumIntermediates, checkSelfSignature: checkSelfSignature,
                    crls: crls.map(\.der), authenticationLevel: authenticationLevel)
            }
            if systemRoots {
                outcome = try run()
            } else {
                // A CRL's dates bound the outcome's interval as a certificate's do.
                let validity =
                    (chain + anchors).map { (Int64($0.notBefore.timeIntervalSince1970), Int64($0.notAfter.timeIntervalSince1970)) }
                    + crls.map { (Int64($0.thisUpdate.timeIntervalSince1970), Int64(($0.nextUpdate ?? .distantFuture).timeIntervalSince1970)) }
                outcome = try OpenSSLMemo.shared.verification(key, at: seconds, validity: validity, compute: run)
            }
        } catch {
            return .failure(Failure(reasons: [TrustReason(.verificationFailed, error.message)]))
        }
        switch outcome {
        case .trusted(let ders):
            let validated = ders.compactMap { try? Certificate(der: $0) }
            return .success(validated.count == ders.count ? validated : chain)
        case .rejected(let issues):
            let anchorCount = systemRoots ? nil : anchors.count
            return .failure(Failure(reasons: issues.map { Self.reason(for: $0, role: role, anchorCount: anchorCount, limit: maximumIntermediates) }))
        }
    }

    /// Words and a `TrustReason.Code` for OpenSSL's verification errors: OpenSSL's numbers
    /// end here, reasons carry codes of their own.
    static func reason(for issue: OpenSSL.Issue, role: PeerRole, anchorCount: Int?, limit: Int) -> TrustReason {
        typealias X509Error = OpenSSL.VerifyError
        let name = issue.subject.isEmpty ? "the certificate" : "\"\(commonName(of: issue.subject))\""
        let position = issue.depth == 0 ? "certificate" : "CA certificate"
        let anchors = anchorCount.map { "the \($0) trusted anchor\($0 == 1 ? "" : "s")" } ?? "the system's trusted roots"
        let code: TrustReason.Code
        let message: String
        switch issue.code {
        case X509Error.certHasExpired:
            (code, message) = (.expired, "\(position) \(name) expired on \(day(issue.notAfter))")
        case X509Error.certNotYetValid:
            (code, message) = (.notYetValid, "\(position) \(name) is not valid until \(day(issue.notBefore))")
        case X509Error.unableToGetIssuerCert, X509Error.unableToGetIssuerCertLocally:
            (code, message) = (.unknownIssuer, "issuer not among \(anchors): \(name) was issued by \"\(commonName(of: issue.issuer))\"")
        case X509Error.unableToVerifyLeafSignature:
            (code, message) = (.unknownIssuer, "\(name) cannot be verified: its issuer \"\(commonName(of: issue.issuer))\" is not among \(anchors)")
        case X509Error.depthZeroSelfSignedCert:
            (code, message) = (.selfSignedNotTrusted, "\(name) is self-signed and not among \(anchors)")
        case X509Error.selfSignedCertInChain:
            (code, message) = (.untrustedRoot, "the chain ends in the self-signed root \(name), which is not among \(anchors)")
        case X509Error.certSignatureFailure:
            (code, message) = (.badSignature, "the signature on \(name) does not verify (tampered or corrupt)")
        case X509Error.unableToDecryptCertSignature, X509Error.unableToDecodeIssuerPublicKey:
            (code, message) = (.unreadableSignature, "the signature on \(name) cannot be checked (unreadable signature or issuer key)")
        case X509Error.invalidPurpose:
            (code, message) = (.wrongUsage, "\(name) is not fit for \(role.fitness) (its key usage or extended key usage forbids it)")
        case X509Error.certChainTooLong:
            (code, message) = (.chainTooLong, "the chain is longer than allowed: at most \(limit) intermediate CA certificate\(limit == 1 ? "" : "s")")
        case X509Error.invalidCA:
            (code, message) = (.notACA, "\(name) signs other certificates but is not a CA (basic constraints)")
        case X509Error.pathLengthExceeded:
            (code, message) = (.pathLengthExceeded, "\(name) is deeper in the chain than its CA's path length allows")
        case X509Error.invalidNonCA:
            (code, message) = (.unexpectedCA, "\(name) is marked as a CA where a leaf certificate was expected")
        case X509Error.eeKeyTooSmall, X509Error.caKeyTooSmall:
            let key = issue.key.isEmpty ? "" : " (\(issue.key))"
            (code, message) = (
                .weakKey,
                "the key of \(position) \(name)\(key) is below the 112-bit security required (RSA and DSA keys need 2048 bits, elliptic curves 224); --allow-weak-keys accepts it"
            )
        case X509Error.caDigestTooWeak:
            let digest = issue.digest.isEmpty ? "a weak digest" : issue.digest
            (code, message) = (
                .weakSignature,
                "\(name) is signed with \(digest), which is below the 112-bit security required (MD5 and SHA-1 are broken for signatures); --allow-weak-keys accepts it"
            )
        case X509Error.certRevoked:
            var words = "\(position) \(name) was revoked by \"\(commonName(of: issue.crl?.issuer ?? issue.issuer))\""
            if let revokedAt = issue.revokedAt { words += " on \(day(revokedAt))" }
            if let reason = issue.revocationReason { words += " (\(revocationReason(reason)))" }
            if let crl = issue.crl { words += ", according to its CRL of \(day(crl.thisUpdate))" }
            (code, message) = (.revoked, words)
        case X509Error.crlHasExpired:
            let crl = issue.crl
            let issuer = commonName(of: crl?.issuer ?? issue.issuer)
            let due = crl?.nextUpdate.map { " on \(day($0))" } ?? ""
            (code, message) = (
                .staleRevocationList,
                "the CRL from \"\(issuer)\" expired\(due) (its next update was due then), so whether \(name) is revoked is unknown: get a current CRL from that CA"
            )
        case X509Error.crlNotYetValid:
            let issuer = commonName(of: issue.crl?.issuer ?? issue.issuer)
            let from = issue.crl.map { " until \(day($0.thisUpdate))" } ?? ""
            (code, message) = (.staleRevocationList, "the CRL from \"\(issuer)\" is not valid\(from): check this machine's clock, or the CRL")
        case X509Error.crlSignatureFailure, X509Error.unableToDecryptCRLSignature:
            let issuer = commonName(of: issue.crl?.issuer ?? issue.issuer)
            (code, message) = (
                .badRevocationList,
                "the CRL that names \"\(issuer)\" as its issuer is not signed by that CA's key (forged, damaged, or from another CA of the same name), so it proves nothing about \(name)"
            )
        case X509Error.keyUsageNoCRLSign:
            let issuer = commonName(of: issue.crl?.issuer ?? issue.issuer)
            (code, message) = (.badRevocationList, "\"\(issuer)\" may not sign CRLs (its key usage lacks cRLSign), so its CRL proves nothing about \(name)")
        default:
            code = .other
            message = "\(name): \(OpenSSL.verifyErrorText(issue.code))"
        }
        return TrustReason(code, depth: issue.depth, message)
    }

    static func commonName(of subject: String) -> String {
        for part in subject.split(separator: ",") where part.hasPrefix("CN=") { return String(part.dropFirst(3)) }
        return subject
    }

    static func day(_ date: Date) -> String { day(Int64(date.timeIntervalSince1970)) }

    /// RFC 5280's CRLReason codes in words.
    static func revocationReason(_ code: Int) -> String {
        switch code {
        case 0: "reason unspecified"
        case 1: "key compromise"
        case 2: "CA compromise"
        case 3: "affiliation changed"
        case 4: "superseded"
        case 5: "cessation of operation"
        case 6: "on hold"
        case 8: "removed from the CRL"
        case 9: "privilege withdrawn"
        case 10: "attribute authority compromise"
        default: "reason code \(code)"
        }
    }

    static func day(_ seconds: Int64) -> String {
        // What DateFormatter's "yyyy-MM-dd HH:mm 'UTC'" (en_US_POSIX, UTC) wrote.
        let time = CivilTime(secondsSince1970: seconds)
        return "\(time.dateText) \(CivilTime.pad(time.hour, 2)):\(CivilTime.pad(time.minute, 2)) UTC"
    }
}
