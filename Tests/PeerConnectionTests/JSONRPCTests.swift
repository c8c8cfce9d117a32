import Testing

@testable import PeerConnection

/// JSON-RPC 2.0 as the specification's examples have it (§7), and what a hostile or careless
/// peer may send instead.
@Suite("JSON-RPC 2.0 messages")
struct JSONRPCTests {
    func single(_ text: String) -> JSONRPCFrame.Entry? {
        let frame = JSONRPCFrame(parsing: text)
        #expect(!frame.isBatch)
        #expect(frame.entries.count == 1)
        return frame.entries.first
    }

    func owedError(_ entry: JSONRPCFrame.Entry?) -> (id: JSONRPCID?, code: Int)? {
        guard case .invalid(.failure(let id, let error))? = entry else { return nil }
        return (id, error.code)
    }

    @Test("requests, notifications, responses and errors are read, with ids as strings or integers")
    func validMessages() {
        #expect(single(#"{"jsonrpc":"2.0","method":"subtract","params":[42,23],"id":1}"#)
            == .message(.request(id: .integer(1), method: "subtract", params: .array([.integer(42), .integer(23)]))))
        #expect(single(#"{"jsonrpc":"2.0","method":"subtract","params":{"subtrahend":23,"minuend":42},"id":"a-3"}"#)
            == .message(.request(id: .string("a-3"), method: "subtract",
                                 params: .object(["subtrahend": .integer(23), "minuend": .integer(42)]))))
        #expect(single(#"{"jsonrpc":"2.0","method":"update","params":[1,2,3,4,5]}"#)
            == .message(.notification(method: "update", params: .array((1...5).map(JSONValue.integer)))))
        #expect(single(#"{"jsonrpc":"2.0","method":"ping"}"#) == .message(.notification(method: "ping", params: nil)))
        #expect(single(#"{"jsonrpc":"2.0","result":19,"id":1}"#) == .message(.response(id: .integer(1), result: .integer(19))))
        #expect(single(#"{"jsonrpc":"2.0","result":null,"id":"x"}"#) == .message(.response(id: .string("x"), result: .null)))
        #expect(single(#"{"jsonrpc":"2.0","error":{"code":-32601,"message":"Method not found","data":{"m":"foo"}},"id":"1"}"#)
            == .message(.failure(id: .string("1"), JSONRPCError(-32601, "Method not found", data: .object(["m": .string("foo")])))))
        #expect(single(#"{"jsonrpc":"2.0","error":{"code":-32700,"message":"Parse error"},"id":null}"#)
            == .message(.failure(id: nil, JSONRPCError(-32700, "Parse error"))))
        // An integral id written with a fraction is still an integer id.
        #expect(single(#"{"jsonrpc":"2.0","method":"a","id":7.0}"#) == .message(.request(id: .integer(7), method: "a", params: nil)))
    }

    @Test("text that is not JSON gets -32700 with a null id")
    func parseErrors() {
        for text in [#"{"jsonrpc":"2.0","method":"foobar,"params":"bar","baz]"#, "", "{", "nul", "[1,2", "\u{0}", "{\"a\":1}}"] {
            let owed = owedError(single(text))
            #expect(owed?.code == JSONRPCError.parseError, "\(text.debugDescription)")
            #expect(owed?.id == nil)
        }
    }

    @Test("JSON that is not JSON-RPC 2.0 gets -32600, with the id when one could be read")
    func invalidRequests() {
        let cases: [(String, JSONRPCID?)] = [
            (#"{"jsonrpc":"2.0","method":1,"params":"bar"}"#, nil),
            (#"{"jsonrpc":"1.0","method":"a","id":4}"#, .integer(4)),
            (#"{"method":"a","id":"k"}"#, .string("k")),
            (#"{"jsonrpc":"2.0","method":"a","params":"text","id":5}"#, .integer(5)),
            (#"{"jsonrpc":"2.0","method":"a","params":3,"id":5}"#, .integer(5)),
            (#"{"jsonrpc":"2.0","method":"a","id":null}"#, nil),
            (#"{"jsonrpc":"2.0","method":"a","id":[1]}"#, nil),
            (#"{"jsonrpc":"2.0","method":"a","id":1.5}"#, nil),
            (#"{"jsonrpc":"2.0","id":6}"#, .integer(6)),
            (#"{"jsonrpc":"2.0","result":1,"error":{"code":1,"message":"x"},"id":6}"#, .integer(6)),
            (#"{"jsonrpc":"2.0","error":{"code":"x","message":"m"},"id":6}"#, .integer(6)),
            (#"{"jsonrpc":"2.0","result":1}"#, nil),
            ("1", nil), (#""text""#, nil), ("null", nil), ("true", nil),
        ]
        for (text, id) in cases {
            let owed = owedError(single(text))
            #expect(owed?.code == JSONRPCError.invalidRequest, "\(text)")
            #expect(owed?.id == id, "\(text)")
        }
    }

    @Test("batches: each entry on its own, invalid ones each owed an error; an empty batch is one error")
    func batches() {
        let frame = JSONRPCFrame(parsing: """
            [{"jsonrpc":"2.0","method":"sum","params":[1,2,4],"id":"1"},{"jsonrpc":"2.0","method":"notify_hello","params":[7]},
             {"jsonrpc":"2.0","method":"subtract","params":[42,23],"id":"2"},{"foo":"boo"},
             {"jsonrpc":"2.0","method":"foo.get","params":{"name":"myself"},"id":"5"},1]
            """)
        #expect(frame.isBatch)
        #expect(frame.entries.count == 6)
        #expect(frame.messages.count == 4)
        #expect(frame.entries.filter { owedError($0)?.code == JSONRPCError.invalidRequest }.count == 2)
        let empty = JSONRPCFrame(parsing: "[]")
        #expect(!empty.isBatch)
        #expect(owedError(empty.entries.first)?.code == JSONRPCError.invalidRequest)
        // A batch that is not JSON at all is one parse error, not a batch.
        let broken = JSONRPCFrame(parsing: #"[{"jsonrpc":"2.0","method":"sum","params":[1,2,4],"id":"1"},{"jsonrpc":"2.0","method""#)
        #expect(!broken.isBatch && owedError(broken.entries.first)?.code == JSONRPCError.parseError)
    }

    @Test("every message written reads back as itself")
    func roundTrip() {
        let messages: [JSONRPCMessage] = [
            .request(id: .integer(-3), method: "initialize", params: .object(["protocol_version": .string("0.2.2"), "n": .number(1.5)])),
            .request(id: .string("é \"quoted\" / id"), method: "echo", params: .array([.null, .bool(true), .string("\u{1F600}")])),
            .notification(method: "$/cancelRequest", params: .object(["id": .integer(4)])),
            .notification(method: "tick", params: nil),
            .response(id: .integer(Int.max), result: .object([:])),
            .failure(id: .string("9"), JSONRPCError(JSONRPCError.declined, "declined by the user", data: .array([]))),
            .failure(id: nil, JSONRPCError(JSONRPCError.parseError, "not valid JSON")),
        ]
        for message in messages {
            let text = message.jsonText
            #expect(single(text) == .message(message), "\(text)")
        }
        // Keys come out sorted: the same message always gives the same text.
        #expect(JSONRPCMessage.response(id: .integer(1), result: .integer(2)).jsonText == #"{"id":1,"jsonrpc":"2.0","result":2}"#)
    }

    @Test("params and results convert to and from the app's Codable types")
    func codable() throws {
        struct ClientInfo: Codable, Equatable {
            var name: String
            var title: String
            var version: String
        }
        let info = ClientInfo(name: "nearby", title: "Nearby", version: "0.1.0")
        let value = try JSONValue(encoding: info)
        #expect(value["name"] == .string("nearby"))
        #expect(try value.decode(as: ClientInfo.self) == info)
        #expect(throws: (any Error).self) { try JSONValue.integer(3).decode(as: ClientInfo.self) }
    }
}
