import PacketCapture
import Testing

// Test-only writers: captures and frames built byte by byte, so tests can write what no
// capture tool would.

/// Appends fixed-width values in one byte order.
struct ByteWriter {
    var bytes: [UInt8] = []
    var little: Bool

    init(little: Bool) { self.little = little }

    mutating func u8(_ value: UInt8) { bytes.append(value) }

    mutating func u16(_ value: UInt16) {
        let pair = [UInt8(value >> 8), UInt8(value & 0xFF)]
        bytes += little ? pair.reversed() : pair
    }

    mutating func u32(_ value: UInt32) {
        let quad = [UInt8(value >> 24), UInt8((value >> 16) & 0xFF), UInt8((value >> 8) & 0xFF), UInt8(value & 0xFF)]
        bytes += little ? quad.reversed() : quad
    }

    mutating func u64(_ value: UInt64) {
        if little {
            u32(UInt32(value & 0xFFFF_FFFF))
            u32(UInt32(value >> 32))
        } else {
            u32(UInt32(value >> 32))
            u32(UInt32(value & 0xFFFF_FFFF))
        }
    }

    mutating func append(_ more: [UInt8]) { bytes += more }

    mutating func pad4() { while bytes.count % 4 != 0 { bytes.append(0) } }
}

/// Big-endian 16 bits.
func be16(_ value: Int) -> [UInt8] { [UInt8((value >> 8) & 0xFF), UInt8(value & 0xFF)] }
/// Big-endian 32 bits.
func be32(_ value: UInt32) -> [UInt8] {
    [UInt8(value >> 24), UInt8((value >> 16) & 0xFF), UInt8((value >> 8) & 0xFF), UInt8(value & 0xFF)]
}

/// A classic pcap file.
struct PcapFile {
    var writer: ByteWriter
    var modified: Bool

    init(
        linkType: UInt32 = 1, little: Bool = true, nanoseconds: Bool = false, modified: Bool = false,
        snapLength: UInt32 = 262_144, major: UInt16 = 2, minor: UInt16 = 4
    ) {
        writer = ByteWriter(little: little)
        self.modified = modified
        writer.u32(modified ? 0xA1B2_CD34 : nanoseconds ? 0xA1B2_3C4D : 0xA1B2_C3D4)
        writer.u16(major)
        writer.u16(minor)
        writer.u32(0)
        writer.u32(0)
        writer.u32(snapLength)
        writer.u32(linkType)
    }

    /// Adds a record; `original` defaults to the frame's length, `captured` (the length the
    /// record header claims) to the bytes given.
    mutating func add(
        _ frame: [UInt8], seconds: UInt32 = 1_700_000_000, fraction: UInt32 = 0, original: Int? = nil,
        captured: Int? = nil
    ) {
        writer.u32(seconds)
        writer.u32(fraction)
        writer.u32(UInt32(captured ?? frame.count))
        writer.u32(UInt32(original ?? frame.count))
        if modified {
            writer.u32(2)  // ifindex
            writer.u16(0x0800)  // protocol
            writer.u8(0)  // packet type
            writer.u8(0)  // pad
        }
        writer.append(frame)
    }

    var bytes: [UInt8] { writer.bytes }
}

/// A pcapng file, section by section.
struct PcapngFile {
    var bytes: [UInt8] = []
    var little = true

    init() {}

    /// Starts a section (a Section Header Block) in the given byte order.
    mutating func section(little: Bool = true, major: UInt16 = 1, minor: UInt16 = 0) {
        self.little = little
        var body = ByteWriter(little: little)
        body.u32(0x1A2B_3C4D)
        body.u16(major)
        body.u16(minor)
        body.u64(UInt64.max)  // section length unknown
        block(type: 0x0A0D_0D0A, body: body.bytes)
    }

    /// One option (code, length, value padded to 4).
    func option(_ code: UInt16, _ value: [UInt8]) -> [UInt8] {
        var writer = ByteWriter(little: little)
        writer.u16(code)
        writer.u16(UInt16(value.count))
        writer.append(value)
        writer.pad4()
        return writer.bytes
    }

    func nameOption(_ name: String) -> [UInt8] { option(2, Array(name.utf8)) }
    func resolutionOption(_ value: UInt8) -> [UInt8] { option(9, [value]) }
    func fcsLengthOption(_ bytes: UInt8) -> [UInt8] { option(13, [bytes]) }
    func offsetOption(_ seconds: Int64) -> [UInt8] {
        var writer = ByteWriter(little: little)
        writer.u64(UInt64(bitPattern: seconds))
        return option(14, writer.bytes)
    }
    func flagsOption(_ flags: UInt32) -> [UInt8] {
        var writer = ByteWriter(little: little)
        writer.u32(flags)
        return option(2, writer.bytes)
    }
    var endOfOptions: [UInt8] { [0, 0, 0, 0] }

    /// An Interface Description Block.
    mutating func interface(linkType: UInt16 = 1, snapLength: UInt32 = 0, options: [[UInt8]] = []) {
        var body = ByteWriter(little: little)
        body.u16(linkType)
        body.u16(0)
        body.u32(snapLength)
        for option in options { body.append(option) }
        if !options.isEmpty { body.append(endOfOptions) }
        block(type: 1, body: body.bytes)
    }

    /// An Enhanced Packet Block.
    mutating func enhanced(
        interface: UInt32 = 0, timestamp: UInt64 = 0, _ frame: [UInt8], original: Int? = nil, captured: Int? = nil,
        options: [[UInt8]] = []
    ) {
        var body = ByteWriter(little: little)
        body.u32(interface)
        body.u32(UInt32(timestamp >> 32))
        body.u32(UInt32(timestamp & 0xFFFF_FFFF))
        body.u32(UInt32(captured ?? frame.count))
        body.u32(UInt32(original ?? frame.count))
        body.append(frame)
        body.pad4()
        for option in options { body.append(option) }
        if !options.isEmpty { body.append(endOfOptions) }
        block(type: 6, body: body.bytes)
    }

    /// A Simple Packet Block: only the original length and the (possibly cut) bytes.
    mutating func simple(_ frame: [UInt8], original: Int? = nil) {
        var body = ByteWriter(little: little)
        body.u32(UInt32(original ?? frame.count))
        body.append(frame)
        body.pad4()
        block(type: 3, body: body.bytes)
    }

    /// An obsolete Packet Block.
    mutating func obsolete(interface: UInt16 = 0, timestamp: UInt64 = 0, _ frame: [UInt8]) {
        var body = ByteWriter(little: little)
        body.u16(interface)
        body.u16(0)  // drops
        body.u32(UInt32(timestamp >> 32))
        body.u32(UInt32(timestamp & 0xFFFF_FFFF))
        body.u32(UInt32(frame.count))
        body.u32(UInt32(frame.count))
        body.append(frame)
        body.pad4()
        block(type: 2, body: body.bytes)
    }

    /// Any block; the lengths can be made wrong on purpose.
    mutating func block(type: UInt32, body: [UInt8], length: UInt32? = nil, trailer: UInt32? = nil) {
        var writer = ByteWriter(little: little)
        let total = UInt32(12 + body.count)
        writer.u32(type)
        writer.u32(length ?? total)
        writer.append(body)
        writer.u32(trailer ?? length ?? total)
        bytes += writer.bytes
    }
}

/// IP packets and what they carry.
enum Packet {
    static let source4: [UInt8] = [198, 18, 1, 1]
    static let mdns4: [UInt8] = [224, 0, 0, 251]
    static let source6: [UInt8] = [0xFE, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]
    static let mdns6: [UInt8] = [0xFF, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFB]

    /// A payload of recognisable bytes.
    static func payload(_ count: Int, seed: Int = 0) -> [UInt8] {
        (0..<count).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ seed &* 13 &+ 1) }
    }

    /// A UDP header and payload; `length` overrides the length field.
    static func udp(source: Int = 5353, destination: Int = 5353, _ payload: [UInt8], length: Int? = nil) -> [UInt8] {
        be16(source) + be16(destination) + be16(length ?? 8 + payload.count) + [0, 0] + payload
    }

    /// An IPv4 packet around `payload` (a UDP datagram by default protocol).
    static func ipv4(
        source: [UInt8] = source4, destination: [UInt8] = mdns4, protocolNumber: UInt8 = 17, ttl: UInt8 = 255,
        identification: Int = 0, moreFragments: Bool = false, fragmentOffset: Int = 0, options: [UInt8] = [],
        headerWords: Int? = nil, totalLength: Int? = nil, _ payload: [UInt8]
    ) -> [UInt8] {
        let headerLength = 20 + options.count
        let words = headerWords ?? headerLength / 4
        let fragmentField = (moreFragments ? 0x2000 : 0) | (fragmentOffset / 8)
        return [0x40 | UInt8(words & 0xF), 0] + be16(totalLength ?? headerLength + payload.count) + be16(identification)
            + be16(fragmentField) + [ttl, protocolNumber, 0, 0] + source + destination + options + payload
    }

    /// An IPv6 packet; `payload` starts with the header `next` names.
    static func ipv6(
        source: [UInt8] = source6, destination: [UInt8] = mdns6, next: UInt8 = 17, hopLimit: UInt8 = 255,
        payloadLength: Int? = nil, _ payload: [UInt8]
    ) -> [UInt8] {
        [0x60, 0, 0, 0] + be16(payloadLength ?? payload.count) + [next, hopLimit] + source + destination + payload
    }

    /// A generic IPv6 extension header ((length + 1) * 8 bytes) followed by `rest`.
    static func extensionHeader(next: UInt8, units: Int = 0, _ rest: [UInt8]) -> [UInt8] {
        [next, UInt8(units)] + [UInt8](repeating: 0, count: (units + 1) * 8 - 2) + rest
    }

    /// An IPv6 fragment header followed by `rest`.
    static func fragmentHeader(next: UInt8, offset: Int, more: Bool, identification: UInt32, _ rest: [UInt8]) -> [UInt8] {
        [next, 0] + be16(offset | (more ? 1 : 0)) + be32(identification) + rest
    }
}

/// Link-layer framing.
enum Link {
    static let multicastMAC: [UInt8] = [0x01, 0x00, 0x5E, 0x00, 0x00, 0xFB]
    static let hostMAC: [UInt8] = [0x02, 0x00, 0x00, 0x00, 0x00, 0x01]

    /// An Ethernet II frame, with VLAN tags (TPID, VLAN ID) outermost first.
    static func ethernet(_ payload: [UInt8], type: Int = 0x0800, vlans: [(tpid: Int, id: Int)] = []) -> [UInt8] {
        var frame = multicastMAC + hostMAC
        for tag in vlans { frame += be16(tag.tpid) + be16(0x2000 | tag.id) }  // priority 1
        return frame + be16(type) + payload
    }

    /// An IEEE 802.3 frame: a length, then `llc` (LLC header and payload), then padding.
    static func ieee8023(_ llc: [UInt8], padding: Int = 0) -> [UInt8] {
        multicastMAC + hostMAC + be16(llc.count) + llc + [UInt8](repeating: 0, count: padding)
    }

    /// LLC/SNAP with an ethertype.
    static func snap(_ type: Int) -> [UInt8] { [0xAA, 0xAA, 0x03, 0, 0, 0] + be16(type) }

    /// Linux cooked v1.
    static func linuxCooked(_ payload: [UInt8], protocolType: Int = 0x0800, hardware: Int = 1) -> [UInt8] {
        be16(0) + be16(hardware) + be16(6) + hostMAC + [0, 0] + be16(protocolType) + payload
    }

    /// Linux cooked v2.
    static func linuxCooked2(_ payload: [UInt8], protocolType: Int = 0x0800, hardware: Int = 1) -> [UInt8] {
        be16(protocolType) + [0, 0] + be32(3) + be16(hardware) + [0, 6] + hostMAC + [0, 0] + payload
    }

    /// BSD loopback with the family in the given byte order.
    static func null(_ payload: [UInt8], family: UInt32, little: Bool) -> [UInt8] {
        var writer = ByteWriter(little: little)
        writer.u32(family)
        return writer.bytes + payload
    }

    /// An 802.11 data frame carrying `body` (usually LLC/SNAP + IP).
    static func wifiData(
        _ body: [UInt8], subtype: UInt8 = 0, toDS: Bool = false, fromDS: Bool = false, protected: Bool = false,
        order: Bool = false, amsdu: Bool = false, padTo4: Bool = false
    ) -> [UInt8] {
        var flags: UInt8 = 0
        if toDS { flags |= 0x01 }
        if fromDS { flags |= 0x02 }
        if protected { flags |= 0x40 }
        if order { flags |= 0x80 }
        var frame: [UInt8] = [0x08 | subtype << 4, flags, 0, 0]  // type 2 (data)
        frame += multicastMAC + hostMAC + [0x02, 0, 0, 0, 0, 0x02] + [0x10, 0x00]  // addresses, sequence
        if toDS && fromDS { frame += [0x02, 0, 0, 0, 0, 0x03] }
        if subtype & 0x8 != 0 { frame += [amsdu ? 0x80 : 0x00, 0x00] }
        if subtype & 0x8 != 0 && order { frame += [0, 0, 0, 0] }
        if padTo4 { while frame.count % 4 != 0 { frame.append(0xEE) } }
        return frame + body
    }

    /// A radiotap header in front of `frame`: TSFT (optional), Flags (optional), a rate byte,
    /// and optionally a second (chained) presence word.
    static func radiotap(_ frame: [UInt8], flags: UInt8?, tsft: Bool = true, chained: Bool = false) -> [UInt8] {
        var present: UInt32 = 1 << 2  // rate
        if tsft { present |= 1 }
        if flags != nil { present |= 1 << 1 }
        if chained { present |= 1 << 31 }
        var header: [UInt8] = [0, 0, 0, 0]
        var writer = ByteWriter(little: true)
        writer.u32(present)
        if chained { writer.u32(0) }
        header += writer.bytes
        if tsft {
            while header.count % 8 != 0 { header.append(0) }
            header += [1, 2, 3, 4, 5, 6, 7, 8]
        }
        if let flags { header.append(flags) }
        header.append(0x0C)  // rate
        header[2] = UInt8(header.count & 0xFF)
        header[3] = UInt8(header.count >> 8)
        return header + frame
    }
}

/// Reads a one-frame pcap of `linkType` and returns the frame.
func readOne(_ frame: [UInt8], linkType: UInt32 = 1, original: Int? = nil) throws -> CapturedFrame {
    var file = PcapFile(linkType: linkType)
    file.add(frame, original: original)
    let capture = try Capture.read(file.bytes)
    #expect(capture.frames.count == 1)
    return try #require(capture.frames.first)
}

/// The UDP datagram of a one-frame pcap, or a test failure.
func readDatagram(_ frame: [UInt8], linkType: UInt32 = 1, sourceLocation: SourceLocation = #_sourceLocation) throws -> UDPDatagram {
    let captured = try readOne(frame, linkType: linkType)
    return try #require(captured.content.datagram, "got \(captured.content)", sourceLocation: sourceLocation)
}

extension FrameContent {
    /// The words of `.other`, or nil.
    var otherText: String? {
        if case .other(let text) = self { return text }
        return nil
    }

    /// The reason of `.undecodable`, or nil.
    var undecodableText: String? {
        if case .undecodable(let text) = self { return text }
        return nil
    }

    var isFragment: Bool {
        if case .fragment = self { return true }
        return false
    }
}

/// A deterministic generator for the hostile-input tests.
struct SplitMix64 {
    var state: UInt64

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    mutating func below(_ bound: Int) -> Int { Int(next() % UInt64(max(1, bound))) }
}
