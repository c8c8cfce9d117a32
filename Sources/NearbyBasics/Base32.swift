/// Crockford's base32, the alphabet of peer IDs and invitation links: digits, then A-Z without
/// I, L, O and U; most significant bit first, no padding. Reading ignores case and takes `O`
/// as `0` and `I`/`L` as `1`.
package enum CrockfordBase32 {
    package static let alphabet = Array("0123456789ABCDEFGHJKMNPQRSTVWXYZ".unicodeScalars)

    package static func encode(_ bytes: [UInt8]) -> String {
        var text = String.UnicodeScalarView()
        var buffer = 0, bits = 0
        for byte in bytes {
            buffer = (buffer << 8 | Int(byte)) & 0xFFFF
            bits += 8
            while bits >= 5 {
                bits -= 5
                text.append(alphabet[(buffer >> bits) & 31])
            }
        }
        if bits > 0 { text.append(alphabet[(buffer << (5 - bits)) & 31]) }
        return String(text)
    }

    /// Exactly `count` bytes, or nil: a character outside the alphabet, the wrong length, or
    /// stray bits after the last byte.
    package static func decode(_ text: String, count: Int) -> [UInt8]? {
        var bytes: [UInt8] = []
        var buffer = 0, bits = 0
        for scalar in text.uppercased().unicodeScalars {
            let normalized: Unicode.Scalar =
                switch scalar {
                case "O": "0"
                case "I", "L": "1"
                default: scalar
                }
            guard let value = alphabet.firstIndex(of: normalized) else { return nil }
            buffer = (buffer << 5 | value) & 0xFFFF
            bits += 5
            if bits >= 8 {
                bits -= 8
                bytes.append(UInt8((buffer >> bits) & 0xFF))
            }
        }
        guard bytes.count == count, bits < 5, buffer & ((1 << bits) - 1) == 0 else { return nil }
        return bytes
    }
}
