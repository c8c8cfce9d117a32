import NearbyCrypto
public import DNSWire
import NearbyBasics

/// A shared secret for signing DNS messages (TSIG, RFC 8945): the key's name, its algorithm
/// (HMAC-SHA256) and the secret. Made by `tsig-keygen -a hmac-sha256 NAME`, which writes the
/// file ``init(file:)`` reads; the server's configuration must list the same key.
public struct TSIGKey: Hashable, Sendable, CustomStringConvertible {
    public var name: DomainName
    public var algorithm: DomainName
    /// The secret bytes (never printed).
    public var secret: [UInt8]

    public init(name: DomainName, secret: [UInt8], algorithm: DomainName = TSIGRecord.hmacSHA256) {
        self.name = name
        self.secret = secret
        self.algorithm = algorithm
    }

    public var description: String { "TSIG key \(name.description.dropLast()) (\(algorithm.description.dropLast()))" }

    /// Reads a key in BIND's syntax, as `tsig-keygen` writes it:
    ///
    ///     key "nearby-key" {
    ///         algorithm hmac-sha256;
    ///         secret "base64…";
    ///     };
    ///
    /// or in nsupdate's `-y` form, `[hmac-sha256:]NAME:BASE64SECRET`.
    /// - Throws: ``UnicastDNSError`` (`invalidInput`) saying what is missing or wrong.
    public init(parsing text: String, source: String = "the key") throws(UnicastDNSError) {
        let trimmed = text.trimmingWhitespace
        if !trimmed.contains("{") {
            let parts = trimmed.split(separator: ":", omittingEmptySubsequences: false).map(String.init)
            guard parts.count == 2 || parts.count == 3 else {
                throw UnicastDNSError(
                    .invalidInput, "\(source) is neither a key file as tsig-keygen writes it nor NAME:SECRET")
            }
            if parts.count == 3, parts[0].lowercased() != "hmac-sha256" {
                throw UnicastDNSError(.invalidInput, "\(source) uses \(parts[0]); only hmac-sha256 is supported (tsig-keygen -a hmac-sha256)")
            }
            try self.init(name: parts[parts.count - 2], algorithm: "hmac-sha256", secret: parts[parts.count - 1], source: source)
            return
        }
        // key "NAME" { algorithm ALG; secret "B64"; };  with comments (#, //) allowed.
        let lines = trimmed.split(whereSeparator: \.isNewline).map { Self.withoutComment(Substring($0)) }
        let tokens = Self.tokens(lines.joined(separator: " "))
        guard tokens.count >= 3, tokens[0] == "key", tokens[2] == "{" else {
            throw UnicastDNSError(.invalidInput, "\(source) has no `key \"NAME\" { … }` (make one with tsig-keygen -a hmac-sha256 NAME)")
        }
        let name = tokens[1]
        func value(of keyword: String) -> String? {
            guard tokens.count > 4 else { return nil }
            for index in 3..<(tokens.count - 1) where tokens[index] == keyword && (tokens[index - 1] == "{" || tokens[index - 1] == ";") {
                return tokens[index + 1]
            }
            return nil
        }
        guard let algorithm = value(of: "algorithm") else {
            throw UnicastDNSError(.invalidInput, "\(source) has no `algorithm` line")
        }
        guard let secret = value(of: "secret") else {
            throw UnicastDNSError(.invalidInput, "\(source) has no `secret \"…\";` line")
        }
        try self.init(name: name, algorithm: algorithm, secret: secret, source: source)
    }

    private init(name: String, algorithm: String, secret: String, source: String) throws(UnicastDNSError) {
        guard algorithm.lowercased() == "hmac-sha256" else {
            throw UnicastDNSError(
                .invalidInput, "\(source) uses \(algorithm); only hmac-sha256 is supported (tsig-keygen -a hmac-sha256 NAME)")
        }
        guard let keyName = try? DomainName(parsing: name), !keyName.isRoot else {
            throw UnicastDNSError(.invalidInput, "\(source) names the key \"\(name)\", which is not a DNS name")
        }
        guard let bytes = bytes(fromBase64: secret), !bytes.isEmpty else {
            throw UnicastDNSError(.invalidInput, "the secret in \(source) is not base64")
        }
        self.init(name: keyName, secret: bytes)
    }

    /// The line up to its comment (`#` or `//`), which begins only outside quotes: a base64
    /// secret holds "//" now and then (about one key in a hundred).
    static func withoutComment(_ line: Substring) -> Substring {
        var quoted = false
        var previous: Character?
        for index in line.indices {
            let character = line[index]
            if character == "\"" { quoted.toggle() }
            if !quoted {
                if character == "#" { return line[..<index] }
                if character == "/", previous == "/" { return line[..<line.index(before: index)] }
            }
            previous = character
        }
        return line
    }

    /// Words, quoted strings (without their quotes), braces and semicolons, in order.
    private static func tokens(_ text: String) -> [String] {
        var tokens: [String] = []
        var current = ""
        var quoted = false
        func flush() {
            if !current.isEmpty { tokens.append(current) }
            current = ""
        }
        for character in text {
            if quoted {
                if character == "\"" {
                    tokens.append(current)
                    current = ""
                    quoted = false
                } else {
                    current.append(character)
                }
            } else if character == "\"" {
                flush()
                quoted = true
            } else if character == "{" || character == "}" || character == ";" {
                flush()
                tokens.append(String(character))
            } else if character.isWhitespace {
                flush()
            } else {
                current.append(character)
            }
        }
        flush()
        return tokens
    }

    /// Reads a key file.
    /// - Throws: ``UnicastDNSError`` (`invalidInput`) when the file cannot be read or parsed.
    public init(file path: String) throws(UnicastDNSError) {
        guard let text = readTextFile(path) else {
            throw UnicastDNSError(.invalidInput, "cannot read the key file \(path)")
        }
        try self.init(parsing: text, source: path)
    }

    /// How many seconds of clock difference a signature allows (BIND's and RFC 8945's 300).
    public static let fudge: UInt16 = 300

    /// Signs an encoded message: returns it with a TSIG record appended, and the MAC (which
    /// the response's signature covers).
    func sign(_ message: [UInt8], id: UInt16, at time: UInt64) -> (bytes: [UInt8], mac: [UInt8]) {
        var record = TSIGRecord(keyName: name, algorithm: algorithm, timeSigned: time, fudge: Self.fudge, mac: [], originalID: id)
        record.mac = hmacSHA256(key: secret, record.digestInput(message: message, requestMAC: nil))
        return (record.appended(to: message), record.mac)
    }

    /// Checks a response to a request signed with `requestMAC`. Returns nil when it is good,
    /// else why not.
    func verify(response bytes: [UInt8], requestMAC: [UInt8], at time: UInt64) -> UnicastDNSError? {
        let split: (unsigned: [UInt8], record: TSIGRecord)?
        do { split = try TSIGRecord.split(bytes) } catch {
            return UnicastDNSError(.badResponse, "the server's signature cannot be read: \(error)")
        }
        guard let (unsigned, record) = split else {
            return UnicastDNSError(.badResponse, "the server's answer is not signed, although the request was (a server that does not know TSIG, or something in between)")
        }
        switch record.error {
        case .noError: break
        case .badKey:
            return UnicastDNSError(
                .notAuthorized, "the server does not know the key \(name.description.dropLast()) (BADKEY): check the key's name against the server's configuration",
                responseCode: .badKey)
        case .badSignature:
            return UnicastDNSError(
                .notAuthorized, "the server rejected the signature of key \(name.description.dropLast()) (BADSIG): the secret differs from the server's",
                responseCode: .badSignature)
        case .badTime:
            let skew = record.serverTime.map { Int64(bitPattern: time &- $0) }
            return UnicastDNSError(
                .clockSkew,
                "the server's clock and this machine's differ by more than \(Self.fudge) s (BADTIME\(skew.map { ", ours is \($0) s ahead" } ?? "")): fix the clock (timedatectl, NTP)",
                responseCode: .badTime)
        default:
            return UnicastDNSError(.notAuthorized, "the server rejected the signature (\(record.error))", responseCode: record.error)
        }
        guard record.keyName == name, record.algorithm == algorithm else {
            return UnicastDNSError(.badResponse, "the answer is signed with another key (\(record.keyName))")
        }
        let expected = hmacSHA256(key: secret, record.digestInput(message: unsigned, requestMAC: requestMAC))
        guard equalInConstantTime(expected, record.mac) else {
            return UnicastDNSError(.badResponse, "the answer's signature does not verify: it was changed on the way, or it is not from the server")
        }
        let difference = time > record.timeSigned ? time - record.timeSigned : record.timeSigned - time
        guard difference <= UInt64(record.fudge) else {
            return UnicastDNSError(.clockSkew, "the answer was signed \(difference) s away from this machine's clock (more than \(record.fudge) s): fix the clock")
        }
        return nil
    }
}

extension String {
    var trimmingWhitespace: String {
        String(drop(while: \.isWhitespace).reversed().drop(while: \.isWhitespace).reversed())
    }
}
