import Testing

@testable import PeerConnection

@Suite("JSON text")
struct JSONTextTests {
    @Test("values read as RFC 8259 says: escapes, surrogate pairs, integers and other numbers")
    func reads() throws {
        #expect(try JSONValue(parsing: #" {"a": [1, -2, 3.5, 1e3, true, false, null], "b": "x\"\\\/\n\u00e9\ud83d\ude00"} "#)
            == .object(["a": [.integer(1), .integer(-2), .number(3.5), .number(1000), true, false, nil], "b": .string("x\"\\/\né😀")]))
        #expect(try JSONValue(parsing: "123456789012345678901234567890") == .number(1.2345678901234568e29))
        #expect(try JSONValue(parsing: #""héllo""#) == "héllo")
    }

    @Test("what RFC 8259 forbids is refused with where", arguments: [
        "", "[1,]", "{\"a\":1,}", "01", "-", "1.", "1e", "[1 2]", "{\"a\" 1}", "{a:1}", "'x'", "tru", "nul",
        "\"\\ud800\"", "\"\\udc00\"", "\"\\x\"", "\"a\u{01}b\"", "\"open", "[1] 2", "NaN", "1e999",
        String(repeating: "[", count: 300) + String(repeating: "]", count: 300),
    ])
    func refuses(_ text: String) {
        do {
            let value = try JSONValue(parsing: text)
            Issue.record("\(text.prefix(40)) was read as \(value)")
        } catch {
            #expect(error.code == JSONRPCError.parseError)
            #expect(error.message.contains("offset") || error.message.contains("end of the text"), "\(error.message)")
        }
    }

    @Test("invalid UTF-8 inside a string is refused")
    func invalidUTF8() {
        #expect(throws: JSONRPCError.self) { try JSONValue(parsing: [0x22, 0xC3, 0x28, 0x22]) }
    }

    @Test("written text reads back as the same value, keys sorted, control characters escaped")
    func roundTrip() throws {
        let value: JSONValue = ["z": 1, "a": ["\u{01}\t\"q\"\\", 2.5, -7, nil, false], "m": [:], "é": "😀"]
        #expect(value.jsonText == #"{"a":["\u0001\t\"q\"\\",2.5,-7,null,false],"m":{},"z":1,"é":"😀"}"#)
        #expect(try JSONValue(parsing: value.jsonText) == value)
        #expect(JSONValue.number(.infinity).jsonText == "null")
    }
}

extension JSONValue {
    init(parsing bytes: [UInt8]) throws(JSONRPCError) {
        do {
            self = try JSONTextCodec.parse(bytes)
        } catch {
            throw JSONRPCError(JSONRPCError.parseError, error.message)
        }
    }
}
