#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif

/// Any JSON value: what JSON-RPC params, results and error data are before the app decodes them
/// into its own `Codable` types.
///
/// Integers that fit `Int` stay integers (ids and counts survive a round trip exactly); other
/// numbers are `Double`.
public enum JSONValue: Hashable, Sendable {
    case null
    case bool(Bool)
    case integer(Int)
    case number(Double)
    case string(String)
    case array([JSONValue])
    case object([String: JSONValue])

    /// The value of `key` when this is an object.
    public subscript(key: String) -> JSONValue? {
        if case .object(let members) = self { return members[key] }
        return nil
    }

    /// The string, when this is one.
    public var stringValue: String? {
        if case .string(let text) = self { return text }
        return nil
    }

    /// Parses JSON text.
    /// - Throws: ``JSONRPCError`` with code -32700 (parse error) saying what is wrong and where.
    public init(parsing text: some StringProtocol) throws(JSONRPCError) {
        do {
            self = try JSONTextCodec.parse(text.utf8)
        } catch {
            throw JSONRPCError(JSONRPCError.parseError, "not valid JSON: \(error.message)")
        }
    }

    /// Parses JSON text given as UTF-8 bytes.
    /// - Throws: ``JSONRPCError`` with code -32700 (parse error) saying what is wrong and where.
    public init(parsing data: Data) throws(JSONRPCError) {
        do {
            self = try JSONTextCodec.parse(data)
        } catch {
            throw JSONRPCError(JSONRPCError.parseError, "not valid JSON: \(error.message)")
        }
    }

    /// Encodes any `Encodable` value as a JSON value (for params and results).
    public init(encoding value: some Encodable) throws {
        self = try JSONTextCodec.parse(JSONEncoder().encode(value))
    }

    /// Decodes this value as `type` (for params and results), by JSONDecoder's default rules,
    /// straight from the value (no text in between).
    public func decode<Value: Decodable>(as type: Value.Type = Value.self) throws -> Value {
        try JSONValueDecoder.decode(type, from: self)
    }

    /// What kind of value this is, in words ("a string", "null"), for error messages.
    package var kindName: String {
        switch self {
        case .null: "null"
        case .bool: "a boolean"
        case .integer, .number: "a number"
        case .string: "a string"
        case .array: "an array"
        case .object: "an object"
        }
    }

    /// Compact JSON text, keys in sorted order (the same value always gives the same text).
    /// Non-finite numbers, which JSON cannot carry, are written as null.
    public var jsonText: String {
        var out = ""
        JSONTextCodec.write(self, to: &out)
        return out
    }
}

extension JSONValue: Codable {
    public init(from decoder: any Decoder) throws {
        if var array = try? decoder.unkeyedContainer() {
            var elements: [JSONValue] = []
            while !array.isAtEnd { elements.append(try array.decode(JSONValue.self)) }
            self = .array(elements)
            return
        }
        if let object = try? decoder.container(keyedBy: AnyKey.self) {
            var members: [String: JSONValue] = [:]
            for key in object.allKeys { members[key.stringValue] = try object.decode(JSONValue.self, forKey: key) }
            self = .object(members)
            return
        }
        let single = try decoder.singleValueContainer()
        if single.decodeNil() {
            self = .null
        } else if let value = try? single.decode(Bool.self) {
            self = .bool(value)
        } else if let value = try? single.decode(Int.self) {
            self = .integer(value)
        } else if let value = try? single.decode(Double.self) {
            self = .number(value)
        } else {
            self = .string(try single.decode(String.self))
        }
    }

    public func encode(to encoder: any Encoder) throws {
        switch self {
        case .null:
            var single = encoder.singleValueContainer()
            try single.encodeNil()
        case .bool(let value):
            var single = encoder.singleValueContainer()
            try single.encode(value)
        case .integer(let value):
            var single = encoder.singleValueContainer()
            try single.encode(value)
        case .number(let value):
            var single = encoder.singleValueContainer()
            if value.isFinite { try single.encode(value) } else { try single.encodeNil() }
        case .string(let value):
            var single = encoder.singleValueContainer()
            try single.encode(value)
        case .array(let elements):
            var array = encoder.unkeyedContainer()
            for element in elements { try array.encode(element) }
        case .object(let members):
            var object = encoder.container(keyedBy: AnyKey.self)
            for (key, value) in members { try object.encode(value, forKey: AnyKey(key)) }
        }
    }
}

/// A coding key made from any string.
package struct AnyKey: CodingKey {
    package var stringValue: String
    package var intValue: Int? { nil }
    package init(_ string: String) { stringValue = string }
    package init?(stringValue: String) { self.stringValue = stringValue }
    package init?(intValue: Int) { return nil }
}

// Literals, so params read like the JSON they become: `["text": "hi", "n": [1, 2]]`.
extension JSONValue: ExpressibleByStringLiteral, ExpressibleByIntegerLiteral, ExpressibleByFloatLiteral, ExpressibleByBooleanLiteral,
    ExpressibleByArrayLiteral, ExpressibleByDictionaryLiteral, ExpressibleByNilLiteral
{
    public init(stringLiteral value: String) { self = .string(value) }
    public init(integerLiteral value: Int) { self = .integer(value) }
    public init(floatLiteral value: Double) { self = .number(value) }
    public init(booleanLiteral value: Bool) { self = .bool(value) }
    public init(arrayLiteral elements: JSONValue...) { self = .array(elements) }
    public init(nilLiteral: ()) { self = .null }
    /// A later duplicate key wins, as in most JSON parsers.
    public init(dictionaryLiteral elements: (String, JSONValue)...) {
        self = .object(Dictionary(elements, uniquingKeysWith: { _, last in last }))
    }
}
