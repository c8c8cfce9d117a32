import NearbyBasics

/// Who a peer is: the SHA-256 of its certificate's SubjectPublicKeyInfo (DER). Anyone holding
/// the certificate can check it, so a peer ID cannot be claimed without the key.
///
/// Printed as 54 characters of Crockford's base32 in nine groups of six, e.g.
/// `3QX7KD-…`: 52 characters carry the 256 bits and each half ends in a Luhn mod 32 check
/// character, so a mistyped or swapped character is caught. Parsing ignores case, dashes and
/// spaces, and reads `O` as `0` and `I`/`L` as `1`. Peer IDs order bytewise.
public struct PeerID: Hashable, Comparable, Sendable, CustomStringConvertible, LosslessStringConvertible, Codable {
    /// The 32 bytes of the SHA-256.
    public let bytes: [UInt8]

    /// The peer ID of a DER SubjectPublicKeyInfo.
    public init(publicKeyInfo: [UInt8]) {
        bytes = SHA256.hash(publicKeyInfo)
    }

    /// A peer ID from its 32 bytes; nil for any other length.
    public init?(bytes: [UInt8]) {
        guard bytes.count == 32 else { return nil }
        self.bytes = bytes
    }

    package static let alphabet = Array("0123456789ABCDEFGHJKMNPQRSTVWXYZ")

    /// The printable form, `XXXXXX-XXXXXX-…` (nine groups of six).
    public var description: String {
        let data = Self.base32(bytes)
        let halves = [Array(data.prefix(26)), Array(data.suffix(26))]
        let characters = halves.flatMap { $0 + [Self.luhnCheck($0)] }
        return stride(from: 0, to: characters.count, by: 6).map { String(characters[$0..<min($0 + 6, characters.count)]) }
            .joined(separator: "-")
    }

    /// A short form for display, e.g. `3QX7KD…`; not for comparing peers.
    public var short: String { String(description.prefix(6)) + "…" }

    /// Parses the printable form.
    public init(parsing text: String) throws(PeerIDError) {
        var characters: [Character] = []
        for character in text.uppercased() where character != "-" && !character.isWhitespace {
            switch character {
            case "O": characters.append("0")
            case "I", "L": characters.append("1")
            default:
                guard Self.alphabet.contains(character) else {
                    throw PeerIDError("\"\(text)\" is not a peer ID: '\(character)' is not one of 0-9 A-Z (without U)")
                }
                characters.append(character)
            }
        }
        guard characters.count == 54 else {
            throw PeerIDError("\"\(text)\" is not a peer ID: it has \(characters.count) characters, a peer ID has 54 (nine groups of six)")
        }
        let first = Array(characters[0..<26]), second = Array(characters[27..<53])
        guard Self.luhnCheck(first) == characters[26], Self.luhnCheck(second) == characters[53] else {
            throw PeerIDError("\"\(text)\" is not a peer ID: a check character does not match (a typo?)")
        }
        guard let bytes = Self.unbase32(first + second) else {
            throw PeerIDError("\"\(text)\" is not a peer ID: its last character carries stray bits")
        }
        self.bytes = bytes
    }

    /// Whether `prefix` begins this peer ID as printed, read the way ``init(parsing:)`` reads
    /// (case, dashes and spaces ignored, `O` as `0`, `I`/`L` as `1`): `pbfjbc` matches
    /// `PBFJBC-…`. An empty prefix matches nothing.
    public func hasPrefix(_ prefix: String) -> Bool {
        var typed: [Character] = []
        for character in prefix.uppercased() where character != "-" && !character.isWhitespace {
            switch character {
            case "O": typed.append("0")
            case "I", "L": typed.append("1")
            default: typed.append(character)
            }
        }
        guard !typed.isEmpty else { return false }
        return description.filter { $0 != "-" }.starts(with: typed)
    }

    public init?(_ description: String) {
        guard let id = try? PeerID(parsing: description) else { return nil }
        self = id
    }

    public static func < (lhs: PeerID, rhs: PeerID) -> Bool { lhs.bytes.lexicographicallyPrecedes(rhs.bytes) }

    /// A code for two people to compare when pairing their devices: 12 digits in groups of
    /// four, the same whichever side computes it. It shows that both see the same two keys;
    /// it is not a secret.
    public func verificationCode(with other: PeerID) -> String {
        let (low, high) = self < other ? (self, other) : (other, self)
        let digest = SHA256.hash(Array("nearby verification code 1".utf8) + low.bytes + high.bytes)
        let number = digest.prefix(8).reduce(UInt64(0)) { $0 << 8 | UInt64($1) } % 1_000_000_000_000
        let digits = String(number).leftPadded(to: 12)
        return [digits.prefix(4), digits.dropFirst(4).prefix(4), digits.suffix(4)].joined(separator: " ")
    }

    public init(from decoder: any Decoder) throws {
        let text = try decoder.singleValueContainer().decode(String.self)
        do {
            self = try PeerID(parsing: text)
        } catch {
            throw DecodingError.dataCorrupted(.init(codingPath: decoder.codingPath, debugDescription: error.message))
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(description)
    }

    // MARK: base32 and the check characters

    static func base32(_ bytes: [UInt8]) -> [Character] {
        Array(CrockfordBase32.encode(bytes))
    }

    /// 32 bytes from 52 characters (the last carries 4 zero bits), or nil.
    static func unbase32(_ characters: [Character]) -> [UInt8]? {
        CrockfordBase32.decode(String(characters), count: 32)
    }

    /// Luhn mod 32 over the alphabet: catches any single wrong character and most swaps of
    /// neighbours.
    static func luhnCheck(_ characters: [Character]) -> Character {
        var factor = 2
        var sum = 0
        for character in characters.reversed() {
            let addend = factor * (alphabet.firstIndex(of: character) ?? 0)
            factor = factor == 2 ? 1 : 2
            sum += addend / 32 + addend % 32
        }
        return alphabet[(32 - sum % 32) % 32]
    }
}

/// Why a text is not a peer ID, in words a person can act on (what was typed, what a peer ID
/// looks like).
public struct PeerIDError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The explanation, e.g. `"ABC" is not a peer ID: it has 3 characters, a peer ID has 54 (nine groups of six)`.
    public let message: String

    package init(_ message: String) { self.message = message }

    public var description: String { message }
}
