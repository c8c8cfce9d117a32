import DNSWire
import Foundation
import Testing

@Suite("TXT discovery info")
struct DiscoveryInfoTests {
    @Test("an entry of 255 bytes is accepted")
    func entry255() throws {
        var info = DiscoveryInfo()
        // "version" (7) + "=" (1) + 247 bytes = 255.
        try info.set("version", to: String(repeating: "v", count: 247))
        #expect(info.entries[0].encodedLength == 255)
        #expect(info.rdata.count == 256)
        #expect(info.rdata[0] == 255)
    }

    @Test("an entry of 256 bytes is refused, naming the key, its size and the 255-byte limit")
    func entry256() {
        var info = DiscoveryInfo()
        let error = #expect(throws: DiscoveryInfoError.self) {
            try info.set("version", to: String(repeating: "v", count: 248))
        }
        #expect(error?.kind == .entryTooLong)
        #expect(error?.key == "version")
        #expect(error?.description.contains("\"version=vvv") == true)
        #expect(error?.description.contains("256 bytes") == true)
        #expect(error?.description.contains("at most 255") == true)
        #expect(info.isEmpty)
    }

    @Test("a long entry is quoted by its first 40 characters, once, with its size and the limit")
    func longEntryQuotedShort() {
        var info = DiscoveryInfo()
        let value = String(repeating: "x", count: 297)
        let error = #expect(throws: DiscoveryInfoError.self) { try info.set("version", to: value) }
        #expect(
            error?.description
                == "TXT entry \"version=\(String(repeating: "x", count: 32))…\" is 305 bytes; an entry (key, \"=\" and value) holds at most 255")
        let long = #expect(throws: DiscoveryInfoError.self) { try DiscoveryInfo(["k=" + value]) }
        #expect(long?.description.contains(value) == false)
        let key = String(repeating: "k", count: 300)
        let flag = #expect(throws: DiscoveryInfoError.self) { try info.setFlag(key) }
        #expect(flag?.description == "TXT entry \"\(String(repeating: "k", count: 40))…\" is 300 bytes; an entry (key, \"=\" and value) holds at most 255")
        let repeated = #expect(throws: DiscoveryInfoError.self) { try DiscoveryInfo(["a=1", "A=" + String(repeating: "y", count: 100)]) }
        #expect(repeated?.description == "TXT entry \"A=\(String(repeating: "y", count: 38))…\" repeats the key of \"a=1\" (keys are case-insensitive, and a record holds each key once); keep one of them")
    }

    @Test("a boolean attribute of 255 bytes is accepted, 256 refused")
    func flagLimits() throws {
        var info = DiscoveryInfo()
        try info.setFlag(String(repeating: "k", count: 255))
        #expect(throws: DiscoveryInfoError.self) { try info.setFlag(String(repeating: "k", count: 256)) }
    }

    @Test("flags, empty values and values are distinct (RFC 6763 §6.4)")
    func valueKinds() throws {
        let info = try DiscoveryInfo(["beta", "empty=", "version=0.2.2", "eq=a=b"])
        #expect(info["beta"] == .flag)
        #expect(info["empty"] == .bytes([]))
        #expect(info.string(for: "version") == "0.2.2")
        #expect(info.string(for: "eq") == "a=b")
        #expect(info["missing"] == nil)
        #expect(info.wireStrings.map { String(decoding: $0, as: UTF8.self) } == ["beta", "empty=", "version=0.2.2", "eq=a=b"])
        #expect(info.description == "beta empty= version=0.2.2 eq=a=b")
    }

    @Test("keys are case-insensitive; set replaces in place, remove removes")
    func keys() throws {
        var info = try DiscoveryInfo(["a=1", "Version=1", "c=3"])
        #expect(info.string(for: "VERSION") == "1")
        try info.set("version", to: "2")
        #expect(info.entries.map(\.key) == ["a", "version", "c"])
        #expect(info.string(for: "Version") == "2")
        #expect(info.remove("VERSION") == .string("2"))
        #expect(!info.contains("version"))
        #expect(info.remove("version") == nil)
    }

    @Test("binary values")
    func binary() throws {
        var info = DiscoveryInfo()
        try info.set("key", bytes: [0x00, 0xFF, 0x3D])
        #expect(info["key"] == .bytes([0x00, 0xFF, 0x3D]))
        #expect(info.string(for: "key") == nil)
        #expect(DiscoveryInfo(rdata: info.rdata) == info)
    }

    @Test("invalid keys are refused with the rule", arguments: ["", "a=b", "tab\tkey", "ключ", "del\u{7F}"])
    func invalidKeys(key: String) {
        var info = DiscoveryInfo()
        let error = #expect(throws: DiscoveryInfoError.self) { try info.set(key, to: "x") }
        #expect(error?.kind == (key.isEmpty ? .emptyKey : .invalidKey))
    }

    @Test("parsing wire TXT follows RFC 6763 §6")
    func wireParsing() {
        let strings: [[UInt8]] = [
            [],                                  // empty string: ignored
            Array("=novalue".utf8),              // starts with '=': ignored
            Array("Path=/a".utf8),
            Array("path=/b".utf8),               // repeat (any case): first wins
            Array("flag".utf8),
            Array("empty=".utf8),
            [0x01, 0x3D, 0x78],                  // key with a control byte: ignored
            Array("bin=".utf8) + [0xFF, 0x00],
        ]
        let info = DiscoveryInfo(wireStrings: strings)
        #expect(info.entries.map(\.key) == ["Path", "flag", "empty", "bin"])
        #expect(info.string(for: "path") == "/a")
        #expect(info["flag"] == .flag)
        #expect(info["empty"] == .bytes([]))
        #expect(info["bin"] == .bytes([0xFF, 0x00]))
    }

    @Test("an empty record is a single zero byte, both ways")
    func emptyRecord() {
        #expect(DiscoveryInfo().rdata == [0])
        #expect(DiscoveryInfo().encodedLength == 1)
        #expect(DiscoveryInfo(rdata: [0]).isEmpty)
        #expect(DiscoveryInfo(rdata: []).isEmpty)
    }

    @Test("RDATA with a string running past the end keeps the complete strings")
    func truncatedRDATA() {
        let info = DiscoveryInfo(rdata: [3, 0x61, 0x3D, 0x31, 9, 0x62])
        #expect(info.entries.map(\.key) == ["a"])
    }

    @Test("warnings for long keys and records over 1300 bytes, without refusing them")
    func warnings() throws {
        var info = DiscoveryInfo()
        try info.set("protocolversion", to: "1")
        #expect(info.warnings.count == 1)
        #expect(info.warnings[0].contains("\"protocolversion\""))
        for index in 0..<6 { try info.set("k\(index)", to: String(repeating: "x", count: 250)) }
        #expect(info.encodedLength > 1300)
        #expect(info.warnings.count == 2)
        #expect(info.warnings[1].contains("1300"))
    }

    @Test("the whole record stays within 65535 bytes")
    func recordLimit() throws {
        var info = DiscoveryInfo()
        var index = 0
        while info.encodedLength + 256 <= 65535 {
            try info.set("k\(index)", to: String(repeating: "x", count: 255 - "k\(index)=".utf8.count))
            index += 1
        }
        let error = #expect(throws: DiscoveryInfoError.self) {
            try info.set("last", to: String(repeating: "x", count: 250))
        }
        #expect(error?.kind == .recordTooLong)
        #expect(error?.description.contains("65535") == true)
    }
}

@Suite("Codable discovery info")
struct DiscoveryInfoCoderTests {
    enum Mode: String, Codable { case bridge, client }

    struct Agent: Codable, Equatable {
        var version: String
        var port: Int
        var load: Double
        var beta: Bool
        var stable: Bool
        var mode: Mode
        var nickname: String?
        var token: [UInt8]
        var blob: Data
        var small: UInt8
    }

    let agent = Agent(
        version: "0.2.2", port: 9099, load: 0.25, beta: true, stable: false, mode: .bridge, nickname: nil,
        token: [0, 1, 255], blob: Data([0xDE, 0xAD]), small: 7)

    @Test("a struct round-trips through TXT entries")
    func roundTrip() throws {
        let info = try DiscoveryInfoEncoder().encode(agent)
        #expect(info.string(for: "version") == "0.2.2")
        #expect(info.string(for: "port") == "9099")
        #expect(info.string(for: "load") == "0.25")
        #expect(info["beta"] == .flag)
        #expect(!info.contains("stable"))      // false: omitted
        #expect(!info.contains("nickname"))    // nil: omitted
        #expect(info.string(for: "mode") == "bridge")
        #expect(info["token"] == .bytes([0, 1, 255]))
        #expect(info["blob"] == .bytes([0xDE, 0xAD]))
        let decoded = try DiscoveryInfoDecoder().decode(Agent.self, from: info)
        #expect(decoded == agent)
        // And through the wire.
        let wire = DiscoveryInfo(rdata: info.rdata)
        #expect(try DiscoveryInfoDecoder().decode(Agent.self, from: wire) == agent)
    }

    @Test("optionals present are written; booleans accept text forms")
    func optionalsAndBooleans() throws {
        var withNickname = agent
        withNickname.nickname = "box"
        let info = try DiscoveryInfoEncoder().encode(withNickname)
        #expect(info.string(for: "nickname") == "box")
        var text = info
        try text.set("beta", to: "no")
        try text.set("stable", to: "TRUE")
        let decoded = try DiscoveryInfoDecoder().decode(Agent.self, from: text)
        #expect(decoded.beta == false && decoded.stable == true)
    }

    @Test("errors name the field")
    func fieldErrors() throws {
        var info = try DiscoveryInfoEncoder().encode(agent)
        try info.set("port", to: "ninety")
        let bad = #expect(throws: DiscoveryInfoError.self) { try DiscoveryInfoDecoder().decode(Agent.self, from: info) }
        #expect(bad?.kind == .invalidFieldValue)
        #expect(bad?.description.contains("\"port\"") == true)
        #expect(bad?.description.contains("\"ninety\"") == true)

        try info.set("small", to: "300")
        try info.set("port", to: "1")
        let range = #expect(throws: DiscoveryInfoError.self) { try DiscoveryInfoDecoder().decode(Agent.self, from: info) }
        #expect(range?.description.contains("\"small\"") == true)
        #expect(range?.description.contains("0 to 255") == true)

        info.remove("version")
        let missing = #expect(throws: DiscoveryInfoError.self) { try DiscoveryInfoDecoder().decode(Agent.self, from: info) }
        #expect(missing?.kind == .missingField)
        #expect(missing?.key == "version")
    }

    struct Nested: Codable {
        struct Inner: Codable { var a: Int }
        var name: String
        var inner: Inner
    }

    struct WithList: Codable { var tags: [String] }

    @Test("nested values and lists are refused, naming the field")
    func unsupported() {
        let nested = #expect(throws: DiscoveryInfoError.self) {
            try DiscoveryInfoEncoder().encode(Nested(name: "x", inner: .init(a: 1)))
        }
        #expect(nested?.kind == .unsupportedField)
        #expect(nested?.key == "inner")
        let list = #expect(throws: DiscoveryInfoError.self) { try DiscoveryInfoEncoder().encode(WithList(tags: ["a"])) }
        #expect(list?.key == "tags")
    }

    struct TooLong: Codable { var description: String }

    @Test("an oversized field is refused with the entry-size error")
    func oversized() {
        let error = #expect(throws: DiscoveryInfoError.self) {
            try DiscoveryInfoEncoder().encode(TooLong(description: String(repeating: "x", count: 300)))
        }
        #expect(error?.kind == .entryTooLong)
        #expect(error?.key == "description")
    }

    enum Level: Int, Codable { case low = 1, high = 9 }

    struct Numbers: Codable, Equatable {
        var int8: Int8, int16: Int16, int32: Int32, int64: Int64
        var uint: UInt, uint16: UInt16, uint32: UInt32, uint64: UInt64
        var float: Float, level: Level, levels: Level?
    }

    @Test("every number width and a raw-value enum round-trip as decimal text; ranges are checked")
    func numbers() throws {
        let numbers = Numbers(
            int8: -128, int16: -300, int32: 70_000, int64: -5_000_000_000, uint: 1, uint16: 65535, uint32: 4_000_000_000,
            uint64: .max, float: 1.5, level: .high, levels: nil)
        let info = try DiscoveryInfoEncoder().encode(numbers)
        #expect(info.string(for: "int8") == "-128")
        #expect(info.string(for: "uint64") == "18446744073709551615")
        #expect(info.string(for: "float") == "1.5")
        #expect(info.string(for: "level") == "9")
        #expect(!info.contains("levels"))
        #expect(try DiscoveryInfoDecoder().decode(Numbers.self, from: info) == numbers)

        var wrong = info
        try wrong.set("uint16", to: "65536")
        let range = #expect(throws: DiscoveryInfoError.self) { try DiscoveryInfoDecoder().decode(Numbers.self, from: wrong) }
        #expect(range?.description == "field \"uint16\": expected an integer from 0 to 65535, found \"65536\"")
        try wrong.set("uint16", to: "1")
        try wrong.set("level", to: "4")
        // A raw value no case has is the enum's own error, not a TXT one.
        #expect(throws: DecodingError.self) { try DiscoveryInfoDecoder().decode(Numbers.self, from: wrong) }
    }
}
