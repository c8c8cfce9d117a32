import Foundation
import Testing

/// `nearby decode` on the lab's captures (Tests/PacketCaptureTests/Fixtures/captures, made by
/// Tools/captures/make in every format and link type), compared packet by packet with tshark's
/// dissection of the same files (their manifest.json): frame numbers, endpoints, and the DNS
/// header, questions and record counts; plus the exit status and summary of each file.
@Suite("nearby decode on real captures, against tshark")
struct DecodeCaptureTests {
    static let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    static let captures = repository.appendingPathComponent("Tests/PacketCaptureTests/Fixtures/captures")

    /// One datagram tshark dissected as DNS or mDNS.
    struct Datagram: Sendable {
        var frame: Int
        var source: String
        var destination: String
        var payloadLength: Int
        var fragments: [Int]
        var id: Int
        var questions: [String]
        var counts: [String: Int]
    }

    struct Capture: Sendable, CustomTestStringConvertible {
        var file: String
        var frames: Int
        var dns: [Datagram]
        var malformed: [Int]
        var testDescription: String { file }
    }

    static func manifest() throws -> [String: Any] {
        let data = try Data(contentsOf: captures.appendingPathComponent("manifest.json"))
        return try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
    }

    static let all: [Capture] = {
        guard let manifest = try? manifest(), let list = manifest["captures"] as? [[String: Any]] else { return [] }
        return list.compactMap { entry in
            guard let file = entry["file"] as? String, let frames = entry["frames"] as? Int else { return nil }
            let udp = entry["udp"] as? [[String: Any]] ?? []
            let dns = udp.compactMap { item -> Datagram? in
                guard let dns = item["dns"] as? [String: Any], let frame = item["frame"] as? Int else { return nil }
                var counts: [String: Int] = [:]
                for key in ["answers", "authorities", "additionals"] { counts[key] = dns[key] as? Int }
                return Datagram(
                    frame: frame, source: endpoint(item["source"] as? String ?? "", item["sourcePort"] as? Int ?? -1),
                    destination: endpoint(item["destination"] as? String ?? "", item["destinationPort"] as? Int ?? -1),
                    payloadLength: item["payloadLength"] as? Int ?? -1, fragments: item["fragmentFrames"] as? [Int] ?? [],
                    id: dns["id"] as? Int ?? -1, questions: dns["questions"] as? [String] ?? [], counts: counts)
            }
            return Capture(file: file, frames: frames, dns: dns, malformed: entry["malformed"] as? [Int] ?? [])
        }
    }()

    /// Runs the built `nearby decode ARGS`; exit status, stdout, stderr.
    static func decode(_ arguments: [String]) async throws -> (Int32, String, String) {
        try await onOwnThread { try decodeBlocking(arguments) }
    }

    static func decodeBlocking(_ arguments: [String]) throws -> (Int32, String, String) {
        let process = Process()
        process.executableURL = repository.appendingPathComponent(".build/debug/nearby")
        process.arguments = ["decode"] + arguments
        process.currentDirectoryURL = captures
        let out = Pipe(), err = Pipe()
        process.standardOutput = out
        process.standardError = err
        try process.run()
        let output = out.fileHandleForReading.readDataToEndOfFile()
        let errors = err.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: output, as: UTF8.self), String(decoding: errors, as: UTF8.self))
    }

    static func endpoint(_ address: String, _ port: Int) -> String {
        address.contains(":") ? "[\(address)]:\(port)" : "\(address):\(port)"
    }

    @Test("the manifest lists every capture format and link type")
    func manifestIsWhole() {
        let files = Set(Self.all.map(\.file))
        for file in ["ethernet.pcap", "ethernet.pcapng", "multi.pcapng", "sll.pcap", "sll2.pcap", "null.pcap", "loop.pcap", "raw.pcap", "ieee80211.pcap", "radiotap.pcap", "vlan.pcap", "two-sections.pcapng", "simple-blocks.pcapng"] {
            #expect(files.contains(file), "\(file) is missing from the manifest")
        }
    }

    @Test("every DNS packet tshark sees, nearby decode --all shows at the same frame, from and to the same endpoints, with the same id, questions and record counts", arguments: all)
    func agreesWithTshark(_ capture: Capture) async throws {
        let (status, output, errors) = try await Self.decode([capture.file, "--json", "--all"])
        let packets = output.split(separator: "\n").compactMap { line in
            (try? JSONSerialization.jsonObject(with: Data(line.utf8))) as? [String: Any]
        }
        let byFrame = Dictionary(packets.compactMap { packet in (packet["frame"] as? Int).map { ($0, packet) } }) { first, _ in first }
        #expect(!capture.dns.isEmpty || capture.frames == 0 || capture.file == "no-udp.pcap", "tshark saw no DNS in \(capture.file)")
        for expected in capture.dns where !capture.malformed.contains(expected.frame) {
            let frame = expected.frame
            let packet = try #require(byFrame[frame], "\(capture.file) frame \(frame) is missing: \(errors)")
            // One deliberate difference: a frame whose radiotap flags say its FCS is bad is not
            // read (tshark dissects it anyway).
            if (packet["frameError"] as? String)?.contains("bad FCS") == true, capture.file == "radiotap.pcap" { continue }
            #expect(packet["source"] as? String == expected.source && packet["destination"] as? String == expected.destination, "\(capture.file) frame \(frame)")
            #expect(packet["size"] as? Int == expected.payloadLength, "\(capture.file) frame \(frame)")
            if !expected.fragments.isEmpty {
                #expect(packet["fragments"] as? [Int] == expected.fragments, "\(capture.file) frame \(frame)")
            }
            #expect(packet["id"] as? Int == expected.id, "\(capture.file) frame \(frame)")
            let questions = (packet["questions"] as? [[String: Any]] ?? []).map { ($0["labels"] as? [String] ?? []).joined(separator: ".") }
            #expect(questions == expected.questions, "\(capture.file) frame \(frame)")
            for (key, count) in expected.counts {
                #expect((packet[key] as? [Any])?.count == count, "\(capture.file) frame \(frame) \(key)")
            }
        }
        // Only frames tshark calls UDP appear (and the ones that cannot be read, with the reason).
        for packet in packets where packet["frameError"] == nil {
            #expect(packet["source"] != nil, "\(capture.file): \(packet)")
        }
        let clean = capture.malformed.isEmpty && !["radiotap.pcap", "truncated-record.pcap"].contains(capture.file)
        #expect(status == (clean ? 0 : 1), "\(capture.file): exit \(status): \(errors)")
        #expect(errors.contains("nearby: \(capture.file): " + (capture.frames == 0 ? "the capture holds no frames" : "\(capture.frames) frame")), "\(errors)")
    }

    @Test("what is not shown is said: no UDP, a cut record, a bad FCS, frames cut by the snap length")
    func problemsAreSaid() async throws {
        let (noUDP, _, noUDPErrors) = try await Self.decode(["no-udp.pcap"])
        #expect(noUDP == 0 && noUDPErrors.contains("14 frames, no mDNS/DNS-SD packets, 14 frames not UDP"), "\(noUDPErrors)")
        let (cut, _, cutErrors) = try await Self.decode(["truncated-record.pcap"])
        #expect(cut == 1 && cutErrors.contains("the capture ends inside frame 6"), "\(cutErrors)")
        let (fcs, fcsOutput, _) = try await Self.decode(["radiotap.pcap"])
        #expect(fcs == 1 && fcsOutput.contains("frame 8  t=") && fcsOutput.contains("CANNOT BE READ: bad FCS"), "\(fcsOutput)")
        let (snap, snapOutput, _) = try await Self.decode(["snaplen.pcap", "--json"])
        #expect(snap == 1 && snapOutput.contains(#""frameError":"cut short by the snap length: 120 of"#), "\(snapOutput.prefix(500))")
        // Cut frames still say where they came from and went, as tshark does.
        let snapshot = try #require(Self.all.first { $0.file == "snaplen.pcap" })
        let cutFrames = snapOutput.split(separator: "\n").compactMap { line in
            (try? JSONSerialization.jsonObject(with: Data(line.utf8))) as? [String: Any]
        }.filter { $0["frameError"] != nil }
        #expect(!cutFrames.isEmpty)
        for packet in cutFrames {
            let frame = try #require(packet["frame"] as? Int)
            guard let expected = snapshot.dns.first(where: { $0.frame == frame }) else { continue }
            #expect(packet["source"] as? String == expected.source && packet["destination"] as? String == expected.destination, "frame \(frame): \(packet)")
            #expect((packet["captured"] as? Int ?? 0) > 0 && (packet["captured"] as? Int ?? 0) < expected.payloadLength, "frame \(frame): \(packet)")
        }
    }

    @Test("by default only mDNS and DNS-SD are shown; --all adds the other UDP datagrams, frame numbers unchanged")
    func defaultFilter() async throws {
        let (_, shown, summary) = try await Self.decode(["ethernet.pcap", "--json"])
        let (_, everything, _) = try await Self.decode(["ethernet.pcap", "--json", "--all"])
        let frames = { (text: String) in Set(text.split(separator: "\n").compactMap { line in
            ((try? JSONSerialization.jsonObject(with: Data(line.utf8))) as? [String: Any])?["frame"] as? Int
        }) }
        #expect(frames(shown).isStrictSubset(of: frames(everything)))
        #expect(summary.contains("other UDP datagram") && summary.contains("--all shows them"), "\(summary)")
    }

    @Test("files that are not captures say what they are: text, random bytes, gzip (exit 2)")
    func notCaptures() async throws {
        for (file, words) in [
            ("not-a-capture/passwd.txt", "text, not a capture or a DNS message"), ("not-a-capture/random.bin", "neither a pcap or pcapng capture nor a DNS message"),
            ("not-a-capture/ethernet.pcap.gz", "gzip-compressed data, not a capture or a DNS message: decompress it first"),
        ] {
            let (status, output, errors) = try await Self.decode([file])
            #expect(status == 2 && output.isEmpty && errors.contains(words), "\(file): \(errors)")
        }
    }
}
