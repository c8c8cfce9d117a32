import Foundation
import Testing

@testable import PeerConnection

/// `JSONValue.decode(as:)` reads a tree directly; it must agree with JSONDecoder reading the
/// same value as text, in what it returns and in when it fails.
@Suite("decoding Codable types from a JSONValue")
struct JSONValueDecoderTests {
    enum Mood: String, Codable, Equatable { case calm, busy }
    struct Inner: Codable, Equatable {
        var name: String
        var tags: [String]
    }
    struct Everything: Codable, Equatable {
        var flag: Bool
        var small: Int8
        var big: UInt64
        var whole: Int
        var real: Double
        var single: Float
        var text: String
        var optional: String?
        var missing: Int?
        var explicitNull: Int?
        var list: [Int]
        var nested: [[Int]]
        var map: [String: Inner]
        var mood: Mood
        var blob: Data
        var link: URL
        var any: JSONValue
    }

    static let text = #"""
        {"flag":true,"small":-5,"big":9223372036854775807,"whole":42,"real":2.5,"single":0.25,"text":"héllo",
         "optional":"here","explicitNull":null,"list":[1,2,3],"nested":[[1],[],[2,3]],
         "map":{"a":{"name":"A","tags":["x"]}},"mood":"busy","blob":"AQID","link":"https://example.com/a?b=c",
         "any":{"k":[1,"two",null,true,{"n":1.5}]}}
        """#

    /// The same type decoded both ways: the same value, or both fail.
    func agree<Value: Decodable & Equatable>(_ type: Value.Type, _ text: String, sourceLocation: SourceLocation = #_sourceLocation) throws {
        let theirs = Result { try JSONDecoder().decode(type, from: Data(text.utf8)) }
        let ours = Result { try JSONValue(parsing: text).decode(as: type) }
        switch (theirs, ours) {
        case (.success(let a), .success(let b)): #expect(a == b, sourceLocation: sourceLocation)
        case (.failure, .failure): break
        default: Issue.record("JSONDecoder: \(theirs); ours: \(ours)", sourceLocation: sourceLocation)
        }
    }

    @Test("every kind of member decodes as JSONDecoder decodes it")
    func everything() throws {
        let decoded = try JSONValue(parsing: Self.text).decode(as: Everything.self)
        #expect(decoded.big == UInt64(Int64.max) && decoded.blob == Data([1, 2, 3]) && decoded.link.host == "example.com")
        #expect(decoded.missing == nil && decoded.explicitNull == nil && decoded.optional == "here")
        try agree(Everything.self, Self.text)
    }

    @Test("mismatches fail both ways: wrong types, numbers that do not fit, missing keys, short arrays, bad base64")
    func failures() throws {
        try agree(Int8.self, "300")
        try agree(Int.self, "1.5")
        try agree(UInt.self, "-1")
        try agree(String.self, "1")
        try agree(Bool.self, "\"true\"")
        try agree(Inner.self, #"{"name":"A"}"#)
        try agree(Inner.self, #"{"name":null,"tags":[]}"#)
        try agree([Int].self, #"[1,"2"]"#)
        try agree(Data.self, #""not base64!""#)
        try agree(Mood.self, #""sleepy""#)
        try agree(Everything.self, "[]")
        let error = try #require(throws: DecodingError.self) { try JSONValue(parsing: #"{"name":"A"}"#).decode(as: Inner.self) }
        guard case .keyNotFound(let key, _) = error else { Issue.record("not keyNotFound: \(error)"); return }
        #expect(key.stringValue == "tags")
    }

    @Test("values that JSONDecoder takes are taken: an integral real as an Int, an integer as a Double")
    func numbers() throws {
        try agree(Int.self, "3.0")
        try agree(Double.self, "3")
        try agree([Float].self, "[0.1, 1e30, 3]")
        try agree([Int64].self, "[-9223372036854775808, 9223372036854775807]")
    }
}
