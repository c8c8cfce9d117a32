#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import NearbyBasics

/// Remembers the results of OpenSSL's two costly pure functions, so that a peer seen again
/// (a reconnect, a broker's probe) is not parsed and verified from scratch each time. With
/// OpenSSL 3, parsing a certificate alone sets up a key decoder (tens of microseconds), and a
/// verification parses everything again and checks signatures: together they were about 40 %
/// of a connection's set-up CPU on each side.
///
/// Both memos are exact, never approximate:
/// - a certificate's facts are a function of its DER bytes;
/// - a verification's outcome is a function of its inputs and of the time, and the time
///   matters only through the validity periods of the certificates involved. An outcome is
///   reused only at times within the same interval between two of those dates (`notBefore`,
///   or the second after a `notAfter`) as the time it was computed for. Verifications against
///   the system's roots are not remembered: that store is read from disk and may change.
final class OpenSSLMemo: @unchecked Sendable {  // Its dictionaries are touched only under `lock`.
    static let shared = OpenSSLMemo()

    /// Entries kept per memo; when full, the memo starts again empty (peers in use refill it at
    /// once, and a flood of distinct certificates cannot grow it).
    static let capacity = 512

    struct VerificationKey: Hashable {
        var leaf: [UInt8]
        var untrusted: [[UInt8]]
        var anchors: [[UInt8]]
        var purpose: Int32
        var maximumIntermediates: Int
        var checkSelfSignature: Bool
        var crls: [[UInt8]]
        var authenticationLevel: Int32
    }

    struct VerificationEntry {
        var outcome: OpenSSL.Verification
        /// The outcome holds for times in `from..<until` (seconds since 1970).
        var from: Int64
        var until: Int64
    }

    private let lock = Locked()
    private var facts: [[UInt8]: OpenSSL.CertificateFacts] = [:]
    private var verifications: [VerificationKey: VerificationEntry] = [:]

    func facts(of der: [UInt8], compute: () throws(PeerTrustError) -> OpenSSL.CertificateFacts) throws(PeerTrustError) -> OpenSSL.CertificateFacts {
        if let known = lock.withLock({ facts[der] }) { return known }
        let fresh = try compute()
        lock.withLock {
            if facts.count >= Self.capacity { facts.removeAll(keepingCapacity: true) }
            facts[der] = fresh
        }
        return fresh
    }

    /// What is remembered of `der`, without computing anything.
    func rememberedFacts(of der: [UInt8]) -> OpenSSL.CertificateFacts? {
        lock.withLock { facts[der] }
    }

    /// A remembered outcome that holds at `time`, without computing anything.
    func rememberedVerification(_ key: VerificationKey, at time: Int64) -> OpenSSL.Verification? {
        guard let known = lock.withLock({ verifications[key] }), known.from <= time, time < known.until else { return nil }
        return known.outcome
    }

    func verification(
        _ key: VerificationKey, at time: Int64, validity: [(notBefore: Int64, notAfter: Int64)],
        compute: () throws(PeerTrustError) -> OpenSSL.Verification
    ) throws(PeerTrustError) -> OpenSSL.Verification {
        if let known = lock.withLock({ verifications[key] }), known.from <= time, time < known.until { return known.outcome }
        let outcome = try compute()
        let (from, until) = Self.interval(around: time, validity: validity)
        lock.withLock {
            if verifications.count >= Self.capacity { verifications.removeAll(keepingCapacity: true) }
            verifications[key] = VerificationEntry(outcome: outcome, from: from, until: until)
        }
        return outcome
    }

    /// The widest interval around `time` in which no certificate becomes valid or expires. A
    /// certificate is valid at t when notBefore ≤ t ≤ notAfter: its validity changes at
    /// notBefore and at notAfter + 1.
    static func interval(around time: Int64, validity: [(notBefore: Int64, notAfter: Int64)]) -> (from: Int64, until: Int64) {
        var from = Int64.min
        var until = Int64.max
        for period in validity {
            for boundary in [period.notBefore, period.notAfter == .max ? .max : period.notAfter + 1] {
                if boundary <= time { from = max(from, boundary) } else { until = min(until, boundary) }
            }
        }
        return (from, until)
    }
}
