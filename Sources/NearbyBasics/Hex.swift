/// Bytes as lower-case hexadecimal digits, two per byte.
package func hexString(_ bytes: some Sequence<UInt8>) -> String {
    let digits = Array("0123456789abcdef".utf8)
    var text: [UInt8] = []
    text.reserveCapacity(bytes.underestimatedCount * 2)
    for byte in bytes {
        text.append(digits[Int(byte >> 4)])
        text.append(digits[Int(byte & 0x0F)])
    }
    return String(decoding: text, as: UTF8.self)
}

/// The bytes that hexadecimal `text` (either case) spells; nil for an odd length or a character
/// that is not a hexadecimal digit.
package func bytes(fromHex text: String) -> [UInt8]? {
    let units = Array(text.utf8)
    guard units.count % 2 == 0 else { return nil }
    func value(_ unit: UInt8) -> UInt8? {
        switch unit {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): unit - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): unit - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): unit - UInt8(ascii: "A") + 10
        default: nil
        }
    }
    var bytes: [UInt8] = []
    bytes.reserveCapacity(units.count / 2)
    var index = 0
    while index + 1 < units.count {
        guard let high = value(units[index]), let low = value(units[index + 1]) else { return nil }
        bytes.append(high << 4 | low)
        index += 2
    }
    return bytes
}

/// The bytes that base64 `text` (RFC 4648 §4, with or without `=` padding; spaces and line
/// breaks are skipped) spells; nil for any other character or an impossible length.
package func bytes(fromBase64 text: String) -> [UInt8]? {
    func value(_ unit: UInt8) -> UInt8? {
        switch unit {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"): unit - UInt8(ascii: "A")
        case UInt8(ascii: "a")...UInt8(ascii: "z"): unit - UInt8(ascii: "a") + 26
        case UInt8(ascii: "0")...UInt8(ascii: "9"): unit - UInt8(ascii: "0") + 52
        case UInt8(ascii: "+"): 62
        case UInt8(ascii: "/"): 63
        default: nil
        }
    }
    var bytes: [UInt8] = []
    var accumulator: UInt32 = 0
    var bits = 0
    var padding = 0
    for unit in text.utf8 {
        if unit == UInt8(ascii: " ") || unit == UInt8(ascii: "\n") || unit == UInt8(ascii: "\r") || unit == UInt8(ascii: "\t") { continue }
        if unit == UInt8(ascii: "=") {
            padding += 1
            continue
        }
        guard padding == 0, let digit = value(unit) else { return nil }
        accumulator = accumulator << 6 | UInt32(digit)
        bits += 6
        if bits >= 8 {
            bits -= 8
            bytes.append(UInt8(truncatingIfNeeded: accumulator >> UInt32(bits)))
        }
    }
    // Leftover bits must be padding zeros, and there are never 6 of them (half a byte at most).
    guard bits < 6, accumulator & ((1 << UInt32(bits)) - 1) == 0, padding <= 2 else { return nil }
    return bytes
}

extension String {
    /// The text with zeros in front up to `length` characters (unchanged if already that long).
    package func leftPadded(to length: Int) -> String {
        count >= length ? self : String(repeating: "0", count: length - count) + self
    }
}
