/// The words of a trust decision. PeerTrust makes the decision; the protocol core's errors carry
/// its reasons to the application. They live here, below both, so that the core needs neither
/// OpenSSL nor PeerTrust. `import PeerTrust` names them as before.

/// One reason for a rejection, in words a person can act on.
public struct TrustReason: Hashable, Sendable, CustomStringConvertible {
    /// What kind of reason this is, for programs: stable, and independent of OpenSSL's numbers.
    /// New codes may be added; switch with a `default`.
    public typealias Code = OpenKind<TrustReason>

    /// What kind of reason this is.
    public var code: Code
    /// Position in the chain (0: the leaf), when known.
    public var depth: Int?
    /// The reason in words, for a person.
    public var message: String

    /// A reason of kind `code`, about the certificate at `depth` in the chain when known.
    public init(_ code: Code, depth: Int? = nil, _ message: String) {
        self.code = code
        self.depth = depth
        self.message = message
    }

    /// The message.
    public var description: String { message }
}

extension OpenKind where Owner == TrustReason {
    /// A certificate's validity period ended before the evaluation time.
    public static var expired: Self { Self("expired") }
    /// A certificate's validity period starts after the evaluation time.
    public static var notYetValid: Self { Self("notYetValid") }
    /// A certificate's issuer is not among the trusted anchors, or cannot be found.
    public static var unknownIssuer: Self { Self("unknownIssuer") }
    /// The leaf is self-signed and is not itself a trusted anchor.
    public static var selfSignedNotTrusted: Self { Self("selfSignedNotTrusted") }
    /// The chain ends in a self-signed root that is not a trusted anchor.
    public static var untrustedRoot: Self { Self("untrustedRoot") }
    /// A certificate's signature does not verify with its issuer's key (tampered or corrupt).
    public static var badSignature: Self { Self("badSignature") }
    /// A certificate's signature, or its issuer's key, cannot be read, so it cannot be checked.
    public static var unreadableSignature: Self { Self("unreadableSignature") }
    /// The leaf's key usage or extended key usage forbids the role (TLS server or client).
    public static var wrongUsage: Self { Self("wrongUsage") }
    /// The chain holds more intermediate CA certificates than allowed.
    public static var chainTooLong: Self { Self("chainTooLong") }
    /// A certificate that signs others is not a valid CA (basic constraints).
    public static var notACA: Self { Self("notACA") }
    /// A certificate is deeper in the chain than its CA's path length constraint allows.
    public static var pathLengthExceeded: Self { Self("pathLengthExceeded") }
    /// A certificate is marked as a CA where a leaf certificate was expected.
    public static var unexpectedCA: Self { Self("unexpectedCA") }
    /// A key in the chain is below 112-bit security (RSA or DSA under 2048 bits, an elliptic
    /// curve under 224 bits); see `TrustEvaluator.allowsWeakKeys`.
    public static var weakKey: Self { Self("weakKey") }
    /// A certificate is signed with a digest below 112-bit security (MD5, SHA-1).
    public static var weakSignature: Self { Self("weakSignature") }
    /// A certificate in the chain was revoked by its issuer's CRL.
    public static var revoked: Self { Self("revoked") }
    /// The CRL that covers a certificate has expired or is not valid yet: revocation is unknown.
    public static var staleRevocationList: Self { Self("staleRevocationList") }
    /// The CRL that covers a certificate is not signed by its issuer (or may not be).
    public static var badRevocationList: Self { Self("badRevocationList") }
    /// The leaf's peer ID is not among the pinned peers.
    public static var notPinned: Self { Self("notPinned") }
    /// The leaf's key is not the peer ID discovery announced.
    public static var peerIDMismatch: Self { Self("peerIDMismatch") }
    /// An anchors policy was given no anchors.
    public static var noAnchors: Self { Self("noAnchors") }
    /// The policy trusts nothing at all (no anchors and no pinned peers).
    public static var nothingTrusted: Self { Self("nothingTrusted") }
    /// The peer presented no certificate.
    public static var noCertificate: Self { Self("noCertificate") }
    /// Verification could not run (unreadable input, OpenSSL failure); nothing was judged.
    public static var verificationFailed: Self { Self("verificationFailed") }
    /// Any other verification error OpenSSL reported; the message says which.
    public static var other: Self { Self("other") }
    /// Every code, for tests. Keep in step with the members above.
    package static var all: [Self] {
        [
            .expired, .notYetValid, .unknownIssuer, .selfSignedNotTrusted, .untrustedRoot, .badSignature, .unreadableSignature,
            .wrongUsage, .chainTooLong, .notACA, .pathLengthExceeded, .unexpectedCA, .weakKey, .weakSignature, .revoked,
            .staleRevocationList, .badRevocationList, .notPinned, .peerIDMismatch, .noAnchors,
            .nothingTrusted, .noCertificate, .verificationFailed, .other,
        ]
    }
}
