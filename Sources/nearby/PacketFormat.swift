import DNSWire
import NearbyBasics

/// TXT discovery info as the JSON object the CLI prints: `"k":"v"`, `"k":""` for `k=`,
/// `"k":true` for a boolean attribute, `{"base64":"…"}` for a value that is not UTF-8.
func txtJSON(_ info: DiscoveryInfo) -> OutputValue {
    .object(info.entries.map { entry in
        switch entry.value {
        case .flag: return (entry.key, .bool(true))
        case .bytes(let bytes):
            if let text = String(validating: bytes, as: UTF8.self) { return (entry.key, .string(text)) }
            return (entry.key, .object([("base64", .string(Base64.encode(bytes)))]))
        }
    })
}

enum Base64 {
    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)

    static func encode(_ bytes: [UInt8]) -> String {
        var out: [UInt8] = []
        var index = 0
        while index < bytes.count {
            let chunk = Array(bytes[index..<min(index + 3, bytes.count)])
            let value = chunk.enumerated().reduce(0) { $0 | Int($1.element) << (16 - 8 * $1.offset) }
            for position in 0..<4 {
                out.append(position <= chunk.count ? alphabet[(value >> (18 - 6 * position)) & 63] : UInt8(ascii: "="))
            }
            index += 3
        }
        return String(decoding: out, as: UTF8.self)
    }
}


/// A TXT string in double quotes: `"` and `\` escaped, bytes that are not printable (or not
/// UTF-8) as `\DDD`.
func quoted(_ bytes: [UInt8]) -> String {
    var out = "\""
    func escaped(_ value: UInt32) -> String {
        let digits = String(value)
        return "\\" + String(repeating: "0", count: max(0, 3 - digits.count)) + digits
    }
    if let text = String(validating: bytes, as: UTF8.self) {
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"", "\\": out += "\\" + String(scalar)
            case _ where scalar.value < 0x20 || scalar.value == 0x7F: out += escaped(scalar.value)
            default: out.unicodeScalars.append(scalar)
            }
        }
    } else {
        for byte in bytes {
            switch byte {
            case UInt8(ascii: "\""), UInt8(ascii: "\\"): out += "\\" + String(UnicodeScalar(byte))
            case 0x20..<0x7F: out += String(UnicodeScalar(byte))
            default: out += escaped(UInt32(byte))
            }
        }
    }
    return out + "\""
}

/// The human-readable form of a packet.
enum PacketText {
    static func packet(_ decoded: DecodedMessage, datagram: CapturedDatagram, number: Int) -> String {
        let message = decoded.message
        var kind: String
        if message.header.isResponse {
            let goodbye = !message.answers.isEmpty && message.answers.allSatisfy(\.isGoodbye)
            kind = goodbye ? "goodbye" : "response"
        } else if message.isProbe {
            kind = "probe"
        } else if message.answers.isEmpty {
            kind = "query"
        } else {
            kind = "query with \(message.answers.count) known answer\(message.answers.count == 1 ? "" : "s")"
        }
        if message.header.isAuthoritative { kind += ", authoritative" }
        if message.header.isTruncated { kind += ", truncated (more known answers follow)" }
        if message.header.opcode != 0 { kind += ", opcode \(message.header.opcode)" }
        if message.header.responseCode != 0 { kind += ", rcode \(message.header.responseCode)" }
        var head = "packet \(number)"
        if !datagram.source.isEmpty {
            let milliseconds = Int((datagram.time * 1000).rounded())
            let time = "\(milliseconds / 1000).\(String(1000 + milliseconds % 1000).dropFirst())"
            head += "  t=\(time) s  \(datagram.source) → \(datagram.destination)"
        }
        head += "  \(kind)  \(datagram.payload.count) bytes"
        if message.header.id != 0 { head += "  id \(message.header.id)" }
        var rows: [[String]] = []
        for question in message.questions {
            rows.append(["question", question.name.description, question.type.description, question.unicastResponse ? "QU" : "QM", ""])
        }
        let sections: [(String, [ResourceRecord])] = [
            ("answer", message.answers), ("authority", message.authorities), ("additional", message.additionals),
        ]
        for (section, records) in sections {
            for record in records {
                rows.append([
                    section, record.name.description, record.type.description,
                    "\(record.ttl)" + (record.cacheFlush ? " flush" : ""), data(record.data),
                ])
            }
        }
        for skipped in decoded.skippedRecords {
            rows.append(["skipped", skipped.name.description, skipped.type.description, "", skipped.error.description])
        }
        return ([head] + alignedLines(rows)).joined(separator: "\n") + "\n"
    }

    static func data(_ data: RecordData) -> String {
        switch data {
        case .a(let address): address.description
        case .aaaa(let address): address.description
        case .ptr(let name), .cname(let name), .ns(let name): name.description
        case .srv(let srv): "priority \(srv.priority) weight \(srv.weight) port \(srv.port) \(srv.target)"
        case .soa(let soa):
            "\(soa.primary) \(soa.mailbox) serial \(soa.serial) refresh \(soa.refresh) retry \(soa.retry) expire \(soa.expire) minimum \(soa.minimum)"
        case .txt(let txt):
            txt.isEmpty ? "(empty)" : txt.strings.map(quoted).joined(separator: " ")
        case .nsec(let nsec): "\(nsec.nextName) " + nsec.types.map(\.description).joined(separator: " ")
        case .hinfo(let hinfo):
            "cpu \"\(String(decoding: hinfo.cpu, as: UTF8.self))\" os \"\(String(decoding: hinfo.os, as: UTF8.self))\""
        case .opt(let raw): "EDNS options \(hexString(raw))"
        case .unknown(_, let raw): "\\# \(raw.count) \(hexString(raw))"
        }
    }
}

/// The JSON form of a packet.
enum PacketJSON {
    static func packet(_ decoded: DecodedMessage, datagram: CapturedDatagram, number: Int, file: String)
        -> [(String, OutputValue)]
    {
        let message = decoded.message
        var members: [(String, OutputValue)] = [("packet", .number(Double(number))), ("file", .string(file))]
        if !datagram.source.isEmpty {
            members += [
                ("time", .number((datagram.time * 1000).rounded() / 1000)),
                ("source", .string(datagram.source)), ("destination", .string(datagram.destination)),
            ]
        }
        let header = message.header
        members += [
            ("size", .number(Double(datagram.payload.count))),
            ("id", .number(Double(header.id))),
            ("response", .bool(header.isResponse)),
            ("authoritative", .bool(header.isAuthoritative)),
            ("truncated", .bool(header.isTruncated)),
            ("opcode", .number(Double(header.opcode))),
            ("rcode", .number(Double(header.responseCode))),
            ("questions", .array(message.questions.map { question in
                .object([
                    ("name", .string(question.name.description)), ("type", .string(question.type.description)),
                    ("unicastResponse", .bool(question.unicastResponse)),
                ])
            })),
            ("answers", .array(message.answers.map(record))),
            ("authorities", .array(message.authorities.map(record))),
            ("additionals", .array(message.additionals.map(record))),
        ]
        if !decoded.skippedRecords.isEmpty {
            members.append(("skipped", .array(decoded.skippedRecords.map { skipped in
                .object([
                    ("section", .string(skipped.section.description)), ("name", .string(skipped.name.description)),
                    ("type", .string(skipped.type.description)), ("error", .string(skipped.error.description)),
                ])
            })))
        }
        return members
    }

    static func record(_ record: ResourceRecord) -> OutputValue {
        var members: [(String, OutputValue)] = [
            ("name", .string(record.name.description)), ("type", .string(record.type.description)),
            ("ttl", .number(Double(record.ttl))), ("cacheFlush", .bool(record.cacheFlush)),
        ]
        switch record.data {
        case .a(let address): members.append(("address", .string(address.description)))
        case .aaaa(let address): members.append(("address", .string(address.description)))
        case .ptr(let name), .cname(let name), .ns(let name): members.append(("target", .string(name.description)))
        case .srv(let srv):
            members += [
                ("priority", .number(Double(srv.priority))), ("weight", .number(Double(srv.weight))),
                ("port", .number(Double(srv.port))), ("target", .string(srv.target.description)),
            ]
        case .soa(let soa):
            members += [
                ("primary", .string(soa.primary.description)), ("mailbox", .string(soa.mailbox.description)),
                ("serial", .number(Double(soa.serial))), ("refresh", .number(Double(soa.refresh))),
                ("retry", .number(Double(soa.retry))), ("expire", .number(Double(soa.expire))),
                ("minimum", .number(Double(soa.minimum))),
            ]
        case .txt(let txt): members.append(("txt", txtJSON(DiscoveryInfo(txt))))
        case .nsec(let nsec):
            members += [
                ("next", .string(nsec.nextName.description)),
                ("types", .array(nsec.types.map { .string($0.description) })),
            ]
        case .hinfo(let hinfo):
            members += [
                ("cpu", .string(String(decoding: hinfo.cpu, as: UTF8.self))),
                ("os", .string(String(decoding: hinfo.os, as: UTF8.self))),
            ]
        case .opt(let raw), .unknown(_, let raw): members.append(("rdata", .string(hexString(raw))))
        }
        return .object(members)
    }
}
