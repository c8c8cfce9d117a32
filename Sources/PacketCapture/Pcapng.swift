/// pcapng: a sequence of blocks (type, total length, body, total length again), in sections
/// that each start with a Section Header Block fixing the byte order and starting a new list
/// of interfaces.
///
/// Frames are what Wireshark makes frames of: Enhanced, Simple and (obsolete) Packet Blocks,
/// and also custom blocks, systemd journal entries and Sysdig events (which Wireshark lists
/// as frames too, so numbers stay in step; they become ``FrameContent/other(_:)``).
/// Name resolution, interface statistics, decryption secrets and the other known blocks are
/// skipped silently; blocks of unknown types are skipped and counted in one problem.
enum PcapngReader {
    static let byteOrderMagic: UInt32 = 0x1A2B_3C4D

    /// The section being read.
    struct Section {
        var littleEndian: Bool
        /// Index in the capture's interface list of this section's interface 0.
        var firstInterface: Int
        var interfaceCount = 0
        var index: Int
    }

    /// What was wrong with a Section Header Block.
    struct SectionFailure: Error {
        var code: CaptureError.Code
        var reason: String
        var offset: Int
    }

    static func read(_ data: [UInt8], into builder: inout CaptureBuilder) throws(CaptureError) {
        var offset = 0
        var section: Section?
        var unknownCount = 0
        var unknownTypes: [UInt32] = []
        var firstUnknownOffset = 0
        var roundedCount = 0
        var firstRoundedOffset = 0

        reading: while offset < data.count {
            let remaining = data.count - offset
            if remaining >= 4, data[offset] == 0x0A, data[offset + 1] == 0x0D, data[offset + 2] == 0x0D,
                data[offset + 3] == 0x0A
            {
                switch sectionHeader(data, at: offset) {
                case .success(let header):
                    section = Section(
                        littleEndian: header.littleEndian, firstInterface: builder.interfaces.count,
                        index: (section?.index ?? -1) + 1)
                    offset += header.length
                    continue reading
                case .failure(let failure):
                    guard section != nil else { throw CaptureError(failure.code, failure.reason, at: failure.offset) }
                    let kind: CaptureProblem.Kind = failure.code == CaptureError.Code.truncatedHeader ? .truncated : .badBlock
                    builder.problems.append(
                        CaptureProblem(kind, "\(failure.reason): reading stopped", offset: failure.offset))
                    break reading
                }
            }
            guard var current = section else {
                throw CaptureError(.notACapture(.unknown), CaptureError.notACaptureReason(.unknown), at: 0)
            }
            let little = current.littleEndian
            guard remaining >= 8 else {
                builder.problems.append(
                    CaptureProblem(
                        .truncated, "the capture ends with \(remaining) stray bytes after its last block", offset: offset))
                break
            }
            let type = data.u32(offset, little: little)
            let declared = Int(data.u32(offset + 4, little: little))
            guard declared >= 12 else {
                builder.problems.append(
                    CaptureProblem(
                        .badBlock,
                        "\(aBlock(type)) says its total length is \(declared) bytes (at least 12 are needed): reading stopped",
                        offset: offset))
                break
            }
            var length = declared
            if length % 4 != 0 {
                // Wireshark rounds up (some writers left the padding out of the length); so do we.
                length = padded4(length)
                if roundedCount == 0 { firstRoundedOffset = offset }
                roundedCount += 1
            }
            guard length <= remaining else {
                if isPacketRecord(type) {
                    let number = builder.nextFrameNumber
                    builder.problems.append(
                        CaptureProblem(
                            .truncated,
                            "the capture ends inside frame \(number): its block says \(length) bytes, \(remaining) remain (\(length - remaining) missing)",
                            frames: [number], offset: offset))
                } else {
                    builder.problems.append(
                        CaptureProblem(
                            .truncated,
                            "the capture ends inside \(aBlock(type)): it says \(length) bytes, \(remaining) remain",
                            offset: offset))
                }
                break
            }
            let trailer = Int(data.u32(offset + length - 4, little: little))
            guard padded4(trailer) == length else {
                builder.problems.append(
                    CaptureProblem(
                        .badBlock,
                        "\(aBlock(type)) has trailing length \(trailer) but leading length \(declared): reading stopped",
                        offset: offset))
                break
            }
            let body = offset + 8
            let bodyEnd = offset + length - 4
            switch type {
            case 1:
                guard bodyEnd - body >= 8 else {
                    builder.problems.append(
                        CaptureProblem(
                            .badBlock,
                            "an Interface Description Block of \(length) bytes is too short (at least 20 are needed): reading stopped",
                            offset: offset))
                    break reading
                }
                let interface = interfaceDescription(
                    data, body: body, end: bodyEnd, little: little, section: current.index, offset: offset,
                    problems: &builder.problems)
                builder.addInterface(interface)
                current.interfaceCount += 1
                section = current
            case 6:
                enhancedPacket(data, body: body, end: bodyEnd, offset: offset, section: current, into: &builder)
            case 3:
                simplePacket(data, body: body, end: bodyEnd, offset: offset, section: current, into: &builder)
            case 2:
                obsoletePacket(data, body: body, end: bodyEnd, offset: offset, section: current, into: &builder)
            case 0x9:
                builder.addFrame(
                    content: .other("systemd journal entry"), time: nil, interface: nil, captured: bodyEnd - body,
                    original: bodyEnd - body, fileOffset: offset)
            case 0x204, 0x216, 0x221:
                builder.addFrame(
                    content: .other("Sysdig event"), time: nil, interface: nil, captured: bodyEnd - body,
                    original: bodyEnd - body, fileOffset: offset)
            case 0xBAD, 0x4000_0BAD:
                let text = bodyEnd - body >= 4 ? "pcapng custom block, PEN \(data.u32(body, little: little))" : "pcapng custom block"
                builder.addFrame(
                    content: .other(text), time: nil, interface: nil, captured: bodyEnd - body, original: bodyEnd - body,
                    fileOffset: offset)
            case 0x4, 0x5, 0x7, 0x8, 0xA, 0x200...0x2FF, 0x8000_0001:
                break  // name resolution, statistics, IRIG, ARINC, secrets, Sysdig metadata, Darwin process info
            default:
                if unknownCount == 0 { firstUnknownOffset = offset }
                unknownCount += 1
                if unknownTypes.count < 8, !unknownTypes.contains(type) { unknownTypes.append(type) }
            }
            offset += length
        }
        if roundedCount > 0 {
            builder.problems.append(
                CaptureProblem(
                    .irregularBlock,
                    "\(roundedCount) block\(roundedCount == 1 ? "" : "s") had a total length that is not a multiple of 4: rounded up, as Wireshark does",
                    offset: firstRoundedOffset, count: roundedCount))
        }
        if unknownCount > 0 {
            let types = unknownTypes.map { hex(Int($0), digits: 8) }.joined(separator: ", ")
            builder.problems.append(
                CaptureProblem(
                    .unknownBlocks,
                    "skipped \(unknownCount) pcapng block\(unknownCount == 1 ? "" : "s") of unknown type (\(types))",
                    offset: firstUnknownOffset, count: unknownCount))
        }
    }

    // MARK: Section header

    struct SectionHeader {
        var littleEndian: Bool
        var length: Int
    }

    static func sectionHeader(_ data: [UInt8], at offset: Int) -> Result<SectionHeader, SectionFailure> {
        let remaining = data.count - offset
        guard remaining >= 12 else {
            return .failure(
                SectionFailure(
                    code: .truncatedHeader,
                    reason: "the capture ends inside a Section Header Block: at least 28 bytes needed, \(remaining) remain",
                    offset: offset))
        }
        let little: Bool
        if data.le32(offset + 8) == byteOrderMagic {
            little = true
        } else if data.be32(offset + 8) == byteOrderMagic {
            little = false
        } else {
            return .failure(
                SectionFailure(
                    code: .badHeader, reason: "a Section Header Block without the byte-order magic 0x1a2b3c4d",
                    offset: offset + 8))
        }
        let length = Int(data.u32(offset + 4, little: little))
        guard length >= 28, length % 4 == 0 else {
            return .failure(
                SectionFailure(
                    code: .badHeader,
                    reason: "a Section Header Block says its length is \(length) bytes (it must be at least 28 and a multiple of 4)",
                    offset: offset + 4))
        }
        if remaining >= 16 {
            let major = data.u16(offset + 12, little: little)
            let minor = data.u16(offset + 14, little: little)
            guard major == 1 else {
                return .failure(
                    SectionFailure(
                        code: .unsupportedVersion, reason: "pcapng version \(major).\(minor) is not supported (only 1.x is)",
                        offset: offset + 12))
            }
        }
        guard length <= remaining else {
            return .failure(
                SectionFailure(
                    code: .truncatedHeader,
                    reason: "the capture ends inside a Section Header Block: it says \(length) bytes, \(remaining) remain",
                    offset: offset))
        }
        let trailer = Int(data.u32(offset + length - 4, little: little))
        guard trailer == length else {
            return .failure(
                SectionFailure(
                    code: .badHeader,
                    reason: "a Section Header Block has trailing length \(trailer) but leading length \(length)",
                    offset: offset + length - 4))
        }
        return .success(SectionHeader(littleEndian: little, length: length))
    }

    // MARK: Interfaces

    static func interfaceDescription(
        _ data: [UInt8], body: Int, end: Int, little: Bool, section: Int, offset: Int, problems: inout [CaptureProblem]
    ) -> CaptureInterface {
        var interface = CaptureInterface(
            linkType: LinkType(data.u16(body, little: little)), name: nil,
            snapLength: Int(data.u32(body + 4, little: little)), timestampUnitsPerSecond: 1_000_000,
            timestampOffset: 0, fcsLength: 0, section: section)
        var position = body + 8
        while end - position >= 4 {
            let code = data.u16(position, little: little)
            let length = data.u16(position + 2, little: little)
            if code == 0 { break }  // opt_endofopt
            let value = position + 4
            guard length <= end - value else { break }  // a damaged option list: keep what was read
            switch code {
            case 2 where length > 0:  // if_name
                var nameEnd = value + length
                while nameEnd > value, data[nameEnd - 1] == 0 { nameEnd -= 1 }
                interface.name = String(decoding: data[value..<nameEnd], as: UTF8.self)
            case 9 where length >= 1:  // if_tsresol
                let resolution = data[value]
                let exponent = Int(resolution & 0x7F)
                if resolution & 0x80 != 0 {
                    interface.timestampUnitsPerSecond = exponent < 64 ? UInt64(1) << UInt64(exponent) : nil
                } else if exponent <= 19 {
                    var units: UInt64 = 1
                    for _ in 0..<exponent { units *= 10 }
                    interface.timestampUnitsPerSecond = units
                } else {
                    interface.timestampUnitsPerSecond = nil
                }
                if interface.timestampUnitsPerSecond == nil {
                    let base = resolution & 0x80 != 0 ? "2" : "10"
                    problems.append(
                        CaptureProblem(
                            .irregularBlock,
                            "an interface's if_tsresol is \(base)^-\(exponent) s, finer than 64 bits can count: its frames have no time",
                            offset: offset))
                }
            case 13 where length >= 1:  // if_fcslen, in bytes
                interface.fcsLength = Int(data[value])
            case 14 where length >= 8:  // if_tsoffset, seconds
                interface.timestampOffset = Int64(bitPattern: data.u64(value, little: little))
            default:
                break
            }
            position = value + padded4(length)
        }
        return interface
    }

    // MARK: Packets

    /// `(high << 32 | low)` units of the interface's resolution since the epoch, plus its offset.
    static func time(high: UInt32, low: UInt32, interface: CaptureInterface) -> CaptureTime? {
        guard let units = interface.timestampUnitsPerSecond, units > 0 else { return nil }
        let stamp = UInt64(high) << 32 | UInt64(low)
        let (whole, rest) = stamp.quotientAndRemainder(dividingBy: units)
        let nanoseconds: UInt64
        if units == 1_000_000_000 {
            nanoseconds = rest
        } else {
            // rest < units, so the quotient is below 10^9: no overflow.
            nanoseconds = units.dividingFullWidth(rest.multipliedFullWidth(by: 1_000_000_000)).quotient
        }
        let seconds = Int64(clamping: whole)
        let (sum, overflow) = seconds.addingReportingOverflow(interface.timestampOffset)
        let shifted = overflow ? (interface.timestampOffset > 0 ? Int64.max : Int64.min) : sum
        return CaptureTime(seconds: shifted, nanoseconds: Int64(nanoseconds))
    }

    /// The FCS length a packet's flags option (code 2) gives, if any.
    static func flagsFCSLength(_ data: [UInt8], from start: Int, to end: Int, little: Bool) -> Int? {
        var position = start
        while end - position >= 4 {
            let code = data.u16(position, little: little)
            let length = data.u16(position + 2, little: little)
            if code == 0 { return nil }
            let value = position + 4
            guard length <= end - value else { return nil }
            if code == 2, length >= 4 {
                let flags = data.u32(value, little: little)
                let fcs = Int((flags >> 5) & 0xF)
                return fcs > 0 ? fcs : nil
            }
            position = value + padded4(length)
        }
        return nil
    }

    static func enhancedPacket(_ data: [UInt8], body: Int, end: Int, offset: Int, section: Section, into builder: inout CaptureBuilder) {
        let little = section.littleEndian
        guard end - body >= 20 else {
            builder.addFrame(
                content: .undecodable("its Enhanced Packet Block is too short: \(end - body + 12) bytes, at least 32 needed"),
                time: nil, interface: nil, captured: 0, original: 0, fileOffset: offset)
            return
        }
        let interfaceID = Int(data.u32(body, little: little))
        let high = data.u32(body + 4, little: little)
        let low = data.u32(body + 8, little: little)
        let captured = Int(data.u32(body + 12, little: little))
        let original = Int(data.u32(body + 16, little: little))
        packet(
            data, interfaceID: interfaceID, high: high, low: low, captured: captured, original: original,
            dataStart: body + 20, end: end, offset: offset, section: section, blockName: "Enhanced Packet Block",
            into: &builder)
    }

    static func obsoletePacket(_ data: [UInt8], body: Int, end: Int, offset: Int, section: Section, into builder: inout CaptureBuilder) {
        let little = section.littleEndian
        guard end - body >= 20 else {
            builder.addFrame(
                content: .undecodable("its Packet Block is too short: \(end - body + 12) bytes, at least 32 needed"),
                time: nil, interface: nil, captured: 0, original: 0, fileOffset: offset)
            return
        }
        let interfaceID = data.u16(body, little: little)
        let high = data.u32(body + 4, little: little)
        let low = data.u32(body + 8, little: little)
        let captured = Int(data.u32(body + 12, little: little))
        let original = Int(data.u32(body + 16, little: little))
        packet(
            data, interfaceID: interfaceID, high: high, low: low, captured: captured, original: original,
            dataStart: body + 20, end: end, offset: offset, section: section, blockName: "Packet Block", into: &builder)
    }

    static func packet(
        _ data: [UInt8], interfaceID: Int, high: UInt32, low: UInt32, captured: Int, original: Int, dataStart: Int,
        end: Int, offset: Int, section: Section, blockName: String, into builder: inout CaptureBuilder
    ) {
        let room = end - dataStart
        let interface: Int? = interfaceID < section.interfaceCount ? section.firstInterface + interfaceID : nil
        let time = interface.flatMap { Self.time(high: high, low: low, interface: builder.interfaces[$0]) }
        guard captured <= room else {
            builder.addFrame(
                content: .undecodable("its captured length \(captured) exceeds the \(room) bytes its \(blockName) holds"),
                time: time, interface: interface, captured: room, original: original, fileOffset: offset)
            return
        }
        guard let interface else {
            builder.addFrame(
                content: .undecodable(
                    "its \(blockName) names interface \(interfaceID), but section \(section.index) has \(section.interfaceCount) interface\(section.interfaceCount == 1 ? "" : "s")"),
                time: nil, interface: nil, captured: captured, original: original, fileOffset: offset)
            return
        }
        let fcs = flagsFCSLength(data, from: dataStart + padded4(captured), to: end, little: section.littleEndian)
        builder.addFrame(
            data, start: dataStart, captured: captured, original: original, time: time, interface: interface,
            fileOffset: offset, fcsLength: fcs)
    }

    static func simplePacket(_ data: [UInt8], body: Int, end: Int, offset: Int, section: Section, into builder: inout CaptureBuilder) {
        guard end - body >= 4 else {
            builder.addFrame(
                content: .undecodable("its Simple Packet Block is too short: \(end - body + 12) bytes, at least 16 needed"),
                time: nil, interface: nil, captured: 0, original: 0, fileOffset: offset)
            return
        }
        let original = Int(data.u32(body, little: section.littleEndian))
        guard section.interfaceCount > 0 else {
            builder.addFrame(
                content: .undecodable("a Simple Packet Block belongs to interface 0, but section \(section.index) has no interfaces"),
                time: nil, interface: nil, captured: 0, original: original, fileOffset: offset)
            return
        }
        let interface = section.firstInterface
        let snapLength = builder.interfaces[interface].snapLength
        var captured = min(original, end - (body + 4))
        if snapLength > 0 { captured = min(captured, snapLength) }
        builder.addFrame(
            data, start: body + 4, captured: captured, original: original, time: nil, interface: interface,
            fileOffset: offset)
    }

    // MARK: Names

    static func isPacketRecord(_ type: UInt32) -> Bool {
        switch type {
        case 2, 3, 6, 0x9, 0x204, 0x216, 0x221, 0xBAD, 0x4000_0BAD: true
        default: false
        }
    }

    /// "an Enhanced Packet Block", "a block of type 0x00001234".
    static func aBlock(_ type: UInt32) -> String {
        let name = blockName(type)
        return (name.first.map { "AEIOU".contains($0) } ?? false ? "an " : "a ") + name
    }

    static func blockName(_ type: UInt32) -> String {
        switch type {
        case 1: "Interface Description Block"
        case 2: "Packet Block"
        case 3: "Simple Packet Block"
        case 4: "Name Resolution Block"
        case 5: "Interface Statistics Block"
        case 6: "Enhanced Packet Block"
        case 0xA: "Decryption Secrets Block"
        case 0xBAD, 0x4000_0BAD: "Custom Block"
        default: "block of type \(hex(Int(type), digits: 8))"
        }
    }
}
