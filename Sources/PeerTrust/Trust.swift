public import Foundation

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
    /// Trusted when any of the policies trusts.
    case anyOf([TrustPolicy])
    /// Trusted when every policy trusts.
    case allOf([TrustPolicy])
}

/// One reason for a rejection, in words a person can act on.
public struct TrustReason: Hashable, Sendable, CustomStringConvertible {
    /// OpenSSL's X509_V_ERR_* code, when the reason came from chain verification.
    public var code: Int?
    /// Position in the chain (0: the leaf), when known.
    public var depth: Int?
    public var message: String

    public init(code: Int? = nil, depth: Int? = nil, _ message: String) {
        self.code = code
        self.depth = depth
        self.message = message
    }

    public var description: String { message }
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
/// ``maximumIntermediates`` intermediates, and — when discovery announced a peer ID — that the
/// leaf's key hashes to it.
public struct TrustEvaluator: Sendable {
    public var policy: TrustPolicy
    /// Intermediate CAs allowed between leaf and anchor (OpenSSL's verify depth).
    public var maximumIntermediates: Int

    public init(policy: TrustPolicy, maximumIntermediates: Int = 8) {
        self.policy = policy
        self.maximumIntermediates = maximumIntermediates
    }

    /// Judges `chain` (leaf first, then the intermediates the peer sent).
    /// - Parameters:
    ///   - expectedPeerID: the peer ID discovery announced, if any.
    ///   - role: `.connecting` when we connect to the peer, `.accepting` when it connected to us.
    ///   - time: the time to judge validity at (now by default).
    public func evaluate(
        chain: [Certificate], expectedPeerID: PeerID? = nil, role: PeerRole, at time: Date = Date()
    ) -> TrustVerdict {
        guard let leaf = chain.first else { return .rejected([TrustReason("the peer sent no certificate")]) }
        var reasons: [TrustReason] = []
        if let expectedPeerID, leaf.peerID != expectedPeerID {
            reasons.append(TrustReason(
                "peer ID mismatch: discovery announced \(expectedPeerID.short), the certificate's key is \(leaf.peerID.short)"))
        }
        switch judge(policy, chain: chain, role: role, time: time) {
        case .success(let validated):
            guard reasons.isEmpty else { return .rejected(reasons) }
            return .trusted(TrustedPeer(
                peerID: leaf.peerID, displayName: leaf.commonName.isEmpty ? leaf.subject : leaf.commonName, chain: validated))
        case .failure(let failure):
            return .rejected(reasons + failure.reasons)
        }
    }

    static let nothingTrusted = "nothing is trusted yet: no anchors and no pinned peers (nearby trust anchor add FILE, nearby trust pin PEER-ID)"

    struct Failure: Error {
        var reasons: [TrustReason]
    }

    private func judge(_ policy: TrustPolicy, chain: [Certificate], role: PeerRole, time: Date) -> Result<[Certificate], Failure> {
        let leaf = chain[0]
        switch policy {
        case .anchors(let anchors):
            guard !anchors.isEmpty else { return .failure(Failure(reasons: [TrustReason("no trusted anchors are configured")])) }
            return verify(chain, anchors: anchors, systemRoots: false, role: role, time: time, checkSelfSignature: false)
        case .systemRoots:
            return verify(chain, anchors: [], systemRoots: true, role: role, time: time, checkSelfSignature: false)
        case .pinned(let pins):
            guard pins.contains(leaf.peerID) else {
                return .failure(Failure(reasons: [TrustReason(
                    "not pinned: peer ID \(leaf.peerID.short) is not among the \(pins.count) pinned peer\(pins.count == 1 ? "" : "s")")]))
            }
            // The pinned key stands for itself: the leaf alone is the chain, but its dates,
            // its usage for the role and (when it names itself as issuer) its own signature
            // still count.
            return verify([leaf], anchors: [leaf], systemRoots: false, role: role, time: time, checkSelfSignature: leaf.subject == leaf.issuer)
        case .anyOf(let policies):
            var reasons: [TrustReason] = []
            for policy in policies {
                switch judge(policy, chain: chain, role: role, time: time) {
                case .success(let validated): return .success(validated)
                case .failure(let failure): reasons += failure.reasons
                }
            }
            return .failure(Failure(reasons: reasons.isEmpty ? [TrustReason(Self.nothingTrusted)] : reasons))
        case .allOf(let policies):
            var reasons: [TrustReason] = []
            var first: [Certificate]?
            for policy in policies {
                switch judge(policy, chain: chain, role: role, time: time) {
                case .success(let validated): first = first ?? validated
                case .failure(let failure): reasons += failure.reasons
                }
            }
            if reasons.isEmpty, let first { return .success(first) }
            return .failure(Failure(reasons: reasons.isEmpty ? [TrustReason(Self.nothingTrusted)] : reasons))
        }
    }

    private func verify(
        _ chain: [Certificate], anchors: [Certificate], systemRoots: Bool, role: PeerRole, time: Date, checkSelfSignature: Bool
    ) -> Result<[Certificate], Failure> {
        let outcome: OpenSSL.Verification
        do {
            outcome = try OpenSSL.verify(
                leaf: chain[0].der, untrusted: chain.dropFirst().map(\.der), anchors: anchors.map(\.der), systemRoots: systemRoots,
                purpose: role.purpose, time: Int64(time.timeIntervalSince1970.rounded(.down)),
                maximumIntermediates: maximumIntermediates, checkSelfSignature: checkSelfSignature)
        } catch {
            return .failure(Failure(reasons: [TrustReason(error.message)]))
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

    /// Words for OpenSSL's verification errors.
    static func reason(for issue: OpenSSL.Issue, role: PeerRole, anchorCount: Int?, limit: Int) -> TrustReason {
        let name = issue.subject.isEmpty ? "the certificate" : "\"\(commonName(of: issue.subject))\""
        let position = issue.depth == 0 ? "certificate" : "CA certificate"
        let anchors = anchorCount.map { "the \($0) trusted anchor\($0 == 1 ? "" : "s")" } ?? "the system's trusted roots"
        let message: String
        switch issue.code {
        case 10: message = "\(position) \(name) expired on \(day(issue.notAfter))"
        case 9: message = "\(position) \(name) is not valid until \(day(issue.notBefore))"
        case 2, 20: message = "issuer not among \(anchors): \(name) was issued by \"\(commonName(of: issue.issuer))\""
        case 21: message = "\(name) cannot be verified: its issuer \"\(commonName(of: issue.issuer))\" is not among \(anchors)"
        case 18: message = "\(name) is self-signed and not among \(anchors)"
        case 19: message = "the chain ends in the self-signed root \(name), which is not among \(anchors)"
        case 7: message = "the signature on \(name) does not verify (tampered or corrupt)"
        case 4, 6: message = "the signature on \(name) cannot be checked (unreadable signature or issuer key)"
        case 26: message = "\(name) is not fit for \(role.fitness) (its key usage or extended key usage forbids it)"
        case 22: message = "the chain is longer than allowed: at most \(limit) intermediate CA certificate\(limit == 1 ? "" : "s")"
        case 79: message = "\(name) signs other certificates but is not a CA (basic constraints)"
        case 25: message = "\(name) is deeper in the chain than its CA's path length allows"
        case 37: message = "\(name) is marked as a CA where a leaf certificate was expected"
        default: message = "\(name): \(OpenSSL.verifyErrorText(issue.code))"
        }
        return TrustReason(code: issue.code, depth: issue.depth, message)
    }

    private static func commonName(of subject: String) -> String {
        for part in subject.split(separator: ",") where part.hasPrefix("CN=") { return String(part.dropFirst(3)) }
        return subject
    }

    private static func day(_ seconds: Int64) -> String {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "UTC")
        formatter.dateFormat = "yyyy-MM-dd HH:mm 'UTC'"
        return formatter.string(from: Date(timeIntervalSince1970: TimeInterval(seconds)))
    }
}
