import PacketCapture
import Testing

@Suite("File kinds")
struct DetectTests {
    @Test("captures, compressed files, archives, text and the rest are told apart by their first bytes")
    func kinds() {
        #expect(Capture.kind(of: [0xD4, 0xC3, 0xB2, 0xA1, 2, 0]) == .pcap)
        #expect(Capture.kind(of: [0xA1, 0xB2, 0xC3, 0xD4]) == .pcap)
        #expect(Capture.kind(of: [0x4D, 0x3C, 0xB2, 0xA1]) == .pcap)
        #expect(Capture.kind(of: [0xA1, 0xB2, 0x3C, 0x4D]) == .pcap)
        #expect(Capture.kind(of: [0x0A, 0x0D, 0x0D, 0x0A, 0x1C, 0, 0, 0]) == .pcapng)
        #expect(Capture.kind(of: Array("\n\r\r\nsome text after blank lines\n".utf8)) == .text)
        #expect(Capture.kind(of: [0x0A, 0x0D, 0x0D, 0x0A, 0x1C, 0, 0, 0, 0x00, 0x00, 0x00, 0x00]) == .pcapng)
        #expect(Capture.kind(of: [0x1F, 0x8B, 0x08, 0x00]) == .gzip)
        #expect(Capture.kind(of: Array("BZh91AY&SY".utf8)) == .bzip2)
        #expect(Capture.kind(of: [0xFD, 0x37, 0x7A, 0x58, 0x5A, 0x00, 0x00]) == .xz)
        #expect(Capture.kind(of: [0x28, 0xB5, 0x2F, 0xFD, 0x24]) == .zstd)
        #expect(Capture.kind(of: [0x50, 0x4B, 0x03, 0x04, 0x14]) == .zip)
        #expect(Capture.kind(of: [0x50, 0x4B, 0x05, 0x06]) == .zip)
        #expect(Capture.kind(of: Array("1  0.000000 198.18.1.1 → 224.0.0.251 MDNS 80 Standard query\n".utf8)) == .text)
        #expect(Capture.kind(of: Array("Größe: ünïcödé\tтекст\r\n".utf8)) == .text)
        // A multi-byte character cut by the 512-byte look is still text.
        #expect(Capture.kind(of: [UInt8](repeating: 0x41, count: 511) + [0xC3, 0xA9]) == .text)
        #expect(Capture.kind(of: []) == .unknown)
        #expect(Capture.kind(of: [0x00, 0x01, 0x02, 0x03]) == .unknown)
        #expect(Capture.kind(of: [0xC3]) == .unknown)  // a lone lead byte
        var random = SplitMix64(state: 42)
        let noise = (0..<256).map { _ in UInt8(truncatingIfNeeded: random.next()) }
        #expect(Capture.kind(of: noise) == .unknown)
    }

    @Test("reading something that is not a capture says what it is")
    func notACapture() {
        let gzip = #expect(throws: CaptureError.self) { try Capture.read([0x1F, 0x8B, 0x08, 0x00, 0, 0, 0, 0]) }
        #expect(gzip?.code == .notACapture(.gzip))
        #expect(gzip?.description == "not a capture file: it is gzip-compressed data (decompress it first, e.g. with gunzip) (at byte offset 0)")
        let text = #expect(throws: CaptureError.self) { try Capture.read(Array("hello\n".utf8)) }
        #expect(text?.code == .notACapture(.text))
        let nothing = #expect(throws: CaptureError.self) { try Capture.read([]) }
        #expect(nothing?.code == .notACapture(.unknown))
        #expect(nothing?.reason == "not a capture file: no pcap or pcapng magic number")
        for kind: FileKind in [.bzip2, .xz, .zstd, .zip] {
            #expect(!kind.description.isEmpty)
        }
    }

    @Test("capture times compare, subtract and print")
    func times() {
        let a = CaptureTime(seconds: 10, nanoseconds: 900_000_000)
        let b = CaptureTime(seconds: 11, nanoseconds: 100_000_000)
        #expect(a < b)
        #expect(abs(b.seconds(since: a) - 0.2) < 1e-9)
        #expect(CaptureTime(seconds: 1, nanoseconds: 5).description == "1.000000005")
        #expect(CaptureTime(seconds: 0, nanoseconds: -1) == CaptureTime(seconds: -1, nanoseconds: 999_999_999))
        #expect(CaptureTime(seconds: Int64.max, nanoseconds: 2_000_000_000).seconds == Int64.max)
    }
}
