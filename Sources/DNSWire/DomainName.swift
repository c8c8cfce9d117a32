/// A domain name: a sequence of labels, each 1–63 arbitrary bytes.
///
/// DNS-SD instance names are UTF-8 and may contain spaces, dots and anything else, so a label is
/// bytes, not a hostname-syntax string. Comparison and hashing ignore ASCII case only
/// (RFC 1035 §2.3.3, RFC 6762 §16), so `_HTTP._tcp.local.` equals `_http._tcp.local.`.
///
/// The root name has no labels. Names are always absolute; the trailing dot is implied.
public struct DomainName: Sendable {
    /// The labels in wire form: each a length byte followed by its bytes, without the final zero
    /// byte. One allocation per name, and the form the encoder copies out directly.
    @usableFromInline internal var storage: [UInt8]

    /// The most bytes a name may take on the wire, including length bytes and the final zero.
    public static let maximumWireLength = 255
    /// The most bytes in one label.
    public static let maximumLabelLength = 63
    /// The most labels in one name.
    public static let maximumLabelCount = 128

    /// The root name (`.`).
    public static let root = DomainName(uncheckedStorage: [])

    @usableFromInline
    internal init(uncheckedStorage: [UInt8]) { self.storage = uncheckedStorage }

    /// Makes a name from labels given as bytes.
    /// - Throws: ``DNSWireError`` when a label is empty or longer than 63 bytes, or the name is
    ///   longer than 255 bytes on the wire.
    public init<Labels: Sequence>(labels: Labels) throws(DNSWireError) where Labels.Element == [UInt8] {
        var storage: [UInt8] = []
        var count = 0
        for label in labels {
            guard !label.isEmpty else {
                throw DNSWireError(.badPresentationName, "a name cannot contain an empty label")
            }
            guard label.count <= Self.maximumLabelLength else {
                throw DNSWireError(
                    .labelTooLong,
                    "label of \(label.count) bytes is longer than the 63-byte limit")
            }
            count += 1
            storage.append(UInt8(label.count))
            storage.append(contentsOf: label)
        }
        let wireLength = storage.count + 1
        guard wireLength <= Self.maximumWireLength else {
            throw DNSWireError(
                .nameTooLong,
                "name of \(wireLength) bytes is longer than the 255-byte limit")
        }
        let labelCount = count
        guard labelCount <= Self.maximumLabelCount else {
            throw DNSWireError(.tooManyLabels, "name has \(labelCount) labels; at most 128 are allowed")
        }
        self.storage = storage
    }

    /// Reads a name in uncompressed wire form (length-prefixed labels ending in a zero byte),
    /// as found in the RDATA that a DNS-SD daemon hands over.
    /// - Throws: ``DNSWireError`` when the bytes do not hold exactly one such name.
    public init(wire bytes: [UInt8]) throws(DNSWireError) {
        let (pieces, complete) = splitLengthPrefixed(bytes[...])
        guard complete, pieces.last?.isEmpty == true, pieces.dropLast().allSatisfy({ !$0.isEmpty }) else {
            throw DNSWireError(.badRecordData, "\(bytes.count) bytes are not one name in wire form")
        }
        try self.init(labels: pieces.dropLast())
    }

    /// Makes a name from labels given as strings (their UTF-8 bytes, taken literally: no escapes).
    public init(labels: [String]) throws(DNSWireError) {
        try self.init(labels: labels.map { Array($0.utf8) })
    }

    /// The labels, as bytes.
    public var labels: [[UInt8]] { splitLengthPrefixed(storage[...]).pieces }

    /// The number of labels.
    public var labelCount: Int {
        var count = 0
        var index = 0
        while index < storage.count {
            index += 1 + Int(storage[index])
            count += 1
        }
        return count
    }

    /// True for the root name.
    public var isRoot: Bool { storage.isEmpty }

    /// Bytes this name takes on the wire when not compressed (including the final zero byte).
    public var wireLength: Int { storage.count + 1 }

    /// The first label as bytes, or nil for the root.
    public var firstLabel: [UInt8]? {
        guard let length = storage.first else { return nil }
        return Array(storage[1..<(1 + Int(length))])
    }

    /// The name without its first label (the root's parent is the root).
    public var parent: DomainName {
        guard let length = storage.first else { return self }
        return DomainName(uncheckedStorage: Array(storage[(1 + Int(length))...]))
    }

    /// A new name with `label` in front of this one.
    public func prepending(_ label: [UInt8]) throws(DNSWireError) -> DomainName {
        guard !label.isEmpty, label.count <= Self.maximumLabelLength else {
            throw DNSWireError(
                .labelTooLong, "label must be 1 to 63 bytes, got \(label.count)")
        }
        guard storage.count + label.count + 2 <= Self.maximumWireLength,
            labelCount < Self.maximumLabelCount
        else {
            throw DNSWireError(.nameTooLong, "name would be longer than the 255-byte limit")
        }
        return DomainName(uncheckedStorage: [UInt8(label.count)] + label + storage)
    }

    /// A new name with `other`'s labels after this one's.
    public func appending(_ other: DomainName) throws(DNSWireError) -> DomainName {
        guard storage.count + other.storage.count + 1 <= Self.maximumWireLength else {
            throw DNSWireError(.nameTooLong, "name would be longer than the 255-byte limit")
        }
        return DomainName(uncheckedStorage: storage + other.storage)
    }

    /// True if this name ends with `suffix` (ASCII case-insensitive), e.g. `a.local.` with `local.`.
    public func hasSuffix(_ suffix: DomainName) -> Bool {
        guard suffix.storage.count <= storage.count else { return false }
        // Walk label boundaries so that "xlocal." does not count as ending in "local.".
        var index = 0
        let start = storage.count - suffix.storage.count
        while index < start { index += 1 + Int(storage[index]) }
        guard index == start else { return false }
        return DomainName.equalFolded(storage[start...], suffix.storage[...])
    }

    @inlinable
    static func fold(_ byte: UInt8) -> UInt8 {
        (byte &- 0x41) < 26 ? byte | 0x20 : byte
    }

    @inlinable
    static func equalFolded(_ a: ArraySlice<UInt8>, _ b: ArraySlice<UInt8>) -> Bool {
        guard a.count == b.count else { return false }
        var i = a.startIndex
        var j = b.startIndex
        while i < a.endIndex {
            if fold(a[i]) != fold(b[j]) { return false }
            i += 1
            j += 1
        }
        return true
    }
}

extension DomainName {
    /// A total order for sorting names cheaply and the same way every time: label by label
    /// from the left, each label's bytes compared with ASCII case folded, a label that is a
    /// prefix of another first. Names equal by `==` are in no order.
    package func precedes(_ other: DomainName) -> Bool {
        var i = storage.startIndex
        var j = other.storage.startIndex
        while i < storage.endIndex && j < other.storage.endIndex {
            let lengthA = Int(storage[i])
            let lengthB = Int(other.storage[j])
            var k = 0
            while k < min(lengthA, lengthB) {
                let a = Self.fold(storage[i + 1 + k])
                let b = Self.fold(other.storage[j + 1 + k])
                if a != b { return a < b }
                k += 1
            }
            if lengthA != lengthB { return lengthA < lengthB }
            i += 1 + lengthA
            j += 1 + lengthB
        }
        return i == storage.endIndex && j < other.storage.endIndex
    }
}

extension DomainName: Hashable {
    public static func == (lhs: DomainName, rhs: DomainName) -> Bool {
        guard lhs.storage.count == rhs.storage.count else { return false }
        // Copies of one name share their bytes, and most names compared are such copies (a
        // record and the same record queued, cached or known): that test costs nothing.
        if lhs.storage.withUnsafeBufferPointer({ a in rhs.storage.withUnsafeBufferPointer { b in a.baseAddress == b.baseAddress } }) {
            return true
        }
        return equalFolded(lhs.storage[...], rhs.storage[...])
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(storage.count)
        // Eight folded bytes per combine: names are hashed for every packet on a busy link.
        var word: UInt64 = 0
        var filled = 0
        for byte in storage {
            word = word << 8 | UInt64(DomainName.fold(byte))
            filled += 1
            if filled == 8 {
                hasher.combine(word)
                word = 0
                filled = 0
            }
        }
        if filled > 0 { hasher.combine(word) }
    }
}

// MARK: - Presentation format

extension DomainName: CustomStringConvertible, LosslessStringConvertible {
    /// Parses a name in presentation format, as `dns-sd` and `avahi-browse -p` print them:
    /// labels separated by dots, `\.` and `\\` for a literal dot and backslash, `\DDD` (three
    /// decimal digits) for any byte, `\X` for any other character X. The trailing dot is
    /// optional; `""` and `"."` are the root.
    public init(parsing text: String) throws(DNSWireError) {
        let bytes = Array(text.utf8)
        var labels: [[UInt8]] = []
        var current: [UInt8] = []
        var index = 0
        var sawEscapeOrByte = false
        if bytes == [UInt8(ascii: ".")] {
            self = .root
            return
        }
        while index < bytes.count {
            let byte = bytes[index]
            switch byte {
            case UInt8(ascii: "."):
                guard !current.isEmpty || sawEscapeOrByte else {
                    throw DNSWireError(
                        .badPresentationName, "empty label", at: index)
                }
                labels.append(current)
                current = []
                sawEscapeOrByte = false
                index += 1
            case UInt8(ascii: "\\"):
                guard index + 1 < bytes.count else {
                    throw DNSWireError(
                        .badPresentationName, "a lone backslash at the end", at: index)
                }
                let next = bytes[index + 1]
                if isDigit(next) {
                    guard index + 3 < bytes.count, isDigit(bytes[index + 2]), isDigit(bytes[index + 3])
                    else {
                        throw DNSWireError(
                            .badPresentationName,
                            "a \\DDD escape needs exactly three decimal digits",
                            at: index)
                    }
                    let value =
                        Int(next - 48) * 100 + Int(bytes[index + 2] - 48) * 10
                        + Int(bytes[index + 3] - 48)
                    guard value <= 255 else {
                        throw DNSWireError(
                            .badPresentationName,
                            "\\\(value) is not a byte (000 to 255)", at: index)
                    }
                    current.append(UInt8(value))
                    index += 4
                } else {
                    current.append(next)
                    index += 2
                }
                sawEscapeOrByte = true
            default:
                current.append(byte)
                sawEscapeOrByte = true
                index += 1
            }
            if current.count > Self.maximumLabelLength {
                throw DNSWireError(
                    .labelTooLong,
                    "a label is longer than the 63-byte limit", at: index)
            }
        }
        if !current.isEmpty { labels.append(current) }
        try self.init(labels: labels)
    }

    public init?(_ description: String) {
        guard let name = try? DomainName(parsing: description) else { return nil }
        self = name
    }

    /// The name in presentation format with a trailing dot, escaped the way `dns-sd` prints it:
    /// `.` and `\` get a backslash, bytes below 0x21 and 0x7F become `\DDD`, other bytes
    /// (UTF-8 included) are printed as they are. `Build Box._openagents._tcp.local.` prints as
    /// `Build\032Box._openagents._tcp.local.`.
    public var description: String {
        if storage.isEmpty { return "." }
        var out: [UInt8] = []
        out.reserveCapacity(storage.count + 8)
        var index = 0
        while index < storage.count {
            let length = Int(storage[index])
            DomainName.appendEscaped(label: storage[(index + 1)..<(index + 1 + length)], to: &out)
            out.append(UInt8(ascii: "."))
            index += 1 + length
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// Escapes one label the same way ``description`` does.
    public static func escape(label: [UInt8]) -> String {
        var out: [UInt8] = []
        appendEscaped(label: label[...], to: &out)
        return String(decoding: out, as: UTF8.self)
    }

    /// Escapes one label. Bytes from 0x80 up stay as they are when the label is valid UTF-8
    /// (names people read), and become `\DDD` when it is not, so printing never loses a byte.
    private static func appendEscaped(label: ArraySlice<UInt8>, to out: inout [UInt8]) {
        let isUTF8 = label.allSatisfy { $0 < 0x80 } || String(validating: label, as: UTF8.self) != nil
        for byte in label { appendEscaped(byte, keepingHighBytes: isUTF8, to: &out) }
    }

    private static func appendEscaped(_ byte: UInt8, keepingHighBytes: Bool, to out: inout [UInt8]) {
        switch byte {
        case UInt8(ascii: "."), UInt8(ascii: "\\"):
            out.append(UInt8(ascii: "\\"))
            out.append(byte)
        case 0x80...0xFF where !keepingHighBytes, 0..<0x21, 0x7F:
            out.append(UInt8(ascii: "\\"))
            out.append(48 + byte / 100)
            out.append(48 + (byte / 10) % 10)
            out.append(48 + byte % 10)
        default:
            out.append(byte)
        }
    }
}

private func isDigit(_ byte: UInt8) -> Bool { byte >= 48 && byte <= 57 }

extension DomainName: ExpressibleByStringLiteral {
    /// A name from a literal in presentation format. An invalid literal is a programming error.
    public init(stringLiteral value: String) {
        do {
            try self.init(parsing: value)
        } catch {
            preconditionFailure("invalid domain name literal \"\(value)\": \(error)")
        }
    }
}
