/// JSON text written by hand: strings, numbers, arrays and objects, shared by the channel's
/// codec (PeerConnection) and the command-line tool's output, so both escape alike.
package enum JSONWriter {
    /// A number as JSON: integral values without a fraction, and null for NaN and the
    /// infinities, which JSON has no words for.
    package static func writeNumber(_ number: Double, to out: inout String) {
        if !number.isFinite {
            out += "null"
        } else if number == number.rounded(), abs(number) < 1e15 {
            out += String(Int64(number))
        } else {
            out += "\(number)"
        }
    }

    /// `[a,b,…]`, each element written by `element`.
    package static func writeArray<Element>(
        _ elements: [Element], to out: inout String, _ element: (Element, inout String) -> Void
    ) {
        out += "["
        for (position, item) in elements.enumerated() {
            if position > 0 { out += "," }
            element(item, &out)
        }
        out += "]"
    }

    /// `{"key":value,…}` in the order given, each value written by `value`.
    package static func writeObject<Value>(
        _ members: [(String, Value)], to out: inout String, _ value: (Value, inout String) -> Void
    ) {
        out += "{"
        for (position, (key, member)) in members.enumerated() {
            if position > 0 { out += "," }
            writeString(key, to: &out)
            out += ":"
            value(member, &out)
        }
        out += "}"
    }

    /// `text` as a JSON string, quotes included .
    package static func writeString(_ text: String, to out: inout String) {
        out += "\""
        var plain = true
        for byte in text.utf8 where byte < 0x20 || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") {
            plain = false
            break
        }
        if plain {
            out += text
        } else {
            for scalar in text.unicodeScalars {
                switch scalar {
                case "\"": out += "\\\""
                case "\\": out += "\\\\"
                case "\n": out += "\\n"
                case "\r": out += "\\r"
                case "\t": out += "\\t"
                case _ where scalar.value < 0x20:
                    let hex = String(scalar.value, radix: 16)
                    out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
                default: out.unicodeScalars.append(scalar)
                }
            }
        }
        out += "\""
    }
}
