#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Decodes a `Decodable` type straight from a ``JSONValue`` tree, with JSONDecoder's default
/// rules (numbers must fit the type exactly, `Data` is base64 text, `URL` a string, `Date`
/// seconds since 2001), so ``JSONValue/decode(as:)`` need not write the value out as text and
/// parse it again (Tools/bench/json measures the difference).
package struct JSONValueDecoder {
    package static func decode<Value: Decodable>(_ type: Value.Type, from value: JSONValue) throws -> Value {
        try TreeDecoder(value: value, codingPath: []).decodeValue(type)
    }
}

private struct TreeDecoder: Decoder {
    package let value: JSONValue
    package let codingPath: [any CodingKey]
    package var userInfo: [CodingUserInfoKey: Any] { [:] }

    package func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> {
        guard case .object(let members) = value else { throw mismatch([String: JSONValue].self, value, codingPath) }
        return KeyedDecodingContainer(KeyedTree(members: members, codingPath: codingPath))
    }

    package func unkeyedContainer() throws -> any UnkeyedDecodingContainer {
        guard case .array(let elements) = value else { throw mismatch([JSONValue].self, value, codingPath) }
        return UnkeyedTree(elements: elements, codingPath: codingPath)
    }

    package func singleValueContainer() throws -> any SingleValueDecodingContainer { SingleTree(decoder: self) }

    /// The one place every value is decoded: the special cases JSONDecoder has, then the type's own init.
    package func decodeValue<Value: Decodable>(_ type: Value.Type) throws -> Value {
        if type == JSONValue.self, let same = value as? Value { return same }
        if type == Data.self {
            guard case .string(let text) = value else { throw mismatch(String.self, value, codingPath) }
            guard let data = Data(base64Encoded: text), let typed = data as? Value else {
                throw DecodingError.dataCorrupted(.init(codingPath: codingPath, debugDescription: "not valid base64"))
            }
            return typed
        }
        if type == URL.self {
            guard case .string(let text) = value else { throw mismatch(String.self, value, codingPath) }
            guard let url = URL(string: text), let typed = url as? Value else {
                throw DecodingError.dataCorrupted(.init(codingPath: codingPath, debugDescription: "not a valid URL: \(text)"))
            }
            return typed
        }
        return try Value(from: self)
    }

    package func child(_ value: JSONValue, _ key: any CodingKey) -> TreeDecoder {
        TreeDecoder(value: value, codingPath: codingPath + [key])
    }
}

private func mismatch(_ expected: Any.Type, _ value: JSONValue, _ path: [any CodingKey]) -> DecodingError {
    if case .null = value {
        return .valueNotFound(expected, .init(codingPath: path, debugDescription: "expected \(expected), found null"))
    }
    return .typeMismatch(expected, .init(codingPath: path, debugDescription: "expected \(expected), found \(value.kindName)"))
}

/// Numbers as JSONDecoder reads them: an integer type takes only a value it holds exactly.
private func integer<Number: FixedWidthInteger>(_ type: Number.Type, _ value: JSONValue, _ path: [any CodingKey]) throws -> Number {
    switch value {
    case .integer(let whole):
        if let exact = Number(exactly: whole) { return exact }
    case .number(let real):
        if let exact = Number(exactly: real) { return exact }
    default:
        throw mismatch(type, value, path)
    }
    throw DecodingError.dataCorrupted(.init(codingPath: path, debugDescription: "the number \(value.jsonText) does not fit in \(type)"))
}

private func real(_ value: JSONValue, _ path: [any CodingKey]) throws -> Double {
    switch value {
    case .integer(let whole): return Double(whole)
    case .number(let real): return real
    default: throw mismatch(Double.self, value, path)
    }
}

private struct SingleTree: SingleValueDecodingContainer {
    package let decoder: TreeDecoder
    package var codingPath: [any CodingKey] { decoder.codingPath }
    private var value: JSONValue { decoder.value }

    package init(decoder: TreeDecoder) { self.decoder = decoder }

    package func decodeNil() -> Bool { value == .null }
    package func decode(_ type: Bool.Type) throws -> Bool {
        guard case .bool(let flag) = value else { throw mismatch(type, value, codingPath) }
        return flag
    }
    package func decode(_ type: String.Type) throws -> String {
        guard case .string(let text) = value else { throw mismatch(type, value, codingPath) }
        return text
    }
    package func decode(_ type: Double.Type) throws -> Double { try real(value, codingPath) }
    package func decode(_ type: Float.Type) throws -> Float {
        let wide = try real(value, codingPath)
        guard abs(wide) <= Double(Float.greatestFiniteMagnitude) else {
            throw DecodingError.dataCorrupted(.init(codingPath: codingPath, debugDescription: "the number \(wide) does not fit in Float"))
        }
        return Float(wide)
    }
    package func decode(_ type: Int.Type) throws -> Int { try integer(type, value, codingPath) }
    package func decode(_ type: Int8.Type) throws -> Int8 { try integer(type, value, codingPath) }
    package func decode(_ type: Int16.Type) throws -> Int16 { try integer(type, value, codingPath) }
    package func decode(_ type: Int32.Type) throws -> Int32 { try integer(type, value, codingPath) }
    package func decode(_ type: Int64.Type) throws -> Int64 { try integer(type, value, codingPath) }
    package func decode(_ type: UInt.Type) throws -> UInt { try integer(type, value, codingPath) }
    package func decode(_ type: UInt8.Type) throws -> UInt8 { try integer(type, value, codingPath) }
    package func decode(_ type: UInt16.Type) throws -> UInt16 { try integer(type, value, codingPath) }
    package func decode(_ type: UInt32.Type) throws -> UInt32 { try integer(type, value, codingPath) }
    package func decode(_ type: UInt64.Type) throws -> UInt64 { try integer(type, value, codingPath) }
    package func decode<Value: Decodable>(_ type: Value.Type) throws -> Value { try decoder.decodeValue(type) }
}

private struct KeyedTree<Key: CodingKey>: KeyedDecodingContainerProtocol {
    package let members: [String: JSONValue]
    package let codingPath: [any CodingKey]

    package var allKeys: [Key] { members.keys.compactMap { Key(stringValue: $0) } }
    package func contains(_ key: Key) -> Bool { members[key.stringValue] != nil }

    private func member(_ key: Key) throws -> JSONValue {
        guard let value = members[key.stringValue] else {
            throw DecodingError.keyNotFound(key, .init(codingPath: codingPath, debugDescription: "no member \"\(key.stringValue)\""))
        }
        return value
    }

    private func single(_ key: Key) throws -> SingleTree {
        SingleTree(decoder: TreeDecoder(value: try member(key), codingPath: codingPath + [key]))
    }

    package func decodeNil(forKey key: Key) throws -> Bool { try member(key) == .null }
    package func decode(_ type: Bool.Type, forKey key: Key) throws -> Bool { try single(key).decode(type) }
    package func decode(_ type: String.Type, forKey key: Key) throws -> String { try single(key).decode(type) }
    package func decode(_ type: Double.Type, forKey key: Key) throws -> Double { try single(key).decode(type) }
    package func decode(_ type: Float.Type, forKey key: Key) throws -> Float { try single(key).decode(type) }
    package func decode(_ type: Int.Type, forKey key: Key) throws -> Int { try single(key).decode(type) }
    package func decode(_ type: Int8.Type, forKey key: Key) throws -> Int8 { try single(key).decode(type) }
    package func decode(_ type: Int16.Type, forKey key: Key) throws -> Int16 { try single(key).decode(type) }
    package func decode(_ type: Int32.Type, forKey key: Key) throws -> Int32 { try single(key).decode(type) }
    package func decode(_ type: Int64.Type, forKey key: Key) throws -> Int64 { try single(key).decode(type) }
    package func decode(_ type: UInt.Type, forKey key: Key) throws -> UInt { try single(key).decode(type) }
    package func decode(_ type: UInt8.Type, forKey key: Key) throws -> UInt8 { try single(key).decode(type) }
    package func decode(_ type: UInt16.Type, forKey key: Key) throws -> UInt16 { try single(key).decode(type) }
    package func decode(_ type: UInt32.Type, forKey key: Key) throws -> UInt32 { try single(key).decode(type) }
    package func decode(_ type: UInt64.Type, forKey key: Key) throws -> UInt64 { try single(key).decode(type) }
    package func decode<Value: Decodable>(_ type: Value.Type, forKey key: Key) throws -> Value {
        try TreeDecoder(value: try member(key), codingPath: codingPath + [key]).decodeValue(type)
    }

    package func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type, forKey key: Key) throws -> KeyedDecodingContainer<NestedKey> {
        try TreeDecoder(value: try member(key), codingPath: codingPath + [key]).container(keyedBy: type)
    }

    package func nestedUnkeyedContainer(forKey key: Key) throws -> any UnkeyedDecodingContainer {
        try TreeDecoder(value: try member(key), codingPath: codingPath + [key]).unkeyedContainer()
    }

    package func superDecoder() throws -> any Decoder {
        TreeDecoder(value: members["super"] ?? .null, codingPath: codingPath + [AnyKey("super")])
    }

    package func superDecoder(forKey key: Key) throws -> any Decoder {
        TreeDecoder(value: members[key.stringValue] ?? .null, codingPath: codingPath + [key])
    }
}

private struct UnkeyedTree: UnkeyedDecodingContainer {
    package let elements: [JSONValue]
    package let codingPath: [any CodingKey]
    package private(set) var currentIndex = 0

    package init(elements: [JSONValue], codingPath: [any CodingKey]) {
        self.elements = elements
        self.codingPath = codingPath
    }

    package var count: Int? { elements.count }
    package var isAtEnd: Bool { currentIndex >= elements.count }

    private struct IndexKey: CodingKey {
        package var stringValue: String { "Index \(intValue ?? 0)" }
        package var intValue: Int?
        package init(_ index: Int) { intValue = index }
        package init?(stringValue: String) { return nil }
        package init?(intValue: Int) { self.intValue = intValue }
    }

    /// The next element's decoder; moves on only once the element decoded.
    private func next<Type>(_ type: Type.Type) throws -> TreeDecoder {
        guard !isAtEnd else {
            throw DecodingError.valueNotFound(
                type, .init(codingPath: codingPath + [IndexKey(currentIndex)], debugDescription: "the array has only \(elements.count) elements"))
        }
        return TreeDecoder(value: elements[currentIndex], codingPath: codingPath + [IndexKey(currentIndex)])
    }

    package mutating func decodeNil() throws -> Bool {
        guard try next(Never.self).value == .null else { return false }
        currentIndex += 1
        return true
    }

    package mutating func decode<Value: Decodable>(_ type: Value.Type) throws -> Value {
        let value = try next(type).decodeValue(type)
        currentIndex += 1
        return value
    }

    package mutating func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type) throws -> KeyedDecodingContainer<NestedKey> {
        let container = try next([String: JSONValue].self).container(keyedBy: type)
        currentIndex += 1
        return container
    }

    package mutating func nestedUnkeyedContainer() throws -> any UnkeyedDecodingContainer {
        let container = try next([JSONValue].self).unkeyedContainer()
        currentIndex += 1
        return container
    }

    package mutating func superDecoder() throws -> any Decoder {
        let decoder = try next(JSONValue.self)
        currentIndex += 1
        return decoder
    }
}
