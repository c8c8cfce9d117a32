import ArgumentParser
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import NearbyBasics
import ConnectionBroker
import Logging
import NearbyDiscovery
import PeerConnection
import PeerTrust

struct ConnectCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "connect",
        abstract: "Connect to a peer (by address, or found by type: the nearest, a peer ID, a name), then relay JSON-RPC lines.",
        discussion: """
            Either --host and --port, or a service TYPE and one of --nearest, --peer ID or --name \
            NAME: the peer is then found with mDNS (TXT id and pv). --nearest measures every \
            compatible peer found with a round-trip probe and picks the lowest RTT (within 10 % or \
            1 ms it is a tie, and the smaller peer ID wins); its "connected" event lists them.

            Prints "connected" once TLS, the peer's certificate and initialize have passed. Then \
            each line of stdin is sent as one message (a JSON-RPC request, notification or batch) \
            and each message received is printed. At the end of stdin it waits for the replies \
            still due (up to --timeout), closes with 1000 and exits 0.

            Exit status: 0 done; 1 refused (by trust or by the handshake: every reason is printed) \
            or the connection was lost; 2 bad input.

            TRUST: --anchor FILE..., --system-roots, --pinned, --trust-on-first-use (default: --pinned).

            Examples:
              echo '{"jsonrpc":"2.0","id":1,"method":"ping"}' | nearby connect --host 192.168.1.20 --port 9099
              nearby connect --host fe80::1%eth0 --port 9099 --peer-id 3KX…  --json
              nearby connect --host buildbox.local --port 9099
              nearby connect --host bridge.example --port 9099 --insecure
              nearby connect --host 192.168.1.20 --port 9099 --protocol-version 0.3
              nearby connect _openagents._tcp --nearest --json
              nearby connect _openagents._tcp --peer 3KX…
            """)

    @Argument(help: "Service type to find the peer by (with --nearest, --peer or --name), e.g. _openagents._tcp.")
    var type: String?
    @OptionGroup var target: TargetOptions
    @OptionGroup var output: OutputOptions
    @OptionGroup(title: "TRUST") var trust: TrustOptions
    @OptionGroup var channel: ChannelOptions
    @OptionGroup var state: StateDirectory

    var json: Bool { output.json }
    var logger: Logger { output.logger("nearby.connection") }

    func validate() throws {
        try target.validate(type: type, insecure: channel.insecure)
        _ = try channel.version()
    }

    func run() async throws {
        let found = try await target.connect(
            type: type, configuration: { try channel.configuration(state: state, trust: trust, json: json, logger: logger) }, json: json,
            trustOnFirstUse: trust.trustOnFirstUse, state: state, logger: logger)
        printConnected(json, found.connection, extra: found.extra)
        do { try await Self.relay(found.connection, json: json, timeout: target.timeout) } catch {
            await found.shutdown()
            throw error
        }
        await found.shutdown()
    }

    /// How relaying ends.
    enum RelayEnding: Sendable {
        /// stdin ended: wait for the replies due, then close.
        case inputEnded
        /// Sending failed, or the peer closed the connection: say so at once (exit 1), without
        /// waiting for stdin.
        case lost, peerClosed
    }

    /// stdin lines to the peer, the peer's messages to stdout, until stdin ends or the peer goes.
    static func relay(_ connection: PeerConnection, json: Bool, timeout: Double) async throws {
        let who = connection.peerID?.description
        // Replies due: ids of the requests sent, until their answers arrive.
        let due = DueReplies()
        // Bounded by its producers: stdin's end and the peer's, one each.
        let (endings, ending) = AsyncStream<RelayEnding>.makeStream()
        // stdin is read on a thread of its own and cannot be interrupted: when the peer goes
        // first, this task is left waiting and the process ends without it (unstructured on
        // purpose: a child would keep the command from ending).
        Task {
            while let line = await StandardInput.shared.next() {
                guard !line.trimmingBlanks().isEmpty else { continue }
                due.sending(line)
                do { try await connection.send(text: line) } catch {
                    ending.yield(.lost)
                    return
                }
            }
            ending.yield(.inputEnded)
        }
        let ended = await withTaskGroup(of: Void.self) { group in
            // The peer's messages to stdout, until the connection ends.
            group.addTask {
                for await message in connection.incoming {
                    await printMessage(json, peerID: who, message.message)
                    due.answered(message.message)
                }
                ending.yield(.peerClosed)
            }
            var first = endings.makeAsyncIterator()
            let ended = await first.next() ?? .peerClosed
            if ended == .inputEnded {
                await due.waitUntilAnswered(or: .milliseconds(Int64(timeout * 1000)))
                await connection.close(code: 1000, reason: "done")
            }
            return ended
        }
        let reason = await connection.closed()
        printEvent(
            json,
            [("event", .string("disconnected")), ("connection", .number(Double(connection.id.value))), ("peerID", who.map { .string($0) } ?? .null),
             ("reason", .string(reason.message))] + endMembers(reason),
            text: "Disconnected: \(reason)")
        if ended != .inputEnded { throw ExitCode(1) }
    }
}

/// Requests sent from stdin whose answers have not arrived yet.
final class DueReplies: @unchecked Sendable {
    private let lock = Locked()
    private var ids: Set<JSONRPCID> = []

    func sending(_ line: String) {
        let ids = JSONRPCFrame(parsing: line).messages.compactMap { message -> JSONRPCID? in
            if case .request(let id, _, _) = message { id } else { nil }
        }
        lock.withLock { self.ids.formUnion(ids) }
    }

    func answered(_ message: JSONRPCMessage) {
        switch message {
        case .response(let id, _), .failure(let id?, _): lock.withLock { _ = ids.remove(id) }
        default: break
        }
    }

    var isEmpty: Bool { lock.withLock { ids.isEmpty } }

    func waitUntilAnswered(or limit: Duration) async {
        let end = ContinuousClock.now + limit
        while !isEmpty, ContinuousClock.now < end {
            try? await Task.sleep(for: .milliseconds(10))
        }
    }
}
