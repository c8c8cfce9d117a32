import ArgumentParser
import CNearbySocket
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Dispatch
import NearbyBasics
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif
import Logging
import PeerConnection
import PeerTrust

struct PipeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "pipe",
        abstract: "A byte stream both ways with a peer: stdin goes to the peer, what it sends comes out on stdout.",
        discussion: """
            The peer is found as with connect: --host and --port, or a service TYPE (default \
            _openagents._tcp) with --nearest, --peer ID or --name NAME. It must take pipes: \
            `nearby pipe --listen` there (or `nearby serve … --pipe`), whose own stdin and stdout \
            are the other end.

            Bytes go as they are, in both directions at once, each at the pace its reader takes \
            (a credit window per direction: nothing piles up in memory). The end of stdin \
            half-closes: the other side's stdout ends, and it may still answer. The command ends \
            once both directions have ended. Events (connected, the end) go to stderr, never \
            into the bytes.

            --listen: advertise NAME (--name, default this machine's name) as TYPE on --port \
            (default any free port), admit trusted peers (TRUST), and connect the first pipe a \
            peer opens to stdin and stdout; the command ends with that pipe.

            Exit status: 0 both directions ended cleanly; 1 the peer reset the stream or the \
            connection was lost; 2 bad input; 130 interrupted.

            Examples:
              nearby pipe _openagents._tcp --nearest < input > output
              nearby pipe --listen > received.tar
                  (on the other machine: its stdin and stdout are the other end)
              tar c photos | nearby pipe --host 192.168.1.20 --port 9099
            """)

    @Argument(help: "Service type to find the peer by (with --nearest, --peer or --name), e.g. _openagents._tcp.")
    var type: String?
    @Flag(help: "Wait for a peer's pipe instead of connecting (advertised as --name on --port).")
    var listen = false
    @Flag(name: .customLong("no-advertise"), help: "With --listen: do not advertise; the peer connects with --host and --port.")
    var noAdvertise = false
    @OptionGroup var target: TargetOptions
    @OptionGroup var output: OutputOptions
    @OptionGroup(title: "TRUST") var trust: TrustOptions
    @OptionGroup var channel: ChannelOptions
    @OptionGroup var state: StateDirectory

    var json: Bool { output.json }

    var typeToFind: String? {
        type ?? (target.nearest || target.wantedPeer != nil || target.wantedName != nil ? "_openagents._tcp" : nil)
    }

    func validate() throws {
        guard !channel.insecure else { throw ValidationError("pipe needs TLS: each side proves its key") }
        if listen {
            guard target.host == nil, !target.nearest, target.wantedPeer == nil, target.peerID == nil else {
                throw ValidationError("--listen waits for a peer: --host, --nearest, --peer and --peer-id are for the side that connects")
            }
            _ = try serve()
            return
        }
        guard !noAdvertise else { throw ValidationError("--no-advertise goes with --listen") }
        try target.validate(type: typeToFind, insecure: channel.insecure)
        _ = try channel.version()
    }

    /// `--listen`: the serve command it stands for.
    func serve() throws -> Serve {
        var arguments = [target.wantedName ?? PeerIdentity.defaultDisplayName(), type ?? "_openagents._tcp", String(target.port ?? 0), "--pipe"]
        if let directory = state.stateDirectory { arguments += ["--state-dir", directory] }
        for anchor in trust.anchors { arguments += ["--anchor", anchor] }
        if trust.systemRoots { arguments.append("--system-roots") }
        if trust.pinned { arguments.append("--pinned") }
        if trust.trustOnFirstUse { arguments.append("--trust-on-first-use") }
        if json { arguments.append("--json") }
        if noAdvertise { arguments.append("--no-advertise") }
        arguments += ["--protocol-version", channel.protocolVersion]
        return try Serve.parse(arguments)
    }

    func run() async throws {
        _ = nearby_tune_malloc_for_bulk()
        StandardOutput.sendEventsToStandardError()
        if listen {
            let serve = try serve()
            try await serve.run()
            if PipeSlot.shared.failed { throw ExitCode(1) }
            return
        }
        let logger = output.logger("nearby.connection")
        let found = try await target.connect(
            type: typeToFind,
            configuration: { try channel.configuration(state: state, trust: trust, json: json, logger: logger, streams: StreamSettings()) },
            json: json, trustOnFirstUse: trust.trustOnFirstUse, state: state, logger: logger)
        printConnected(json, found.connection, extra: found.extra)
        let connection = found.connection
        refuseIncomingStreams(on: connection, because: "nearby pipe takes no streams; it opens its own")
        let ending = await unlessInterrupted { () -> PipeEnding in
            do throws(PeerConnectionError) {
                let stream = try await connection.openStream(label: PipeSlot.label)
                return await PipeSlot.run(stream)
            } catch {
                return .failed("cannot open a pipe: \(error.message)")
            }
        } ?? .interrupted
        await connection.close(code: ending == .done ? .normal : .goingAway, reason: ending == .done ? "done" : "pipe ended")
        await found.shutdown()
        switch ending {
        case .done: return
        case .failed(let reason):
            printEvent(json, [("event", .string("failed")), ("reason", .string(reason))], text: "nearby: \(reason)")
            throw ExitCode(1)
        case .interrupted:
            throw ExitCode(130)
        }
    }
}

/// How a pipe ended.
enum PipeEnding: Sendable, Equatable {
    case done
    case failed(String)
    case interrupted
}

/// The one pipe this process's stdin and stdout carry (serve --pipe takes the first a peer opens).
final class PipeSlot: @unchecked Sendable {
    static let shared = PipeSlot()
    static let label = "nearby.pipe/1"
    private let lock = Locked()
    private var taken = false
    private(set) var failed = false

    /// Takes the slot; false when a pipe has it already.
    func take() -> Bool {
        lock.withLock {
            defer { taken = true }
            return !taken
        }
    }

    func finished(_ ending: PipeEnding) {
        lock.withLock { failed = ending != .done }
    }

    /// stdin to the stream and the stream to stdout, both at once, until both have ended.
    static func run(_ stream: PeerStream) async -> PipeEnding {
        await withTaskGroup(of: PipeEnding.self) { group in
            group.addTask {
                do throws(PeerConnectionError) {
                    while let chunk = await StandardInput.shared.nextChunk() {
                        try await stream.write(chunk)
                    }
                    try await stream.finish()
                    return .done
                } catch {
                    return error.code == .cancelled ? .interrupted : .failed("sending: \(error.message)")
                }
            }
            group.addTask {
                do throws(PeerConnectionError) {
                    for try await chunk in stream {
                        await StandardOutput.shared.emit(bytes: Data(chunk.readableBytesView))
                        if StandardOutput.shared.isBroken {
                            stream.reset("its reader closed stdout", code: .cancelled)
                            return .failed("stdout was closed")
                        }
                    }
                    return .done
                } catch {
                    return error.code == .cancelled ? .interrupted : .failed("receiving: \(error.message)")
                }
            }
            var ending = PipeEnding.done
            for await part in group where part != .done {
                ending = part
                group.cancelAll()
            }
            return ending
        }
    }
}
