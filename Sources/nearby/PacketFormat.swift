import DNSWire
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif
import NearbyBasics
import PacketCapture

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

/// The human-readable form of a packet, written straight into the output buffer (a capture
/// of 50,000 packets should print as fast as tshark does).
enum PacketText {
    /// "probe", "query with 2 known answers", "response, authoritative", …
    static func kind(_ message: Message) -> String {
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
        return kind
    }

    /// "frame 3  t=1.500 s  A → B" and, for a captured datagram, its VLAN tags and fragments.
    static func head(_ shown: Shown) -> String {
        var head = "frame \(shown.frame)"
        if let relative = shown.relative {
            // A frame earlier than the first (captures need not be in time order) is negative.
            let milliseconds = Int((abs(relative) * 1000).rounded())
            head += "  t=\(relative < 0 ? "-" : "")\(milliseconds / 1000).\(String(1000 + milliseconds % 1000).dropFirst()) s"
        }
        if !shown.source.isEmpty { head += "  \(shown.source) → \(shown.destination)" }
        return head
    }

    static func extras(_ shown: Shown) -> String {
        var extras = ""
        if !shown.vlan.isEmpty { extras += "  VLAN \(shown.vlan.map(String.init).joined(separator: "/"))" }
        if !shown.fragments.isEmpty { extras += "  reassembled from frames \(shown.fragments.map(String.init).joined(separator: ","))" }
        return extras
    }

    static func write(_ decoded: DecodedMessage, shown: Shown, into sink: inout OutputSink) {
        let message = decoded.message
        var head = head(shown) + "  \(kind(message))  \(shown.payload.count) bytes"
        if message.header.id != 0 { head += "  id \(message.header.id)" }
        head += extras(shown)
        var rows: [[String]] = []
        rows.reserveCapacity(message.questions.count + message.answers.count + message.authorities.count + message.additionals.count)
        for question in message.questions {
            let type = question.class == .internet ? question.type.description : "\(question.type) \(question.class)"
            rows.append(["question", question.name.description, type, question.unicastResponse ? "QU" : "QM", ""])
        }
        for (section, records) in [("answer", message.answers), ("authority", message.authorities), ("additional", message.additionals)] {
            for record in records {
                if case .opt(let raw) = record.data {
                    rows.append([section, record.name.description, "OPT", "", EDNS(record, options: raw).text])
                    continue
                }
                let type = record.class == .internet ? record.type.description : "\(record.type) \(record.class)"
                rows.append([section, record.name.description, type, record.cacheFlush ? "\(record.ttl) flush" : "\(record.ttl)", data(record.data)])
            }
        }
        for skipped in decoded.skippedRecords {
            rows.append(["skipped", skipped.name.description, skipped.type.description, "", skipped.error.description])
        }
        sink.write(head)
        sink.write("\n")
        writeAligned(rows, into: &sink)
        sink.write("\n")
    }

    static func writeUndecoded(_ shown: Shown, reason: String, notDNS: Bool = false, into sink: inout OutputSink) {
        let verdict = notDNS ? "not DNS (as DNS: \(reason))" : "DOES NOT DECODE: \(reason)"
        sink.write(head(shown) + "  \(shown.payload.count) bytes\(extras(shown))  \(verdict)\n\n")
    }

    static func writeUnreadable(_ shown: Shown, reason: String, into sink: inout OutputSink) {
        let captured = shown.source.isEmpty ? "" : "  \(shown.payload.count) bytes of UDP payload captured"
        sink.write(head(shown) + "\(captured)\(extras(shown))  CANNOT BE READ: \(reason)\n\n")
    }

    /// Rows in columns two spaces apart (the last column as it is), each line indented by two.
    /// Widths count Unicode scalars: no grapheme breaking, no Foundation padding.
    static func writeAligned(_ rows: [[String]], into sink: inout OutputSink) {
        let columns = (rows.map(\.count).max() ?? 1) - 1
        guard columns >= 0 else { return }
        var widths = [Int](repeating: 0, count: columns)
        for row in rows {
            for column in 0..<min(columns, row.count) { widths[column] = max(widths[column], row[column].unicodeScalars.count) }
        }
        var line: [UInt8] = []
        line.reserveCapacity(160)
        for row in rows {
            line.removeAll(keepingCapacity: true)
            line.append(0x20)
            line.append(0x20)
            for (index, cell) in row.enumerated() {
                if index > 0 { line.append(contentsOf: [0x20, 0x20]) }
                line.append(contentsOf: cell.utf8)
                if index < widths.count, index < row.count - 1 {
                    let pad = widths[index] - cell.unicodeScalars.count
                    if pad > 0 { line.append(contentsOf: repeatElement(0x20, count: pad)) }
                }
            }
            while line.last == 0x20 { line.removeLast() }
            line.append(0x0A)
            sink.write(bytes: line)
        }
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

/// An OPT pseudo-record (EDNS(0), RFC 6891) read as what it is: the class is the sender's
/// UDP payload size, the TTL holds the extended RCODE, the version and the DO bit.
struct EDNS {
    struct Option {
        var code: UInt16
        var data: ArraySlice<UInt8>
        var name: String? {
            switch code {
            case 3: "NSID"
            case 4: "Owner"
            case 5: "DAU"
            case 6: "DHU"
            case 7: "N3U"
            case 8: "Client Subnet"
            case 9: "Expire"
            case 10: "Cookie"
            case 11: "TCP Keepalive"
            case 12: "Padding"
            case 13: "Chain"
            case 14: "Key Tag"
            case 15: "Extended DNS Error"
            default: nil
            }
        }
    }

    var payloadSize: UInt16
    var extendedRcode: UInt8
    var version: UInt8
    var dnssecOK: Bool
    var options: [Option]
    /// Bytes after the last whole option (a damaged option list), if any.
    var trailing: ArraySlice<UInt8>

    init(_ record: ResourceRecord, options raw: [UInt8]) {
        payloadSize = record.class.rawValue
        extendedRcode = UInt8(record.ttl >> 24)
        version = UInt8((record.ttl >> 16) & 0xFF)
        dnssecOK = record.ttl & 0x8000 != 0
        var options: [Option] = []
        var offset = 0
        while offset + 4 <= raw.count {
            let code = UInt16(raw[offset]) << 8 | UInt16(raw[offset + 1])
            let length = Int(raw[offset + 2]) << 8 | Int(raw[offset + 3])
            guard offset + 4 + length <= raw.count else { break }
            options.append(Option(code: code, data: raw[(offset + 4)..<(offset + 4 + length)]))
            offset += 4 + length
        }
        self.options = options
        trailing = raw[offset...]
    }

    var text: String {
        var text = "payload \(payloadSize), version \(version)"
        if dnssecOK { text += ", DO" }
        if extendedRcode != 0 { text += ", extended rcode \(extendedRcode)" }
        for option in options {
            text += ", \(option.name ?? "option \(option.code)") \(option.data.isEmpty ? "(empty)" : hexString(Array(option.data)))"
        }
        if !trailing.isEmpty { text += ", \(trailing.count) stray bytes" }
        return text
    }

    var json: [(String, OutputValue)] {
        var members: [(String, OutputValue)] = [
            ("payloadSize", .number(Double(payloadSize))), ("extendedRcode", .number(Double(extendedRcode))),
            ("version", .number(Double(version))), ("dnssecOK", .bool(dnssecOK)),
            ("options", .array(options.map { option in
                var members: [(String, OutputValue)] = [("code", .number(Double(option.code)))]
                if let name = option.name { members.append(("name", .string(name))) }
                members.append(("data", .string(hexString(Array(option.data)))))
                return .object(members)
            })),
        ]
        if !trailing.isEmpty { members.append(("strayBytes", .string(hexString(Array(trailing))))) }
        return members
    }
}

/// Whether a label is `text`, ignoring ASCII case (DNS names compare so).
func isLabel(_ label: [UInt8], _ text: StaticString) -> Bool {
    guard label.count == text.utf8CodeUnitCount else { return false }
    return text.withUTF8Buffer { expected in
        zip(label, expected).allSatisfy { pair in
            let (a, b) = pair
            return a == b || (a | 0x20 == b | 0x20 && (0x61...0x7A).contains(b | 0x20))
        }
    }
}

/// The JSON form of a packet.
enum PacketJSON {
    /// Frame, file, time, source, destination, VLAN tags, fragments: what every packet carries.
    static func frame(_ shown: Shown, file: String) -> [(String, OutputValue)] {
        var members: [(String, OutputValue)] = [("frame", .number(Double(shown.frame))), ("file", .string(file))]
        if let time = shown.time {
            members.append(("time", .raw(epochText(time))))
            members.append(("timestamp", .string(timestampText(time))))
        }
        if let relative = shown.relative { members.append(("relative", .number((relative * 1_000_000).rounded() / 1_000_000))) }
        if !shown.source.isEmpty { members += [("source", .string(shown.source)), ("destination", .string(shown.destination))] }
        if !shown.vlan.isEmpty { members.append(("vlan", .array(shown.vlan.map { .number(Double($0)) }))) }
        if !shown.fragments.isEmpty { members.append(("fragments", .array(shown.fragments.map { .number(Double($0)) }))) }
        return members
    }

    /// Seconds since 1970 with nine decimals, as JSON number text (a Double would round the
    /// nanoseconds away).
    static func epochText(_ time: CaptureTime) -> String {
        let nanoseconds = String(1_000_000_000 + Int(time.nanoseconds)).dropFirst()
        return time.seconds < 0 && time.nanoseconds > 0
            ? "-\(-(time.seconds + 1)).\(String(2_000_000_000 - Int(time.nanoseconds)).dropFirst())"
            : "\(time.seconds).\(nanoseconds)"
    }

    /// "2026-11-25T04:45:00.123456789Z".
    static func timestampText(_ time: CaptureTime) -> String {
        var seconds = time_t(time.seconds)
        var parts = tm()
        gmtime_r(&seconds, &parts)
        func two(_ value: Int32) -> String { value < 10 ? "0\(value)" : "\(value)" }
        let nanoseconds = String(1_000_000_000 + Int(time.nanoseconds)).dropFirst()
        return "\(parts.tm_year + 1900)-\(two(parts.tm_mon + 1))-\(two(parts.tm_mday))T\(two(parts.tm_hour)):\(two(parts.tm_min)):\(two(parts.tm_sec)).\(nanoseconds)Z"
    }

    static func packet(_ decoded: DecodedMessage, shown: Shown, file: String) -> [(String, OutputValue)] {
        let message = decoded.message
        let header = message.header
        var members = frame(shown, file: file)
        members += [
            ("size", .number(Double(shown.payload.count))),
            ("id", .number(Double(header.id))),
            ("response", .bool(header.isResponse)),
            ("authoritative", .bool(header.isAuthoritative)),
            ("truncated", .bool(header.isTruncated)),
            ("opcode", .number(Double(header.opcode))),
            ("rcode", .number(Double(header.responseCode))),
            ("questions", .array(message.questions.map { question in
                .object(name(question.name) + [
                    ("type", .string(question.type.description)), ("class", .string(question.class.description)),
                    ("unicastResponse", .bool(question.unicastResponse)),
                ])
            })),
            ("answers", .array(message.answers.map(record))),
            ("authorities", .array(message.authorities.map(record))),
            ("additionals", .array(message.additionals.map(record))),
        ]
        if let opt = message.additionals.first(where: { $0.type == .opt }), case .opt(let raw) = opt.data {
            members.append(("edns", .object(EDNS(opt, options: raw).json)))
        }
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

    /// A datagram whose DNS message does not decode, or a frame that cannot be read.
    /// A datagram whose payload does not decode as DNS (`error`; `notDNS` when it is not on a
    /// DNS port, so nothing is wrong), or a frame that cannot be read (`frameError`).
    static func undecoded(_ shown: Shown, file: String, error: String, frameError: Bool = false, notDNS: Bool = false) -> [(String, OutputValue)] {
        var members = frame(shown, file: file)
        if !frameError {
            members.append(("size", .number(Double(shown.payload.count))))
        } else if !shown.source.isEmpty {
            members.append(("captured", .number(Double(shown.payload.count))))  // of a datagram the snap length cut
        }
        if notDNS { members.append(("notDNS", .bool(true))) }
        members.append((frameError ? "frameError" : "error", .string(error)))
        return members
    }

    /// A name as shown (dns-sd's escapes) and as its labels, unescaped; for DNS-SD names also
    /// the instance (or subtype), the service type and the domain.
    static func name(_ name: DomainName, key: String = "name") -> [(String, OutputValue)] {
        let labels = name.labels
        var members: [(String, OutputValue)] = [
            (key, .string(name.description)), ("labels", .array(labels.map { .string(String(decoding: $0, as: UTF8.self)) })),
        ]
        guard let at = labels.indices.dropLast().first(where: { index in
            labels[index].first == UInt8(ascii: "_") && (isLabel(labels[index + 1], "_tcp") || isLabel(labels[index + 1], "_udp"))
        }) else { return members }
        let text = { (label: [UInt8]) in String(decoding: label, as: UTF8.self) }
        if at == 1 {
            members.append(("instance", .string(text(labels[0]))))
        } else if at == 2, isLabel(labels[1], "_sub") {
            members.append(("subtype", .string(text(labels[0]))))
        } else if at != 0 {
            return members  // something else that happens to hold a service label
        }
        members.append(("service", .string(text(labels[at]) + "." + text(labels[at + 1]))))
        members.append(("domain", .string(labels[(at + 2)...].map(text).joined(separator: "."))))
        return members
    }

    static func record(_ record: ResourceRecord) -> OutputValue {
        if case .opt(let raw) = record.data {
            return .object(name(record.name) + [("type", .string("OPT"))] + EDNS(record, options: raw).json)
        }
        var members = name(record.name)
        members += [
            ("type", .string(record.type.description)), ("class", .string(record.class.description)),
            ("ttl", .number(Double(record.ttl))), ("cacheFlush", .bool(record.cacheFlush)),
        ]
        switch record.data {
        case .a(let address): members.append(("address", .string(address.description)))
        case .aaaa(let address): members.append(("address", .string(address.description)))
        case .ptr(let target), .cname(let target), .ns(let target):
            members += [
                ("target", .string(target.description)),
                ("targetLabels", .array(target.labels.map { .string(String(decoding: $0, as: UTF8.self)) })),
            ]
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
        case .txt(let txt):
            // The strings as they are (order, empty strings, duplicates), and the key/value view.
            members.append(("strings", .array(txt.strings.map { bytes in
                if let text = String(validating: bytes, as: UTF8.self) { return .string(text) }
                return .object([("base64", .string(Base64.encode(bytes)))])
            })))
            members.append(("txt", txtJSON(DiscoveryInfo(txt))))
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
