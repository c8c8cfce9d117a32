public import NearbyBasics

/// Why an identity, a certificate or a trust store could not be used, in words a person can
/// act on.
public struct PeerTrustError: Error, Hashable, Sendable, CustomStringConvertible {
    /// What kind of problem this is. New codes may be added; switch with a `default`.
    public typealias Code = OpenKind<PeerTrustError>

    public var code: Code
    public var message: String
    /// The file system refused this process access (permissions, a read-only file system): the
    /// message says who owns what; a store in a state directory adds that another one will do.
    var refusedAccess = false

    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { message }
}

extension OpenKind where Owner == PeerTrustError {
    /// Input that is not what it claims to be: garbage, truncated PEM or DER, the wrong kind.
    public static var malformed: Self { Self("malformed") }
    /// A key or PKCS#12 file that needs a passphrase, and none was given.
    public static var passphraseRequired: Self { Self("passphraseRequired") }
    /// The passphrase given does not open the file.
    public static var wrongPassphrase: Self { Self("wrongPassphrase") }
    /// A stored identity or trust store that cannot be read back.
    public static var damaged: Self { Self("damaged") }
    /// An identity already exists where a new one was to be made.
    public static var exists: Self { Self("exists") }
    /// The file system refused (permissions, disk full, …).
    public static var storage: Self { Self("storage") }
    /// OpenSSL failed where it should not have.
    public static var crypto: Self { Self("crypto") }
}
