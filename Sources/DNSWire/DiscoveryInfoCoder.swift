import NearbyBasics

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

/// How a value TXT holds directly becomes an entry: `true` a flag, `false` no entry, text and
/// numbers their text, a byte array its bytes. Other values (enums, `Data`, wrappers) encode
/// themselves through a ``FieldEncoder``.
private enum DirectValue {
    case entry(DiscoveryInfo.Value)
    case omitted

    init?(_ value: some Encodable) {
        switch value {
        case let flag as Bool: self = flag ? .entry(.flag) : .omitted
        case let text as String: self = .entry(.string(text))
        case let bytes as [UInt8]: self = .entry(.bytes(bytes))
        case let number as any FixedWidthInteger: self = .entry(.string("\(number)"))
        case let number as any TextFloat: self = .entry(.string("\(number)"))
        default: return nil
        }
    }

    var entry: DiscoveryInfo.Value? {
        if case .entry(let entry) = self { return entry }
        return nil
    }
}

/// Numbers are stored as decimal text, floating-point ones as Swift prints them.
private typealias TextFloat = BinaryFloatingPoint & LosslessStringConvertible

/// The words an error uses for the integers `N` holds.
private func integerWords<N: FixedWidthInteger>(_ type: N.Type) -> String {
    switch (N.isSigned, N.bitWidth >= 64) {
    case (true, true): "an integer"
    case (false, true): "a non-negative integer"
    default: "an integer from \(N.min) to \(N.max)"
    }
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
    mutating func encode<T: Encodable>(_ value: T, forKey key: Key) throws {
        if let direct = DirectValue(value) {
            switch direct {
            case .entry(let entry): try put(key, entry)
            case .omitted: storage.info.remove(key.stringValue)
            }
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
    mutating func encode<T: Encodable>(_ value: T) throws {
        if let direct = DirectValue(value) {
            result.value = direct.entry
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

    mutating func encode<T: Encodable>(_ value: T) throws {
        count += 1
        guard let byte = value as? UInt8, let key, case .bytes(let bytes)? = key.value else { return refuse() }
        key.value = .bytes(bytes + [byte])
    }
    mutating func encodeNil() throws { refuse() }
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
        shown = String(validating: bytes, as: UTF8.self).map { $0.quotedPrefix() } ?? "\(bytes.count) bytes that are not UTF-8"
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

    func integer<N: FixedWidthInteger>(_ type: N.Type) throws -> N {
        guard let text = value.string, let number = N(text, radix: 10) else {
            throw invalid(path, expected: integerWords(N.self), found: value)
        }
        return number
    }

    func float<N: TextFloat>(_ type: N.Type) throws -> N {
        guard let text = value.string, let number = N(text) else { throw invalid(path, expected: "a number", found: value) }
        return number
    }

    func bytes() -> [UInt8] {
        if case .bytes(let bytes) = value { return bytes }
        return []
    }

    /// The value as `T` when TXT holds `T` directly (see ``DirectValue``), or nil when `T`
    /// decodes itself from a single value or a list of bytes.
    func direct<T>(_ type: T.Type) throws -> T? {
        switch type {
        case is Bool.Type: try bool() as? T
        case is String.Type: try string() as? T
        case is [UInt8].Type: bytes() as? T
        case let integer as any FixedWidthInteger.Type: try self.integer(integer) as? T
        case let float as any TextFloat.Type: try self.float(float) as? T
        default: nil
        }
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
    func decode<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T {
        // An absent Bool is false (RFC 6763 §6.4); every other absent field is an error.
        if T.self == Bool.self, !contains(key), let absent = false as? T { return absent }
        let reader = try reader(key)
        return try reader.direct(T.self) ?? T(from: FieldDecoder(reader: reader))
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
    func decode<T: Decodable>(_ type: T.Type) throws -> T {
        try reader.direct(T.self) ?? T(from: self)
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
