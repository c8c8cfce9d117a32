public import ArgumentParser
import Foundation
import Logging
import PeerConnection
import PeerTrust

struct ConnectCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "connect",
        abstract: "Connect to a peer, judge it, initialize, then relay JSON-RPC lines between stdin and stdout.",
        discussion: """
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
              nearby connect --host bridge.example --port 9099 --insecure --protocol-version 0.2.2
            """)

    @Option(help: "The peer's address: IPv4, IPv6 (fe80::1%eth0 for link-local), a .local name (looked up over mDNS) or a DNS name.")
    var host: String
    @Option(help: "The peer's TCP port, 1-65535.")
    var port: Int
    @Option(name: .customLong("peer-id"), help: "The peer ID expected (from discovery's TXT id): any other key is refused.")
    var peerID: String?
    @Option(help: ArgumentHelp("Seconds to wait for the connection, and at the end for replies still due.", valueName: "seconds"))
    var timeout: Double = 10
    @Flag(help: "Print one JSON object per line instead of text.")
    var json = false
    @Flag(name: .shortAndLong, help: "Say on stderr what the connection does.")
    var verbose = false
    @OptionGroup(title: "TRUST") var trust: TrustOptions
    @OptionGroup var channel: ChannelOptions
    @OptionGroup var state: StateDirectory

    func validate() throws {
        guard (1...65535).contains(port) else { throw ValidationError("port \(port) is out of range; use 1-65535") }
        guard !host.isEmpty else { throw ValidationError("--host is empty; give an IP address or a name") }
        guard timeout > 0, timeout <= 3600 else { throw ValidationError("--timeout \(timeout) is out of range; use 0-3600 seconds") }
        if let peerID {
            do { _ = try PeerID(parsing: peerID) } catch { throw ValidationError("--peer-id: \(error.message)") }
        }
        if channel.insecure, peerID != nil { throw ValidationError("--peer-id needs TLS: an insecure connection proves no peer ID") }
        _ = try channel.version()
    }

    var logger: Logger {
        CommandLogging.bootstrap()
        var logger = Logger(label: "nearby.connection")
        logger.logLevel = verbose ? .debug : .warning
        return logger
    }

    func run() async throws {
        var configuration = try channel.configuration(state: state, trust: trust, json: json, logger: logger)
        configuration.setupTimeout = .milliseconds(Int64(timeout * 1000))
        let expected = try peerID.map { try PeerID(parsing: $0) }
        let connection: PeerConnection
        let address = try await HostLookup.address(of: host, logger: configuration.logger)
        do {
            connection = try await PeerConnection.connect(host: address, port: port, expecting: expected, configuration: configuration)
        } catch {
            if error.code == .invalidInput { throw ValidationError(error.message) }
            printRejection(json, address: host, peerID: nil, error: error)
            throw ExitCode(1)
        }
        printConnected(json, connection)
        let who = connection.peerID?.description
        // Replies due: ids of the requests sent, until their answers arrive.
        let due = DueReplies()
        let printer = Task {
            for await message in connection.incoming {
                printMessage(json, peerID: who, message.message)
                due.answered(message.message)
            }
        }
        var lost = false
        while let line = await LineReader.standardInput.next() {
            guard !line.trimmingCharacters(in: .whitespaces).isEmpty else { continue }
            due.sending(line)
            do { try await connection.send(text: line) } catch {
                lost = true
                break
            }
        }
        if !lost {
            await due.waitUntilAnswered(or: .milliseconds(Int64(timeout * 1000)))
            await connection.close(code: 1000, reason: "done")
        }
        await printer.value
        let reason = await connection.closed()
        printEvent(
            json, [("event", .string("disconnected")), ("peerID", who.map { .string($0) } ?? .null), ("reason", .string(reason))],
            text: "Disconnected: \(reason)")
        if lost { throw ExitCode(1) }
    }
}

/// Requests sent from stdin whose answers have not arrived yet.
final class DueReplies: @unchecked Sendable {
    private let lock = NSLock()
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
