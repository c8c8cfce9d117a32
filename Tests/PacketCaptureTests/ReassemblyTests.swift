import PacketCapture
import Testing

@Suite("IP fragment reassembly")
struct ReassemblyTests {
    /// IPv4 fragments of `datagram` (the IP payload) cut at `cuts` (multiples of 8).
    static func ipv4Fragments(
        _ datagram: [UInt8], cuts: [Int], identification: Int = 0x1234, source: [UInt8] = Packet.source4,
        protocolNumber: UInt8 = 17
    ) -> [[UInt8]] {
        let bounds = [0] + cuts + [datagram.count]
        return (0..<(bounds.count - 1)).map { index in
            Packet.ipv4(
                source: source, protocolNumber: protocolNumber, ttl: UInt8(250 + index), identification: identification,
                moreFragments: index < bounds.count - 2, fragmentOffset: bounds[index],
                Array(datagram[bounds[index]..<bounds[index + 1]]))
        }
    }

    /// IPv6 fragments of `fragmentable` (starting with header `next`) cut at `cuts`.
    static func ipv6Fragments(_ fragmentable: [UInt8], next: UInt8, cuts: [Int], identification: UInt32 = 0xABCD_0001) -> [[UInt8]] {
        let bounds = [0] + cuts + [fragmentable.count]
        return (0..<(bounds.count - 1)).map { index in
            Packet.ipv6(
                next: 0, hopLimit: UInt8(200 + index),
                Packet.extensionHeader(next: 44,
                    Packet.fragmentHeader(next: next, offset: bounds[index], more: index < bounds.count - 2,
                        identification: identification, Array(fragmentable[bounds[index]..<bounds[index + 1]]))))
        }
    }

    static func read(_ packets: [[UInt8]]) throws -> Capture {
        var file = PcapFile()
        for packet in packets { file.add(Link.ethernet(packet, type: packet.first.map { $0 >> 4 == 6 ? 0x86DD : 0x0800 } ?? 0x0800)) }
        return try Capture.read(file.bytes)
    }

    static let big = Packet.payload(3000, seed: 5)

    @Test("IPv4 fragments in order: the last frame holds the datagram")
    func ipv4InOrder() throws {
        let fragments = Self.ipv4Fragments(Packet.udp(Self.big), cuts: [1480, 2960])
        let capture = try Self.read(fragments)
        #expect(capture.frames[0].content.isFragment)
        #expect(capture.frames[1].content.isFragment)
        let datagram = try #require(capture.frames[2].content.datagram)
        #expect(datagram.payload == Self.big)
        #expect(datagram.fragmentFrames == [1, 2, 3])
        #expect(datagram.hopLimit == 250)  // the first fragment's
        #expect(datagram.source.description == "198.18.1.1:5353")
        #expect(capture.problems.isEmpty)
    }

    @Test("IPv4 fragments out of order, with a duplicate and an unrelated frame between")
    func ipv4OutOfOrder() throws {
        let fragments = Self.ipv4Fragments(Packet.udp(Self.big), cuts: [1480, 2960])
        let other = Packet.ipv4(Packet.udp(Packet.payload(5)))
        let capture = try Self.read([fragments[2], fragments[0], other, fragments[0], fragments[1]])
        #expect(capture.frames.map(\.content.isFragment) == [true, true, false, true, false])
        #expect(capture.frames[2].content.datagram?.payload == Packet.payload(5))
        let datagram = try #require(capture.frames[4].content.datagram)
        #expect(datagram.payload == Self.big)
        #expect(datagram.fragmentFrames == [1, 2, 4, 5])
        #expect(capture.problems.isEmpty)
    }

    @Test("overlapping fragments with different bytes discard the set; identical overlaps are fine")
    func overlaps() throws {
        let datagram = Packet.udp(Packet.payload(40))  // 48 bytes
        let first = Packet.ipv4(identification: 0x1234, moreFragments: true, fragmentOffset: 0, Array(datagram[0..<24]))
        var changed = Array(datagram[16..<48])
        changed[0] ^= 0xFF
        let conflicting = Packet.ipv4(identification: 0x1234, fragmentOffset: 16, changed)
        let capture = try Self.read([first, conflicting])
        #expect(capture.frames.allSatisfy { $0.content.isFragment })
        #expect(capture.problems.count == 1)
        let problem = try #require(capture.problems.first)
        #expect(problem.kind == .fragmentsOverlap)
        #expect(problem.frames == [1, 2])
        #expect(problem.message
            == "overlapping IPv4 fragments for id 0x1234 (198.18.1.1 → 224.0.0.251, UDP) from frames [1, 2] differ (at byte 16 of the datagram): discarded")

        let agreeing = Packet.ipv4(identification: 0x1234, fragmentOffset: 16, Array(datagram[16..<48]))
        let fine = try Self.read([first, agreeing])
        #expect(fine.frames[1].content.datagram?.payload == Packet.payload(40))
        #expect(fine.problems.isEmpty)

        // Two "last" fragments that disagree about the end.
        let lastA = Packet.ipv4(identification: 7, fragmentOffset: 24, Array(datagram[24..<48]))
        let lastB = Packet.ipv4(identification: 7, fragmentOffset: 24, Array(datagram[24..<40]))
        let ends = try Self.read([lastA, lastB])
        #expect(ends.problems.map(\.kind) == [.fragmentsOverlap])
        #expect(ends.problems.first?.message.contains("disagree about where the datagram ends") == true)
    }

    @Test("sets never completed are listed at the end with what is missing")
    func incomplete() throws {
        let udp = Packet.udp(Self.big)
        let middle = Self.ipv4Fragments(udp, cuts: [1480, 2960], identification: 1)
        let first = Self.ipv4Fragments(udp, cuts: [1480], identification: 2)
        let last = Self.ipv4Fragments(udp, cuts: [1480], identification: 3)
        let capture = try Self.read([middle[0], middle[2], first[1], last[0]])
        #expect(capture.frames.allSatisfy { $0.content.isFragment })
        #expect(capture.problems.map(\.kind) == [.fragmentsIncomplete, .fragmentsIncomplete, .fragmentsIncomplete])
        #expect(capture.problems.map(\.frames) == [[1, 2], [3], [4]])
        #expect(capture.problems[0].message
            == "IPv4 fragments for id 0x0001 (198.18.1.1 → 224.0.0.251, UDP) from frames [1, 2] never completed: bytes 1480..<2960 are missing")
        #expect(capture.problems[1].message.hasSuffix("never completed: the first fragment (offset 0) is missing"))
        #expect(capture.problems[2].message.hasSuffix("never completed: the last fragment (more-fragments clear) is missing"))

        // A fragment cut by the snap length is not held: its set stays incomplete.
        var file = PcapFile()
        let pieces = Self.ipv4Fragments(udp, cuts: [1480])
        let cutFrame = Link.ethernet(pieces[0])
        file.add(Array(cutFrame.prefix(100)), original: cutFrame.count)
        file.add(Link.ethernet(pieces[1]))
        let snapped = try Capture.read(file.bytes)
        #expect(snapped.frames[0].content.undecodableText == "cut short by the snap length: 100 of \(cutFrame.count) bytes captured")
        #expect(snapped.frames[1].content.isFragment)
        #expect(snapped.problems.map(\.frames) == [[2]])
    }

    @Test("a reassembled datagram that is not valid UDP says where, counted in the datagram")
    func reassembledErrors() throws {
        let fragments = Self.ipv4Fragments(Packet.udp(Packet.payload(40), length: 100), cuts: [24])
        let capture = try Self.read(fragments)
        #expect(capture.frames[1].content.undecodableText == "UDP length 100 exceeds the 48 bytes present, at byte 0 of the reassembled datagram")
        #expect(capture.problems.isEmpty)
    }

    @Test("a datagram past 65,535 bytes is discarded")
    func tooLarge() throws {
        let huge = Packet.ipv4(identification: 9, fragmentOffset: 65528, Packet.payload(100))
        let start = Packet.ipv4(identification: 9, moreFragments: true, fragmentOffset: 0, Packet.payload(64))
        let capture = try Self.read([start, huge])
        #expect(capture.problems.map(\.kind) == [.fragmentsTooLarge])
        #expect(capture.problems.first?.frames == [1, 2])
        #expect(capture.problems.first?.message
            == "IPv4 fragments for id 0x0009 (198.18.1.1 → 224.0.0.251, UDP) from frames [1, 2] would make a datagram of 65648 bytes (> 65535): discarded")
    }

    @Test("at most 64 sets are pending: the oldest is evicted")
    func eviction() throws {
        let udp = Packet.udp(Self.big)
        let firsts = (0..<65).map { Self.ipv4Fragments(udp, cuts: [1480], identification: $0)[0] }
        let capture = try Self.read(firsts)
        #expect(capture.problems.count == 65)
        #expect(capture.problems[0].kind == .fragmentsEvicted)
        #expect(capture.problems[0].frames == [1])
        #expect(capture.problems[0].message.hasSuffix("discarded unfinished, more than 64 datagrams were being reassembled at once"))
        #expect(capture.problems.dropFirst().allSatisfy { $0.kind == .fragmentsIncomplete })
        #expect(capture.problems[1].frames == [2])
    }

    @Test("sets are keyed by source, destination, protocol and identification; TCP reassembles to words")
    func keys() throws {
        let udp = Packet.udp(Self.big)
        let a = Self.ipv4Fragments(udp, cuts: [1480], identification: 5, source: [10, 0, 0, 1])
        let b = Self.ipv4Fragments(udp, cuts: [1480], identification: 5, source: [10, 0, 0, 2])
        let tcp = Self.ipv4Fragments(be16(80) + be16(8080) + Packet.payload(2000), cuts: [1480], identification: 5,
            source: [10, 0, 0, 1], protocolNumber: 6)
        let capture = try Self.read([a[0], b[0], tcp[0], b[1], tcp[1], a[1]])
        #expect(capture.frames[3].content.datagram?.source.description == "10.0.0.2:5353")
        #expect(capture.frames[3].content.datagram?.fragmentFrames == [2, 4])
        #expect(capture.frames[4].content.otherText == "TCP 10.0.0.1:80 → 224.0.0.251:8080")
        #expect(capture.frames[5].content.datagram?.fragmentFrames == [1, 6])
        #expect(capture.problems.isEmpty)
    }

    @Test("IPv6 fragments, in order and out of order, with a destination options header inside")
    func ipv6() throws {
        let fragmentable = Packet.extensionHeader(next: 17, Packet.udp(Self.big))
        let fragments = Self.ipv6Fragments(fragmentable, next: 60, cuts: [1232, 2464])
        for order in [[0, 1, 2], [2, 1, 0], [1, 2, 0]] {
            let capture = try Self.read(order.map { fragments[$0] })
            #expect(capture.frames[0].content.isFragment && capture.frames[1].content.isFragment)
            let datagram = try #require(capture.frames[2].content.datagram)
            #expect(datagram.payload == Self.big)
            #expect(datagram.fragmentFrames == [1, 2, 3])
            #expect(datagram.hopLimit == 200)
            #expect(datagram.destination.description == "[ff02::fb]:5353")
            #expect(capture.problems.isEmpty)
        }
        let lonely = try Self.read([fragments[1]])
        #expect(lonely.problems.first?.message
            == "IPv6 fragments for id 0xabcd0001 (fe80::1 → ff02::fb) from frames [1] never completed: the first fragment (offset 0) is missing")
    }
}
