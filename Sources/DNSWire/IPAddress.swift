/// An IPv4 address, as carried in an A record.
public struct IPv4Address: Hashable, Sendable, Comparable, CustomStringConvertible,
    LosslessStringConvertible
{
    /// The address in network byte order as one number (`192.0.2.1` is `0xC000_0201`).
    public var value: UInt32

    public init(_ value: UInt32) { self.value = value }

    public init(_ a: UInt8, _ b: UInt8, _ c: UInt8, _ d: UInt8) {
        value = UInt32(a) << 24 | UInt32(b) << 16 | UInt32(c) << 8 | UInt32(d)
    }

    /// The four bytes, most significant first.
    public var bytes: [UInt8] {
        [UInt8(value >> 24), UInt8(truncatingIfNeeded: value >> 16),
         UInt8(truncatingIfNeeded: value >> 8), UInt8(truncatingIfNeeded: value)]
    }

    /// Parses dotted-quad text such as `198.18.1.2`.
    public init?(_ text: String) {
        let parts = text.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 4 else { return nil }
        var value: UInt32 = 0
        for part in parts {
            guard !part.isEmpty, part.count <= 3, part.allSatisfy(\.isASCII),
                let byte = UInt8(part)
            else { return nil }
            value = value << 8 | UInt32(byte)
        }
        self.value = value
    }

    public var description: String {
        bytes.map(String.init).joined(separator: ".")
    }

    /// True for 169.254.0.0/16.
    public var isLinkLocal: Bool { value >> 16 == 0xA9FE }

    public static func < (lhs: IPv4Address, rhs: IPv4Address) -> Bool { lhs.value < rhs.value }
}

/// An IPv6 address, as carried in an AAAA record. The wire form has no scope (interface); the
/// layers above attach the interface a link-local address was seen on.
public struct IPv6Address: Hashable, Sendable, Comparable, CustomStringConvertible,
    LosslessStringConvertible
{
    /// The high and low 64 bits, most significant first.
    public var high: UInt64
    public var low: UInt64

    public init(high: UInt64, low: UInt64) {
        self.high = high
        self.low = low
    }

    /// Makes an address from 16 bytes; nil if `bytes` does not have exactly 16.
    public init?(bytes: some Collection<UInt8>) {
        guard bytes.count == 16 else { return nil }
        var high: UInt64 = 0
        var low: UInt64 = 0
        for (index, byte) in bytes.enumerated() {
            if index < 8 { high = high << 8 | UInt64(byte) } else { low = low << 8 | UInt64(byte) }
        }
        self.init(high: high, low: low)
    }

    /// The sixteen bytes, most significant first.
    public var bytes: [UInt8] {
        var out = [UInt8](repeating: 0, count: 16)
        for index in 0..<8 {
            out[index] = UInt8(truncatingIfNeeded: high >> UInt64(56 - 8 * index))
            out[index + 8] = UInt8(truncatingIfNeeded: low >> UInt64(56 - 8 * index))
        }
        return out
    }

    /// The eight 16-bit groups.
    public var groups: [UInt16] {
        (0..<8).map { index in
            let word = index < 4 ? high : low
            return UInt16(truncatingIfNeeded: word >> UInt64(48 - 16 * (index % 4)))
        }
    }

    /// True for fe80::/10.
    public var isLinkLocal: Bool { high >> 54 == 0x3FA }

    /// Parses text such as `fe80::1`, `fd6e:6272:1::2` or `::ffff:192.0.2.1`. A zone suffix
    /// (`%eth0`) is not part of the address and is refused here.
    public init?(_ text: String) {
        guard !text.isEmpty, text.utf8.count <= 45 else { return nil }
        var head: Substring
        var tail: Substring?
        if let gap = text.firstRange(of: "::") {
            head = text[..<gap.lowerBound]
            tail = text[gap.upperBound...]
            if tail?.contains("::") == true { return nil }
        } else {
            head = Substring(text)
        }
        // Only the very last group may be written as dotted IPv4.
        func groups(_ part: Substring, isLast: Bool) -> [UInt16]? {
            if part.isEmpty { return [] }
            let fields = part.split(separator: ":", omittingEmptySubsequences: false)
            var out: [UInt16] = []
            for (index, field) in fields.enumerated() {
                if isLast, index == fields.count - 1, field.contains("."),
                    let v4 = IPv4Address(String(field))
                {
                    out += [UInt16(v4.value >> 16), UInt16(truncatingIfNeeded: v4.value)]
                    continue
                }
                guard !field.isEmpty, field.count <= 4, field.allSatisfy(\.isHexDigit),
                    let group = UInt16(field, radix: 16)
                else { return nil }
                out.append(group)
            }
            return out
        }
        guard let first = groups(head, isLast: tail == nil) else { return nil }
        var all: [UInt16]
        if let tail {
            guard let second = groups(tail, isLast: true), first.count + second.count <= 7 else {
                return nil
            }
            all = first + [UInt16](repeating: 0, count: 8 - first.count - second.count) + second
        } else {
            guard first.count == 8 else { return nil }
            all = first
        }
        var high: UInt64 = 0
        var low: UInt64 = 0
        for (index, group) in all.enumerated() {
            if index < 4 { high = high << 16 | UInt64(group) } else { low = low << 16 | UInt64(group) }
        }
        self.init(high: high, low: low)
    }

    /// RFC 5952 text: lower-case hex, leading zeros dropped, the longest run of two or more zero
    /// groups (the first one on a tie) written as `::`.
    public var description: String {
        let groups = self.groups
        var bestStart = -1
        var bestLength = 0
        var index = 0
        while index < 8 {
            if groups[index] == 0 {
                var end = index
                while end < 8 && groups[end] == 0 { end += 1 }
                if end - index > bestLength && end - index >= 2 {
                    bestStart = index
                    bestLength = end - index
                }
                index = end
            } else {
                index += 1
            }
        }
        func hex(_ range: Range<Int>) -> String {
            range.map { String(groups[$0], radix: 16) }.joined(separator: ":")
        }
        if bestStart < 0 { return hex(0..<8) }
        return hex(0..<bestStart) + "::" + hex((bestStart + bestLength)..<8)
    }

    public static func < (lhs: IPv6Address, rhs: IPv6Address) -> Bool {
        (lhs.high, lhs.low) < (rhs.high, rhs.low)
    }
}
