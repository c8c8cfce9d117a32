import PacketCapture
import Testing

@Suite("pcapng")
struct PcapngTests {
    static let ethernetFrame = Link.ethernet(Packet.ipv4(Packet.udp(Packet.payload(20))))
    static let rawFrame = Packet.ipv6(Packet.udp(Packet.payload(21)))
    static let cookedFrame = Link.linuxCooked2(Packet.ipv4(Packet.udp(Packet.payload(22))))

    @Test("sections in both byte orders, interfaces of different link types, if_tsresol and if_tsoffset")
    func sectionsAndInterfaces() throws {
        var file = PcapngFile()
        file.section(little: true)
        file.interface(linkType: 1, options: [file.nameOption("eth0"), file.resolutionOption(9)])
        file.interface(linkType: 101, options: [file.nameOption("tun0"), file.resolutionOption(0x80 | 20), file.offsetOption(1_000)])
        file.enhanced(interface: 0, timestamp: 1_700_000_000_123_456_789, Self.ethernetFrame)
        file.enhanced(interface: 1, timestamp: 5 << 20 | 1 << 19, Self.rawFrame)  // 5.5 s in 2^-20 units
        file.section(little: false)
        file.interface(linkType: 276, options: [file.nameOption("any")])
        file.enhanced(interface: 0, timestamp: 2_000_001, Self.cookedFrame)  // microseconds by default
        #expect(Capture.kind(of: file.bytes) == .pcapng)

        let capture = try Capture.read(file.bytes)
        #expect(capture.format == .pcapng)
        #expect(capture.problems.isEmpty)
        #expect(capture.interfaces.map(\.linkType) == [.ethernet, .raw, .linuxCooked2])
        #expect(capture.interfaces.map(\.name) == ["eth0", "tun0", "any"])
        #expect(capture.interfaces.map(\.section) == [0, 0, 1])
        #expect(capture.interfaces.map(\.timestampUnitsPerSecond) == [1_000_000_000, 1 << 20, 1_000_000])
        #expect(capture.interfaces[1].timestampOffset == 1_000)

        #expect(capture.frames.map(\.number) == [1, 2, 3])
        #expect(capture.frames.map(\.interface) == [0, 1, 2])
        #expect(capture.frames[0].time == CaptureTime(seconds: 1_700_000_000, nanoseconds: 123_456_789))
        #expect(capture.frames[1].time == CaptureTime(seconds: 1_005, nanoseconds: 500_000_000))
        #expect(capture.frames[2].time == CaptureTime(seconds: 2, nanoseconds: 1_000))
        #expect(capture.frames.map { $0.content.datagram?.payload.count } == [20, 21, 22])
        #expect(capture.frames[1].content.datagram?.source.description == "[fe80::1]:5353")
    }

    @Test("Simple Packet Blocks (interface 0, no time, cut to the snap length) and obsolete Packet Blocks")
    func simpleAndObsoleteBlocks() throws {
        let small = Link.ethernet(Packet.ipv4(Packet.udp(Packet.payload(10))))
        let large = Link.ethernet(Packet.ipv4(Packet.udp(Packet.payload(100))))
        var file = PcapngFile()
        file.section()
        file.interface(linkType: 1, snapLength: 64)
        file.simple(small)
        file.simple(large)  // the block holds all of it, but the snap length says 64 were captured
        file.obsolete(interface: 0, timestamp: 3_000_000, small)
        let capture = try Capture.read(file.bytes)
        #expect(capture.frames.count == 3)
        #expect(capture.frames[0].time == nil)
        #expect(capture.frames[0].interface == 0)
        #expect(capture.frames[0].content.datagram?.payload == Packet.payload(10))
        #expect(capture.frames[1].capturedLength == 64)
        #expect(capture.frames[1].originalLength == large.count)
        #expect(capture.frames[1].content.undecodableText == "cut short by the snap length: 64 of \(large.count) bytes captured")
        // What the cut frame holds of its datagram: the endpoints, and the payload bytes captured.
        let cut = try #require(capture.frames[1].cutDatagram)
        #expect(cut.source.port == 5353 && cut.destination.port == 5353)
        #expect(cut.payload == Array(Packet.payload(100).prefix(64 - 14 - 20 - 8)))
        #expect(capture.frames[0].cutDatagram == nil && capture.frames[2].cutDatagram == nil)
        #expect(capture.frames[2].time == CaptureTime(seconds: 3))
        #expect(capture.frames[2].content.datagram?.payload == Packet.payload(10))

        var orphan = PcapngFile()
        orphan.section()
        orphan.simple(small)
        let lonely = try Capture.read(orphan.bytes)
        #expect(lonely.frames.first?.content.undecodableText == "a Simple Packet Block belongs to interface 0, but section 0 has no interfaces")
    }

    @Test("known non-packet blocks are skipped silently, unknown ones counted, custom blocks are frames as in Wireshark")
    func otherBlocks() throws {
        var file = PcapngFile()
        file.section()
        file.interface()
        file.block(type: 4, body: [0, 0, 0, 0])  // name resolution: just the end record
        file.enhanced(Self.ethernetFrame)
        file.block(type: 5, body: [UInt8](repeating: 0, count: 12))  // interface statistics
        file.block(type: 0x1234, body: [1, 2, 3, 4])
        file.block(type: 0xA, body: [UInt8](repeating: 0, count: 8))  // decryption secrets
        file.block(type: 0x1234, body: [])
        file.block(type: 0x8000_7777, body: [])
        var custom = ByteWriter(little: true)
        custom.u32(32473)
        custom.append([9, 9, 9, 9])
        file.block(type: 0xBAD, body: custom.bytes)
        file.enhanced(Self.ethernetFrame)
        let capture = try Capture.read(file.bytes)
        #expect(capture.frames.count == 3)
        #expect(capture.frames[0].content.datagram != nil)
        #expect(capture.frames[1].content.otherText == "pcapng custom block, PEN 32473")
        #expect(capture.frames[1].interface == nil)
        #expect(capture.frames[2].number == 3)
        #expect(capture.frames[2].content.datagram != nil)
        #expect(capture.problems.count == 1)
        let problem = try #require(capture.problems.first)
        #expect(problem.kind == .unknownBlocks)
        #expect(problem.count == 3)
        #expect(problem.message == "skipped 3 pcapng blocks of unknown type (0x00001234, 0x80007777)")
    }

    @Test("block lengths: below 12, trailing length mismatch, not a multiple of 4, cut short at the end")
    func blockLengths() throws {
        var base = PcapngFile()
        base.section()
        base.interface()
        base.enhanced(Self.ethernetFrame)

        var tooShort = base
        tooShort.block(type: 6, body: [], length: 8)
        tooShort.enhanced(Self.ethernetFrame)
        let short = try Capture.read(tooShort.bytes)
        #expect(short.frames.count == 1)
        #expect(short.problems.first?.kind == .badBlock)
        #expect(short.problems.first?.offset == base.bytes.count)
        #expect(short.problems.first?.message == "an Enhanced Packet Block says its total length is 8 bytes (at least 12 are needed): reading stopped")

        var mismatch = base
        mismatch.block(type: 6, body: [UInt8](repeating: 0, count: 20), trailer: 36)
        let mismatched = try Capture.read(mismatch.bytes)
        #expect(mismatched.frames.count == 1)
        #expect(mismatched.problems.first?.kind == .badBlock)
        #expect(mismatched.problems.first?.message.contains("trailing length 36 but leading length 32") == true)

        // 50 bytes of frame padded to 52: a writer that left the padding out of the length.
        var unpadded = base
        let start = unpadded.bytes.count
        let frame50 = Link.ethernet(Packet.ipv4(Packet.udp(Packet.payload(8))))
        #expect(frame50.count == 50)
        unpadded.enhanced(frame50)
        let declared = UInt32(unpadded.bytes.count - start - 2)
        for position in [start + 4, unpadded.bytes.count - 4] {
            for index in 0..<4 { unpadded.bytes[position + index] = UInt8((declared >> (8 * UInt32(index))) & 0xFF) }
        }
        let rounded = try Capture.read(unpadded.bytes)
        #expect(rounded.frames.count == 2)
        #expect(rounded.frames[1].content.datagram?.payload == Packet.payload(8))
        #expect(rounded.problems.map(\.kind) == [.irregularBlock])
        #expect(rounded.problems.first?.offset == start)

        var cut = base
        cut.enhanced(Self.ethernetFrame)
        let lost = 30
        let truncated = try Capture.read(Array(cut.bytes.dropLast(lost)))
        #expect(truncated.frames.count == 1)
        let problem = try #require(truncated.problems.first)
        #expect(problem.kind == .truncated)
        #expect(problem.frames == [2])
        #expect(problem.message.hasPrefix("the capture ends inside frame 2: its block says"))
        #expect(problem.message.hasSuffix("(\(lost) missing)"))

        let stray = try Capture.read(base.bytes + [1, 2, 3])
        #expect(stray.problems.first?.message == "the capture ends with 3 stray bytes after its last block")
    }

    @Test("first Section Header Block errors throw; a bad later section stops with a problem")
    func sectionHeaderErrors() throws {
        var future = PcapngFile()
        future.section(major: 2)
        let version = #expect(throws: CaptureError.self) { try Capture.read(future.bytes) }
        #expect(version?.code == .unsupportedVersion)
        #expect(version?.offset == 12)
        #expect(version?.reason == "pcapng version 2.0 is not supported (only 1.x is)")

        var good = PcapngFile()
        good.section()
        let cut = #expect(throws: CaptureError.self) { try Capture.read(Array(good.bytes.prefix(20))) }
        #expect(cut?.code == .truncatedHeader)

        var noMagic = good.bytes
        noMagic[8] = 0x00
        let magic = #expect(throws: CaptureError.self) { try Capture.read(noMagic) }
        #expect(magic?.code == .badHeader)
        #expect(magic?.offset == 8)

        var later = PcapngFile()
        later.section()
        later.interface()
        later.enhanced(Self.ethernetFrame)
        later.section(major: 2)
        later.interface()
        later.enhanced(Self.ethernetFrame)
        let partial = try Capture.read(later.bytes)
        #expect(partial.frames.count == 1)
        #expect(partial.problems.first?.kind == .badBlock)
        #expect(partial.problems.first?.message == "pcapng version 2.0 is not supported (only 1.x is): reading stopped")
    }

    @Test("an Enhanced Packet Block naming a missing interface is an undecodable frame")
    func missingInterface() throws {
        var file = PcapngFile()
        file.section()
        file.interface()
        file.enhanced(interface: 3, Self.ethernetFrame)
        file.enhanced(interface: 0, Self.ethernetFrame)
        file.section()  // a new section forgets the old interfaces
        file.enhanced(interface: 0, Self.ethernetFrame)
        let capture = try Capture.read(file.bytes)
        #expect(capture.frames.count == 3)
        #expect(capture.frames[0].interface == nil)
        #expect(capture.frames[0].content.undecodableText == "its Enhanced Packet Block names interface 3, but section 0 has 1 interface")
        #expect(capture.frames[1].content.datagram != nil)
        #expect(capture.frames[2].content.undecodableText == "its Enhanced Packet Block names interface 0, but section 1 has 0 interfaces")

        var overlong = PcapngFile()
        overlong.section()
        overlong.interface()
        overlong.enhanced(Self.ethernetFrame, captured: 5000)
        let frame = try #require(try Capture.read(overlong.bytes).frames.first)
        #expect(frame.content.undecodableText?.hasPrefix("its captured length 5000 exceeds the") == true)
    }

    @Test("FCS lengths from if_fcslen and from epb_flags are stripped")
    func fcsOptions() throws {
        // As in the pcap FCS test: the UDP length covers the 4 FCS bytes, so a stripped FCS
        // shows as "exceeds".
        let ip = Packet.ipv4(totalLength: 0, Packet.udp(Packet.payload(30), length: 42))
        let frame = Link.ethernet(ip) + [0xDE, 0xAD, 0xBE, 0xEF]
        var file = PcapngFile()
        file.section()
        file.interface(linkType: 1, options: [file.fcsLengthOption(4)])
        file.interface(linkType: 1)
        file.enhanced(interface: 0, frame)
        file.enhanced(interface: 1, frame, options: [file.flagsOption(4 << 5)])
        file.enhanced(interface: 1, frame)
        let capture = try Capture.read(file.bytes)
        #expect(capture.interfaces.map(\.fcsLength) == [4, 0])
        #expect(capture.frames[0].content.undecodableText?.hasPrefix("UDP length 42 exceeds the 38 bytes present") == true)
        #expect(capture.frames[1].content.undecodableText?.hasPrefix("UDP length 42 exceeds the 38 bytes present") == true)
        #expect(capture.frames[2].content.datagram?.payload.count == 34)
    }

    @Test("an unsupported link type makes its frames undecodable, not the file")
    func unsupportedLinkType() throws {
        var file = PcapngFile()
        file.section()
        file.interface(linkType: 192)
        file.interface(linkType: 1)
        file.interface(linkType: 999)
        file.enhanced(interface: 0, [1, 2, 3, 4])
        file.enhanced(interface: 1, Self.ethernetFrame)
        file.enhanced(interface: 2, [1, 2, 3, 4])
        let capture = try Capture.read(file.bytes)
        let ppi = try #require(capture.frames[0].content.undecodableText)
        #expect(ppi.hasPrefix("link type 192 (802.11 PPI) is not supported (supported: Ethernet (1), Linux cooked (113), Linux cooked v2 (276)"))
        #expect(capture.frames[1].content.datagram != nil)
        #expect(capture.frames[2].content.undecodableText?.hasPrefix("link type 999 is not supported (supported: ") == true)
        #expect(LinkType(192).description == "802.11 PPI (192)")
        #expect(LinkType(999).description == "link type 999")
        #expect(LinkType.ethernet.description == "Ethernet (1)")
        #expect(!LinkType(192).isSupported && LinkType.radiotap.isSupported)
    }

    @Test("if_tsresol: whole seconds, and one too fine to count")
    func timestampResolutions() throws {
        var file = PcapngFile()
        file.section()
        file.interface(options: [file.resolutionOption(0)])
        file.interface(options: [file.resolutionOption(25)])
        file.interface(options: [file.resolutionOption(0x80 | 70)])
        file.enhanced(interface: 0, timestamp: 5, Self.ethernetFrame)
        file.enhanced(interface: 1, timestamp: 5, Self.ethernetFrame)
        file.enhanced(interface: 2, timestamp: UInt64.max, Self.ethernetFrame)
        let capture = try Capture.read(file.bytes)
        #expect(capture.interfaces.map(\.timestampUnitsPerSecond) == [1, nil, nil])
        #expect(capture.frames[0].time == CaptureTime(seconds: 5))
        #expect(capture.frames[1].time == nil)
        #expect(capture.frames[2].time == nil)
        #expect(capture.frames.allSatisfy { $0.content.datagram != nil })
        #expect(capture.problems.map(\.kind) == [.irregularBlock, .irregularBlock])
        #expect(capture.problems.first?.message == "an interface's if_tsresol is 10^-25 s, finer than 64 bits can count: its frames have no time")
    }
}
