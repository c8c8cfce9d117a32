import ArgumentParser
import DNSWire
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import PacketCapture

#if canImport(Glibc)
    import Glibc
#endif

/// `nearby decode`: shows the mDNS (and DNS-SD) packets of capture files or raw DNS messages.
struct Decode: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Decode mDNS packets from pcap or pcapng captures, or raw DNS message files.",
        discussion: """
            Each FILE is a capture (pcap as `tcpdump -w` writes it, or pcapng, Wireshark's \
            format) or one raw DNS message. Captures may hold Ethernet (with VLAN tags), Linux \
            cooked (v1, v2), BSD/macOS loopback, raw IP, or 802.11 frames with or without \
            radiotap; IPv4 fragments and IPv6 fragment and extension headers are handled.

            Shown by default: mDNS (UDP port 5353 on either side) and DNS-SD over unicast DNS \
            (port 53 messages about _tcp/_udp services); --all shows every UDP datagram. \
            Packets are numbered as the capture numbers its frames (Wireshark's numbers). \
            Names are in presentation format with dns-sd's escapes (\\032 is a space); JSON \
            also gives each name's labels unescaped. A packet that does not decode is shown \
            with the reason; a frame that cannot be read, a capture cut short, or fragments \
            never completed are reported too, and make the exit status 1. A summary of what \
            was and was not shown goes to stderr.

            Exit status: 0 every packet shown decoded; 1 something did not (or the capture is \
            damaged); 2 a file that cannot be read, or is neither a capture nor a DNS message.

            Examples:
              tcpdump -i eth0 -w mdns.pcap udp port 5353     (then)  nearby decode mdns.pcap
              nearby decode wifi.pcapng --json
              nearby decode everything.pcapng --all
              nearby decode --json Tests/DNSWireTests/Fixtures/golden/avahi-probe-1.bin
            """
    )

    @Argument(help: "pcap or pcapng captures, or raw DNS messages", completion: .file())
    var files: [String]

    @Flag(help: "Print one JSON object per packet (and per frame that cannot be read).")
    var json = false

    @Flag(help: "Show every UDP datagram, not only mDNS and DNS-SD.")
    var all = false

    func validate() throws {
        guard !files.isEmpty else { throw ValidationError("name at least one FILE (a pcap or pcapng capture, or a raw DNS message)") }
    }

    func run() throws {
        var sink = OutputSink()
        var worst = Outcome.decoded
        for path in files {
            let bytes = try read(path)
            worst = max(worst, decodeFile(path, bytes, into: &sink))
        }
        sink.flush()
        switch worst {
        case .decoded: break
        case .failed: throw ExitCode(1)
        case .unusable: throw ExitCode(2)
        }
    }

    private func read(_ path: String) throws -> [UInt8] {
        if fileStatus(path).isDirectory {
            throw ValidationError("\(path) is a directory; name capture files")
        }
        guard let data = FileManager.default.contents(atPath: path) else {
            throw ValidationError("cannot read \(path): no such file or not readable")
        }
        return [UInt8](data)
    }

    /// How a file went, worst last.
    enum Outcome: Int, Comparable {
        case decoded, failed, unusable
        static func < (lhs: Self, rhs: Self) -> Bool { lhs.rawValue < rhs.rawValue }
    }

    /// Shows one file.
    private func decodeFile(_ path: String, _ bytes: [UInt8], into sink: inout OutputSink) -> Outcome {
        switch Capture.kind(of: bytes) {
        case .pcap, .pcapng:
            let capture: Capture
            do {
                capture = try Capture.read(bytes)
            } catch {
                sink.flush()
                note("\(path): \(error)")
                return .failed
            }
            return show(capture, path: path, into: &sink) ? .decoded : .failed
        case .gzip, .bzip2, .xz, .zstd, .zip, .text:
            sink.flush()
            note("\(path): \(CaptureErrorWords.notACapture(Capture.kind(of: bytes)))\(Self.beginning(of: bytes))")
            return .unusable
        case .unknown:
            // Not a capture: a raw DNS message, or neither.
            guard bytes.count >= 12 else {
                sink.flush()
                note("\(path): neither a pcap or pcapng capture nor a DNS message (\(bytes.count) bytes; a DNS message has a 12-byte header)")
                return .unusable
            }
            let datagram = Shown(frame: 1, time: nil, relative: nil, source: "", destination: "", vlan: [], fragments: [], payload: bytes)
            do {
                let decoded = try Message.decode(bytes)
                if json {
                    sink.write(JSONText.object(PacketJSON.packet(decoded, shown: datagram, file: path)))
                    sink.write("\n")
                } else {
                    PacketText.write(decoded, shown: datagram, into: &sink)
                }
                return decoded.skippedRecords.isEmpty ? .decoded : .failed
            } catch {
                sink.flush()
                note("\(path): neither a pcap or pcapng capture nor a DNS message: read as a DNS message, \(error)")
                return .unusable
            }
        }
    }

    /// The first bytes of a text file, to show what it is.
    static func beginning(of bytes: [UInt8]) -> String {
        guard let text = String(validating: bytes.prefix(40), as: UTF8.self) ?? String(validating: bytes.prefix(39), as: UTF8.self) else { return "" }
        let line = text.split(whereSeparator: \.isNewline).first.map(String.init) ?? ""
        return line.isEmpty ? "" : " (it begins \"\(line.count > 30 ? String(line.prefix(30)) + "…" : line)\")"
    }

    /// Shows a capture's packets; false when a packet did not decode or the capture is damaged.
    private func show(_ capture: Capture, path: String, into sink: inout OutputSink) -> Bool {
        var ok = true
        var shown = 0, notShown = 0, notUDP = 0, fragments = 0, undecodable = 0, failed = 0
        let start = capture.frames.lazy.compactMap(\.time).first
        for frame in capture.frames {
            switch frame.content {
            case .udp(let datagram):
                // Decoded only when it may be shown: other traffic (QUIC, SSDP) is not parsed for nothing.
                let dnsPort = datagram.source.port == 53 || datagram.destination.port == 53
                let decoded = all || dnsPort || Self.isMulticastDNS(datagram) ? try? Message.decode(datagram.payload) : nil
                guard all || Self.isMulticastDNS(datagram) || (decoded.map { Self.isServiceDiscovery(datagram, $0.message) } ?? false) else {
                    notShown += 1
                    continue
                }
                shown += 1
                let item = Shown(
                    frame: frame.number, time: frame.time, relative: frame.time.flatMap { time in start.map { time.seconds(since: $0) } },
                    source: datagram.source.description, destination: datagram.destination.description,
                    vlan: datagram.vlanTags, fragments: datagram.fragmentFrames, payload: datagram.payload)
                if let decoded {
                    if json {
                        sink.write(JSONText.object(PacketJSON.packet(decoded, shown: item, file: path)))
                        sink.write("\n")
                    } else {
                        PacketText.write(decoded, shown: item, into: &sink)
                    }
                    if !decoded.skippedRecords.isEmpty { failed += 1 }
                } else {
                    // Only a datagram on a DNS port is a DNS message that failed; others (--all)
                    // are simply not DNS.
                    let onDNSPort = dnsPort || Self.isMulticastDNS(datagram)
                    if onDNSPort { failed += 1 }
                    let reason: String
                    do {
                        _ = try Message.decode(datagram.payload)
                        reason = "unknown"
                    } catch {
                        reason = error.description
                    }
                    if json {
                        sink.write(JSONText.object(PacketJSON.undecoded(item, file: path, error: reason, notDNS: !onDNSPort)))
                        sink.write("\n")
                    } else {
                        PacketText.writeUndecoded(item, reason: reason, notDNS: !onDNSPort, into: &sink)
                    }
                }
            case .fragment:
                fragments += 1
            case .other:
                notUDP += 1
            case .undecodable(let reason):
                // A datagram the snap length cut: shown when its ports say mDNS or DNS (or --all).
                let cut = frame.cutDatagram
                if let cut, !all, !Self.isMulticastDNS(cut), cut.source.port != 53, cut.destination.port != 53 {
                    notShown += 1
                    continue
                }
                undecodable += 1
                let item = Shown(
                    frame: frame.number, time: frame.time, relative: frame.time.flatMap { time in start.map { time.seconds(since: $0) } },
                    source: cut?.source.description ?? "", destination: cut?.destination.description ?? "", vlan: cut?.vlanTags ?? [],
                    fragments: [], payload: cut?.payload ?? [])
                if json {
                    sink.write(JSONText.object(PacketJSON.undecoded(item, file: path, error: reason, frameError: true)))
                    sink.write("\n")
                } else {
                    PacketText.writeUnreadable(item, reason: reason, into: &sink)
                }
            }
        }
        sink.flush()
        if failed > 0 || undecodable > 0 { ok = false }
        for problem in capture.problems {
            note("\(path): \(problem)")
            switch problem.kind {
            case .unknownBlocks, .irregularBlock: break
            default: ok = false
            }
        }
        note("\(path): " + Self.summary(
            frames: capture.frames.count, shown: shown, failed: failed, notShown: notShown, notUDP: notUDP, fragments: fragments,
            undecodable: undecodable, all: all))
        return ok
    }

    /// The summary line: frames, what was shown, and what was not and why.
    static func summary(frames: Int, shown: Int, failed: Int, notShown: Int, notUDP: Int, fragments: Int, undecodable: Int, all: Bool) -> String {
        guard frames > 0 else { return "the capture holds no frames" }
        func count(_ number: Int, _ one: String, _ many: String? = nil) -> String { "\(number) \(number == 1 ? one : many ?? one + "s")" }
        var parts = [count(frames, "frame")]
        let what = all ? "UDP datagram" : "mDNS/DNS-SD packet"
        parts.append(shown == 0 ? "no \(what)s" : "\(count(shown, what)) shown" + (failed > 0 ? " (\(failed) did not decode)" : ""))
        if notShown > 0 { parts.append("\(count(notShown, "other UDP datagram")) not shown (--all shows them)") }
        if notUDP > 0 { parts.append("\(count(notUDP, "frame")) not UDP") }
        if fragments > 0 { parts.append("\(count(fragments, "IP fragment")) reassembled") }
        if undecodable > 0 { parts.append("\(count(undecodable, "frame")) that cannot be read") }
        return parts.joined(separator: ", ")
    }

    /// mDNS: UDP port 5353 on either side (queries, responses, legacy unicast answers).
    static func isMulticastDNS(_ datagram: UDPDatagram) -> Bool {
        datagram.source.port == 5353 || datagram.destination.port == 5353
    }

    /// DNS-SD over unicast DNS: a port 53 message whose questions or records name a service
    /// (a `_tcp` or `_udp` label, or the `_dns-sd` enumeration names).
    static func isServiceDiscovery(_ datagram: UDPDatagram, _ message: Message) -> Bool {
        guard datagram.source.port == 53 || datagram.destination.port == 53 else { return false }
        func serviceName(_ name: DomainName) -> Bool {
            name.labels.contains { isLabel($0, "_tcp") || isLabel($0, "_udp") || isLabel($0, "_dns-sd") }
        }
        return message.questions.contains { serviceName($0.name) } || message.allRecords.contains { serviceName($0.name) }
    }

    private func note(_ text: String) {
        writeToStandardError("nearby: \(text)\n")
    }
}

/// The words for a file that is not a capture.
enum CaptureErrorWords {
    static func notACapture(_ kind: FileKind) -> String {
        switch kind {
        case .gzip: "gzip-compressed data, not a capture or a DNS message: decompress it first (gunzip -k FILE)"
        case .bzip2: "bzip2-compressed data, not a capture or a DNS message: decompress it first (bunzip2 -k FILE)"
        case .xz: "xz-compressed data, not a capture or a DNS message: decompress it first (unxz -k FILE)"
        case .zstd: "zstd-compressed data, not a capture or a DNS message: decompress it first (unzstd FILE)"
        case .zip: "a zip archive, not a capture or a DNS message: extract the capture first"
        case .text: "text, not a capture or a DNS message (a capture is binary pcap or pcapng, e.g. from tcpdump -w)"
        default: "not a capture"
        }
    }
}

/// One datagram about to be shown, with where and when it was captured.
struct Shown {
    var frame: Int
    var time: CaptureTime?
    /// Seconds since the capture's first time stamp.
    var relative: Double?
    /// "198.18.1.1:5353", "[fe80::1]:5353"; empty for a raw message file.
    var source: String
    var destination: String
    var vlan: [Int]
    var fragments: [Int]
    var payload: [UInt8]
}

/// Buffered standard output: one write per 64 KiB, not per line (a capture of 50,000 packets
/// prints millions of lines).
struct OutputSink {
    private var buffer: [UInt8] = []
    /// Keeps everything instead of writing it (tests).
    private let collecting: Bool

    init(collecting: Bool = false) {
        self.collecting = collecting
        buffer.reserveCapacity(1 << 17)
    }

    /// What was written, when collecting.
    var collected: String { String(decoding: buffer, as: UTF8.self) }

    mutating func write(_ text: String) {
        buffer.append(contentsOf: text.utf8)
        if buffer.count >= 1 << 16 { flush() }
    }

    mutating func write(bytes: some Sequence<UInt8>) {
        buffer.append(contentsOf: bytes)
        if buffer.count >= 1 << 16 { flush() }
    }

    mutating func flush() {
        guard !buffer.isEmpty, !collecting else { return }
        buffer.withUnsafeBytes { raw in
            var offset = 0
            while offset < raw.count, let base = raw.baseAddress {
                let written = Glibc.write(STDOUT_FILENO, base + offset, raw.count - offset)
                if written < 0, errno == EINTR { continue }
                if written <= 0 { break }  // a closed pipe (| head): the rest has no reader
                offset += written
            }
        }
        buffer.removeAll(keepingCapacity: true)
    }
}
