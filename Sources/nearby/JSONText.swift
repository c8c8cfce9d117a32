import PeerConnection

/// A JSON value whose objects keep their keys in the order written, so that command output
/// reads the way the documentation shows it (`{"event":…,"name":…}`).
indirect enum OutputValue {
    case string(String)
    case number(Double)
    case bool(Bool)
    case null
    case array([OutputValue])
    case object([(String, OutputValue)])
    /// JSON already written (a message as it came off the wire), copied as it is.
    case raw(String)
}

enum JSONText {
    static func object(_ members: [(String, OutputValue)]) -> String {
        var out = ""
        write(.object(members), to: &out)
        return out
    }

    static func write(_ value: OutputValue, to out: inout String) {
        switch value {
        case .string(let text): writeString(text, to: &out)
        case .number(let number):
            if number == number.rounded(), abs(number) < 1e15 { out += String(Int64(number)) } else { out += "\(number)" }
        case .bool(let flag): out += flag ? "true" : "false"
        case .null: out += "null"
        case .raw(let json): out += json
        case .array(let items):
            out += "["
            for (index, item) in items.enumerated() {
                if index > 0 { out += "," }
                write(item, to: &out)
            }
            out += "]"
        case .object(let members):
            out += "{"
            for (index, (key, item)) in members.enumerated() {
                if index > 0 { out += "," }
                writeString(key, to: &out)
                out += ":"
                write(item, to: &out)
            }
            out += "}"
        }
    }

    private static func writeString(_ text: String, to out: inout String) {
        JSONTextCodec.writeString(text, to: &out)
    }
}
