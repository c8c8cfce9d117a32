import NearbyBasics

/// JSON text in and out for ``JSONValue``, written for this job: every JSON-RPC message passes
/// through here, and Foundation's JSONDecoder/JSONEncoder (through `Codable`) cost a third of a
/// server's CPU per message. Strict RFC 8259: no trailing commas, comments, leading zeros,
/// control characters in strings or lone surrogates; nesting deeper than ``maximumDepth`` is
/// refused rather than recursed into.
package enum JSONTextCodec {
    package static let maximumDepth = 256

    package struct Failure: Error {
        package var message: String
    }

    package static func parse(_ bytes: some Collection<UInt8>) throws(Failure) -> JSONValue {
        let array = Array(bytes)
        return try array.withUnsafeBufferPointer { buffer throws(Failure) in
            var parser = Parser(bytes: buffer)
            parser.skipSpace()
            let value = try parser.value(depth: 0)
            parser.skipSpace()
            guard parser.index == buffer.count else { throw parser.failure("text after the JSON value") }
            return value
        }
    }

    private struct Parser {
        package let bytes: UnsafeBufferPointer<UInt8>
        package var index = 0

        package func failure(_ what: String) -> Failure {
            guard index < bytes.count else { return Failure(message: "\(what) at the end of the text") }
            let byte = bytes[index]
            let shown = (0x21...0x7E).contains(byte) ? "'\(Character(Unicode.Scalar(byte)))'" : "byte 0x\(String(byte, radix: 16))"
            return Failure(message: "\(what) at offset \(index) (\(shown))")
        }

        package mutating func skipSpace() {
            while index < bytes.count, bytes[index] == 0x20 || bytes[index] == 0x0A || bytes[index] == 0x0D || bytes[index] == 0x09 {
                index += 1
            }
        }

        package mutating func literal(_ word: String, _ value: JSONValue) throws(Failure) -> JSONValue {
            for expected in word.utf8 {
                guard index < bytes.count, bytes[index] == expected else { throw failure("not a JSON value") }
                index += 1
            }
            return value
        }

        package mutating func value(depth: Int) throws(Failure) -> JSONValue {
            guard index < bytes.count else { throw failure("a value is missing") }
            switch bytes[index] {
            case UInt8(ascii: "{"): return try object(depth: depth + 1)
            case UInt8(ascii: "["): return try array(depth: depth + 1)
            case UInt8(ascii: "\""): return .string(try string())
            case UInt8(ascii: "t"): return try literal("true", .bool(true))
            case UInt8(ascii: "f"): return try literal("false", .bool(false))
            case UInt8(ascii: "n"): return try literal("null", .null)
            case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return try number()
            default: throw failure("not a JSON value")
            }
        }

        package mutating func object(depth: Int) throws(Failure) -> JSONValue {
            var members: [String: JSONValue] = [:]
            var more = try open(depth: depth, close: UInt8(ascii: "}"))
            while more {
                skipSpace()
                guard index < bytes.count, bytes[index] == UInt8(ascii: "\"") else { throw failure("an object key (a string) is expected") }
                let key = try string()
                skipSpace()
                guard index < bytes.count, bytes[index] == UInt8(ascii: ":") else { throw failure("':' is expected after an object key") }
                index += 1
                skipSpace()
                members[key] = try value(depth: depth)
                more = try next(close: UInt8(ascii: "}"), in: "object")
            }
            return .object(members)
        }

        package mutating func array(depth: Int) throws(Failure) -> JSONValue {
            var elements: [JSONValue] = []
            var more = try open(depth: depth, close: UInt8(ascii: "]"))
            while more {
                skipSpace()
                elements.append(try value(depth: depth))
                more = try next(close: UInt8(ascii: "]"), in: "array")
            }
            return .array(elements)
        }

        /// Steps over an object's or array's opening bracket; false when `close` follows at once
        /// (an empty one, then read to its end).
        mutating func open(depth: Int, close: UInt8) throws(Failure) -> Bool {
            guard depth <= maximumDepth else { throw failure("nesting deeper than \(maximumDepth) levels") }
            index += 1
            skipSpace()
            guard index < bytes.count, bytes[index] == close else { return true }
            index += 1
            return false
        }

        /// After an item of an object or array (`kind`): true after a comma (another item
        /// follows), false after `close` (the end).
        package mutating func next(close: UInt8, in kind: String) throws(Failure) -> Bool {
            skipSpace()
            guard index < bytes.count else { throw failure("an unfinished \(kind)") }
            let byte = bytes[index]
            guard byte == UInt8(ascii: ",") || byte == close else {
                throw failure("',' or '\(Character(Unicode.Scalar(close)))' is expected in an \(kind)")
            }
            index += 1
            return byte != close
        }

        package mutating func number() throws(Failure) -> JSONValue {
            let start = index
            if bytes[index] == UInt8(ascii: "-") { index += 1 }
            guard index < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[index]) else { throw failure("a digit is expected") }
            if bytes[index] == UInt8(ascii: "0") {
                index += 1
                if index < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[index]) { throw failure("a number with a leading zero") }
            } else {
                skipDigits()
            }
            var integral = true
            if index < bytes.count, bytes[index] == UInt8(ascii: ".") {
                integral = false
                index += 1
                guard index < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[index]) else { throw failure("a digit is expected after '.'") }
                skipDigits()
            }
            if index < bytes.count, bytes[index] == UInt8(ascii: "e") || bytes[index] == UInt8(ascii: "E") {
                integral = false
                index += 1
                if index < bytes.count, bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-") { index += 1 }
                guard index < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[index]) else { throw failure("a digit is expected in the exponent") }
                skipDigits()
            }
            let text = String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<index]), as: UTF8.self)
            if integral, let value = Int(text) { return .integer(value) }
            guard let value = Double(text), value.isFinite else {
                index = start
                throw failure("a number out of range")
            }
            return .number(value)
        }

        package mutating func skipDigits() {
            while index < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[index]) { index += 1 }
        }

        package mutating func string() throws(Failure) -> String {
            index += 1
            let start = index
            // The common case: no escapes; the bytes are the string (checked as UTF-8).
            while index < bytes.count, bytes[index] != UInt8(ascii: "\""), bytes[index] != UInt8(ascii: "\\"), bytes[index] >= 0x20 {
                index += 1
            }
            guard index < bytes.count else { throw failure("an unfinished string") }
            if bytes[index] == UInt8(ascii: "\"") {
                let text = try utf8(start..<index)
                index += 1
                return text
            }
            var text = try utf8(start..<index)
            while true {
                guard index < bytes.count else { throw failure("an unfinished string") }
                let byte = bytes[index]
                if byte == UInt8(ascii: "\"") {
                    index += 1
                    return text
                }
                guard byte >= 0x20 else { throw failure("a control character in a string (escape it)") }
                if byte != UInt8(ascii: "\\") {
                    let runStart = index
                    while index < bytes.count, bytes[index] != UInt8(ascii: "\""), bytes[index] != UInt8(ascii: "\\"), bytes[index] >= 0x20 {
                        index += 1
                    }
                    text += try utf8(runStart..<index)
                    continue
                }
                index += 1
                guard index < bytes.count else { throw failure("an unfinished escape") }
                let escaped = bytes[index]
                index += 1
                switch escaped {
                case UInt8(ascii: "\""): text += "\""
                case UInt8(ascii: "\\"): text += "\\"
                case UInt8(ascii: "/"): text += "/"
                case UInt8(ascii: "b"): text += "\u{08}"
                case UInt8(ascii: "f"): text += "\u{0C}"
                case UInt8(ascii: "n"): text += "\n"
                case UInt8(ascii: "r"): text += "\r"
                case UInt8(ascii: "t"): text += "\t"
                case UInt8(ascii: "u"):
                    let unit = try hex4()
                    if (0xD800...0xDBFF).contains(unit) {
                        guard index + 1 < bytes.count, bytes[index] == UInt8(ascii: "\\"), bytes[index + 1] == UInt8(ascii: "u") else {
                            throw failure("a lone high surrogate in \\u escapes")
                        }
                        index += 2
                        let low = try hex4()
                        guard (0xDC00...0xDFFF).contains(low) else { throw failure("a high surrogate not followed by a low one") }
                        let scalar = 0x10000 + ((UInt32(unit) - 0xD800) << 10) + (UInt32(low) - 0xDC00)
                        guard let character = Unicode.Scalar(scalar) else { throw failure("an invalid \\u escape") }
                        text.unicodeScalars.append(character)
                    } else {
                        guard let character = Unicode.Scalar(UInt32(unit)) else { throw failure("a lone low surrogate in \\u escapes") }
                        text.unicodeScalars.append(character)
                    }
                default:
                    index -= 1
                    throw failure("an unknown escape")
                }
            }
        }

        package mutating func hex4() throws(Failure) -> UInt16 {
            guard index + 4 <= bytes.count else { throw failure("an unfinished \\u escape") }
            var value: UInt16 = 0
            for _ in 0..<4 {
                let byte = bytes[index]
                let digit: UInt8
                switch byte {
                case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
                case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
                case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = byte - UInt8(ascii: "A") + 10
                default: throw failure("a hex digit is expected in a \\u escape")
                }
                value = value << 4 | UInt16(digit)
                index += 1
            }
            return value
        }

        package func utf8(_ range: Range<Int>) throws(Failure) -> String {
            guard let text = String(validating: UnsafeBufferPointer(rebasing: bytes[range]), as: UTF8.self) else {
                var copy = self
                copy.index = range.lowerBound
                throw copy.failure("a string that is not valid UTF-8")
            }
            return text
        }
    }

    /// Compact JSON, object keys sorted (the same value always gives the same text).
    package static func write(_ value: JSONValue, to out: inout String) {
        switch value {
        case .null: out += "null"
        case .bool(let flag): out += flag ? "true" : "false"
        case .integer(let number): out += String(number)
        case .number(let number): JSONWriter.writeNumber(number, to: &out)
        case .string(let text): JSONWriter.writeString(text, to: &out)
        // The loops are written out here rather than through JSONWriter's generic ones: every
        // message passes through this, and a generic call across modules is not specialized
        // (its type metadata lookups cost a tenth of the channel's round trips).
        case .array(let elements):
            out += "["
            var first = true
            for element in elements {
                if !first { out += "," }
                first = false
                write(element, to: &out)
            }
            out += "]"
        case .object(let members):
            out += "{"
            var first = true
            for (key, member) in members.sorted(by: { $0.key < $1.key }) {
                if !first { out += "," }
                first = false
                JSONWriter.writeString(key, to: &out)
                out += ":"
                write(member, to: &out)
            }
            out += "}"
        }
    }
}
