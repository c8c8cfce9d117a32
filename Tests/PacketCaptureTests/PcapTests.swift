import PacketCapture
import Testing

@Suite("Classic pcap")
struct PcapTests {
    static let mdnsFrame = Link.ethernet(Packet.ipv4(Packet.udp(Packet.payload(40))))

    @Test("every magic number, both byte orders, micro- and nanoseconds", arguments: [
        (true, false), (false, false), (true, true), (false, true),
    ])
    func magicNumbers(little: Bool, nanoseconds: Bool) throws {
        var file = PcapFile(little: little, nanoseconds: nanoseconds)
        file.add(Self.mdnsFrame, seconds: 1_700_000_000, fraction: nanoseconds ? 123_456_789 : 123_456)
        file.add(Self.mdnsFrame, seconds: 1_700_000_001, fraction: 0)
        #expect(Capture.kind(of: file.bytes) == .pcap)
        let capture = try Capture.read(file.bytes)
        #expect(capture.format == .pcap)
        #expect(capture.problems.isEmpty)
        #expect(capture.interfaces.count == 1)
        #expect(capture.interfaces[0].linkType == .ethernet)
        #expect(capture.interfaces[0].timestampUnitsPerSecond == (nanoseconds ? 1_000_000_000 : 1_000_000))
        #expect(capture.frames.map(\.number) == [1, 2])
        let time = try #require(capture.frames[0].time)
        #expect(time.seconds == 1_700_000_000)
        #expect(time.nanoseconds == (nanoseconds ? 123_456_789 : 123_456_000))
        #expect(capture.frames[1].time == CaptureTime(seconds: 1_700_000_001))
        let datagram = try #require(capture.frames[0].content.datagram)
        #expect(datagram.payload == Packet.payload(40))
        #expect(datagram.source.description == "198.18.1.1:5353")
        #expect(datagram.destination.description == "224.0.0.251:5353")
        #expect(capture.frames[0].capturedLength == Self.mdnsFrame.count)
        #expect(capture.frames[0].interface == 0)
        #expect(capture.frames[0].fileOffset == 24)
    }

    @Test("the modified (Kuznetzov) format has 24-byte record headers")
    func modifiedFormat() throws {
        for little in [true, false] {
            var file = PcapFile(little: little, modified: true)
            file.add(Self.mdnsFrame)
            file.add(Self.mdnsFrame)
            let capture = try Capture.read(file.bytes)
            #expect(capture.frames.count == 2)
            #expect(capture.frames.allSatisfy { $0.content.datagram?.payload == Packet.payload(40) })
            #expect(capture.problems.isEmpty)
        }
    }

    @Test("microsecond fractions past one second carry into the seconds")
    func fractionCarries() throws {
        var file = PcapFile()
        file.add(Self.mdnsFrame, seconds: 10, fraction: 2_500_000)
        let capture = try Capture.read(file.bytes)
        #expect(capture.frames[0].time == CaptureTime(seconds: 12, nanoseconds: 500_000_000))
        #expect(capture.frames[0].time?.secondsSinceEpoch == 12.5)
    }

    @Test("FCS bits in the link-type field: bit 26 set, bits 28-31 give 16-bit words to strip")
    func fcsBits() throws {
        let linkField: UInt32 = 1 | 0x0400_0000 | (2 << 28)  // Ethernet, 4-byte FCS
        var file = PcapFile(linkType: linkField)
        // IP total length 0 (offload) makes the UDP length the only bound: it claims the 4 FCS
        // bytes too, which fits only if the FCS were (wrongly) left in place.
        let ip = Packet.ipv4(totalLength: 0, Packet.udp(Packet.payload(30), length: 38 + 4))
        file.add(Link.ethernet(ip) + [0xDE, 0xAD, 0xBE, 0xEF])
        let capture = try Capture.read(file.bytes)
        #expect(capture.interfaces[0].linkType == .ethernet)
        #expect(capture.interfaces[0].fcsLength == 4)
        #expect(capture.frames[0].content.undecodableText == "UDP length 42 exceeds the 38 bytes present, at byte 34 of the frame")

        var plain = PcapFile(linkType: linkField)
        plain.add(Link.ethernet(Packet.ipv4(Packet.udp(Packet.payload(30)))) + [1, 2, 3, 4])
        let datagram = try #require(try Capture.read(plain.bytes).frames[0].content.datagram)
        #expect(datagram.payload == Packet.payload(30))
    }

    @Test("a file that ends inside a record is a problem naming the frame, not silence")
    func endsInsideRecord() throws {
        var file = PcapFile()
        file.add(Self.mdnsFrame)
        file.add(Array(Self.mdnsFrame.prefix(40)), captured: Self.mdnsFrame.count)
        let capture = try Capture.read(file.bytes)
        #expect(capture.frames.count == 1)
        let problem = try #require(capture.problems.first)
        #expect(problem.kind == .truncated)
        #expect(problem.frames == [2])
        #expect(problem.offset == 24 + 16 + Self.mdnsFrame.count)
        #expect(problem.message == "the capture ends inside frame 2: its record says \(Self.mdnsFrame.count) bytes, 40 remain (\(Self.mdnsFrame.count - 40) missing)")

        var header = PcapFile()
        header.add(Self.mdnsFrame)
        let stray = header.bytes + [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]
        let cut = try Capture.read(stray)
        #expect(cut.frames.count == 1)
        #expect(cut.problems.first?.message == "the capture ends inside the record header of frame 2: 16 bytes needed, 10 remain")
    }

    @Test("absurd captured lengths stop the reading without trapping")
    func absurdLengths() throws {
        for claimed in [0xFFFF_FFFF, 300 * 1024 * 1024, 0x7FFF_FFFF, 1_000_000] {
            var file = PcapFile()
            file.add(Self.mdnsFrame)
            file.add(Self.mdnsFrame, captured: claimed)
            let capture = try Capture.read(file.bytes)
            #expect(capture.frames.count == 1)
            #expect(capture.problems.count == 1)
            #expect(capture.problems.first?.frames == [2])
            #expect(capture.problems.first?.kind == (claimed > 256 * 1024 * 1024 ? .badBlock : .truncated))
        }
    }

    @Test("file header errors: cut short, unsupported version")
    func headerErrors() throws {
        let file = PcapFile().bytes
        let short = #expect(throws: CaptureError.self) { try Capture.read(Array(file.prefix(10))) }
        #expect(short?.code == .truncatedHeader)
        #expect(short?.description == "the pcap file header is cut short: 24 bytes needed, 10 present (at byte offset 0)")

        let old = #expect(throws: CaptureError.self) { try Capture.read(PcapFile(major: 1, minor: 0).bytes) }
        #expect(old?.code == .unsupportedVersion)
        #expect(old?.offset == 4)

        // 2.2 is still read (old writers), and an empty capture is fine.
        let empty = try Capture.read(PcapFile(minor: 2).bytes)
        #expect(empty.frames.isEmpty && empty.problems.isEmpty)
    }

    @Test("a frame cut by the snap length says so")
    func snapLength() throws {
        let full = Link.ethernet(Packet.ipv4(Packet.udp(Packet.payload(1472))))
        #expect(full.count == 1514)
        var file = PcapFile(snapLength: 96)
        file.add(Array(full.prefix(96)), original: 1514)
        let frame = try #require(try Capture.read(file.bytes).frames.first)
        #expect(frame.capturedLength == 96)
        #expect(frame.originalLength == 1514)
        #expect(frame.content.undecodableText == "cut short by the snap length: 96 of 1514 bytes captured")

        // Cut inside the Ethernet header too.
        let tiny = try readOne(Array(full.prefix(10)), original: 1514)
        #expect(tiny.content.undecodableText == "cut short by the snap length: 10 of 1514 bytes captured")
    }
}
