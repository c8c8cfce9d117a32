// libFuzzer target for PacketCapture, the capture reader of `nearby decode`
// (Sources/PacketCapture). Tools/fuzz/build compiles this file into the SAME module as
// Sources/PacketCapture/*.swift (module PacketCapture), so it may use internal API; it needs no
// other module (FuzzSupport.swift, compiled in too, imports NearbyBasics for hexString).
//
// Every failed property calls `fail`, which traps with a message naming the property; libFuzzer
// then saves the input under .build-fuzz/crashes-pcap/. The properties:
//
//  C1 Reading any bytes never traps: Capture.kind(of:) and Capture.read(_:) return or throw a
//     CaptureError; read throws .notACapture(kind) exactly when kind(of:) is neither .pcap nor
//     .pcapng (and with that very kind); a pcap throws exactly when its file header is cut
//     short (.truncatedHeader) or its major version is not 2 (.unsupportedVersion); a pcapng
//     throws exactly when its first Section Header Block cannot be read (.truncatedHeader,
//     .badHeader or .unsupportedVersion); the format read is the kind detected; an error's
//     offset lies in the input. kind(of:) does not change when bytes after the first 512 do.
//     The input placed after a valid pcap file header, and after a valid pcapng Section Header
//     Block and Interface Description Block, reads without throwing (C2 is checked on both:
//     so the fuzzer explores pcap records and pcapng blocks directly).
//  C2 What it returns is consistent (checked on the input, on the input behind the headers of
//     C1, and on every capture C3 and C4 write): frames are numbered 1...n in order; a frame's
//     capturedLength is at most the input size, its file offset inside it, its interface an
//     index of `interfaces`, its time's nanoseconds in 0..<10^9; a UDP payload that was not
//     reassembled (fragmentFrames empty)
//     occurs in the input, inside its frame's record; a reassembled one is at most 65,535
//     bytes and lists at least 2 fragment frames, ascending, whose last is the frame itself and
//     whose others hold `.fragment`; both endpoints are of one IP version, read "a.b.c.d:port"
//     or "[ipv6]:port" exactly as RFC 5952 writes the address (checked against this file's own
//     formatter) and rebuild from their address bytes; hop limit 0...255, VLAN IDs 0...4095;
//     problems list ascending frames within 1...n (n + 1, the frame cut short, for .truncated
//     and .badBlock), fragment problems only frames holding `.fragment`, offsets in the input.
//  C3 A well-formed capture gives its payload back: from the input (a cheap deterministic
//     hash seeding a generator) the harness chooses pcap (micro/nanosecond, the "modified"
//     format, FCS bits) or pcapng (byte order, an earlier section, a dummy interface, if_name,
//     if_tsresol, if_tsoffset, if_fcslen, epb_flags FCS length, Enhanced/Simple/obsolete packet
//     blocks, a block to skip), a link type (Ethernet II or 802.3 LLC/SNAP with zero to two
//     VLAN tags, Linux cooked v1/v2 optionally with LLC and VLAN tags, BSD NULL and OpenBSD
//     LOOP, raw IP as 101/12/14/228/229, 802.11 data frames with and without radiotap, radiotap
//     FCS and header padding), an FCS possibly cut by the snap length, frame padding, and IPv4
//     (options, DF, total length 0 as offload captures have it) or IPv6 (hop-by-hop, routing,
//     destination options, authentication and atomic fragment headers, payload length 0), and
//     writes a capture holding the input as the payload of one UDP datagram (when it fits in
//     65,535 bytes with its headers), followed by a second record whose frame is the raw input.
//     It reads back with the interfaces written; frame 1 is exactly that `.udp` datagram (payload,
//     addresses, ports, hop limit, VLAN IDs, no fragment frames) with the lengths, file offset,
//     interface and time written; frame 2 is the raw input's record; the only problems are a
//     skipped unknown block (when one was written) and fragment problems about frame 2.
//  C4 Fragments: when the input is at least 16 bytes, the same datagram is also written as 2-4
//     fragments (IPv4, offsets multiples of 8; or IPv6 fragment headers after the chosen
//     unfragmentable headers, with a destination options header in the fragmentable part
//     sometimes), in an order chosen from the input, some overlapping the next one by 8 equal
//     bytes, one sometimes written twice, each with its own TTL/hop limit and VLAN IDs. The
//     datagram comes back whole at the frame of the last fragment written, with fragmentFrames
//     listing every frame written, the hop limit of the offset-0 fragment and the VLAN IDs of
//     the completing frame; every earlier frame holds `.fragment`; no problems but a skipped
//     unknown block.

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ start: UnsafeRawPointer?, _ count: Int) -> CInt {
    let input = UnsafeRawBufferPointer(start: count == 0 ? nil : start, count: count)
    FuzzPcap(bytes: Array(input)).run()
    return 0
}

struct FuzzPcap {
    let bytes: [UInt8]

    func run() {
        if let capture = readAny() {  // C1
            checkCoherent(capture, of: bytes, "C2", "the input")  // C2
        }
        checkBehindHeaders()  // C1, C2
        var random = FuzzRandom(seedingFrom: bytes)
        let plan = FuzzPlan(random: &random)
        checkWellFormed(plan, random: &random)  // C3
        if bytes.count >= 16 { checkFragments(plan, random: &random) }  // C4
    }

    // MARK: C1

    func readAny() -> Capture? {
        let kind = Capture.kind(of: bytes)
        if bytes.count > 512 {
            var changed = bytes
            for index in 512..<changed.count { changed[index] = ~changed[index] }
            let again = Capture.kind(of: changed)
            guard again == kind else {
                fail("C1", "kind(of:) is \(kind), but \(again) once the bytes after the first 512 change")
            }
        }
        let isCapture = kind == .pcap || kind == .pcapng
        let result = Result { () throws(CaptureError) -> Capture in try Capture.read(bytes) }
        switch result {
        case .success(let capture):
            guard isCapture else { fail("C1", "kind(of:) is \(kind) but read(_:) read \(capture.frames.count) frames") }
            guard capture.format == (kind == .pcap ? .pcap : .pcapng) else {
                fail("C1", "kind(of:) is \(kind) but read(_:) says the format is \(capture.format)")
            }
            if kind == .pcap, let expected = expectedPcapError() {
                fail("C1", "a pcap that should throw \(expected) was read (\(capture.frames.count) frames)")
            }
            if kind == .pcapng, let why = firstSectionUnreadable() {
                fail("C1", "a pcapng whose first Section Header Block is unreadable (\(why)) was read")
            }
            return capture
        case .failure(let error):
            guard (0...bytes.count).contains(error.offset), !error.reason.isEmpty, !error.description.isEmpty else {
                fail("C1", "error \(error.code) has offset \(error.offset) (input \(bytes.count) bytes) or no reason")
            }
            switch error.code {
            case .notACapture(let said):
                guard !isCapture else { fail("C1", "kind(of:) is \(kind) but read(_:) threw \(error.code): \(error)") }
                guard said == kind else { fail("C1", "kind(of:) is \(kind) but read(_:) threw notACapture(\(said))") }
            default:
                guard isCapture else { fail("C1", "kind(of:) is \(kind) but read(_:) threw \(error.code): \(error)") }
                if kind == .pcap {
                    guard let expected = expectedPcapError(), expected == error.code else {
                        fail("C1", "a pcap threw \(error.code) (expected \(String(describing: expectedPcapError()))): \(error)")
                    }
                } else {
                    guard firstSectionUnreadable() != nil else {
                        fail("C1", "a pcapng with a readable first Section Header Block threw \(error.code): \(error)")
                    }
                }
            }
            return nil
        }
    }

    /// The input as the records of a pcap and as the blocks of a pcapng section: after a valid
    /// file header (pcap) or Section Header Block and Interface Description Block (pcapng), of
    /// a link type chosen by the input's length, nothing throws and C2 holds. (Without this the
    /// fuzzer would rarely build pcapng blocks from the pcap seeds.)
    func checkBehindHeaders() {
        let linkType = [1, 1, 113, 276, 0, 101, 105, 127, 228, 1][bytes.count % 10]
        var pcap = FuzzWriter(little: true)
        pcap.u32(0xA1B2_C3D4)
        pcap.u16(2)
        pcap.u16(4)
        pcap.u64(0)
        pcap.u32(262_144)
        pcap.u32(UInt32(linkType))
        pcap.append(bytes)
        var pcapng = FuzzWriter(little: true)
        for word: UInt32 in [0x0A0D_0D0A, 28, 0x1A2B_3C4D] { pcapng.u32(word) }
        pcapng.u16(1)
        pcapng.u16(0)
        pcapng.u64(UInt64.max)
        pcapng.u32(28)
        for word: UInt32 in [1, 20, UInt32(linkType), 0, 20] { pcapng.u32(word) }
        pcapng.append(bytes)
        let files = [
            (pcap.bytes, "the input behind a pcap file header"), (pcapng.bytes, "the input behind a pcapng SHB and IDB"),
        ]
        for (file, what) in files {
            let capture: Capture
            do throws(CaptureError) {
                capture = try Capture.read(file)
            } catch {
                fail("C1", "\(what) (link type \(linkType)) threw \(error)")
            }
            checkCoherent(capture, of: file, "C2", "\(what) (link type \(linkType))")
        }
    }

    /// What reading a pcap (magic already seen) must throw, if anything.
    func expectedPcapError() -> CaptureError.Code? {
        guard bytes.count >= 24 else { return .truncatedHeader }
        let little = bytes[0] == 0xD4 || bytes[0] == 0x4D || bytes[0] == 0x34
        let major = little ? Int(bytes[4]) | Int(bytes[5]) << 8 : Int(bytes[4]) << 8 | Int(bytes[5])
        return major == 2 ? nil : .unsupportedVersion
    }

    /// Why the Section Header Block at the start of the input cannot be read, if it cannot
    /// (pcapng: type, total length, byte-order magic, major and minor version, section
    /// length, options, total length again; the length at least 28 and a multiple of 4).
    func firstSectionUnreadable() -> String? {
        guard bytes.count >= 12 else { return "fewer than 12 bytes" }
        func word(_ at: Int, little: Bool) -> Int {
            let quad = bytes[at..<(at + 4)].map(Int.init)
            return little
                ? quad[0] | quad[1] << 8 | quad[2] << 16 | quad[3] << 24
                : quad[0] << 24 | quad[1] << 16 | quad[2] << 8 | quad[3]
        }
        let little: Bool
        if word(8, little: true) == 0x1A2B_3C4D {
            little = true
        } else if word(8, little: false) == 0x1A2B_3C4D {
            little = false
        } else {
            return "no byte-order magic"
        }
        let length = word(4, little: little)
        guard length >= 28, length % 4 == 0 else { return "length \(length)" }
        if bytes.count >= 16 {
            let major = little ? Int(bytes[12]) | Int(bytes[13]) << 8 : Int(bytes[12]) << 8 | Int(bytes[13])
            guard major == 1 else { return "major version \(major)" }
        }
        guard length <= bytes.count else { return "length \(length) beyond the end" }
        guard word(length - 4, little: little) == length else { return "trailing length differs" }
        return nil
    }

    // MARK: C2

    /// Checks what any capture read from `data` must satisfy.
    func checkCoherent(_ capture: Capture, of data: [UInt8], _ property: String, _ what: String) {
        func broken(_ detail: String) -> Never {
            fail(property, "\(what): \(detail)", capture: what == "the input" ? nil : data)
        }
        let count = capture.frames.count
        if capture.format == .pcap, capture.interfaces.count != 1 {
            broken("a pcap with \(capture.interfaces.count) interfaces")
        }
        for (index, frame) in capture.frames.enumerated() {
            let number = index + 1
            guard frame.number == number else { broken("frame \(number) is numbered \(frame.number)") }
            guard (0...data.count).contains(frame.capturedLength), frame.originalLength >= 0 else {
                broken(
                    "frame \(number) has captured length \(frame.capturedLength), original \(frame.originalLength) "
                        + "(\(data.count) bytes of input)")
            }
            guard (0..<data.count).contains(frame.fileOffset) else {
                broken("frame \(number) has file offset \(frame.fileOffset) (\(data.count) bytes of input)")
            }
            if let interface = frame.interface, !capture.interfaces.indices.contains(interface) {
                broken("frame \(number) names interface \(interface) of \(capture.interfaces.count)")
            }
            if let time = frame.time, !(0..<1_000_000_000).contains(time.nanoseconds) {
                broken("frame \(number) has time \(time.seconds) s \(time.nanoseconds) ns")
            }
            let description = frame.content.description
            switch frame.content {
            case .udp(let datagram):
                checkDatagram(datagram, in: frame, of: capture, data: data, broken)
            case .fragment:
                break
            case .other(let words):
                if words.isEmpty { broken("frame \(number) is .other(\"\")") }
            case .undecodable(let reason):
                if reason.isEmpty || description.isEmpty { broken("frame \(number) is .undecodable(\"\")") }
            }
        }
        for problem in capture.problems {
            guard !problem.message.isEmpty, problem.count >= 1, !problem.description.isEmpty else {
                broken("a problem without a message or count: \(problem)")
            }
            if let offset = problem.offset, !(0...data.count).contains(offset) {
                broken("problem at offset \(offset) of \(data.count): \(problem)")
            }
            guard zip(problem.frames, problem.frames.dropFirst()).allSatisfy({ $0 < $1 }) else {
                broken("problem frames \(problem.frames) are not ascending: \(problem)")
            }
            switch problem.kind {
            case .truncated, .badBlock:
                guard problem.frames.allSatisfy({ (1...(count + 1)).contains($0) }) else {
                    broken("problem frames \(problem.frames) outside 1...\(count + 1): \(problem)")
                }
            case .fragmentsIncomplete, .fragmentsOverlap, .fragmentsTooLarge, .fragmentsEvicted:
                guard !problem.frames.isEmpty, problem.frames.allSatisfy({ (1...count).contains($0) }) else {
                    broken("fragment problem frames \(problem.frames) empty or outside 1...\(count): \(problem)")
                }
                for number in problem.frames {
                    guard case .fragment = capture.frames[number - 1].content else {
                        broken("a fragment problem names frame \(number), which holds \(capture.frames[number - 1].content): \(problem)")
                    }
                }
            case .irregularBlock, .unknownBlocks:
                guard problem.frames.allSatisfy({ (1...count).contains($0) }) else {
                    broken("problem frames \(problem.frames) outside 1...\(count): \(problem)")
                }
            }
        }
    }

    func checkDatagram(
        _ datagram: UDPDatagram, in frame: CapturedFrame, of capture: Capture, data: [UInt8],
        _ broken: (String) -> Never
    ) {
        let number = frame.number
        guard datagram.source.isIPv6 == datagram.destination.isIPv6 else {
            broken("frame \(number): source \(datagram.source) and destination \(datagram.destination) differ in IP version")
        }
        if let why = endpointError(datagram.source) ?? endpointError(datagram.destination) {
            broken("frame \(number): \(why)")
        }
        guard (0...255).contains(datagram.hopLimit), datagram.vlanTags.allSatisfy({ (0...4095).contains($0) }) else {
            broken("frame \(number): hop limit \(datagram.hopLimit), VLAN IDs \(datagram.vlanTags)")
        }
        guard datagram.payload.count <= 65_535 - 8 else {
            broken("frame \(number): a payload of \(datagram.payload.count) bytes")
        }
        let fragments = datagram.fragmentFrames
        if fragments.isEmpty {
            // The frame's bytes start at most 28 bytes after its record (a pcapng Enhanced or
            // obsolete Packet Block) and are capturedLength long.
            let window = frame.fileOffset..<min(data.count, frame.fileOffset + 28 + frame.capturedLength)
            guard Self.occurs(datagram.payload, in: data, window) else {
                broken(
                    "frame \(number): its \(datagram.payload.count)-byte payload is not in its record's bytes "
                        + "\(window): \(hexText(datagram.payload, limit: 64))")
            }
        } else {
            guard fragments.count >= 2, fragments.last == number, fragments.first! >= 1,
                zip(fragments, fragments.dropFirst()).allSatisfy({ $0 < $1 })
            else {
                broken("frame \(number): fragment frames \(fragments)")
            }
            for other in fragments.dropLast() {
                guard case .fragment = capture.frames[other - 1].content else {
                    broken("frame \(number) lists fragment frame \(other), which holds \(capture.frames[other - 1].content)")
                }
            }
        }
    }

    /// Whether `needle` occurs in `haystack[window]`.
    static func occurs(_ needle: [UInt8], in haystack: [UInt8], _ window: Range<Int>) -> Bool {
        guard needle.count <= window.count else { return false }
        guard let head = needle.first else { return true }
        var position = window.lowerBound
        let last = window.upperBound - needle.count
        search: while position <= last {
            if haystack[position] == head {
                var offset = 1
                while offset < needle.count {
                    if haystack[position + offset] != needle[offset] {
                        position += 1
                        continue search
                    }
                    offset += 1
                }
                return true
            }
            position += 1
        }
        return false
    }

    /// What is wrong with an endpoint's text or bytes, if anything.
    func endpointError(_ endpoint: IPEndpoint) -> String? {
        let address = endpoint.address
        guard address.count == (endpoint.isIPv6 ? 16 : 4) else {
            return "endpoint \(endpoint) has \(address.count) address bytes"
        }
        guard IPEndpoint(address: address, port: endpoint.port) == endpoint else {
            return "endpoint \(endpoint) does not rebuild from its address bytes \(hexText(address))"
        }
        let text = endpoint.isIPv6 ? Self.ipv6Text(address) : address.map { String($0) }.joined(separator: ".")
        let expected = (endpoint.isIPv6 ? "[\(text)]" : text) + ":\(endpoint.port)"
        guard endpoint.description == expected, endpoint.addressDescription == text else {
            return "endpoint \(quoted(endpoint.description)) (address \(quoted(endpoint.addressDescription))) should read \(quoted(expected))"
        }
        return nil
    }

    /// RFC 5952: lower-case hex groups without leading zeros, the longest run of two or more
    /// zero groups (the first of equal runs) as "::".
    static func ipv6Text(_ address: [UInt8]) -> String {
        let groups = stride(from: 0, to: 16, by: 2).map { Int(address[$0]) << 8 | Int(address[$0 + 1]) }
        var bestStart = -1
        var bestLength = 1
        var runStart = -1
        for index in 0...8 {
            if index < 8, groups[index] == 0 {
                if runStart < 0 { runStart = index }
            } else if runStart >= 0 {
                if index - runStart > bestLength {
                    bestStart = runStart
                    bestLength = index - runStart
                }
                runStart = -1
            }
        }
        let texts = groups.map { String($0, radix: 16) }
        guard bestStart >= 0 else { return texts.joined(separator: ":") }
        return texts[..<bestStart].joined(separator: ":") + "::" + texts[(bestStart + bestLength)...].joined(separator: ":")
    }

    // MARK: C3

    func checkWellFormed(_ plan: FuzzPlan, random: inout FuzzRandom) {
        let headers = FuzzHeaders(plan: plan, random: &random)
        let udp = headers.udp(payload: bytes)
        guard let ip = headers.packet(udp, random: &random) else { return }  // too large for one datagram
        let tags = plan.newTags(random: &random)
        let written = plan.frame(ip, ipv6: plan.ipv6, tags: tags, random: &random)
        let time = plan.newTime(random: &random)
        let records = [
            FuzzRecord(frame: written.frame, original: written.original, time: time),
            FuzzRecord(frame: bytes, original: bytes.count, time: time),
        ]
        let file = plan.write(records, random: &random)
        let what = "the C3 capture (\(plan.summary), \(headers.summary))"
        let capture = read(file, "C3", what)
        checkCoherent(capture, of: file.bytes, "C2", what)
        func broken(_ detail: String) -> Never { fail("C3", "\(what): \(detail)", capture: file.bytes) }

        guard capture.interfaces == file.interfaces else {
            broken("interfaces read \(capture.interfaces), written \(file.interfaces)")
        }
        guard capture.frames.count == 2 else {
            broken("\(capture.frames.count) frames read, 2 written: \(capture.frames.map(\.content)); problems \(capture.problems)")
        }
        let first = capture.frames[0]
        let expected = UDPDatagram(
            source: headers.source, destination: headers.destination, payload: bytes, fragmentFrames: [],
            vlanTags: tags.map { $0.tci & 0xFFF }, hopLimit: headers.hopLimit)
        guard first.content == .udp(expected) else {
            broken("frame 1 is \(differences(first.content, expected)); problems \(capture.problems)")
        }
        let expectedTime = plan.packetBlock == 3 ? nil : plan.expectedTime(time)
        guard first.capturedLength == written.frame.count, first.originalLength == written.original,
            first.fileOffset == file.offsets[0], first.interface == file.packetInterface, first.time == expectedTime
        else {
            broken(
                "frame 1 has lengths \(first.capturedLength)/\(first.originalLength), offset \(first.fileOffset), "
                    + "interface \(String(describing: first.interface)), time \(String(describing: first.time)); written "
                    + "\(written.frame.count)/\(written.original), \(file.offsets[0]), \(file.packetInterface), "
                    + "\(String(describing: expectedTime))")
        }
        let second = capture.frames[1]
        guard second.capturedLength == bytes.count, second.originalLength == bytes.count,
            second.fileOffset == file.offsets[1], second.interface == file.packetInterface
        else {
            broken(
                "frame 2 has lengths \(second.capturedLength)/\(second.originalLength), offset \(second.fileOffset), "
                    + "interface \(String(describing: second.interface)); written \(bytes.count), \(file.offsets[1])")
        }
        checkProblems(capture, file: file, fragmentFrames: [2], broken)
    }

    /// The problems of a capture the harness wrote: one unknown-blocks problem when it wrote an
    /// unknown block; fragment problems only about `fragmentFrames`.
    func checkProblems(_ capture: Capture, file: FuzzFile, fragmentFrames: [Int], _ broken: (String) -> Never) {
        var unknown = 0
        for problem in capture.problems {
            switch problem.kind {
            case .unknownBlocks where file.unknownBlocks > 0 && problem.count == file.unknownBlocks:
                unknown += 1
            case .fragmentsIncomplete, .fragmentsOverlap, .fragmentsTooLarge, .fragmentsEvicted:
                guard !problem.frames.isEmpty, problem.frames.allSatisfy(fragmentFrames.contains) else {
                    broken("unexpected problem \(problem.kind): \(problem)")
                }
            default:
                broken("unexpected problem \(problem.kind): \(problem)")
            }
        }
        guard unknown == (file.unknownBlocks > 0 ? 1 : 0) else {
            broken("\(file.unknownBlocks) unknown blocks written, problems \(capture.problems)")
        }
    }

    func read(_ file: FuzzFile, _ property: String, _ what: String) -> Capture {
        let kind = Capture.kind(of: file.bytes)
        guard kind == (file.pcapng ? .pcapng : .pcap) else {
            fail(property, "\(what): kind(of:) is \(kind)", capture: file.bytes)
        }
        do throws(CaptureError) {
            return try Capture.read(file.bytes)
        } catch {
            fail(property, "\(what) threw \(error)", capture: file.bytes)
        }
    }

    func differences(_ content: FrameContent, _ expected: UDPDatagram) -> String {
        guard case .udp(let datagram) = content else { return "\(content), not .udp" }
        var parts: [String] = []
        if datagram.payload != expected.payload {
            parts.append("payload of \(datagram.payload.count) bytes \(hexText(datagram.payload, limit: 48)), not \(expected.payload.count)")
        }
        if datagram.source != expected.source || datagram.destination != expected.destination {
            parts.append("\(datagram.source) → \(datagram.destination), not \(expected.source) → \(expected.destination)")
        }
        if datagram.fragmentFrames != expected.fragmentFrames {
            parts.append("fragment frames \(datagram.fragmentFrames), not \(expected.fragmentFrames)")
        }
        if datagram.vlanTags != expected.vlanTags { parts.append("VLAN IDs \(datagram.vlanTags), not \(expected.vlanTags)") }
        if datagram.hopLimit != expected.hopLimit { parts.append("hop limit \(datagram.hopLimit), not \(expected.hopLimit)") }
        return "a datagram with " + parts.joined(separator: "; ")
    }

    // MARK: C4

    func checkFragments(_ plan: FuzzPlan, random: inout FuzzRandom) {
        let headers = FuzzHeaders(plan: plan, random: &random)
        let udp = headers.udp(payload: bytes)
        guard let pieces = headers.fragments(udp, random: &random) else { return }
        var records: [FuzzRecord] = []
        var lastTags: [FuzzTag] = []
        for piece in pieces {
            let tags = plan.newTags(random: &random)
            let written = plan.frame(piece.packet, ipv6: plan.ipv6, tags: tags, random: &random)
            records.append(FuzzRecord(frame: written.frame, original: written.original, time: plan.newTime(random: &random)))
            lastTags = tags
        }
        let file = plan.write(records, random: &random)
        let order = pieces.map { "\($0.offset)..<\($0.end)" }.joined(separator: ", ")
        let what = "the C4 capture (\(plan.summary), \(headers.summary), fragments \(order))"
        let capture = read(file, "C4", what)
        checkCoherent(capture, of: file.bytes, "C2", what)
        func broken(_ detail: String) -> Never { fail("C4", "\(what): \(detail)", capture: file.bytes) }

        guard capture.frames.count == records.count else {
            broken("\(capture.frames.count) frames read, \(records.count) written; problems \(capture.problems)")
        }
        for frame in capture.frames.dropLast() {
            guard case .fragment = frame.content else {
                broken("frame \(frame.number) holds \(frame.content), not a fragment; problems \(capture.problems)")
            }
        }
        let firstHopLimit = pieces.first { $0.offset == 0 }!.hopLimit
        let expected = UDPDatagram(
            source: headers.source, destination: headers.destination, payload: bytes,
            fragmentFrames: Array(1...records.count), vlanTags: lastTags.map { $0.tci & 0xFFF }, hopLimit: firstHopLimit)
        let last = capture.frames[records.count - 1]
        guard last.content == .udp(expected) else {
            broken("frame \(last.number) is \(differences(last.content, expected)); problems \(capture.problems)")
        }
        checkProblems(capture, file: file, fragmentFrames: [], broken)
    }

    // MARK: reporting

    func fail(_ property: String, _ detail: String, capture: [UInt8]? = nil) -> Never {
        var text = detail
        if let capture { text += "\ncapture (\(capture.count) bytes): \(hexText(capture, limit: 4096))" }
        fuzzFailure("pcap", property, text, input: bytes)
    }
}

/// Lower-case hex, at most `limit` bytes of it.
func hexText(_ bytes: [UInt8], limit: Int = .max) -> String {
    let digits = Array("0123456789abcdef".utf8)
    var text: [UInt8] = []
    text.reserveCapacity(2 * min(bytes.count, limit) + 3)
    for byte in bytes.prefix(limit) {
        text.append(digits[Int(byte >> 4)])
        text.append(digits[Int(byte & 0xF)])
    }
    if bytes.count > limit { text += Array("...".utf8) }
    return String(decoding: text, as: UTF8.self)
}

// MARK: - Choices

/// SplitMix64, seeded from a hash of the input: every input tries one combination of choices,
/// and the same input always the same one.
struct FuzzRandom {
    var state: UInt64

    init(seedingFrom bytes: [UInt8]) {
        var hash: UInt64 = 0xCBF2_9CE4_8422_2325 ^ UInt64(truncatingIfNeeded: bytes.count)
        for byte in bytes.prefix(64) + bytes.suffix(16) { hash = (hash ^ UInt64(byte)) &* 0x100_0000_01B3 }
        state = hash
    }

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// 0 ..< bound (0 when bound <= 1).
    mutating func below(_ bound: Int) -> Int { bound <= 1 ? 0 : Int(next() % UInt64(bound)) }
    /// True one time in `odds`.
    mutating func oneIn(_ odds: Int) -> Bool { below(odds) == 0 }
    mutating func bool() -> Bool { next() & 1 == 0 }
    mutating func byte() -> UInt8 { UInt8(truncatingIfNeeded: next()) }
    mutating func u16() -> Int { Int(next() & 0xFFFF) }
    mutating func u32() -> UInt32 { UInt32(truncatingIfNeeded: next()) }
    mutating func bytes(_ count: Int) -> [UInt8] { (0..<count).map { _ in byte() } }
    mutating func pick<T>(_ choices: [T]) -> T { choices[below(choices.count)] }
    mutating func shuffle<T>(_ items: inout [T]) {
        guard items.count > 1 else { return }
        for index in stride(from: items.count - 1, to: 0, by: -1) { items.swapAt(index, below(index + 1)) }
    }
}

func fuzzBE16(_ value: Int) -> [UInt8] { [UInt8(truncatingIfNeeded: value >> 8), UInt8(truncatingIfNeeded: value)] }
func fuzzBE32(_ value: UInt32) -> [UInt8] {
    [UInt8(truncatingIfNeeded: value >> 24), UInt8(truncatingIfNeeded: value >> 16), UInt8(truncatingIfNeeded: value >> 8),
     UInt8(truncatingIfNeeded: value)]
}

/// Fixed-width values in one byte order.
struct FuzzWriter {
    var bytes: [UInt8] = []
    let little: Bool

    init(little: Bool) { self.little = little }

    mutating func u8(_ value: UInt8) { bytes.append(value) }
    mutating func u16(_ value: Int) {
        let pair = fuzzBE16(value)
        bytes += little ? [pair[1], pair[0]] : pair
    }
    mutating func u32(_ value: UInt32) {
        let quad = fuzzBE32(value)
        bytes += little ? quad.reversed() : quad
    }
    mutating func u64(_ value: UInt64) {
        if little {
            u32(UInt32(truncatingIfNeeded: value))
            u32(UInt32(truncatingIfNeeded: value >> 32))
        } else {
            u32(UInt32(truncatingIfNeeded: value >> 32))
            u32(UInt32(truncatingIfNeeded: value))
        }
    }
    mutating func append(_ more: [UInt8]) { bytes += more }
    mutating func pad4() { while bytes.count % 4 != 0 { bytes.append(0) } }
}

enum FuzzLink: CaseIterable {
    case ethernet, linuxCooked, linuxCooked2, null, loop, raw, ipv4Only, ipv6Only, ieee80211, radiotap
}

/// One VLAN tag: its TPID and TCI (priority, DEI, VLAN ID).
struct FuzzTag {
    var tpid: Int
    var tci: Int
}

/// One record to write: the frame's bytes and length on the wire, and a time stamp.
struct FuzzRecord {
    var frame: [UInt8]
    var original: Int
    var time: FuzzTime
}

/// A time stamp: seconds and a fraction in the plan's units.
struct FuzzTime {
    var seconds: UInt32
    var fraction: UInt64
}

/// A capture the harness wrote, and what reading it must find.
struct FuzzFile {
    var bytes: [UInt8]
    var pcapng: Bool
    var interfaces: [CaptureInterface]
    /// The index in `interfaces` of the packets' interface.
    var packetInterface: Int
    /// Where each record starts.
    var offsets: [Int]
    var unknownBlocks: Int
}

/// The container and link-layer choices C3 and C4 share.
struct FuzzPlan {
    var pcapng: Bool
    var little: Bool
    // pcap
    var nanoseconds = false
    var modified = false
    var pcapSnapLength: UInt32 = 262_144
    /// FCS length in 16-bit words when the pcap link-type field's FCS bit is set.
    var pcapFCSWords: Int?
    // pcapng
    /// 0: none; 1: an empty section first; 2: a section with one interface first.
    var earlierSection = 0
    var earlierLittle = true
    /// An interface of an unsupported link type before the packets' own.
    var dummyInterface = false
    var resolution: UInt8?
    var unitsPerSecond: UInt64 = 1_000_000
    var timestampOffset: Int64?
    var interfaceName: [UInt8]?
    var interfaceFCS: Int?
    /// The FCS length an Enhanced Packet Block's flags give (1...15), overriding the interface's.
    var packetFCS: Int?
    /// 6: Enhanced Packet Block, 2: obsolete Packet Block, 3: Simple Packet Block.
    var packetBlock = 6
    /// A block to skip before the packets: its type.
    var extraBlock: UInt32?
    var interfaceSnapLength: UInt32 = 0
    // link
    var link: FuzzLink
    var linkType: Int
    var ipv6: Bool
    var vlanCount = 0
    var llc = false
    var familyLittle = false
    var family: UInt32 = 2
    var wifiSubtype: UInt8 = 0
    var wifiDS: UInt8 = 0
    var wifiOrder = false
    var radiotapTSFT = false
    var radiotapFlags = false
    var radiotapFCS = false
    var radiotapPad = false
    var radiotapExtraWords = 0
    /// FCS bytes at the end of every frame (the interface's, or the packets' own).
    var fcs = 0

    init(random: inout FuzzRandom) {
        pcapng = random.bool()
        little = random.bool()
        link = random.pick(FuzzLink.allCases)
        switch link {
        case .ipv4Only: ipv6 = false
        case .ipv6Only: ipv6 = true
        default: ipv6 = random.bool()
        }
        switch link {
        case .ethernet: linkType = 1
        case .linuxCooked: linkType = 113
        case .linuxCooked2: linkType = 276
        case .null: linkType = 0
        case .loop: linkType = 108
        case .raw: linkType = random.pick([101, 101, 12, 14])
        case .ipv4Only: linkType = 228
        case .ipv6Only: linkType = 229
        case .ieee80211: linkType = 105
        case .radiotap: linkType = 127
        }
        switch link {
        case .ethernet, .linuxCooked, .linuxCooked2, .ieee80211, .radiotap:
            vlanCount = random.pick([0, 0, 1, 2])
            llc = (link == .ethernet || link == .linuxCooked || link == .linuxCooked2) && random.oneIn(3)
        default:
            break
        }
        if link == .null || link == .loop {
            family = ipv6 ? random.pick([10, 23, 24, 28, 30]) : 2
            familyLittle = link == .null && random.bool()
        }
        if link == .ieee80211 || link == .radiotap {
            wifiSubtype = random.pick([0, 0, 8, 8, 1, 2, 3, 9, 10, 11])
            wifiDS = UInt8(random.below(4))
            wifiOrder = random.bool()
        }
        if link == .radiotap {
            radiotapTSFT = random.bool()
            radiotapFlags = random.oneIn(4) == false
            radiotapFCS = radiotapFlags && random.bool()
            radiotapPad = radiotapFlags && random.bool()
            radiotapExtraWords = random.pick([0, 0, 1, 2])
        }
        let fcsAllowed = link != .radiotap  // radiotap says so itself
        if pcapng {
            earlierSection = random.pick([0, 0, 0, 1, 2])
            earlierLittle = random.bool()
            packetBlock = random.pick([6, 6, 6, 2, 3])
            dummyInterface = packetBlock != 3 && random.oneIn(4)
            switch random.below(6) {
            case 0: resolution = nil
            case 1: resolution = 6
            case 2: resolution = 9
            case 3: resolution = 3
            case 4: resolution = 0x80 | 20
            default: resolution = 0
            }
            switch resolution {
            case 9: unitsPerSecond = 1_000_000_000
            case 3: unitsPerSecond = 1_000
            case 0x80 | 20: unitsPerSecond = 1 << 20
            case 0: unitsPerSecond = 1
            default: unitsPerSecond = 1_000_000
            }
            if random.oneIn(3) { timestampOffset = Int64(Int32(truncatingIfNeeded: random.u32())) }
            if random.oneIn(3) {
                var name = (0..<(1 + random.below(8))).map { _ in UInt8(ascii: "a") + UInt8(random.below(26)) }
                if random.bool() { name += [0, 0] }  // NUL-terminated names are trimmed
                interfaceName = name
            }
            if fcsAllowed {
                if random.oneIn(3) { interfaceFCS = random.pick([0, 4, 4, 2, random.below(16)]) }
                if packetBlock == 6, random.oneIn(4) { packetFCS = 1 + random.below(15) }
            }
            fcs = packetFCS ?? interfaceFCS ?? 0
            if random.oneIn(3) { extraBlock = random.pick([4, 5, 7, 8, 0xA, 0x201, 0x8000_0001, 0x7E57_0000 | random.u32() & 0xFFFF]) }
            interfaceSnapLength = packetBlock == 3 ? random.pick([0, 262_144]) : random.pick([0, 65_535, 262_144, random.u32()])
        } else {
            switch random.below(3) {
            case 0: break
            case 1: nanoseconds = true
            default: modified = true
            }
            unitsPerSecond = nanoseconds ? 1_000_000_000 : 1_000_000
            pcapSnapLength = random.pick([65_535, 262_144, random.u32()])
            if fcsAllowed, random.oneIn(3) { pcapFCSWords = random.pick([0, 2, 2, random.below(16)]) }
            fcs = 2 * (pcapFCSWords ?? 0)
        }
    }

    var summary: String {
        var parts = [pcapng ? "pcapng" : modified ? "modified pcap" : nanoseconds ? "pcap ns" : "pcap"]
        parts.append(little ? "little-endian" : "big-endian")
        if pcapng {
            parts.append("block \(packetBlock)")
            if earlierSection > 0 { parts.append("earlier section \(earlierSection)") }
            if dummyInterface { parts.append("dummy interface") }
            if let resolution { parts.append("if_tsresol \(resolution)") }
            if let extraBlock { parts.append("extra block \(hex(Int(extraBlock), digits: 8))") }
        }
        parts.append("link type \(linkType) \(link)")
        if vlanCount > 0 { parts.append("\(vlanCount) VLAN tags") }
        if llc { parts.append("LLC/SNAP") }
        if fcs > 0 { parts.append("FCS \(fcs)") }
        if link == .radiotap {
            parts.append("radiotap TSFT \(radiotapTSFT) flags \(radiotapFlags) FCS \(radiotapFCS) pad \(radiotapPad) words \(radiotapExtraWords + 1)")
        }
        if link == .ieee80211 || link == .radiotap { parts.append("802.11 subtype \(wifiSubtype) DS \(wifiDS)") }
        return parts.joined(separator: ", ")
    }

    // MARK: time

    func newTime(random: inout FuzzRandom) -> FuzzTime {
        FuzzTime(seconds: random.u32(), fraction: random.next() % unitsPerSecond)
    }

    func expectedTime(_ time: FuzzTime) -> CaptureTime {
        let nanoseconds = time.fraction * 1_000_000_000 / unitsPerSecond
        return CaptureTime(seconds: Int64(time.seconds) + (timestampOffset ?? 0), nanoseconds: Int64(nanoseconds))
    }

    // MARK: link layer

    func newTags(random: inout FuzzRandom) -> [FuzzTag] {
        (0..<vlanCount).map { _ in FuzzTag(tpid: random.pick([0x8100, 0x8100, 0x88A8, 0x9100, 0x9200]), tci: random.u16()) }
    }

    /// The type field before the tags, and the tags with the types after them, ending in `final`.
    func chain(_ tags: [FuzzTag], final: Int) -> (first: Int, rest: [UInt8]) {
        guard let firstTag = tags.first else { return (final, []) }
        var rest: [UInt8] = []
        for (index, tag) in tags.enumerated() {
            rest += fuzzBE16(tag.tci) + fuzzBE16(index + 1 < tags.count ? tags[index + 1].tpid : final)
        }
        return (firstTag.tpid, rest)
    }

    func snap(_ type: Int, random: inout FuzzRandom) -> [UInt8] {
        [0xAA, 0xAA, 0x03, 0, 0, random.bool() ? 0 : 0xF8] + fuzzBE16(type)
    }

    /// The frame around an IP packet: link header, the packet, padding, then the FCS (the end of
    /// it possibly cut by the snap length: `original` is then larger).
    func frame(_ ip: [UInt8], ipv6: Bool, tags: [FuzzTag], random: inout FuzzRandom) -> (frame: [UInt8], original: Int) {
        let ipType = ipv6 ? 0x86DD : 0x0800
        var frame: [UInt8]
        switch link {
        case .ethernet:
            frame = random.bytes(12)
            if llc, 8 + ip.count <= 1500 {
                let (first, rest) = chain(tags, final: 8 + ip.count)
                frame += fuzzBE16(first) + rest + snap(ipType, random: &random) + ip
            } else {
                let (first, rest) = chain(tags, final: ipType)
                frame += fuzzBE16(first) + rest + ip
            }
        case .linuxCooked, .linuxCooked2:
            let (first, rest) = chain(tags, final: ipType)
            let protocolField = llc ? 0x0004 : first
            let hardware = random.pick([1, 1, 772, 776, 65534, 0xFFFF & (random.u16() | 0x1000)])
            if link == .linuxCooked {
                frame = fuzzBE16(random.below(5)) + fuzzBE16(hardware) + fuzzBE16(6) + random.bytes(8) + fuzzBE16(protocolField)
            } else {
                frame = fuzzBE16(protocolField) + [0, 0] + fuzzBE32(random.u32()) + fuzzBE16(hardware)
                    + [UInt8(random.below(5)), 6] + random.bytes(8)
            }
            if llc { frame += snap(first, random: &random) }
            frame += rest + ip
        case .null, .loop:
            var writer = FuzzWriter(little: familyLittle)
            writer.u32(family)
            frame = writer.bytes + ip
        case .raw, .ipv4Only, .ipv6Only:
            frame = ip
        case .ieee80211, .radiotap:
            let (first, rest) = chain(tags, final: ipType)
            var header = wifiHeader(random: &random)
            if radiotapPad { while header.count % 4 != 0 { header.append(random.byte()) } }
            frame = header + snap(first, random: &random) + rest + ip
            if link == .radiotap { frame = radiotapHeader(random: &random) + frame }
        }
        frame += random.bytes(random.pick([0, 0, 0, 1, 2, 4, 7]))  // padding, a trailer
        let trailer = link == .radiotap && radiotapFCS ? 4 : fcs
        var missing = 0
        if trailer > 0, packetBlock != 3, random.oneIn(3) { missing = 1 + random.below(trailer) }
        frame += random.bytes(trailer - missing)
        return (frame, frame.count + missing)
    }

    func wifiHeader(random: inout FuzzRandom) -> [UInt8] {
        let qos = wifiSubtype & 0x8 != 0
        var flags = wifiDS | (random.byte() & 0x38)  // retry, power management, more data
        if wifiOrder { flags |= 0x80 }
        var header: [UInt8] = [0x08 | wifiSubtype << 4, flags] + random.bytes(2) + random.bytes(18)
        header += [random.byte() & 0xF0, random.byte()]  // sequence control, fragment number 0
        if wifiDS == 3 { header += random.bytes(6) }
        if qos {
            header += [random.byte() & 0x7F, random.byte()]  // not an A-MSDU
            if wifiOrder { header += random.bytes(4) }  // HT control
        }
        return header
    }

    func radiotapHeader(random: inout FuzzRandom) -> [UInt8] {
        var present = random.u32() & 0x7FFF_FFF8 & ~UInt32(0x6000_0000)
        if radiotapTSFT { present |= 1 }
        if radiotapFlags { present |= 2 }
        if radiotapExtraWords > 0 { present |= 0x8000_0000 }
        var writer = FuzzWriter(little: true)
        writer.u8(0)
        writer.u8(random.byte())
        writer.u16(0)  // the length, below
        writer.u32(present)
        for index in 0..<radiotapExtraWords {
            writer.u32(random.u32() & 0x1FFF_FFFF | (index + 1 < radiotapExtraWords ? 0x8000_0000 : 0))
        }
        if radiotapTSFT {
            while writer.bytes.count % 8 != 0 { writer.u8(random.byte()) }
            writer.append(random.bytes(8))
        }
        if radiotapFlags {
            writer.u8(random.byte() & 0x8F | (radiotapFCS ? 0x10 : 0) | (radiotapPad ? 0x20 : 0))
        }
        writer.append(random.bytes(random.below(4)))
        var header = writer.bytes
        header[2] = UInt8(header.count & 0xFF)
        header[3] = UInt8(header.count >> 8)
        return header
    }

    // MARK: containers

    func write(_ records: [FuzzRecord], random: inout FuzzRandom) -> FuzzFile {
        pcapng ? writePcapng(records, random: &random) : writePcap(records, random: &random)
    }

    func writePcap(_ records: [FuzzRecord], random: inout FuzzRandom) -> FuzzFile {
        var writer = FuzzWriter(little: little)
        writer.u32(modified ? 0xA1B2_CD34 : nanoseconds ? 0xA1B2_3C4D : 0xA1B2_C3D4)
        writer.u16(2)
        writer.u16(random.pick([4, 4, 3, random.u16()]))
        writer.u32(random.oneIn(4) ? random.u32() : 0)  // thiszone
        writer.u32(random.oneIn(4) ? random.u32() : 0)  // sigfigs
        writer.u32(pcapSnapLength)
        var linkField = UInt32(linkType)
        if let words = pcapFCSWords { linkField |= 0x0400_0000 | UInt32(words) << 28 }
        writer.u32(linkField)
        var offsets: [Int] = []
        for record in records {
            offsets.append(writer.bytes.count)
            writer.u32(record.time.seconds)
            writer.u32(UInt32(record.time.fraction))
            writer.u32(UInt32(record.frame.count))
            writer.u32(UInt32(record.original))
            if modified {
                writer.u32(random.u32())  // ifindex
                writer.u16(random.u16())  // protocol
                writer.u8(random.byte())  // packet type
                writer.u8(random.byte())  // padding
            }
            writer.append(record.frame)
        }
        let interface = CaptureInterface(
            linkType: LinkType(linkType), name: nil, snapLength: Int(pcapSnapLength),
            timestampUnitsPerSecond: unitsPerSecond, timestampOffset: 0, fcsLength: fcs, section: 0)
        return FuzzFile(
            bytes: writer.bytes, pcapng: false, interfaces: [interface], packetInterface: 0, offsets: offsets,
            unknownBlocks: 0)
    }

    func writePcapng(_ records: [FuzzRecord], random: inout FuzzRandom) -> FuzzFile {
        var file: [UInt8] = []
        var interfaces: [CaptureInterface] = []
        func block(_ type: UInt32, _ body: [UInt8], little: Bool) {
            var writer = FuzzWriter(little: little)
            var padded = body
            while padded.count % 4 != 0 { padded.append(0) }
            writer.u32(type)
            writer.u32(UInt32(12 + padded.count))
            writer.append(padded)
            writer.u32(UInt32(12 + padded.count))
            file += writer.bytes
        }
        func option(_ code: Int, _ value: [UInt8], little: Bool) -> [UInt8] {
            var writer = FuzzWriter(little: little)
            writer.u16(code)
            writer.u16(value.count)
            writer.append(value)
            while writer.bytes.count % 4 != 0 { writer.u8(0) }
            return writer.bytes
        }
        func sectionHeader(little: Bool) {
            var body = FuzzWriter(little: little)
            body.u32(0x1A2B_3C4D)
            body.u16(1)
            body.u16(random.pick([0, 0, 2]))
            body.u64(random.oneIn(4) ? UInt64(random.below(1 << 20)) : UInt64.max)  // section length
            if random.oneIn(4) {
                body.append(option(4, Array("nearby fuzz".utf8), little: little))  // shb_userappl
                body.append([0, 0, 0, 0])
            }
            block(0x0A0D_0D0A, body.bytes, little: little)
        }
        func interfaceBlock(_ type: Int, snapLength: UInt32, options: [[UInt8]], little: Bool) {
            var body = FuzzWriter(little: little)
            body.u16(type)
            body.u16(0)
            body.u32(snapLength)
            for item in options { body.append(item) }
            if !options.isEmpty, random.oneIn(4) == false { body.append([0, 0, 0, 0]) }  // opt_endofopt, optional
            block(1, body.bytes, little: little)
        }

        var section = 0
        if earlierSection > 0 {
            sectionHeader(little: earlierLittle)
            if earlierSection == 2 {
                let type = random.pick([1, 113, 147, 101])
                interfaceBlock(type, snapLength: 1500, options: [], little: earlierLittle)
                interfaces.append(CaptureInterface(linkType: LinkType(type), snapLength: 1500, section: 0))
            }
            section = 1
        }
        sectionHeader(little: little)
        if dummyInterface {
            interfaceBlock(147, snapLength: 0, options: [], little: little)
            interfaces.append(CaptureInterface(linkType: LinkType(147), snapLength: 0, section: section))
        }
        var options: [[UInt8]] = []
        var interface = CaptureInterface(
            linkType: LinkType(linkType), name: nil, snapLength: Int(interfaceSnapLength),
            timestampUnitsPerSecond: unitsPerSecond, timestampOffset: timestampOffset ?? 0, fcsLength: interfaceFCS ?? 0,
            section: section)
        if let interfaceName {
            options.append(option(2, interfaceName, little: little))
            var trimmed = interfaceName
            while trimmed.last == 0 { trimmed.removeLast() }
            interface.name = String(decoding: trimmed, as: UTF8.self)
        }
        if let resolution { options.append(option(9, [resolution], little: little)) }
        if let interfaceFCS { options.append(option(13, [UInt8(interfaceFCS)], little: little)) }
        if let timestampOffset {
            var value = FuzzWriter(little: little)
            value.u64(UInt64(bitPattern: timestampOffset))
            options.append(option(14, value.bytes, little: little))
        }
        if random.oneIn(4) { options.append(option(1, random.bytes(random.below(9)), little: little)) }  // comment
        random.shuffle(&options)
        let packetInterface = interfaces.count
        interfaces.append(interface)
        interfaceBlock(linkType, snapLength: interfaceSnapLength, options: options, little: little)
        var unknownBlocks = 0
        if let extraBlock {
            block(extraBlock, random.bytes(4 * random.below(4)), little: little)
            if extraBlock & 0xFFFF_0000 == 0x7E57_0000 { unknownBlocks = 1 }
        }
        let interfaceID = dummyInterface ? 1 : 0
        var offsets: [Int] = []
        for record in records {
            offsets.append(file.count)
            let stamp = UInt64(record.time.seconds) * unitsPerSecond + record.time.fraction
            var body = FuzzWriter(little: little)
            switch packetBlock {
            case 3:
                body.u32(UInt32(record.original))
                body.append(record.frame)
                body.pad4()
            case 2:
                body.u16(interfaceID)
                body.u16(random.u16())  // drops
                body.u32(UInt32(truncatingIfNeeded: stamp >> 32))
                body.u32(UInt32(truncatingIfNeeded: stamp))
                body.u32(UInt32(record.frame.count))
                body.u32(UInt32(record.original))
                body.append(record.frame)
                body.pad4()
            default:
                body.u32(UInt32(interfaceID))
                body.u32(UInt32(truncatingIfNeeded: stamp >> 32))
                body.u32(UInt32(truncatingIfNeeded: stamp))
                body.u32(UInt32(record.frame.count))
                body.u32(UInt32(record.original))
                body.append(record.frame)
                body.pad4()
                var flags: UInt32?
                if let packetFCS {
                    flags = random.u32() & ~UInt32(0x1E0) | UInt32(packetFCS) << 5
                } else if random.oneIn(4) {
                    flags = random.u32() & ~UInt32(0x1E0)  // no FCS length: the interface's counts
                }
                if let flags {
                    var value = FuzzWriter(little: little)
                    value.u32(flags)
                    body.append(option(2, value.bytes, little: little))
                    body.append([0, 0, 0, 0])
                }
            }
            block(UInt32(packetBlock), body.bytes, little: little)
        }
        return FuzzFile(
            bytes: file, pcapng: true, interfaces: interfaces, packetInterface: packetInterface, offsets: offsets,
            unknownBlocks: unknownBlocks)
    }
}

// MARK: - IP and UDP

/// The network and transport headers of one datagram: addresses, ports, IPv4 options or IPv6
/// extension headers, all chosen from the input.
struct FuzzHeaders {
    var ipv6: Bool
    var source: IPEndpoint
    var destination: IPEndpoint
    var hopLimit: Int
    var identification: UInt32
    var checksum: Int
    // IPv4
    var options: [UInt8] = []
    var typeOfService: UInt8 = 0
    var dontFragment = false
    var zeroLength = false
    // IPv6
    /// Extension headers before the upper layer (C3) or before the fragment header (C4): 0
    /// (hop-by-hop, first only), 43, 60, 51 (authentication), 44 (an atomic fragment, C3 only).
    var extensions: [UInt8] = []
    /// A destination options header in the fragmentable part (C4).
    var innerOptions = false
    var flow: [UInt8] = [0, 0, 0]

    init(plan: FuzzPlan, random: inout FuzzRandom) {
        ipv6 = plan.ipv6
        hopLimit = Int(random.byte())
        identification = random.u32()
        checksum = random.u16()
        func address(_ count: Int) -> [UInt8] {
            // Zero groups are likely, so that RFC 5952's "::" rules get exercised.
            (0..<(count / 2)).flatMap { _ in random.oneIn(2) ? [0, 0] : random.bytes(2) }
        }
        source = IPEndpoint(address: address(ipv6 ? 16 : 4), port: UInt16(random.u16()))!
        destination = IPEndpoint(address: address(ipv6 ? 16 : 4), port: UInt16(random.u16()))!
        if ipv6 {
            flow = random.bytes(3)
            var count = random.pick([0, 0, 1, 1, 2, 3])
            if count > 0, random.bool() {
                extensions.append(0)
                count -= 1
            }
            for _ in 0..<count { extensions.append(random.pick([43, 60, 60, 51, 44])) }
            innerOptions = random.oneIn(3)
            zeroLength = random.oneIn(6)
        } else {
            options = random.bytes(4 * random.pick([0, 0, 0, 1, 2, 10]))
            typeOfService = random.byte()
            dontFragment = random.bool()
            zeroLength = random.oneIn(6)
        }
    }

    var summary: String {
        if ipv6 {
            return "IPv6, extension headers \(extensions)\(innerOptions ? " + inner destination options" : "")\(zeroLength ? ", payload length 0" : "")"
        }
        return "IPv4, \(options.count) bytes of options\(zeroLength ? ", total length 0" : "")"
    }

    func udp(payload: [UInt8]) -> [UInt8] {
        fuzzBE16(Int(source.port)) + fuzzBE16(Int(destination.port)) + fuzzBE16(8 + payload.count) + fuzzBE16(checksum)
            + payload
    }

    /// The extension headers of `kinds`, the last one followed by `last`.
    func extensionHeaders(_ kinds: [UInt8], last: UInt8, random: inout FuzzRandom) -> [UInt8] {
        var result: [UInt8] = []
        for (index, kind) in kinds.enumerated() {
            let next = index + 1 < kinds.count ? kinds[index + 1] : last
            switch kind {
            case 0:
                let units = random.below(3)
                let size = (units + 1) * 8 - 2
                result += [next, UInt8(units), 1, UInt8(size - 2)] + [UInt8](repeating: 0, count: size - 2)  // PadN
            case 51:
                let words = 1 + random.below(4)
                result += [next, UInt8(words), 0, 0] + random.bytes((words + 2) * 4 - 4)
            case 44:
                result += [next, random.byte(), 0, UInt8(random.below(8) & 0x6)] + random.bytes(4)  // atomic
            default:
                let units = random.below(3)
                result += [next, UInt8(units)] + random.bytes((units + 1) * 8 - 2)
            }
        }
        return result
    }

    func ipv6Header(payloadLength: Int, next: UInt8, hopLimit: Int) -> [UInt8] {
        [0x60 | flow[0] >> 4, flow[0] << 4 | flow[1] & 0x0F, flow[1], flow[2]] + fuzzBE16(payloadLength)
            + [next, UInt8(hopLimit)] + source.address + destination.address
    }

    func ipv4Header(totalLength: Int, fragmentField: Int, hopLimit: Int) -> [UInt8] {
        let words = 5 + options.count / 4
        return [0x40 | UInt8(words), typeOfService] + fuzzBE16(totalLength) + fuzzBE16(Int(identification & 0xFFFF))
            + fuzzBE16(fragmentField) + [UInt8(hopLimit), 17] + fuzzBE16(checksum ^ 0x5A5A) + source.address
            + destination.address + options
    }

    /// One whole IP packet around `udp`, or nil when it does not fit.
    func packet(_ udp: [UInt8], random: inout FuzzRandom) -> [UInt8]? {
        if ipv6 {
            let headers = extensionHeaders(extensions, last: 17, random: &random)
            let length = headers.count + udp.count
            guard udp.count <= 65_535, length <= 65_535 else { return nil }
            let first = extensions.first ?? 17
            return ipv6Header(payloadLength: zeroLength ? 0 : length, next: first, hopLimit: hopLimit) + headers + udp
        }
        let total = 20 + options.count + udp.count
        guard total <= 65_535 else { return nil }
        return ipv4Header(totalLength: zeroLength ? 0 : total, fragmentField: dontFragment ? 0x4000 : 0, hopLimit: hopLimit)
            + udp
    }

    struct Piece {
        var offset: Int
        var end: Int
        var hopLimit: Int
        var packet: [UInt8]
    }

    /// The datagram as 2-4 fragments, in the order to write them; nil when it cannot be.
    func fragments(_ udp: [UInt8], random: inout FuzzRandom) -> [Piece]? {
        var fragmentable = udp
        var firstNext: UInt8 = 17
        var unfragmentable: [UInt8] = []
        if ipv6 {
            let outer = extensions.filter { $0 != 44 && $0 != 51 }
            unfragmentable = extensionHeaders(outer, last: 44, random: &random)
            if innerOptions {
                fragmentable = extensionHeaders([60], last: 17, random: &random) + udp
                firstNext = 60
            }
            guard unfragmentable.count + 8 + fragmentable.count <= 65_535 else { return nil }
        } else {
            guard 20 + options.count + fragmentable.count <= 65_535 else { return nil }
        }
        let length = fragmentable.count
        let candidates = (length - 1) / 8  // cuts at 8, 16, ... < length
        guard candidates >= 1 else { return nil }
        let count = min(2 + random.below(3), candidates + 1)
        var cuts: [Int] = []
        while cuts.count < count - 1 {
            let cut = 8 * (1 + random.below(candidates))
            if !cuts.contains(cut) { cuts.append(cut) }
        }
        let bounds = [0] + cuts.sorted() + [length]
        var pieces: [Piece] = []
        for index in 0..<count {
            let offset = bounds[index]
            var end = bounds[index + 1]
            let isLast = index == count - 1
            // Overlap the next piece by 8 equal bytes, when that still leaves it bytes of its own
            // (so the datagram completes only with the last piece written).
            if !isLast, bounds[index + 2] - end > 8, random.oneIn(3) { end += 8 }
            let bytes = Array(fragmentable[offset..<end])
            let hop = Int(random.byte())
            let packet: [UInt8]
            if ipv6 {
                let next = offset == 0 ? firstNext : random.oneIn(2) ? firstNext : random.byte()
                let fragmentHeader = [next, 0] + fuzzBE16(offset | (isLast ? 0 : 1)) + fuzzBE32(identification)
                let payloadLength = unfragmentable.count + 8 + bytes.count
                let first = extensions.first { $0 != 44 && $0 != 51 } ?? 44
                packet = ipv6Header(payloadLength: payloadLength, next: first, hopLimit: hop) + unfragmentable
                    + fragmentHeader + bytes
            } else {
                let field = (isLast ? 0 : 0x2000) | offset / 8
                packet = ipv4Header(totalLength: 20 + options.count + bytes.count, fragmentField: field, hopLimit: hop) + bytes
            }
            pieces.append(Piece(offset: offset, end: end, hopLimit: hop, packet: packet))
        }
        var order = pieces
        random.shuffle(&order)
        if random.oneIn(4) {
            // One piece written twice, both before the last piece written.
            let copy = order[random.below(order.count - 1)]
            order.insert(copy, at: random.below(order.count))
        }
        return order
    }
}
