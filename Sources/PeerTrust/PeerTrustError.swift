/// Why an identity, a certificate or a trust store could not be used, in words a person can
/// act on.
public struct PeerTrustError: Error, Hashable, Sendable, CustomStringConvertible {
    /// What kind of problem this is. New codes may be added; switch with a `default`.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private let name: String
        private init(_ name: String) { self.name = name }
        public var description: String { name }

        /// Input that is not what it claims to be: garbage, truncated PEM or DER, the wrong kind.
        public static let malformed = Code("malformed")
        /// A key or PKCS#12 file that needs a passphrase, and none was given.
        public static let passphraseRequired = Code("passphraseRequired")
        /// The passphrase given does not open the file.
        public static let wrongPassphrase = Code("wrongPassphrase")
        /// A stored identity or trust store that cannot be read back.
        public static let damaged = Code("damaged")
        /// An identity already exists where a new one was to be made.
        public static let exists = Code("exists")
        /// The file system refused (permissions, disk full, …).
        public static let storage = Code("storage")
        /// OpenSSL failed where it should not have.
        public static let crypto = Code("crypto")
    }

    public var code: Code
    public var message: String

    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { message }
}
