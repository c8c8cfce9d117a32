import NearbyBasics
import PeerConnection

/// A JSON value whose objects keep their keys in the order written, so that command output
/// reads the way the documentation shows it (`{"event":…,"name":…}`).
indirect enum OutputValue: Sendable {
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
        case .string(let text): JSONWriter.writeString(text, to: &out)
        case .number(let number): JSONWriter.writeNumber(number, to: &out)
        case .bool(let flag): out += flag ? "true" : "false"
        case .null: out += "null"
        case .raw(let json): out += json
        case .array(let items): JSONWriter.writeArray(items, to: &out, write)
        case .object(let members): JSONWriter.writeObject(members, to: &out, write)
        }
    }
}
