#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
import NearbyBasics
public import NearbyCrypto

/// An invitation to connect to one peer, as one line of text: the inviter's peer ID (so the
/// invitee knows whom it reaches), a one-time secret (so the inviter knows whom it admits), an
/// expiry, and the addresses to try (so it works from wherever the invitee is).
///
/// The text form is
///
/// ```
/// NEARBY:1/<peer ID>/<invitation ID>/<secret>/<expires>/<host:port>[/<host:port>…]
/// ```
///
/// - `1`: the version of the invitation protocol (Documentation/Protocols.md, "Invitations: the protocol").
/// - peer ID: the inviter's, 54 characters without dashes (`PeerID`, check characters included).
/// - invitation ID: 5 random bytes in Crockford's base32 (8 characters): names the invitation
///   to the inviter, so that wrong proofs count against it whatever secret they were made with.
/// - secret: 16 random bytes in the same base32 (26 characters, the alphabet of peer IDs).
/// - expires: seconds since 1970 (UTC), by the inviter's clock.
/// - addresses: IPv4, IPv6 or a DNS name, each with its port after the last `:`.
///
/// It uses upper-case letters, digits and `:/.-` only: QR codes carry that in their compact
/// alphanumeric mode, shells need no quoting for it, and it is a valid URI (scheme `nearby`),
/// so it passes through chats and URL fields. Reading ignores case, and finds the link inside
/// other text, such as an app's own URL (`myapp://pair?invite=NEARBY:1/…`).
public struct InvitationLink: Hashable, Sendable, CustomStringConvertible {
    /// Where the inviter may be reached.
    public struct Address: Hashable, Sendable, CustomStringConvertible {
        /// An IPv4 or IPv6 address (without brackets) or a DNS name, lower case.
        public var host: String
        public var port: Int

        /// - Throws: ``PeerConnectionError`` (`invalidInput`) for an empty or unusable host or a port outside 1-65535.
        public init(host: String, port: Int) throws(PeerConnectionError) {
            var name = host.lowercased()
            if name.hasPrefix("["), name.hasSuffix("]") { name = String(name.dropFirst().dropLast()) }
            if name.hasSuffix("."), name.count > 1 { name.removeLast() }
            guard (1...65535).contains(port) else {
                throw PeerConnectionError(.invalidInput, "port \(port) of \(host) is out of range; use 1-65535")
            }
            guard !name.isEmpty, name.utf8.count <= 253,
                name.unicodeScalars.allSatisfy({ InvitationLink.hostCharacters.contains($0) })
            else {
                throw PeerConnectionError(
                    .invalidInput, "\"\(host)\" is not an address an invitation can carry: use an IPv4 or IPv6 address or a DNS name (letters, digits, '-', '.')")
            }
            self.host = name
            self.port = port
        }

        /// Reads `HOST:PORT` (`[IPv6]:PORT` too; for a bare IPv6 address the port is after the last `:`).
        public init(parsing text: String, defaultPort: Int? = nil) throws(PeerConnectionError) {
            if text.hasPrefix("["), let close = text.firstIndex(of: "]") {
                let host = String(text[text.index(after: text.startIndex)..<close])
                let rest = text[text.index(after: close)...]
                if rest.isEmpty, let defaultPort { try self.init(host: host, port: defaultPort); return }
                guard rest.hasPrefix(":"), let port = Int(rest.dropFirst()) else {
                    throw PeerConnectionError(.invalidInput, "\"\(text)\": write [IPv6]:PORT, e.g. [fd7a::1]:9099")
                }
                try self.init(host: host, port: port)
                return
            }
            // With a default port, a bare IPv6 address (two or more colons) is all host.
            if let defaultPort, text.filter({ $0 == ":" }).count != 1 {
                try self.init(host: text, port: defaultPort)
                return
            }
            guard let colon = text.lastIndex(of: ":"), let port = Int(text[text.index(after: colon)...]) else {
                throw PeerConnectionError(.invalidInput, "\"\(text)\" has no port: write HOST:PORT, e.g. 100.64.0.7:9099 or [fd7a::1]:9099")
            }
            try self.init(host: String(text[..<colon]), port: port)
        }

        /// Whether the host is an IPv6 address.
        public var isIPv6: Bool { host.contains(":") }

        /// `host:port`, with brackets around an IPv6 address.
        public var description: String { isIPv6 ? "[\(host)]:\(port)" : "\(host):\(port)" }

        /// The form inside the link: upper case, and for IPv6 no brackets (the port follows the last `:`).
        package var linkText: String { "\(host):\(port)".uppercased() }
    }

    /// The version of the invitation protocol this code speaks.
    public static let currentVersion = 1
    /// The number of secret bytes (128 bits).
    public static let secretSize = 16
    /// The number of bytes of an invitation's ID (not secret: it names the invitation).
    public static let idSize = 5
    /// The most addresses a link carries.
    public static let maximumAddresses = 16

    /// The protocol version the link was made for.
    public let version: Int
    /// The inviter: the invitee accepts only a peer whose TLS key hashes to this.
    public let peerID: PeerID
    /// Names the invitation to the inviter (not a secret).
    public let id: [UInt8]
    /// The one-time secret; never sent, only proven (HMAC, see Documentation/Protocols.md).
    public let secret: [UInt8]
    /// When the invitation stops being accepted (the inviter's clock).
    public let expires: Date
    /// Where to try, in order.
    public let addresses: [Address]

    /// A link with these fields.
    /// - Throws: ``PeerConnectionError`` (`invalidInput`): a secret that is not 16 bytes, no
    ///   address, or more than ``maximumAddresses``.
    public init(peerID: PeerID, id: [UInt8], secret: [UInt8], expires: Date, addresses: [Address]) throws(PeerConnectionError) {
        guard id.count == Self.idSize else {
            throw PeerConnectionError(.invalidInput, "an invitation ID has \(Self.idSize) bytes, not \(id.count)")
        }
        guard secret.count == Self.secretSize else {
            throw PeerConnectionError(.invalidInput, "an invitation secret has \(Self.secretSize) bytes, not \(secret.count)")
        }
        guard !addresses.isEmpty else { throw PeerConnectionError(.invalidInput, "an invitation needs at least one address to reach the inviter") }
        var unique: [Address] = []
        for address in addresses where !unique.contains(address) { unique.append(address) }
        guard unique.count <= Self.maximumAddresses else {
            throw PeerConnectionError(.invalidInput, "an invitation carries at most \(Self.maximumAddresses) addresses, not \(unique.count)")
        }
        version = Self.currentVersion
        self.peerID = peerID
        self.id = id
        self.secret = secret
        self.expires = Date(timeIntervalSince1970: expires.timeIntervalSince1970.rounded(.down))
        self.addresses = unique
    }

    /// A new invitation to the peer `peerID`, valid for `ttl` from `now`, with a fresh random secret.
    public static func make(peerID: PeerID, addresses: [Address], ttl: Duration, now: Date = Date()) throws(PeerConnectionError) -> InvitationLink {
        var generator = SystemRandomNumberGenerator()
        let id = (0..<idSize).map { _ in UInt8.random(in: .min ... .max, using: &generator) }
        let secret = (0..<secretSize).map { _ in UInt8.random(in: .min ... .max, using: &generator) }
        let seconds = Double(ttl.components.seconds) + Double(ttl.components.attoseconds) / 1e18
        return try InvitationLink(peerID: peerID, id: id, secret: secret, expires: now.addingTimeInterval(seconds), addresses: addresses)
    }

    /// The link as one line.
    public var text: String {
        let peer = peerID.description.filter { $0 != "-" }
        let fields = ["NEARBY:\(version)", peer, CrockfordBase32.encode(id), CrockfordBase32.encode(secret), String(Int64(expires.timeIntervalSince1970))]
            + addresses.map(\.linkText)
        return fields.joined(separator: "/")
    }

    public var description: String { text }

    /// Whether the invitation has expired at `now` (by this machine's clock).
    public func hasExpired(at now: Date = Date()) -> Bool { now >= expires }

    /// Reads a link, also from inside other text (an app's URL, a chat message).
    /// - Throws: ``PeerConnectionError`` (`invalidInput`) saying what is wrong: not a Nearby
    ///   invitation, a version this code does not read, or which field is damaged.
    public init(parsing input: String) throws(PeerConnectionError) {
        let upper = input.uppercased()
        guard let start = upper.firstRange(of: "NEARBY:") else {
            throw PeerConnectionError(
                .invalidInput, "this is not a Nearby invitation: an invitation link begins with NEARBY:1/ (nearby invite prints one)")
        }
        let body = upper[start.upperBound...].prefix { Self.linkCharacters.contains($0.unicodeScalars.first ?? " ") && $0.unicodeScalars.count == 1 }
        let fields = body.split(separator: "/", omittingEmptySubsequences: false).map(String.init)
        guard let versionText = fields.first, let version = Int(versionText), version >= 1 else {
            throw PeerConnectionError(.invalidInput, "this invitation has no version after NEARBY: (expected NEARBY:1/…)")
        }
        guard version == Self.currentVersion else {
            throw PeerConnectionError(
                .invalidInput,
                "this invitation is for version \(version) of the invitation protocol; this nearby reads version \(Self.currentVersion) (a newer nearby may read it)"
            )
        }
        guard fields.count >= 6 else {
            throw PeerConnectionError(
                .invalidInput,
                "this invitation is cut short: it has \(fields.count) of its fields (version, peer ID, invitation ID, secret, expiry, addresses); copy all of it")
        }
        let peerID: PeerID
        do {
            peerID = try PeerID(parsing: fields[1])
        } catch {
            throw PeerConnectionError(.invalidInput, "this invitation's peer ID is damaged: \(error.message)")
        }
        guard fields[2].count == 8, let id = CrockfordBase32.decode(fields[2], count: Self.idSize) else {
            throw PeerConnectionError(.invalidInput, "this invitation's ID is damaged (8 characters of 0-9 and A-Z without I, L, O, U expected)")
        }
        guard fields[3].count == 26, let secret = CrockfordBase32.decode(fields[3], count: Self.secretSize) else {
            throw PeerConnectionError(.invalidInput, "this invitation's secret is damaged (26 characters of 0-9 and A-Z without I, L, O, U expected, ending in a character that carries no stray bits)")
        }
        guard let seconds = Int64(fields[4]), seconds > 0, seconds < 1 << 40 else {
            throw PeerConnectionError(.invalidInput, "this invitation's expiry \"\(fields[4])\" is not a time (seconds since 1970)")
        }
        var addresses: [Address] = []
        for field in fields[5...] {
            guard let colon = field.lastIndex(of: ":"), let port = Int(field[field.index(after: colon)...]) else {
                throw PeerConnectionError(.invalidInput, "this invitation's address \"\(field)\" is damaged: it has no port after its last ':'")
            }
            do {
                addresses.append(try Address(host: String(field[..<colon]), port: port))
            } catch {
                throw PeerConnectionError(.invalidInput, "this invitation's address \"\(field)\" is damaged: \(error.message)")
            }
        }
        try self.init(peerID: peerID, id: id, secret: secret, expires: Date(timeIntervalSince1970: TimeInterval(seconds)), addresses: addresses)
    }

    /// What a link's text may hold (after upper-casing).
    package static let linkCharacters: Set<Unicode.Scalar> = Set("ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789:/.-".unicodeScalars)
    /// What an address's host may hold (lower case).
    package static let hostCharacters: Set<Unicode.Scalar> = Set("abcdefghijklmnopqrstuvwxyz0123456789:.-".unicodeScalars)

    // MARK: What the secret yields (Documentation/Protocols.md, "Invitations: the protocol")

    /// Names the invitation to the inviter: its ID as in the link (8 characters).
    public var handle: String { CrockfordBase32.encode(id) }

    /// The invitee's proof that it holds the secret, bound to both keys of this TLS session and
    /// to the inviter's fresh challenge: HMAC-SHA-256 with the secret as key over
    /// "nearby invitation proof 1" ‖ inviter's peer ID (32 bytes) ‖ invitee's peer ID (32 bytes) ‖ challenge (32 bytes).
    package static func proof(secret: [UInt8], inviter: PeerID, invitee: PeerID, challenge: [UInt8]) -> [UInt8] {
        hmacSHA256(key: secret, Array("nearby invitation proof 1".utf8) + inviter.bytes + invitee.bytes + challenge)
    }

    /// Size of the inviter's challenge, in bytes.
    package static let challengeSize = 32
}
