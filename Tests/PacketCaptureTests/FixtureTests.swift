import NearbyCrypto
import Foundation
import PacketCapture
import Testing

/// The real capture fixtures (Tools/captures/make) and tshark's view of them, manifest.json.
enum Fixtures {
    /// Fixtures/captures next to this file; PACKET_CAPTURE_FIXTURES overrides it.
    static let directory: String = {
        if let override = ProcessInfo.processInfo.environment["PACKET_CAPTURE_FIXTURES"], !override.isEmpty {
            return override
        }
        return URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .appendingPathComponent("Fixtures").appendingPathComponent("captures").path
    }()

    static var manifestPath: String { directory + "/manifest.json" }

    static var available: Bool { FileManager.default.fileExists(atPath: manifestPath) }

    static func manifest() throws -> [String: Any] {
        let data = try Data(contentsOf: URL(fileURLWithPath: manifestPath))
        return try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
    }

    static func bytes(_ name: String) throws -> [UInt8] {
        [UInt8](try Data(contentsOf: URL(fileURLWithPath: directory + "/" + name)))
    }

    /// "1700000000.123456789" as seconds and nanoseconds; nil for anything else.
    static func time(_ text: String) -> CaptureTime? {
        let parts = text.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count <= 2, let seconds = Int64(parts[0]) else { return nil }
        guard parts.count == 2 else { return CaptureTime(seconds: seconds) }
        let fraction = String(parts[1].prefix(9)).padding(toLength: 9, withPad: "0", startingAt: 0)
        guard let nanoseconds = Int64(fraction) else { return nil }
        return CaptureTime(seconds: seconds, nanoseconds: nanoseconds)
    }
}

@Suite(
    "Real captures against tshark",
    .enabled(if: Fixtures.available, "Fixtures/captures/manifest.json is not there (Tools/captures/make makes it)"))
struct FixtureTests {
    @Test("every capture: frames, and each UDP datagram's frame, endpoints, length, SHA-256, fragments and VLANs")
    func captures() throws {
        let manifest = try Fixtures.manifest()
        let captures = try #require(manifest["captures"] as? [[String: Any]])
        #expect(!captures.isEmpty)
        for entry in captures {
            let name = try #require(entry["file"] as? String)
            let capture = try Capture.read(try Fixtures.bytes(name))
            #expect(capture.format == (entry["format"] as? String == "pcapng" ? .pcapng : .pcap), "\(name)")
            if let frames = entry["frames"] as? Int {
                #expect(capture.frames.count == frames, "\(name): \(capture.frames.count) frames, tshark \(frames)")
            }
            if let linkTypes = entry["linkTypes"] as? [Int] {
                #expect(Set(capture.interfaces.map(\.linkType.rawValue)) == Set(linkTypes.map { $0 & 0xFFFF }), "\(name)")
            }
            if entry["tsharkError"] != nil, name.contains("truncated") {
                #expect(capture.problems.contains { $0.kind == .truncated }, "\(name): the cut record is a problem")
            }
            let expected = (entry["udp"] as? [[String: Any]]) ?? []
            var numbers = Set<Int>()
            for udp in expected {
                let number = try #require(udp["frame"] as? Int)
                numbers.insert(number)
                try check(udp, in: capture, frame: number, file: name)
            }
            for frame in capture.frames where frame.content.datagram != nil {
                #expect(numbers.contains(frame.number), "\(name) frame \(frame.number): UDP here but not for tshark")
            }
        }
    }

    private func check(_ udp: [String: Any], in capture: Capture, frame number: Int, file: String) throws {
        let place = "\(file) frame \(number)"
        guard number >= 1, number <= capture.frames.count else {
            Issue.record("\(place): no such frame here (\(capture.frames.count) frames)")
            return
        }
        let frame = capture.frames[number - 1]
        let declared = udp["payloadLength"] as? Int
        let shown = udp["capturedPayloadLength"] as? Int
        if let shown, let declared, shown < declared {
            // tshark shows what survived the snap length; this reader refuses the datagram.
            #expect(frame.content.undecodableText?.hasPrefix("cut short by the snap length") == true, "\(place): \(frame.content)")
            return
        }
        if frame.content.undecodableText == "bad FCS (radiotap flags)" {
            return  // by design: tshark dissects frames whose radiotap flags say the FCS is bad
        }
        guard let datagram = frame.content.datagram else {
            Issue.record("\(place): tshark has UDP, this reader has \(frame.content)")
            return
        }
        #expect(datagram.source.addressDescription == udp["source"] as? String, "\(place)")
        #expect(Int(datagram.source.port) == udp["sourcePort"] as? Int, "\(place)")
        #expect(datagram.destination.addressDescription == udp["destination"] as? String, "\(place)")
        #expect(Int(datagram.destination.port) == udp["destinationPort"] as? Int, "\(place)")
        #expect(datagram.payload.count == declared, "\(place)")
        if shown == nil {
            #expect(sha256Hex(datagram.payload) == udp["payloadSHA256"] as? String, "\(place)")
        }  // else the UDP length is shorter than the IP payload: tshark's hash covers the bytes after it too
        if let fragments = udp["fragmentFrames"] as? [Int] {
            #expect(datagram.fragmentFrames == fragments.sorted(), "\(place)")
        }
        if let vlans = udp["vlan"] as? [Int] {
            #expect(datagram.vlanTags == vlans, "\(place)")
        }
        if let text = udp["time"] as? String, let time = Fixtures.time(text) {
            #expect(frame.time == time, "\(place): \(String(describing: frame.time)), tshark \(text)")
        }
    }

    @Test("files that are not captures are recognised and refused")
    func notCaptures() throws {
        let manifest = try Fixtures.manifest()
        for entry in (manifest["notCaptures"] as? [[String: Any]]) ?? [] {
            let name = try #require(entry["file"] as? String)
            let bytes = try Fixtures.bytes(name)
            let kind = Capture.kind(of: bytes)
            switch entry["kind"] as? String {
            case "text": #expect(kind == .text, "\(name)")
            case "gzip": #expect(kind == .gzip, "\(name)")
            default: #expect(kind == .unknown, "\(name)")
            }
            let error = #expect(throws: CaptureError.self, "\(name)") { try Capture.read(bytes) }
            #expect(error?.code == .notACapture(kind), "\(name)")
        }
    }
}

@Suite("Test helpers")
struct HelperTests {
    @Test("SHA-256 of the test helper matches the standard's vectors")
    func sha256() {
        #expect(sha256Hex([]) == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
        #expect(sha256Hex(Array("abc".utf8)) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        #expect(sha256Hex(Array("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq".utf8))
            == "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1")
    }
}

/// SHA-256 as lower-case hex (NearbyCrypto's), to compare payloads with the fixtures' manifest.
func sha256Hex(_ bytes: [UInt8]) -> String {
    SHA256.hash(bytes).map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }.joined()
}
