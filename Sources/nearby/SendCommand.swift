import ArgumentParser
import CNearbySocket
import FileTransfer
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Logging
import PeerConnection

struct SendCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "send",
        abstract: "Send files to a peer (nearby receive, or serve --receive): verified by SHA-256, resumable.",
        discussion: """
            The peer is found as with connect: --host and --port, or a service TYPE (default \
            _openagents._tcp) with --nearest, --peer ID or --name NAME. Each file goes on its own \
            stream: its name, size and modification time first, then the bytes, then its SHA-256. \
            The receiver writes NAME.SENDER.part and renames it to NAME once size and SHA-256 match, so \
            nothing half-written ever has the final name; a name taken there gets a number \
            ("report (2).pdf").

            --resume: a file the receiver already has the start of (its partial file from a transfer \
            that was cut short) continues where it stopped, once the receiver's first bytes hash \
            the same as ours; otherwise it starts over.

            Folders go with --recursive, under their own name; hidden entries (a leading dot) and \
            what is neither a file nor a folder are skipped and listed. The receiver declines \
            names with "/", "..", control characters or a leading dot, files over its limit or \
            its free space, and peers it does not trust.

            Progress: on a terminal one line per file (percent, bytes, rate, time left); with \
            --json the events started, progress (every --interval), done and failed.

            Ctrl-C (or SIGTERM) stops at once: the receiver hears that the sender cancelled and \
            keeps its partial file for a later --resume.

            Exit status: 0 every file arrived; 1 a file did not (declined, failed, interrupted), \
            or no connection; 2 bad input; 130 interrupted.

            TRUST: --anchor FILE..., --system-roots, --pinned, --trust-on-first-use (default: --pinned).

            Examples:
              nearby send build.tar.zst _openagents._tcp --nearest
              nearby send big.iso --peer 9R4X9V --resume
              nearby send photos --recursive --host 192.168.1.20 --port 9099
              nearby send a.log b.log --name "Build Box" --json
              nearby send backup.tar --peer 9R4X9V --limit-rate 5M
            """)

    @Argument(help: ArgumentHelp("Files (and with --recursive folders) to send, then optionally the service TYPE.", valueName: "path"))
    var paths: [String] = []
    @OptionGroup var target: TargetOptions
    @Flag(help: "Continue files the receiver has the start of (its partial file), after checking those bytes are the same.")
    var resume = false
    @Flag(help: "Send folders with everything in them.")
    var recursive = false
    @Option(name: .customLong("limit-rate"), help: ArgumentHelp(
        "Send at most this many bytes a second on average (a K, M or G suffix: 1024s), to leave room on a shared link.", valueName: "rate"),
            transform: SendCommand.rate)
    var limitRate: Int?
    @Option(help: ArgumentHelp("Seconds between progress events (--json) or redraws.", valueName: "seconds"),
            transform: NumberInput.seconds("--interval", maximum: 60))
    var interval: Double = 0.25
    @OptionGroup var output: OutputOptions
    @OptionGroup(title: "TRUST") var trust: TrustOptions
    @OptionGroup var channel: ChannelOptions
    @OptionGroup var state: StateDirectory

    var json: Bool { output.json }

    /// `--limit-rate`: bytes a second, with an optional K, M or G (powers of 1024).
    static func rate(_ text: String) throws -> Int {
        let units: [Character: Int] = ["K": 1 << 10, "M": 1 << 20, "G": 1 << 30]
        var digits = text.trimmingBlanks()
        var unit = 1
        if let last = digits.last?.uppercased().first, let scale = units[last] {
            unit = scale
            digits.removeLast()
        }
        guard let value = Int(digits), value > 0, value <= Int.max / unit else {
            throw ValidationError("--limit-rate \(text): give bytes a second, a whole number above 0, with K, M or G if you like (for example 500K or 10M)")
        }
        return value * unit
    }

    /// The files and the service type, from the positional arguments: the last one is the type
    /// when it looks like one (`_name._tcp`) and is not a file here.
    var filesAndType: (files: [String], type: String?) {
        guard let last = paths.last, paths.count > 1 || target.host == nil, last.hasPrefix("_"),
            last.hasSuffix("._tcp") || last.hasSuffix("._udp"), !FileManager.default.fileExists(atPath: last)
        else {
            let needsType = target.nearest || target.wantedPeer != nil || target.wantedName != nil
            return (paths, needsType ? "_openagents._tcp" : nil)
        }
        return (Array(paths.dropLast()), last)
    }

    func validate() throws {
        let (files, type) = filesAndType
        guard !files.isEmpty else { throw ValidationError("give at least one file to send") }
        try target.validate(type: type, insecure: channel.insecure)
        guard !channel.insecure else { throw ValidationError("send needs TLS: the receiver admits senders by their peer ID") }
        _ = try channel.version()
    }

    func run() async throws {
        _ = nearby_tune_malloc_for_bulk()
        let (files, type) = filesAndType
        let items: [FileSender.Item]
        do {
            let found = try await FileSender.items(for: files, recursive: recursive)
            items = found.items
            for skipped in found.skipped {
                printEvent(json, [("event", .string("skipped")), ("path", .string(skipped.path)), ("reason", .string(skipped.reason))],
                           text: "Skipped \(skipped.path): \(skipped.reason)")
            }
        } catch {
            throw ValidationError(error.message)
        }
        guard !items.isEmpty else { throw ValidationError("nothing to send: every entry was skipped") }
        let logger = output.logger("nearby.connection")
        let found = try await target.connect(
            type: type,
            configuration: { try channel.configuration(state: state, trust: trust, json: json, logger: logger, streams: StreamSettings()) },
            json: json, trustOnFirstUse: trust.trustOnFirstUse, state: state, logger: logger)
        printConnected(json, found.connection, extra: found.extra)
        let connection = found.connection
        refuseIncomingStreams(on: connection, because: "nearby send takes no streams; it only sends")
        let show = TransferOutput(json: json, verb: "sent", peer: connection.peerID?.description)
        let resume = self.resume
        let rateLimit = limitRate
        let intervalDuration = Duration.milliseconds(Int64(interval * 1000))
        enum Outcome: Sendable { case done(failed: Int), stopped(FileTransferError), interrupted }
        let outcome = await unlessInterrupted { () -> Outcome in
            var failed = 0
            do throws(FileTransferError) {
                for try await update in FileSender.send(items, over: connection, resume: resume, interval: intervalDuration, rateLimit: rateLimit) {
                    if case .failed = update { failed += 1 }
                    show.show(update)
                }
                return .done(failed: failed)
            } catch {
                return .stopped(error)
            }
        } ?? .interrupted
        switch outcome {
        case .done(let failed):
            await found.connection.close(code: .normal, reason: "done")
            await found.shutdown()
            if failed > 0 { throw ExitCode(1) }
        case .stopped(let error):
            if error.code == .declined, items.count == 1 {
                // Already shown as "failed".
            } else if json {
                printLine(JSONText.object([("event", .string("stopped")), ("code", .string(error.code.description)), ("reason", .string(error.message))]))
            } else {
                status("nearby: the transfer stopped: \(error.message)")
            }
            await found.connection.close(code: .goingAway, reason: "transfer stopped")
            await found.shutdown()
            throw ExitCode(1)
        case .interrupted:
            // The transfer's task was cancelled: its stream was reset ("the sender cancelled").
            await found.connection.close(code: .goingAway, reason: "the sender cancelled")
            await found.shutdown()
            printEvent(json, [("event", .string("cancelled"))], text: "nearby: cancelled; the receiver keeps what it has for --resume")
            throw ExitCode(130)
        }
    }
}
