import FileTransfer
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import NearbyBasics
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// How transfers are shown: `--json` events on stdout (`progress`, `done`, `failed`), or on a
/// terminal one line per file on stderr that redraws itself (percent, bytes, rate, time left),
/// or without a terminal one line per file when it is done.
struct TransferOutput: Sendable {
    let json: Bool
    /// Which side this is, in events ("sent" or "received").
    let verb: String
    /// The peer, for events and lines.
    let peer: String?
    let bar: Bool

    init(json: Bool, verb: String, peer: String?) {
        self.json = json
        self.verb = verb
        self.peer = peer
        bar = !json && isatty(STDERR_FILENO) == 1
    }

    func show(_ update: TransferUpdate) {
        switch update {
        case .started(let progress):
            if json {
                printLine(JSONText.object(members("started", progress)))
            } else if bar {
                redraw(progress)
            }
        case .progress(let progress):
            if json {
                printLine(JSONText.object(members("progress", progress)))
            } else if bar {
                redraw(progress)
            }
        case .finished(let result):
            let rate = result.seconds > 0 ? Double(result.transferred) / result.seconds : nil
            if json {
                printLine(JSONText.object([
                    ("event", .string("done")), ("file", .string(result.name)), ("savedAs", .string(result.savedAs)),
                    ("size", .number(Double(result.size))), ("transferred", .number(Double(result.transferred))),
                    ("sha256", .string(result.sha256)), ("seconds", .number((result.seconds * 1000).rounded() / 1000)),
                    ("rate", rate.map { .number($0.rounded()) } ?? .null), ("peerID", peer.map { .string($0) } ?? .null),
                ]))
                return
            }
            if bar { clearLine() }
            let resumed = result.transferred < result.size ? ", resumed: \(Self.bytes(result.transferred)) this time" : ""
            let saved = result.savedAs == result.name ? "" : " as \(result.savedAs)"
            let speed = rate.map { ", \(Self.bytes(Int64($0)))/s" } ?? ""
            printLine("\(verb.capitalized) \(result.name)\(saved): \(Self.bytes(result.size)) in \(Self.duration(result.seconds))\(speed)\(resumed), SHA-256 \(result.sha256)")
        case .failed(let name, let error):
            if json {
                printLine(JSONText.object([
                    ("event", .string("failed")), ("file", .string(name)), ("code", .string(error.code.description)), ("reason", .string(error.message)),
                    ("peerID", peer.map { .string($0) } ?? .null),
                ]))
                return
            }
            if bar { clearLine() }
            status("nearby: \(name): \(error.message)")
        }
    }

    private func members(_ event: String, _ progress: TransferProgress) -> [(String, OutputValue)] {
        [
            ("event", .string(event)), ("file", .string(progress.name)), ("bytes", .number(Double(progress.done))),
            ("size", .number(Double(progress.size))), ("resumedAt", .number(Double(progress.resumedAt))),
            ("rate", progress.rate.map { .number($0.rounded()) } ?? .null),
            ("etaSeconds", progress.secondsLeft.map { .number(($0 * 10).rounded() / 10) } ?? .null), ("peerID", peer.map { .string($0) } ?? .null),
        ]
    }

    /// `build.tar  45%  482.1 MiB / 1.0 GiB  312.4 MiB/s  ETA 2 s`, redrawn in place.
    private func redraw(_ progress: TransferProgress) {
        let percent = Int((progress.fraction * 100).rounded(.down))
        let rate = progress.rate.map { "  \(Self.bytes(Int64($0)))/s" } ?? ""
        let eta = progress.secondsLeft.map { "  ETA \(Self.duration($0))" } ?? ""
        let name = progress.name.count > 30 ? String(progress.name.prefix(29)) + "…" : progress.name
        let line = "\(name)  \(percent)%  \(Self.bytes(progress.done)) / \(Self.bytes(progress.size))\(rate)\(eta)"
        writeToStandardError("\r\u{1B}[K\(line)")
    }

    private func clearLine() {
        writeToStandardError("\r\u{1B}[K")
    }

    /// 1023 B, 1.5 KiB, 482.1 MiB, 1.0 GiB.
    static func bytes(_ count: Int64) -> String {
        let units = ["B", "KiB", "MiB", "GiB", "TiB"]
        var value = Double(count)
        var unit = 0
        while value >= 1024, unit < units.count - 1 {
            value /= 1024
            unit += 1
        }
        return unit == 0 ? "\(count) B" : "\(fixedPoint(value, digits: 1)) \(units[unit])"
    }

    /// 0.4 s, 12 s, 3 min 20 s.
    static func duration(_ seconds: Double) -> String {
        if seconds < 10 { return "\(fixedPoint(seconds, digits: 1)) s" }
        let whole = Int(seconds.rounded())
        return whole < 60 ? "\(whole) s" : "\(whole / 60) min \(whole % 60) s"
    }
}
