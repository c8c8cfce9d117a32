import ArgumentParser
import Foundation
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
    @Option(help: "The peer's address: IPv4, IPv6 (fe80::1%eth0 for link-local), a .local name (looked up over mDNS) or a DNS name.")
    var host: String?
    @Option(help: "The peer's TCP port, 1-65535.", transform: NumberInput.integer("--port", 1...65535, use: "1-65535"))
    var port: Int?
    @Flag(help: "With TYPE: the nearest compatible peer (lowest round-trip time).")
    var nearest = false
    @Option(name: .customLong("peer"), help: ArgumentHelp("With TYPE: the peer with this peer ID (TXT id).", valueName: "id"))
    var wantedPeer: String?
    @Option(name: .customLong("name"), help: ArgumentHelp("With TYPE: the peer advertised under this instance name.", valueName: "name"))
    var wantedName: String?
    @Option(help: ArgumentHelp("With TYPE: the discovery backend (embedded, system or auto).", valueName: "embedded|system|auto"))
    var backend: BackendChoice = .automatic
    @OptionGroup(title: "DOMAINS") var wideArea: WideAreaOptions
    @Option(name: .customLong("peer-id"), help: "The peer ID expected (from discovery's TXT id): any other key is refused.")
    var peerID: String?
    @Option(help: ArgumentHelp("Seconds to wait for the connection, and at the end for replies still due.", valueName: "seconds"),
            transform: NumberInput.seconds("--timeout", maximum: 3600))
    var timeout: Double = 10
    @OptionGroup var output: OutputOptions
    @OptionGroup(title: "TRUST") var trust: TrustOptions
    @OptionGroup var channel: ChannelOptions
    @OptionGroup var state: StateDirectory

    var json: Bool { output.json }
    var logger: Logger { output.logger("nearby.connection") }

    func validate() throws {
        if let type {
            _ = try parseType(type)
            let ways = [nearest, wantedPeer != nil, wantedName != nil].filter { $0 }.count
            guard ways == 1 else { throw ValidationError("with a service type, give exactly one of --nearest, --peer ID or --name NAME") }
            guard host == nil, port == nil else { throw ValidationError("give either --host and --port, or a service type, not both") }
            guard peerID == nil else { throw ValidationError("with a service type, the peer ID goes in --peer") }
            guard !channel.insecure else { throw ValidationError("--insecure works only with --host and --port: a found peer is told apart by its peer ID") }
        } else {
            guard let host, port != nil else {
                throw ValidationError("give --host and --port, or a service type with --nearest, --peer ID or --name NAME")
            }
            guard !nearest, wantedPeer == nil, wantedName == nil else {
                throw ValidationError("--nearest, --peer and --name need a service type (for example: nearby connect _openagents._tcp --nearest)")
            }
            guard !host.isEmpty else { throw ValidationError("--host is empty; give an IP address or a name") }
        }
        if channel.insecure, peerID != nil { throw ValidationError("--peer-id needs TLS: an insecure connection proves no peer ID") }
        _ = try channel.version()
    }

    func run() async throws {
        var configuration = try channel.configuration(state: state, trust: trust, json: json, logger: logger)
        configuration.setupTimeout = .milliseconds(Int64(timeout * 1000))
        if let type {
            try await connectByDiscovery(type: try parseType(type), configuration: configuration)
            return
        }
        guard let host, let port else { throw ValidationError("give --host and --port") }
        let expected = try peerID.map { try PeerIDInput.resolve($0, for: "--peer-id", among: PeerIDInput.trusted(state.trust), lookedIn: "the trust store") }
        let connection: PeerConnection
        let address = try await HostLookup.address(of: host, logger: configuration.logger)
        do {
            connection = try await PeerConnection.connect(host: address, port: port, expecting: expected, configuration: configuration)
        } catch {
            if error.code == .invalidInput { throw ValidationError(error.message) }
            printNotConnected(json, to: "\(host) port \(port)", error: error)
            throw ExitCode(1)
        }
        printConnected(json, connection)
        try await Self.relay(connection, json: json, timeout: timeout)
    }

    /// Finds the peer with a broker that browses (and does not advertise), then relays.
    private func connectByDiscovery(type: ServiceType, configuration: PeerConnectionConfiguration) async throws {
        if !json {
            let whom = nearest ? "the nearest \(type) peer" : wantedPeer.map { "the \(type) peer \($0)" } ?? "the \(type) peer \"\(wantedName ?? "")\""
            status("Looking for \(whom)...")
        }
        let (discovery, broker) = try await BrowsingBroker.start(type: type, configuration: configuration, backend: backend, wideArea: wideArea, logger: logger)
        let limit = Duration.milliseconds(Int64(timeout * 1000))
        let connection: PeerConnection
        var extra: [(String, OutputValue)] = []
        do {
            if nearest {
                let (chosen, candidates) = try await broker.connectNearest(timeout: limit)
                connection = chosen
                let rtt = candidates.first { $0.peerID == chosen.peerID }?.rtt
                extra = [
                    ("rttMs", rtt.map { .number(milliseconds($0)) } ?? .null),
                    ("candidates", .array(candidates.map { candidate in
                        .object([
                            ("peerID", .string(candidate.peerID.description)), ("name", .string(candidate.name)),
                            ("rttMs", candidate.rtt.map { .number(milliseconds($0)) } ?? .null),
                        ])
                    })),
                ]
            } else if let wantedPeer {
                let peer: PeerID
                if let whole = try? PeerID(parsing: wantedPeer) {
                    peer = whole
                } else {
                    // A prefix: of a peer on the link (browse a moment) or in the trust store.
                    let discovered = await broker.peers(timeout: .seconds(1)).compactMap { found in found.peerID.map { (id: $0, label: found.name) } }
                    do {
                        peer = try PeerIDInput.resolve(wantedPeer, for: "--peer", among: discovered + PeerIDInput.trusted(state.trust),
                                                       lookedIn: "the peers found on the link or in the trust store")
                    } catch {
                        await broker.shutdown()
                        await discovery.shutdown()
                        throw error
                    }
                }
                connection = try await broker.connect(peerID: peer, timeout: limit)
            } else {
                connection = try await broker.connect(name: wantedName ?? "", timeout: limit)
            }
        } catch let error as BrokerError {
            if let refusal = error.connectionError {
                printNotConnected(json, to: "the \(type) peer", error: refusal)
            } else {
                FileHandle.standardError.write(Data("nearby: \(error.message)\n".utf8))
            }
            await broker.shutdown()
            await discovery.shutdown()
            throw ExitCode(1)
        }
        printConnected(json, connection, extra: extra)
        do { try await Self.relay(connection, json: json, timeout: timeout) } catch {
            await broker.shutdown()
            await discovery.shutdown()
            throw error
        }
        await broker.shutdown()
        await discovery.shutdown()
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
        let (endings, ending) = AsyncStream<RelayEnding>.makeStream()
        // stdin is read on a thread of its own and cannot be interrupted: when the peer goes
        // first, this task is left waiting and the process ends without it (unstructured on
        // purpose: a child would keep the command from ending).
        Task {
            while let line = await LineReader.standardInput.next() {
                guard !line.trimmingCharacters(in: .whitespaces).isEmpty else { continue }
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
