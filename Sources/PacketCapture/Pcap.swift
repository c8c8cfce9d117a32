/// Classic pcap: a 24-byte file header, then records of a 16-byte header (24 in the
/// "modified" format) and the frame's bytes.
enum PcapReader {
    /// What the magic number says.
    struct Magic {
        var littleEndian: Bool
        var nanoseconds: Bool
        /// Alexey Kuznetzov's modified format: 8 more bytes in each record header.
        var modified: Bool
    }

    /// A record claiming more than this is not believed, even when the file is that large.
    static let maximumRecord = 256 * 1024 * 1024

    static func magic(_ b0: UInt8, _ b1: UInt8, _ b2: UInt8, _ b3: UInt8) -> Magic? {
        switch (b0, b1, b2, b3) {
        case (0xA1, 0xB2, 0xC3, 0xD4): Magic(littleEndian: false, nanoseconds: false, modified: false)
        case (0xD4, 0xC3, 0xB2, 0xA1): Magic(littleEndian: true, nanoseconds: false, modified: false)
        case (0xA1, 0xB2, 0x3C, 0x4D): Magic(littleEndian: false, nanoseconds: true, modified: false)
        case (0x4D, 0x3C, 0xB2, 0xA1): Magic(littleEndian: true, nanoseconds: true, modified: false)
        case (0xA1, 0xB2, 0xCD, 0x34): Magic(littleEndian: false, nanoseconds: false, modified: true)
        case (0x34, 0xCD, 0xB2, 0xA1): Magic(littleEndian: true, nanoseconds: false, modified: true)
        default: nil
        }
    }

    static func read(_ data: [UInt8], into builder: inout CaptureBuilder) throws(CaptureError) {
        guard data.count >= 24 else {
            throw CaptureError(
                .truncatedHeader, "the pcap file header is cut short: 24 bytes needed, \(data.count) present", at: 0)
        }
        guard let magic = magic(data[0], data[1], data[2], data[3]) else {
            throw CaptureError(.notACapture(.unknown), CaptureError.notACaptureReason(.unknown), at: 0)
        }
        let little = magic.littleEndian
        let major = data.u16(4, little: little)
        let minor = data.u16(6, little: little)
        guard major == 2 else {
            throw CaptureError(
                .unsupportedVersion, "pcap version \(major).\(minor) is not supported (only 2.x is)", at: 4)
        }
        let snapLength = Int(data.u32(16, little: little))
        let linkField = data.u32(20, little: little)
        // The low 16 bits are the link type; bit 26 set means bits 28-31 give the FCS length
        // of every frame, in 16-bit words.
        let fcsLength = linkField & 0x0400_0000 != 0 ? Int(linkField >> 28) * 2 : 0
        builder.addInterface(
            CaptureInterface(
                linkType: LinkType(Int(linkField & 0xFFFF)), name: nil, snapLength: snapLength,
                timestampUnitsPerSecond: magic.nanoseconds ? 1_000_000_000 : 1_000_000, timestampOffset: 0,
                fcsLength: fcsLength, section: 0))
        let recordHeader = magic.modified ? 24 : 16
        let fractionScale: Int64 = magic.nanoseconds ? 1 : 1000
        var offset = 24
        while offset < data.count {
            let remaining = data.count - offset
            let number = builder.nextFrameNumber
            guard remaining >= recordHeader else {
                builder.problems.append(
                    CaptureProblem(
                        .truncated,
                        "the capture ends inside the record header of frame \(number): \(recordHeader) bytes needed, \(remaining) remain",
                        frames: [number], offset: offset))
                break
            }
            let seconds = data.u32(offset, little: little)
            let fraction = data.u32(offset + 4, little: little)
            let captured = Int(data.u32(offset + 8, little: little))
            let original = Int(data.u32(offset + 12, little: little))
            let start = offset + recordHeader
            let available = data.count - start
            guard captured <= Self.maximumRecord else {
                builder.problems.append(
                    CaptureProblem(
                        .badBlock,
                        "the record of frame \(number) says \(captured) bytes were captured (more than 256 MiB): reading stopped",
                        frames: [number], offset: offset))
                break
            }
            guard captured <= available else {
                builder.problems.append(
                    CaptureProblem(
                        .truncated,
                        "the capture ends inside frame \(number): its record says \(captured) bytes, \(available) remain (\(captured - available) missing)",
                        frames: [number], offset: offset))
                break
            }
            let time = CaptureTime(seconds: Int64(seconds), nanoseconds: Int64(fraction) * fractionScale)
            builder.addFrame(
                data, start: start, captured: captured, original: original, time: time, interface: 0, fileOffset: offset)
            offset = start + captured
        }
    }
}
