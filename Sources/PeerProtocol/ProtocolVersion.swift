/// An application protocol version such as `0.2.2`: what peers announce (TXT `pv`) and send in
/// `initialize`.
///
/// Two versions are compatible when their major numbers match and, while the major number is
/// 0, their minor numbers match too: `0.2.2` and `0.2.9` are, `0.2` and `0.3` are not, `1.4`
/// and `1.9` are.
public struct ProtocolVersion: Hashable, Sendable, Comparable, CustomStringConvertible, LosslessStringConvertible {
    public var major: Int
    public var minor: Int
    public var patch: Int

    public init(major: Int, minor: Int = 0, patch: Int = 0) {
        self.major = major
        self.minor = minor
        self.patch = patch
    }

    /// Parses `MAJOR`, `MAJOR.MINOR` or `MAJOR.MINOR.PATCH`, each a decimal number of at most
    /// nine digits.
    /// - Throws: ``ProtocolVersionError`` saying what is wrong and what is allowed.
    public init(parsing text: String) throws(ProtocolVersionError) {
        let parts = text.split(separator: ".", omittingEmptySubsequences: false)
        guard (1...3).contains(parts.count) else {
            throw ProtocolVersionError(text: text, reason: "a version has one to three numbers separated by dots, like 0.2.2")
        }
        var numbers: [Int] = []
        for part in parts {
            guard !part.isEmpty, part.count <= 9, part.utf8.allSatisfy({ (0x30...0x39).contains($0) }), let number = Int(part) else {
                throw ProtocolVersionError(text: text, reason: "\"\(part)\" is not a decimal number of at most nine digits")
            }
            numbers.append(number)
        }
        self.init(major: numbers[0], minor: numbers.count > 1 ? numbers[1] : 0, patch: numbers.count > 2 ? numbers[2] : 0)
    }

    /// The version of the protocol this package speaks, `0.2.2`: what a connection sends in
    /// `initialize` and a broker announces in TXT `pv` unless told otherwise. It is the wire's
    /// own number, apart from the package's (`NearbyVersion` in NearbyBasics, what
    /// `nearby --version` prints): a release that changes nothing on the wire keeps it.
    public static let current = ProtocolVersion(major: 0, minor: 2, patch: 2)

    public init?(_ description: String) {
        guard let version = try? ProtocolVersion(parsing: description) else { return nil }
        self = version
    }

    public var description: String { "\(major).\(minor).\(patch)" }

    /// Whether a peer speaking `other` can talk to one speaking this version.
    public func isCompatible(with other: ProtocolVersion) -> Bool {
        major == other.major && (major != 0 || minor == other.minor)
    }

    public static func < (lhs: ProtocolVersion, rhs: ProtocolVersion) -> Bool {
        (lhs.major, lhs.minor, lhs.patch) < (rhs.major, rhs.minor, rhs.patch)
    }
}

/// A protocol version that could not be read.
public struct ProtocolVersionError: Error, Hashable, Sendable, CustomStringConvertible {
    public var text: String
    public var reason: String
    public var description: String { "invalid protocol version \"\(text)\": \(reason)" }
}
