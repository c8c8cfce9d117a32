import Foundation
import PacketCapture
import Testing

/// Damaged and random captures: reading must never trap, and what it returns stays coherent.
@Suite("Hostile inputs")
struct HostileInputTests {
    /// A small pcapng touching most paths: two sections (both byte orders), several link
    /// types, options, fragments, VLANs, 802.11, SPB, PB, custom and unknown blocks.
    static let richPcapng: [UInt8] = {
        let udp = Packet.udp(Packet.payload(60))
        let fragments = ReassemblyTests.ipv4Fragments(udp, cuts: [24, 48])
        var file = PcapngFile()
        file.section()
        file.interface(linkType: 1, snapLength: 200, options: [file.nameOption("en0"), file.resolutionOption(9), file.offsetOption(-5)])
        file.interface(linkType: 127, options: [file.resolutionOption(0x80 | 20)])
        file.interface(linkType: 101, options: [file.fcsLengthOption(0)])
        file.enhanced(interface: 0, timestamp: 1_700_000_000_000_000_000, Link.ethernet(fragments[1], vlans: [(0x8100, 3)]))
        file.enhanced(interface: 0, Link.ethernet(fragments[0]))
        file.enhanced(interface: 1, Link.radiotap(Link.wifiData(Link.snap(0x0800) + fragments[2], subtype: 8) + [1, 2, 3, 4], flags: 0x10))
        file.enhanced(interface: 2, Packet.ipv6(next: 0, Packet.extensionHeader(next: 17, Packet.udp(Packet.payload(7)))))
        file.simple(Link.ethernet(Packet.ipv4(Packet.udp(Packet.payload(3)))))
        file.obsolete(interface: 0, timestamp: 77, Link.ethernet(Packet.ipv4(protocolNumber: 6, Packet.payload(20))))
        file.block(type: 0xBAD, body: [1, 0, 0, 0])
        file.block(type: 0x7777, body: [0, 0, 0, 0])
        file.section(little: false)
        file.interface(linkType: 113)
        file.interface(linkType: 0)
        file.enhanced(interface: 0, Link.linuxCooked(Packet.ipv6(Packet.udp(Packet.payload(9))), protocolType: 0x86DD))
        file.enhanced(interface: 1, Link.null(Packet.ipv4(Packet.udp(Packet.payload(9))), family: 2, little: false))
        let v6 = ReassemblyTests.ipv6Fragments(Packet.udp(Packet.payload(40)), next: 17, cuts: [16])
        file.enhanced(interface: 0, Link.linuxCooked(v6[1], protocolType: 0x86DD))
        file.enhanced(interface: 0, Link.linuxCooked(v6[0], protocolType: 0x86DD))
        return file.bytes
    }()

    static let richPcap: [UInt8] = {
        let fragments = ReassemblyTests.ipv4Fragments(Packet.udp(Packet.payload(50)), cuts: [16, 32])
        var file = PcapFile(linkType: 1 | 0x0400_0000 | (2 << 28))
        file.add(Link.ethernet(fragments[2], vlans: [(0x88A8, 1), (0x8100, 2)]) + [0, 0, 0, 0])
        file.add(Link.ethernet(fragments[0]) + [0, 0, 0, 0])
        file.add(Link.ethernet(fragments[1]) + [0, 0, 0, 0])
        file.add(Link.ieee8023(Link.snap(0x86DD) + Packet.ipv6(Packet.udp(Packet.payload(5)))) + [0, 0, 0, 0])
        file.add(Link.ethernet([0, 1, 8, 0, 6, 4], type: 0x0806) + [0, 0, 0, 0])
        return file.bytes
    }()

    /// Reads and checks what any reading must satisfy.
    static func readCoherently(_ bytes: [UInt8]) {
        guard let capture = try? Capture.read(bytes) else { return }
        for (index, frame) in capture.frames.enumerated() {
            #expect(frame.number == index + 1)
            #expect(frame.capturedLength >= 0)
            if let interface = frame.interface { #expect(interface >= 0 && interface < capture.interfaces.count) }
            if let datagram = frame.content.datagram {
                #expect(datagram.fragmentFrames.allSatisfy { $0 >= 1 && $0 <= frame.number })
                #expect(datagram.payload.count <= 65_535)
                _ = datagram.source.description
                _ = datagram.destination.description
            }
            _ = frame.content.description
        }
        for problem in capture.problems {
            #expect(!problem.message.isEmpty)
            #expect(problem.frames.allSatisfy { $0 >= 1 && $0 <= capture.frames.count + 1 })
        }
    }

    @Test("the rich captures read cleanly to begin with")
    func richCapturesRead() throws {
        let capture = try Capture.read(Self.richPcapng)
        #expect(capture.frames.count == 11)
        #expect(capture.interfaces.count == 5)
        #expect(capture.problems.map(\.kind) == [.unknownBlocks])
        #expect(capture.frames[2].content.datagram?.fragmentFrames == [1, 2, 3])
        #expect(capture.frames[2].content.datagram?.vlanTags == [])
        #expect(capture.frames[0].time == CaptureTime(seconds: 1_699_999_995))
        #expect(capture.frames[10].content.datagram?.fragmentFrames == [10, 11])
        #expect(capture.frames.filter { $0.content.datagram != nil }.count == 6)

        let pcap = try Capture.read(Self.richPcap)
        #expect(pcap.problems.isEmpty)
        #expect(pcap.frames[2].content.datagram?.payload == Packet.payload(50))
        #expect(pcap.frames[2].content.datagram?.fragmentFrames == [1, 2, 3])
        #expect(pcap.frames[3].content.datagram?.payload == Packet.payload(5))
        #expect(pcap.frames[4].content.otherText == "ARP")
    }

    @Test("truncated at every length")
    func everyPrefix() {
        for bytes in [Self.richPcapng, Self.richPcap] {
            for length in 0...bytes.count { Self.readCoherently(Array(bytes.prefix(length))) }
        }
    }

    @Test("every byte flipped, one at a time, and every byte set to 0x00 and 0xFF")
    func everyByteFlipped() {
        for bytes in [Self.richPcapng, Self.richPcap] {
            for index in bytes.indices {
                for change in [{ (b: UInt8) in b ^ 0xFF }, { _ in 0x00 }, { _ in 0xFF }, { (b: UInt8) in b &+ 1 }] {
                    var mutated = bytes
                    mutated[index] = change(mutated[index])
                    Self.readCoherently(mutated)
                }
            }
        }
    }

    /// PACKET_CAPTURE_FUZZ_ROUNDS raises the number of mutations per capture (and
    /// PACKET_CAPTURE_FUZZ_SEED changes the seed) for a longer run by hand.
    @Test("random mutations of valid captures")
    func randomMutations() {
        let environment = ProcessInfo.processInfo.environment
        let rounds = environment["PACKET_CAPTURE_FUZZ_ROUNDS"].flatMap { Int($0) } ?? 3_000
        var random = SplitMix64(state: environment["PACKET_CAPTURE_FUZZ_SEED"].flatMap { UInt64($0) } ?? 0x5EED)
        for bytes in [Self.richPcapng, Self.richPcap] {
            for _ in 0..<rounds {
                var mutated = bytes
                for _ in 0..<(1 + random.below(8)) {
                    let index = random.below(mutated.count)
                    mutated[index] = UInt8(truncatingIfNeeded: random.next())
                }
                if random.below(4) == 0 { mutated = Array(mutated.prefix(random.below(mutated.count + 1))) }
                Self.readCoherently(mutated)
            }
        }
    }

    @Test("random frames under every link type, and random bytes behind capture headers")
    func randomFrames() {
        var random = SplitMix64(state: 7)
        let linkTypes: [UInt32] = [0, 1, 12, 14, 101, 105, 108, 113, 127, 228, 229, 276, 192]
        for linkType in linkTypes {
            var file = PcapFile(linkType: linkType)
            for _ in 0..<400 {
                var frame = (0..<random.below(120)).map { _ in UInt8(truncatingIfNeeded: random.next()) }
                // Often make the frame look plausible at the IP layer, to go deeper.
                if random.below(2) == 0, frame.count > 40 {
                    let start = [0, 4, 14, 16, 20, 24, 32][random.below(7)]
                    if start < frame.count { frame[start] = random.below(2) == 0 ? 0x45 : 0x60 }
                    if start + 9 < frame.count, frame[start] == 0x45 { frame[start + 9] = 17 }
                    if start + 6 < frame.count, frame[start] == 0x60 { frame[start + 6] = [17, 0, 44, 60][random.below(4)] }
                }
                file.add(frame, original: random.below(3) == 0 ? frame.count + random.below(100) : nil)
            }
            Self.readCoherently(file.bytes)
        }
        for _ in 0..<500 {
            let header = random.below(2) == 0 ? Array(PcapFile().bytes) : Array(HostileInputTests.richPcapng.prefix(28))
            let tail = (0..<random.below(400)).map { _ in UInt8(truncatingIfNeeded: random.next()) }
            Self.readCoherently(header + tail)
        }
    }
}
