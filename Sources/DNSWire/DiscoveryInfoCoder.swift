/// Encodes a flat `Encodable` struct as ``DiscoveryInfo``: each stored property becomes one
/// entry. `Bool` true becomes a boolean attribute (`key`) and false is omitted; numbers and
/// strings become text; byte arrays (`[UInt8]`, `Data`) become binary values; `nil` optionals
/// are omitted. Nested structs, arrays of other types and dictionaries are refused with an
/// error naming the field, since TXT has one level of keys.
///
/// ```swift
/// struct Agent: Codable { var version: String; var port: Int; var beta: Bool }
/// let info = try DiscoveryInfoEncoder().encode(Agent(version: "0.2.2", port: 9099, beta: true))
/// // version=0.2.2 port=9099 beta
/// ```
public struct DiscoveryInfoEncoder: Sendable {
    public init() {}

    public func encode<Value: Encodable>(_ value: Value) throws -> DiscoveryInfo {
        let storage = EncodingStorage()
        try value.encode(to: TopLevelEncoder(storage: storage))
        if let error = storage.error { throw error }
        return storage.info
    }
}

/// Decodes a flat `Decodable` struct from ``DiscoveryInfo``, the inverse of
/// ``DiscoveryInfoEncoder``. An absent `Bool` is false (RFC 6763 §6.4); a flag or the texts
/// `true`/`yes`/`1` and `false`/`no`/`0` are accepted for it. Keys match without regard to
/// ASCII case. Errors name the field and say what was found.
public struct DiscoveryInfoDecoder: Sendable {
    public init() {}

    public func decode<Value: Decodable>(_ type: Value.Type, from info: DiscoveryInfo) throws -> Value {
        try Value(from: TopLevelDecoder(info: info))
    }
}

// MARK: - Encoding

private final class EncodingStorage {
    var info = DiscoveryInfo()
    var error: DiscoveryInfoError?
}

private func fieldName(_ path: [any CodingKey]) -> String {
    path.map(\.stringValue).joined(separator: ".")
}

private func unsupported(_ path: [any CodingKey], _ what: String) -> DiscoveryInfoError {
    DiscoveryInfoError(
        .unsupportedField, key: fieldName(path),
        "field \"\(fieldName(path))\": \(what) cannot be stored in TXT discovery info, which has "
            + "one level of key=value entries; use a string, number, Bool or bytes")
}

private struct TopLevelEncoder: Encoder {
    let storage: EncodingStorage
    var codingPath: [any CodingKey] { [] }
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
        KeyedEncodingContainer(KeyedEncoder<Key>(storage: storage))
    }

    func unkeyedContainer() -> any UnkeyedEncodingContainer {
        storage.error = storage.error ?? unsupported([], "a top-level array")
        return ByteCollector(storage: storage, path: [], key: nil)
    }

    func singleValueContainer() -> any SingleValueEncodingContainer {
        storage.error = storage.error ?? unsupported([], "a top-level single value")
        return FieldEncoder(storage: storage, codingPath: [])
    }
}

private struct KeyedEncoder<Key: CodingKey>: KeyedEncodingContainerProtocol {
    let storage: EncodingStorage
    var codingPath: [any CodingKey] { [] }

    private func put(_ key: Key, _ value: DiscoveryInfo.Value) throws {
        try storage.info.set(key.stringValue, value: value)
    }

    mutating func encodeNil(forKey key: Key) throws {}
    mutating func encode(_ value: Bool, forKey key: Key) throws {
        if value { try put(key, .flag) } else { storage.info.remove(key.stringValue) }
    }
    mutating func encode(_ value: String, forKey key: Key) throws { try put(key, .string(value)) }
    mutating func encode(_ value: Double, forKey key: Key) throws { try put(key, .string("\(value)")) }
    mutating func encode(_ value: Float, forKey key: Key) throws { try put(key, .string("\(value)")) }
    mutating func encode(_ value: Int, forKey key: Key) throws { try put(key, .string("\(value)")) }
    mutating func encode(_ value: Int8, forKey key: Key) throws { try put(key, .string("\(value)")) }
    mutating func encode(_ value: Int16, forKey key: Key) throws { try put(key, .string("\(value)")) }
    mutating func encode(_ value: Int32, forKey key: Key) throws { try put(key, .string("\(value)")) }
    mutating func encode(_ value: Int64, forKey key: Key) throws { try put(key, .string("\(value)")) }
    mutating func encode(_ value: UInt, forKey key: Key) throws { try put(key, .string("\(value)")) }
    mutating func encode(_ value: UInt8, forKey key: Key) throws { try put(key, .string("\(value)")) }
    mutating func encode(_ value: UInt16, forKey key: Key) throws { try put(key, .string("\(value)")) }
    mutating func encode(_ value: UInt32, forKey key: Key) throws { try put(key, .string("\(value)")) }
    mutating func encode(_ value: UInt64, forKey key: Key) throws { try put(key, .string("\(value)")) }

    mutating func encode<T: Encodable>(_ value: T, forKey key: Key) throws {
        if let bytes = value as? [UInt8] {
            try put(key, .bytes(bytes))
            return
        }
        // Other types (enums with raw values, Data, URL, wrappers) encode through one field.
        let field = FieldEncoder(storage: storage, codingPath: [key])
        try value.encode(to: field)
        if let error = storage.error { throw error }
        switch field.result.value {
        case .some(let fieldValue): try put(key, fieldValue)
        case .none: storage.info.remove(key.stringValue)
        }
    }

    mutating func nestedContainer<NestedKey: CodingKey>(
        keyedBy keyType: NestedKey.Type, forKey key: Key
    ) -> KeyedEncodingContainer<NestedKey> {
        storage.error = storage.error ?? unsupported([key], "a nested structure")
        return KeyedEncodingContainer(DiscardingKeyedEncoder<NestedKey>())
    }

    mutating func nestedUnkeyedContainer(forKey key: Key) -> any UnkeyedEncodingContainer {
        storage.error = storage.error ?? unsupported([key], "a list")
        return ByteCollector(storage: storage, path: [key], key: nil)
    }

    mutating func superEncoder() -> any Encoder { FieldEncoder(storage: storage, codingPath: []) }
    mutating func superEncoder(forKey key: Key) -> any Encoder {
        FieldEncoder(storage: storage, codingPath: [key])
    }
}

/// Holds what one field's encoding produced.
private final class FieldResult {
    var value: DiscoveryInfo.Value?
    var bytes: [UInt8]?
}

/// Encodes the value of one field: a single value, or an unkeyed list of bytes (`Data`).
private struct FieldEncoder: Encoder, SingleValueEncodingContainer {
    let storage: EncodingStorage
    let codingPath: [any CodingKey]
    let result = FieldResult()
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    init(storage: EncodingStorage, codingPath: [any CodingKey]) {
        self.storage = storage
        self.codingPath = codingPath
    }

    func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
        storage.error = storage.error ?? unsupported(codingPath, "a nested structure")
        return KeyedEncodingContainer(DiscardingKeyedEncoder<Key>())
    }

    func unkeyedContainer() -> any UnkeyedEncodingContainer {
        result.value = .bytes([])
        return ByteCollector(storage: storage, path: codingPath, key: result)
    }

    func singleValueContainer() -> any SingleValueEncodingContainer { self }

    mutating func encodeNil() throws { result.value = nil }
    mutating func encode(_ value: Bool) throws { result.value = value ? .flag : nil }
    mutating func encode(_ value: String) throws { result.value = .string(value) }
    mutating func encode(_ value: Double) throws { result.value = .string("\(value)") }
    mutating func encode(_ value: Float) throws { result.value = .string("\(value)") }
    mutating func encode(_ value: Int) throws { result.value = .string("\(value)") }
    mutating func encode(_ value: Int8) throws { result.value = .string("\(value)") }
    mutating func encode(_ value: Int16) throws { result.value = .string("\(value)") }
    mutating func encode(_ value: Int32) throws { result.value = .string("\(value)") }
    mutating func encode(_ value: Int64) throws { result.value = .string("\(value)") }
    mutating func encode(_ value: UInt) throws { result.value = .string("\(value)") }
    mutating func encode(_ value: UInt8) throws { result.value = .string("\(value)") }
    mutating func encode(_ value: UInt16) throws { result.value = .string("\(value)") }
    mutating func encode(_ value: UInt32) throws { result.value = .string("\(value)") }
    mutating func encode(_ value: UInt64) throws { result.value = .string("\(value)") }
    mutating func encode<T: Encodable>(_ value: T) throws {
        if let bytes = value as? [UInt8] {
            result.value = .bytes(bytes)
            return
        }
        let inner = FieldEncoder(storage: storage, codingPath: codingPath)
        try value.encode(to: inner)
        result.value = inner.result.value
    }
}

/// Collects the elements of an unkeyed container; only bytes (as `Data` encodes) are allowed.
private struct ByteCollector: UnkeyedEncodingContainer {
    let storage: EncodingStorage
    let path: [any CodingKey]
    let key: FieldResult?
    var codingPath: [any CodingKey] { path }
    var count = 0

    private mutating func refuse() {
        storage.error = storage.error ?? unsupported(path, "a list of values other than bytes")
    }

    mutating func encode(_ value: UInt8) throws {
        count += 1
        guard let key, case .bytes(let bytes)? = key.value else { return refuse() }
        key.value = .bytes(bytes + [value])
    }

    mutating func encodeNil() throws { refuse() }
    mutating func encode(_ value: Bool) throws { refuse() }
    mutating func encode(_ value: String) throws { refuse() }
    mutating func encode(_ value: Double) throws { refuse() }
    mutating func encode(_ value: Float) throws { refuse() }
    mutating func encode(_ value: Int) throws { refuse() }
    mutating func encode(_ value: Int8) throws { refuse() }
    mutating func encode(_ value: Int16) throws { refuse() }
    mutating func encode(_ value: Int32) throws { refuse() }
    mutating func encode(_ value: Int64) throws { refuse() }
    mutating func encode(_ value: UInt) throws { refuse() }
    mutating func encode(_ value: UInt16) throws { refuse() }
    mutating func encode(_ value: UInt32) throws { refuse() }
    mutating func encode(_ value: UInt64) throws { refuse() }
    mutating func encode<T: Encodable>(_ value: T) throws {
        if let byte = value as? UInt8 { return try encode(byte) }
        refuse()
    }
    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type)
        -> KeyedEncodingContainer<NestedKey>
    {
        refuse()
        return KeyedEncodingContainer(DiscardingKeyedEncoder<NestedKey>())
    }
    mutating func nestedUnkeyedContainer() -> any UnkeyedEncodingContainer {
        refuse()
        return self
    }
    mutating func superEncoder() -> any Encoder {
        refuse()
        return FieldEncoder(storage: storage, codingPath: path)
    }
}

/// Swallows what is written under a field that has already been refused.
private struct DiscardingKeyedEncoder<Key: CodingKey>: KeyedEncodingContainerProtocol {
    var codingPath: [any CodingKey] { [] }
    mutating func encodeNil(forKey key: Key) throws {}
    mutating func encode<T: Encodable>(_ value: T, forKey key: Key) throws {}
    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type, forKey key: Key)
        -> KeyedEncodingContainer<NestedKey>
    { KeyedEncodingContainer(DiscardingKeyedEncoder<NestedKey>()) }
    mutating func nestedUnkeyedContainer(forKey key: Key) -> any UnkeyedEncodingContainer {
        ByteCollector(storage: EncodingStorage(), path: [], key: nil)
    }
    mutating func superEncoder() -> any Encoder { FieldEncoder(storage: EncodingStorage(), codingPath: []) }
    mutating func superEncoder(forKey key: Key) -> any Encoder {
        FieldEncoder(storage: EncodingStorage(), codingPath: [])
    }
}

// MARK: - Decoding

private struct TopLevelDecoder: Decoder {
    let info: DiscoveryInfo
    var codingPath: [any CodingKey] { [] }
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> {
        KeyedDecodingContainer(KeyedDecoder<Key>(info: info))
    }
    func unkeyedContainer() throws -> any UnkeyedDecodingContainer {
        throw unsupported([], "a top-level array")
    }
    func singleValueContainer() throws -> any SingleValueDecodingContainer {
        throw unsupported([], "a top-level single value")
    }
}

private func invalid(_ path: [any CodingKey], expected: String, found: DiscoveryInfo.Value)
    -> DiscoveryInfoError
{
    let shown: String
    switch found {
    case .flag: shown = "a boolean attribute (no value)"
    case .bytes(let bytes):
        shown = String(validating: bytes, as: UTF8.self).map { "\"\($0)\"" } ?? "\(bytes.count) bytes that are not UTF-8"
    }
    return DiscoveryInfoError(
        .invalidFieldValue, key: fieldName(path),
        "field \"\(fieldName(path))\": expected \(expected), found \(shown)")
}

/// Reads scalars out of one entry's value.
private struct ValueReader {
    let value: DiscoveryInfo.Value
    let path: [any CodingKey]

    func bool() throws -> Bool {
        switch value {
        case .flag: return true
        case .bytes(let bytes):
            switch String(decoding: bytes, as: UTF8.self).lowercased() {
            case "true", "yes", "1", "": return true
            case "false", "no", "0": return false
            default: throw invalid(path, expected: "a Bool (true/false)", found: value)
            }
        }
    }

    func string() throws -> String {
        guard let text = value.string else { throw invalid(path, expected: "UTF-8 text", found: value) }
        return text
    }

    func number<N: LosslessStringConvertible>(_ type: N.Type, _ label: String) throws -> N {
        guard let text = value.string, let number = N(text) else {
            throw invalid(path, expected: label, found: value)
        }
        return number
    }

    func bytes() -> [UInt8] {
        if case .bytes(let bytes) = value { return bytes }
        return []
    }
}

private struct KeyedDecoder<Key: CodingKey>: KeyedDecodingContainerProtocol {
    let info: DiscoveryInfo
    var codingPath: [any CodingKey] { [] }
    var allKeys: [Key] { info.entries.compactMap { Key(stringValue: $0.key) } }

    func contains(_ key: Key) -> Bool { info.contains(key.stringValue) }

    private func reader(_ key: Key) throws -> ValueReader {
        guard let value = info[key.stringValue] else {
            throw DiscoveryInfoError(
                .missingField, key: key.stringValue,
                "field \"\(key.stringValue)\" is missing from the TXT discovery info")
        }
        return ValueReader(value: value, path: [key])
    }

    func decodeNil(forKey key: Key) throws -> Bool { !info.contains(key.stringValue) }
    func decode(_ type: Bool.Type, forKey key: Key) throws -> Bool {
        guard info.contains(key.stringValue) else { return false }
        return try reader(key).bool()
    }
    func decode(_ type: String.Type, forKey key: Key) throws -> String { try reader(key).string() }
    func decode(_ type: Double.Type, forKey key: Key) throws -> Double { try reader(key).number(Double.self, "a number") }
    func decode(_ type: Float.Type, forKey key: Key) throws -> Float { try reader(key).number(Float.self, "a number") }
    func decode(_ type: Int.Type, forKey key: Key) throws -> Int { try reader(key).number(Int.self, "an integer") }
    func decode(_ type: Int8.Type, forKey key: Key) throws -> Int8 { try reader(key).number(Int8.self, "an integer from -128 to 127") }
    func decode(_ type: Int16.Type, forKey key: Key) throws -> Int16 { try reader(key).number(Int16.self, "a 16-bit integer") }
    func decode(_ type: Int32.Type, forKey key: Key) throws -> Int32 { try reader(key).number(Int32.self, "a 32-bit integer") }
    func decode(_ type: Int64.Type, forKey key: Key) throws -> Int64 { try reader(key).number(Int64.self, "a 64-bit integer") }
    func decode(_ type: UInt.Type, forKey key: Key) throws -> UInt { try reader(key).number(UInt.self, "a non-negative integer") }
    func decode(_ type: UInt8.Type, forKey key: Key) throws -> UInt8 { try reader(key).number(UInt8.self, "an integer from 0 to 255") }
    func decode(_ type: UInt16.Type, forKey key: Key) throws -> UInt16 { try reader(key).number(UInt16.self, "an integer from 0 to 65535") }
    func decode(_ type: UInt32.Type, forKey key: Key) throws -> UInt32 { try reader(key).number(UInt32.self, "a 32-bit unsigned integer") }
    func decode(_ type: UInt64.Type, forKey key: Key) throws -> UInt64 { try reader(key).number(UInt64.self, "a 64-bit unsigned integer") }

    func decode<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T {
        if T.self == [UInt8].self, let bytes = try reader(key).bytes() as? T { return bytes }
        if T.self == Bool.self, let flag = try decode(Bool.self, forKey: key) as? T { return flag }
        return try T(from: FieldDecoder(reader: try reader(key)))
    }

    func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type, forKey key: Key) throws
        -> KeyedDecodingContainer<NestedKey>
    { throw unsupported([key], "a nested structure") }
    func nestedUnkeyedContainer(forKey key: Key) throws -> any UnkeyedDecodingContainer {
        ByteReader(bytes: try reader(key).bytes(), path: [key])
    }
    func superDecoder() throws -> any Decoder { TopLevelDecoder(info: info) }
    func superDecoder(forKey key: Key) throws -> any Decoder { FieldDecoder(reader: try reader(key)) }
}

/// Decodes one field's value: a single value, or the bytes of `Data`.
private struct FieldDecoder: Decoder, SingleValueDecodingContainer {
    let reader: ValueReader
    var codingPath: [any CodingKey] { reader.path }
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> {
        throw unsupported(reader.path, "a nested structure")
    }
    func unkeyedContainer() throws -> any UnkeyedDecodingContainer {
        ByteReader(bytes: reader.bytes(), path: reader.path)
    }
    func singleValueContainer() throws -> any SingleValueDecodingContainer { self }

    func decodeNil() -> Bool { false }
    func decode(_ type: Bool.Type) throws -> Bool { try reader.bool() }
    func decode(_ type: String.Type) throws -> String { try reader.string() }
    func decode(_ type: Double.Type) throws -> Double { try reader.number(Double.self, "a number") }
    func decode(_ type: Float.Type) throws -> Float { try reader.number(Float.self, "a number") }
    func decode(_ type: Int.Type) throws -> Int { try reader.number(Int.self, "an integer") }
    func decode(_ type: Int8.Type) throws -> Int8 { try reader.number(Int8.self, "an integer from -128 to 127") }
    func decode(_ type: Int16.Type) throws -> Int16 { try reader.number(Int16.self, "a 16-bit integer") }
    func decode(_ type: Int32.Type) throws -> Int32 { try reader.number(Int32.self, "a 32-bit integer") }
    func decode(_ type: Int64.Type) throws -> Int64 { try reader.number(Int64.self, "a 64-bit integer") }
    func decode(_ type: UInt.Type) throws -> UInt { try reader.number(UInt.self, "a non-negative integer") }
    func decode(_ type: UInt8.Type) throws -> UInt8 { try reader.number(UInt8.self, "an integer from 0 to 255") }
    func decode(_ type: UInt16.Type) throws -> UInt16 { try reader.number(UInt16.self, "an integer from 0 to 65535") }
    func decode(_ type: UInt32.Type) throws -> UInt32 { try reader.number(UInt32.self, "a 32-bit unsigned integer") }
    func decode(_ type: UInt64.Type) throws -> UInt64 { try reader.number(UInt64.self, "a 64-bit unsigned integer") }
    func decode<T: Decodable>(_ type: T.Type) throws -> T {
        if T.self == [UInt8].self, let bytes = reader.bytes() as? T { return bytes }
        return try T(from: self)
    }
}

/// Hands out the bytes of a binary value one by one, as `Data.init(from:)` reads them.
private struct ByteReader: UnkeyedDecodingContainer {
    let bytes: [UInt8]
    let path: [any CodingKey]
    var codingPath: [any CodingKey] { path }
    var count: Int? { bytes.count }
    var currentIndex = 0
    var isAtEnd: Bool { currentIndex >= bytes.count }

    init(bytes: [UInt8], path: [any CodingKey]) {
        self.bytes = bytes
        self.path = path
    }

    private func refuse() -> DiscoveryInfoError { unsupported(path, "a list of values other than bytes") }

    mutating func decodeNil() throws -> Bool { false }
    mutating func decode(_ type: UInt8.Type) throws -> UInt8 {
        guard currentIndex < bytes.count else {
            throw DiscoveryInfoError(
                .invalidFieldValue, key: fieldName(path),
                "field \"\(fieldName(path))\": read past the end of its bytes")
        }
        defer { currentIndex += 1 }
        return bytes[currentIndex]
    }
    mutating func decode<T: Decodable>(_ type: T.Type) throws -> T {
        if T.self == UInt8.self, let byte = try decode(UInt8.self) as? T { return byte }
        throw refuse()
    }
    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type) throws
        -> KeyedDecodingContainer<NestedKey>
    { throw refuse() }
    mutating func nestedUnkeyedContainer() throws -> any UnkeyedDecodingContainer { throw refuse() }
    mutating func superDecoder() throws -> any Decoder { throw refuse() }
}
