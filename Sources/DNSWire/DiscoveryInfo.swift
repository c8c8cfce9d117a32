import NearbyBasics

/// Why a TXT entry or record was refused. The description names the key, the size and the limit.
public struct DiscoveryInfoError: Error, Hashable, Sendable, CustomStringConvertible {
    public enum Kind: Hashable, Sendable {
        /// The key is empty.
        case emptyKey
        /// The key has a byte outside printable ASCII (0x20–0x7E) or an `=`.
        case invalidKey
        /// Key, `=` and value together exceed 255 bytes.
        case entryTooLong
        /// The whole record would exceed 65535 bytes.
        case recordTooLong
        /// A Codable field has a type TXT cannot hold (nested containers, for instance).
        case unsupportedField
        /// A Codable field's text could not be read as the requested type.
        case invalidFieldValue
        /// A Codable field that is not optional is absent.
        case missingField
        /// Two entries given for one record have the same key (keys are case-insensitive).
        case duplicateKey
    }

    public var kind: Kind
    /// The key (or Codable field) concerned.
    public var key: String
    public var message: String

    public init(_ kind: Kind, key: String, _ message: String) {
        self.kind = kind
        self.key = key
        self.message = message
    }

    public var description: String { message }
}

/// The TXT record of a service: "discovery info" as ordered key/value entries (RFC 6763 §6).
///
/// Keys are printable ASCII without `=`, matched without regard to ASCII case. An entry is a
/// boolean attribute (`key`, no `=`), has an empty value (`key=`), or a value of any bytes.
/// Each entry (key, `=` and value) is at most 255 bytes, 256 with its length byte on the wire.
public struct DiscoveryInfo: Hashable, Sendable {
    /// An entry's value.
    public enum Value: Hashable, Sendable, CustomStringConvertible {
        /// `key` alone: the attribute is present (RFC 6763 §6.4).
        case flag
        /// `key=value`; the bytes may be empty (`key=`) and need not be UTF-8.
        case bytes([UInt8])

        /// A value from text.
        public static func string(_ text: String) -> Value { .bytes(Array(text.utf8)) }

        /// The value as UTF-8 text; nil for a flag or for bytes that are not UTF-8.
        public var string: String? {
            guard case .bytes(let bytes) = self else { return nil }
            return String(validating: bytes, as: UTF8.self)
        }

        public var description: String {
            switch self {
            case .flag: "(flag)"
            case .bytes(let bytes): String(validating: bytes, as: UTF8.self) ?? "\(bytes.count) bytes"
            }
        }
    }

    /// One entry.
    public struct Entry: Hashable, Sendable {
        public var key: String
        public var value: Value

        /// Bytes on the wire, without the length byte.
        public var encodedLength: Int {
            switch value {
            case .flag: key.utf8.count
            case .bytes(let bytes): key.utf8.count + 1 + bytes.count
            }
        }
    }

    /// The most bytes one entry may take, without its length byte.
    public static let maximumEntryLength = 255
    /// The most bytes a whole record may take.
    public static let maximumRecordLength = 65535
    /// Above this size RFC 6763 §6.2 advises against a TXT record (it may not fit a packet).
    public static let recommendedRecordLength = 1300
    /// RFC 6763 §6.4 recommends keys of at most 9 characters.
    public static let recommendedKeyLength = 9

    /// The entries, in order.
    public private(set) var entries: [Entry] = []

    /// An empty record.
    public init() {}

    /// Builds a record from `key=value` strings, `key=` and `key` alone, in order.
    /// Two entries with the same key (in any case) are refused (`duplicateKey`): on the wire
    /// only the first would count, so the second is almost certainly a mistake.
    public init(_ strings: [String]) throws(DiscoveryInfoError) {
        var seen: [String: String] = [:]
        for string in strings {
            let key = String(string.prefix { $0 != "=" })
            if let earlier = seen[key.lowercased()] {
                throw DiscoveryInfoError(
                    .duplicateKey, key: key,
                    "TXT entry \(string.quotedPrefix()) repeats the key of \(earlier.quotedPrefix()) (keys are case-insensitive, and a record holds each key once); keep one of them")
            }
            seen[key.lowercased()] = string
            if let equals = string.firstIndex(of: "=") {
                try set(String(string[..<equals]), bytes: Array(string[string.index(after: equals)...].utf8))
            } else {
                try setFlag(string)
            }
        }
    }

    /// Interprets TXT character-strings received from the network, as RFC 6763 §6 says: empty
    /// strings and strings starting with `=` are ignored, the first occurrence of a key wins,
    /// and strings whose key has bytes outside printable ASCII are ignored. Never throws:
    /// a hostile record yields only the entries that make sense.
    public init(wireStrings: [[UInt8]]) {
        var total = 0
        for string in wireStrings {
            guard !string.isEmpty, string.count <= Self.maximumEntryLength else { continue }
            let equals = string.firstIndex(of: UInt8(ascii: "="))
            let keyBytes = string[..<(equals ?? string.endIndex)]
            guard !keyBytes.isEmpty, keyBytes.allSatisfy({ $0 >= 0x20 && $0 <= 0x7E }) else { continue }
            let key = String(decoding: keyBytes, as: UTF8.self)
            guard index(of: key) == nil else { continue }
            let value: Value = equals.map { .bytes(Array(string[($0 + 1)...])) } ?? .flag
            total += 1 + string.count
            guard total <= Self.maximumRecordLength else { break }
            entries.append(Entry(key: key, value: value))
        }
    }

    /// Parses TXT RDATA (length-prefixed strings). A string that runs past the end is dropped.
    public init(rdata: [UInt8]) {
        self.init(wireStrings: splitLengthPrefixed(rdata[...]).pieces)
    }

    /// Interprets a TXT record's data.
    public init(_ txt: TXTData) {
        self.init(wireStrings: txt.strings)
    }

    /// The TXT record data for these entries.
    public var txt: TXTData {
        TXTData(validatedRDATA: rdata)
    }

    /// The character-strings for a TXT record, one per entry.
    public var wireStrings: [[UInt8]] {
        entries.map { entry in
            switch entry.value {
            case .flag: Array(entry.key.utf8)
            case .bytes(let bytes): Array(entry.key.utf8) + [UInt8(ascii: "=")] + bytes
            }
        }
    }

    /// TXT RDATA: each entry with its length byte; an empty record is one zero byte.
    public var rdata: [UInt8] {
        let strings = wireStrings
        if strings.isEmpty { return [0] }
        var out: [UInt8] = []
        out.reserveCapacity(encodedLength)
        for string in strings {
            out.append(UInt8(string.count))
            out.append(contentsOf: string)
        }
        return out
    }

    /// Bytes of the TXT RDATA.
    public var encodedLength: Int {
        entries.isEmpty ? 1 : entries.reduce(0) { $0 + 1 + $1.encodedLength }
    }

    public var isEmpty: Bool { entries.isEmpty }

    /// The value for `key` (ASCII case-insensitive); nil when absent.
    public subscript(key: String) -> Value? {
        index(of: key).map { entries[$0].value }
    }

    /// The value for `key` as text; nil when absent, a flag, or not UTF-8.
    public func string(for key: String) -> String? { self[key]?.string }

    /// True when `key` is present in any form (flag, empty or with a value).
    public func contains(_ key: String) -> Bool { index(of: key) != nil }

    /// Sets `key=value`, replacing an existing entry for the key in place.
    public mutating func set(_ key: String, to value: String) throws(DiscoveryInfoError) {
        try set(key, value: .bytes(Array(value.utf8)))
    }

    /// Sets `key=` followed by arbitrary bytes.
    public mutating func set(_ key: String, bytes: [UInt8]) throws(DiscoveryInfoError) {
        try set(key, value: .bytes(bytes))
    }

    /// Sets `key` as a boolean attribute (present, no `=`).
    public mutating func setFlag(_ key: String) throws(DiscoveryInfoError) {
        try set(key, value: .flag)
    }

    /// Sets an entry, replacing an existing one for the key in place.
    ///
    /// - Throws: ``DiscoveryInfoError`` when the key is empty or has bytes outside printable
    ///   ASCII or an `=`, when the entry exceeds 255 bytes, or when the record would exceed
    ///   65535 bytes.
    public mutating func set(_ key: String, value: Value) throws(DiscoveryInfoError) {
        try Self.check(key: key)
        let entry = Entry(key: key, value: value)
        guard entry.encodedLength <= Self.maximumEntryLength else {
            let text = switch value {
            case .flag: key
            case .bytes(let bytes): key + "=" + String(decoding: bytes.prefix(64), as: UTF8.self)
            }
            throw DiscoveryInfoError(
                .entryTooLong, key: key,
                "TXT entry \(text.quotedPrefix()) is \(entry.encodedLength) bytes; "
                    + "an entry (key, \"=\" and value) holds at most \(Self.maximumEntryLength)")
        }
        var updated = entries
        if let existing = index(of: key) { updated[existing] = entry } else { updated.append(entry) }
        let total = updated.reduce(0) { $0 + 1 + $1.encodedLength }
        guard total <= Self.maximumRecordLength else {
            throw DiscoveryInfoError(
                .recordTooLong, key: key,
                "adding \(key.quotedPrefix()) makes the TXT record \(total) bytes; "
                    + "at most \(Self.maximumRecordLength) are allowed")
        }
        entries = updated
    }

    /// Removes `key`; returns its old value.
    @discardableResult
    public mutating func remove(_ key: String) -> Value? {
        guard let existing = index(of: key) else { return nil }
        return entries.remove(at: existing).value
    }

    /// Advice that does not make the record invalid (RFC 6763 §6.2, §6.4).
    public var warnings: [String] {
        var result: [String] = []
        for entry in entries where entry.key.utf8.count > Self.recommendedKeyLength {
            result.append(
                "TXT key \(entry.key.quotedPrefix()) has \(entry.key.utf8.count) characters; "
                    + "RFC 6763 recommends at most \(Self.recommendedKeyLength)")
        }
        if encodedLength > Self.recommendedRecordLength {
            result.append(
                "TXT record is \(encodedLength) bytes; RFC 6763 recommends at most "
                    + "\(Self.recommendedRecordLength) so that it fits one packet")
        }
        return result
    }

    static func check(key: String) throws(DiscoveryInfoError) {
        guard !key.isEmpty else {
            throw DiscoveryInfoError(.emptyKey, key: key, "a TXT key cannot be empty")
        }
        for byte in key.utf8 where byte < 0x20 || byte > 0x7E || byte == UInt8(ascii: "=") {
            throw DiscoveryInfoError(
                .invalidKey, key: key,
                "TXT key \(key.quotedPrefix()) may contain only printable ASCII (0x20-0x7E) "
                    + "other than \"=\"; found byte 0x\(String(byte, radix: 16, uppercase: true))")
        }
    }

    private func index(of key: String) -> Int? {
        let wanted = Array(key.utf8)
        return entries.firstIndex { entry in
            DomainName.equalFolded(Array(entry.key.utf8)[...], wanted[...])
        }
    }
}

extension DiscoveryInfo: CustomStringConvertible {
    /// `key=value key2 key3=` with non-UTF-8 values shown by size.
    public var description: String {
        entries.map { entry in
            switch entry.value {
            case .flag: entry.key
            case .bytes: "\(entry.key)=\(entry.value)"
            }
        }.joined(separator: " ")
    }
}

extension DiscoveryInfo: Sequence {
    public func makeIterator() -> IndexingIterator<[Entry]> { entries.makeIterator() }
}
