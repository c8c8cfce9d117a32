/// Collects what the format readers find: interfaces, frames (decoded as they come, so
/// fragments reassemble in file order), problems.
struct CaptureBuilder {
    var interfaces: [CaptureInterface] = []
    var frames: [CapturedFrame] = []
    var problems: [CaptureProblem] = []
    private var decoder = FrameDecoder()
    /// Per interface: the message for frames of an unsupported link type (made once, shared).
    private var unsupported: [String?] = []

    /// The number the next frame will get.
    var nextFrameNumber: Int { frames.count + 1 }

    mutating func addInterface(_ interface: CaptureInterface) {
        interfaces.append(interface)
        if interface.linkType.isSupported {
            unsupported.append(nil)
        } else {
            let names = LinkType.supported.map(\.description).joined(separator: ", ")
            let type = interface.linkType
            let named = type.name.map { " (\($0))" } ?? ""
            unsupported.append("link type \(type.rawValue)\(named) is not supported (supported: \(names))")
        }
    }

    /// Adds a frame whose bytes are `data[start ..< start + captured]` and decodes it.
    ///
    /// - Parameters:
    ///   - interface: index into ``interfaces``, already checked to exist.
    ///   - fcsLength: the packet's own FCS length (pcapng `epb_flags`), overriding the
    ///     interface's.
    mutating func addFrame(
        _ data: [UInt8], start: Int, captured: Int, original: Int, time: CaptureTime?, interface: Int,
        fileOffset: Int, fcsLength: Int? = nil
    ) {
        let number = nextFrameNumber
        let content: FrameContent
        decoder.cutDatagram = nil
        if interface < 0 || interface >= interfaces.count {
            content = .undecodable("interface \(interface) does not exist")
        } else if let message = unsupported[interface] {
            content = .undecodable(message)
        } else {
            let description = interfaces[interface]
            // The FCS is the last bytes on the wire; strip the part of it that was captured.
            let fcs = fcsLength ?? description.fcsLength
            var end = start + captured
            if fcs > 0 {
                let missing = max(0, original - captured)
                end -= min(captured, max(0, fcs - missing))
            }
            let meta = FrameMeta(number: number, start: start, captured: captured, original: original)
            content = decoder.decode(
                data, start: start, end: end, linkType: description.linkType, meta: meta, problems: &problems)
        }
        frames.append(
            CapturedFrame(
                number: number, time: time, interface: interface, capturedLength: captured, originalLength: original,
                fileOffset: fileOffset, content: content, cutDatagram: decoder.cutDatagram))
    }

    /// Adds a frame that is decided without decoding (a damaged record, a non-packet record
    /// that Wireshark still counts as a frame).
    mutating func addFrame(
        content: FrameContent, time: CaptureTime?, interface: Int?, captured: Int, original: Int, fileOffset: Int
    ) {
        frames.append(
            CapturedFrame(
                number: nextFrameNumber, time: time, interface: interface, capturedLength: captured,
                originalLength: original, fileOffset: fileOffset, content: content))
    }

    mutating func finish(format: CaptureFormat) -> Capture {
        decoder.reassembler.finish(problems: &problems)
        return Capture(format: format, interfaces: interfaces, frames: frames, problems: problems)
    }
}
