// libFuzzer target for the JSON-RPC frame parser of the channel. Tools/fuzz/build compiles this
// file into the SAME module (PeerProtocol) as Sources/PeerProtocol/JSONText.swift,
// JSONValue.swift and JSONRPC.swift, and nothing else of that module (those three need only
// Foundation, no NIO), so it may use internal API.
//
// The input is JSON text. Every failed property calls `fail`, which traps with a message naming
// the property; libFuzzer then saves the input under .build-fuzz/crashes-jsonrpc/.
//
// "canonical(v)" below is v with every integral Double of magnitude below 1e15 turned into
// .integer: the writer prints such a number without a fraction ("1.0" is written "1"), so it
// comes back as an integer. That is the only change a round trip may make.
//
//  J1 JSONValue(parsing:) never traps. The input bytes as Data and the same bytes as a String
//     agree: if the bytes are valid UTF-8, both give the same value or both throw; if they are
//     not, the Data overload throws (JSON text is UTF-8). A thrown error has code -32700, and
//     the offset it names ("at offset N") lies inside the text.
//  J2 Values round-trip: for a parsed v, t = v.jsonText parses to exactly canonical(v), writing
//     that again gives t byte for byte (a fixed point), and Foundation's JSONSerialization, an
//     independent reader, accepts t.
//  J3 Nesting is bounded: a parsed value is at most JSONTextCodec.maximumDepth (256) arrays or
//     objects deep. The input wrapped in n more arrays or objects parses, to v wrapped n times,
//     exactly when depth(v) + n <= 256, and fails with the nesting error otherwise; n is chosen
//     around that boundary and sometimes 20_000 (refused without recursing that deep: no stack
//     overflow).
//  J4 JSONRPCFrame(parsing:) never traps (on the input as text; invalid UTF-8 is replaced with
//     U+FFFD) and agrees with JSONValue: text that is not JSON gives one .invalid -32700 failure
//     with no id, not a batch; an empty array one .invalid -32600; a non-empty array a batch with
//     one entry per element; any other value one entry. Every .invalid entry holds a .failure
//     with code -32600 or -32700, and a well-formed notification (an object with
//     "jsonrpc":"2.0", a string "method", no "id" and params absent, an array or an object) is
//     never judged invalid; a valid request or notification has params nil, an array or an
//     object, and only an object gives a valid message.
//  J5 Every entry re-encodes: for a valid message m, JSONRPCFrame(parsing: m.jsonText) is exactly
//     one .message(canonical(m)) and no batch; the error response owed for an invalid entry is
//     itself a valid message that round-trips the same way (the sender can read it).

import Foundation

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ start: UnsafeRawPointer?, _ count: Int) -> CInt {
    let input = UnsafeRawBufferPointer(start: count == 0 ? nil : start, count: count)
    FuzzJSONRPC(bytes: Array(input)).run()
    return 0
}

struct FuzzJSONRPC {
    let bytes: [UInt8]

    func run() {
        let value = checkParse()  // J1
        if let value {
            checkRoundTrip(value)  // J2
            checkDepth(value)      // J3
        }
        checkFrame()  // J4, J5
    }

    // MARK: J1

    func checkParse() -> JSONValue? {
        let fromData = Result { () throws(JSONRPCError) -> JSONValue in try JSONValue(parsing: Data(bytes)) }
        if case .failure(let error) = fromData { checkParseError(error, textCount: bytes.count, what: "JSONValue(parsing: Data)") }
        guard let text = String(validating: bytes, as: UTF8.self) else {
            if case .success(let value) = fromData {
                fail("J1", "bytes that are not valid UTF-8 parsed as JSON: \(shown(value))")
            }
            // Still run the String overload on the repaired text (no trap, sane error).
            let repaired = String(decoding: bytes, as: UTF8.self)
            switch Result(catching: { () throws(JSONRPCError) -> JSONValue in try JSONValue(parsing: repaired) }) {
            case .success(let value): return value
            case .failure(let error):
                checkParseError(error, textCount: repaired.utf8.count, what: "JSONValue(parsing: String)")
                return nil
            }
        }
        let fromText = Result { () throws(JSONRPCError) -> JSONValue in try JSONValue(parsing: text) }
        switch (fromData, fromText) {
        case (.success(let a), .success(let b)):
            guard a == b else { fail("J1", "Data and String overloads differ: \(shown(a)) vs \(shown(b))") }
            return a
        case (.failure(let a), .failure(let b)):
            guard a == b else { fail("J1", "Data and String overloads fail differently: \(a.message) vs \(b.message)") }
            return nil
        case (.success(let value), .failure(let error)):
            fail("J1", "Data overload parsed \(shown(value)) but String overload threw \(error.message)")
        case (.failure(let error), .success(let value)):
            fail("J1", "String overload parsed \(shown(value)) but Data overload threw \(error.message)")
        }
    }

    func checkParseError(_ error: JSONRPCError, textCount: Int, what: String) {
        guard error.code == JSONRPCError.parseError, error.data == nil else {
            fail("J1", "\(what) threw code \(error.code), not -32700: \(error.message)")
        }
        if let range = error.message.range(of: " at offset ", options: .backwards) {
            let digits = error.message[range.upperBound...].prefix { $0.isASCII && $0.isNumber }
            guard let offset = Int(digits), offset < textCount else {
                fail("J1", "\(what): error names an offset outside the \(textCount)-byte text: \(error.message)")
            }
        }
    }

    // MARK: J2

    func checkRoundTrip(_ value: JSONValue) {
        let text = value.jsonText
        let again: JSONValue
        do {
            again = try JSONValue(parsing: text)
        } catch {
            fail("J2", "jsonText does not parse: \(error.message)\ntext: \(quoted(text))")
        }
        let expected = canonical(value)
        guard again == expected else {
            fail("J2", "parse(jsonText) != canonical(value):\nvalue:   \(shown(value))\nexpected: \(shown(expected))\ngot:      \(shown(again))")
        }
        let second = again.jsonText
        guard second == text else {
            fail("J2", "jsonText is not a fixed point:\nfirst:  \(quoted(text))\nsecond: \(quoted(second))")
        }
        do {
            _ = try JSONSerialization.jsonObject(with: Data(text.utf8), options: [.fragmentsAllowed])
        } catch {
            fail("J2", "Foundation's JSONSerialization rejects jsonText (\(error))\ntext: \(quoted(text))")
        }
    }

    // MARK: J3

    func checkDepth(_ value: JSONValue) {
        let limit = JSONTextCodec.maximumDepth
        let depth = Self.depth(of: value)
        guard depth <= limit else { fail("J3", "parsed a value \(depth) levels deep; the limit is \(limit)") }

        // Which wrapping: the input's length picks the case, its first byte the bracket kind.
        let extra: Int
        switch bytes.count % 4 {
        case 0: extra = limit - depth          // exactly at the limit: parses
        case 1: extra = limit - depth + 1      // one past it: refused
        case 2: extra = 20_000                 // far past it: refused without deep recursion
        default: extra = Int(bytes.count / 4 % 7)  // a few levels
        }
        let useObjects = (bytes.first ?? 0) & 1 == 1
        let open = useObjects ? "{\"k\":" : "["
        let close = useObjects ? "}" : "]"
        var text = String(repeating: open, count: extra)
        text += String(decoding: bytes, as: UTF8.self)
        text += String(repeating: close, count: extra)

        let result = Result { () throws(JSONRPCError) -> JSONValue in try JSONValue(parsing: text) }
        if depth + extra <= limit {
            guard case .success(let wrapped) = result else {
                fail("J3", "wrapped in \(extra) more levels (total \(depth + extra) <= \(limit)) it fails: \(result)")
            }
            var expected = value
            for _ in 0..<extra { expected = useObjects ? .object(["k": expected]) : .array([expected]) }
            guard wrapped == expected else {
                fail("J3", "wrapped in \(extra) more levels it parses to something else")
            }
        } else {
            guard case .failure(let error) = result else {
                fail("J3", "wrapped in \(extra) more levels (total \(depth + extra) > \(limit)) it still parses")
            }
            guard error.message.contains("nesting deeper than \(limit) levels") else {
                fail("J3", "wrapped in \(extra) more levels it fails, but not for nesting: \(error.message)")
            }
        }
    }

    /// Arrays and objects on the deepest path (a scalar is 0 deep).
    static func depth(of value: JSONValue) -> Int {
        switch value {
        case .array(let elements): 1 + (elements.map(depth).max() ?? 0)
        case .object(let members): 1 + (members.values.map(depth).max() ?? 0)
        default: 0
        }
    }

    // MARK: J4, J5

    func checkFrame() {
        let text = String(decoding: bytes, as: UTF8.self)
        let frame = JSONRPCFrame(parsing: text)
        // The String overload on repaired text is what the frame parser sees.
        let parsed = Result { () throws(JSONRPCError) -> JSONValue in try JSONValue(parsing: text) }
        switch parsed {
        case .failure:
            guard !frame.isBatch, frame.entries.count == 1,
                case .invalid(.failure(id: nil, let error)) = frame.entries[0], error.code == JSONRPCError.parseError
            else {
                fail("J4", "text that is not JSON gave \(frame)")
            }
        case .success(.array(let elements)):
            if elements.isEmpty {
                guard !frame.isBatch, frame.entries.count == 1,
                    case .invalid(.failure(id: nil, let error)) = frame.entries[0], error.code == JSONRPCError.invalidRequest
                else {
                    fail("J4", "an empty batch gave \(frame)")
                }
            } else {
                guard frame.isBatch, frame.entries.count == elements.count else {
                    fail("J4", "a batch of \(elements.count) gave \(frame.entries.count) entries (isBatch \(frame.isBatch))")
                }
                for (element, entry) in zip(elements, frame.entries) { checkEntry(entry, of: element) }
            }
        case .success(let single):
            guard !frame.isBatch, frame.entries.count == 1 else {
                fail("J4", "a single value gave \(frame.entries.count) entries (isBatch \(frame.isBatch))")
            }
            checkEntry(frame.entries[0], of: single)
        }
        for entry in frame.entries {
            switch entry {
            case .message(let message): checkReencoded(message, what: "message")
            case .invalid(let response): checkReencoded(response, what: "error response")
            }
        }
        guard frame.messages.count == frame.entries.filter({ if case .message = $0 { true } else { false } }).count else {
            fail("J4", "frame.messages does not list the valid entries")
        }
    }

    func checkEntry(_ entry: JSONRPCFrame.Entry, of value: JSONValue) {
        switch entry {
        case .invalid(let response):
            guard case .failure(_, let error) = response,
                error.code == JSONRPCError.invalidRequest || error.code == JSONRPCError.parseError
            else {
                fail("J4", "an invalid entry holds \(response), not a -32600/-32700 failure")
            }
            if case .object(let members) = value, case .string? = members["method"], members["jsonrpc"] == .string("2.0"),
                members["id"] == nil
            {
                // A notification never gets a response, even an error; only bad params can make it invalid.
                switch members["params"] {
                case nil, .array?, .object?: fail("J4", "a well-formed notification was judged invalid: \(response)")
                default: break
                }
            }
        case .message(let message):
            guard case .object = value else { fail("J4", "\(shown(value)) is not an object but gave message \(message)") }
            switch message {
            case .request(_, _, let params), .notification(_, let params):
                switch params {
                case nil, .array?, .object?: break
                default: fail("J4", "message \(message) has params that are neither an array nor an object")
                }
            default:
                break
            }
        }
    }

    func checkReencoded(_ message: JSONRPCMessage, what: String) {
        let text = message.jsonText
        let frame = JSONRPCFrame(parsing: text)
        let expected = canonical(message)
        guard !frame.isBatch, frame.entries.count == 1, case .message(let again) = frame.entries[0] else {
            fail("J5", "the \(what)'s jsonText does not read back as one valid message: \(frame)\ntext: \(quoted(text))")
        }
        guard again == expected else {
            fail("J5", "the \(what) came back different:\nexpected: \(expected)\ngot:      \(again)\ntext: \(quoted(text))")
        }
    }

    // MARK: canonical form

    func canonical(_ value: JSONValue) -> JSONValue {
        switch value {
        case .number(let number) where number == number.rounded() && abs(number) < 1e15:
            .integer(Int(number))
        case .array(let elements): .array(elements.map(canonical))
        case .object(let members): .object(members.mapValues(canonical))
        default: value
        }
    }

    func canonical(_ message: JSONRPCMessage) -> JSONRPCMessage {
        switch message {
        case .request(let id, let method, let params): .request(id: id, method: method, params: params.map(canonical))
        case .notification(let method, let params): .notification(method: method, params: params.map(canonical))
        case .response(let id, let result): .response(id: id, result: canonical(result))
        case .failure(let id, let error): .failure(id: id, JSONRPCError(error.code, error.message, data: error.data.map(canonical)))
        }
    }

    // MARK: reporting

    func fail(_ property: String, _ detail: String) -> Never {
        let input = bytes.count <= 2048 ? bytes : Array(bytes.prefix(2048))
        let text = quoted(String(decoding: input, as: UTF8.self)) + (bytes.count > 2048 ? "..." : "")
        fatalError("JSON-RPC fuzz property \(property) failed: \(detail)\ninput (\(bytes.count) bytes): \(text)")
    }

    func shown(_ value: JSONValue) -> String {
        let text = value.jsonText
        return text.utf8.count <= 600 ? quoted(text) : quoted(String(text.prefix(600))) + "..."
    }

}
