import ArgumentParser
import ConnectionBroker
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Logging
import NearbyDiscovery
import PeerConnection
import PeerTrust

/// How a command that connects names its peer: `--host` and `--port`, or a service TYPE (the
/// command's own argument) with `--nearest`, `--peer ID` or `--name NAME` (connect, send, pipe).
struct TargetOptions: ParsableArguments {
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

    /// Checks the combination (`type` is the command's service-type argument, if given).
    func validate(type: String?, insecure: Bool) throws {
        if let type {
            _ = try parseType(type)
            let ways = [nearest, wantedPeer != nil, wantedName != nil].filter { $0 }.count
            guard ways == 1 else { throw ValidationError("with a service type, give exactly one of --nearest, --peer ID or --name NAME") }
            guard host == nil, port == nil else { throw ValidationError("give either --host and --port, or a service type, not both") }
            guard peerID == nil else { throw ValidationError("with a service type, the peer ID goes in --peer") }
            guard !insecure else { throw ValidationError("--insecure works only with --host and --port: a found peer is told apart by its peer ID") }
        } else {
            guard let host, port != nil else {
                throw ValidationError("give --host and --port, or a service type with --nearest, --peer ID or --name NAME")
            }
            guard !nearest, wantedPeer == nil, wantedName == nil else {
                throw ValidationError("--nearest, --peer and --name need a service type (for example: nearby connect _openagents._tcp --nearest)")
            }
            guard !host.isEmpty else { throw ValidationError("--host is empty; give an IP address or a name") }
        }
        if insecure, peerID != nil { throw ValidationError("--peer-id needs TLS: an insecure connection proves no peer ID") }
    }

    /// Connects to the peer the options name. A failure is printed (every reason) and ends the
    /// command with exit status 1; bad input exits 2.
    /// Connects to the peer the options name. `configuration` (which reads the identity and the
    /// trust store) is called once discovery, when there is discovery, has begun browsing, so
    /// that the link answers while the files are read.
    func connect(
        type: String?, configuration makeConfiguration: () throws -> PeerConnectionConfiguration, json: Bool, trustOnFirstUse: Bool,
        state: StateDirectory, logger: Logger
    ) async throws -> ConnectedPeer {
        if let type {
            let parsed = try parseType(type)
            async let starting = BrowsingBroker.begin(type: parsed, backend: backend, wideArea: wideArea, logger: logger)
            var configuration: PeerConnectionConfiguration
            do {
                configuration = try makeConfiguration()
            } catch {
                if let early = try? await starting { await early.discovery.shutdown() }
                throw error
            }
            configuration.setupTimeout = .milliseconds(Int64(timeout * 1000))
            return try await connectByDiscovery(
                type: parsed, configuration: configuration, early: try await starting, json: json, trustOnFirstUse: trustOnFirstUse, state: state,
                logger: logger)
        }
        var configuration = try makeConfiguration()
        configuration.setupTimeout = .milliseconds(Int64(timeout * 1000))
        guard let host, let port else { throw ValidationError("give --host and --port") }
        let expected = try peerID.map { try PeerIDInput.resolve($0, for: "--peer-id", among: PeerIDInput.trusted(state.trust), lookedIn: "the trust store") }
        let address = try await HostLookup.address(of: host, logger: configuration.logger)
        do {
            let connection = try await PeerConnection.connect(host: address, port: port, expecting: expected, configuration: configuration)
            return ConnectedPeer(connection: connection, extra: [], shutdown: {})
        } catch {
            if error.code == .invalidInput { throw ValidationError(error.message) }
            printNotConnected(
                json, to: "\(host) port \(port)", error: error,
                advice: .connecting(host: host, port: port, trustOnFirstUse: trustOnFirstUse, ownID: configuration.identity?.peerID))
            throw ExitCode(1)
        }
    }

    /// Finds the peer with a broker that browses (and does not advertise).
    private func connectByDiscovery(
        type: ServiceType, configuration: PeerConnectionConfiguration, early: BrowsingBroker.Early, json: Bool, trustOnFirstUse: Bool,
        state: StateDirectory, logger: Logger
    ) async throws -> ConnectedPeer {
        // The early browse lives until the peer is found: the broker's own browse starts its
        // query in a task of its own, so dropping the early one sooner could stop the query
        // before the broker's is asked (one more question on the link, and the answers again).
        defer { withExtendedLifetime(early.browse) {} }
        if !json {
            let whom = nearest ? "the nearest \(type) peer" : wantedPeer.map { "the \(type) peer \($0)" } ?? "the \(type) peer \"\(wantedName ?? "")\""
            status("Looking for \(whom)...")
        }
        let (discovery, broker) = try await BrowsingBroker.start(type: type, configuration: configuration, early: early, wideArea: wideArea, logger: logger)
        let shutdown: @Sendable () async -> Void = {
            await broker.shutdown()
            await discovery.shutdown()
        }
        let limit = Duration.milliseconds(Int64(timeout * 1000))
        do {
            if nearest {
                let (chosen, candidates) = try await broker.connectNearest(timeout: limit)
                let rtt = candidates.first { $0.peerID == chosen.peerID }?.rtt
                let extra: [(String, OutputValue)] = [
                    ("rttMs", rtt.map { .number(milliseconds($0)) } ?? .null),
                    ("candidates", .array(candidates.map { candidate in
                        .object([
                            ("peerID", .string(candidate.peerID.description)), ("name", .string(candidate.name)),
                            ("rttMs", candidate.rtt.map { .number(milliseconds($0)) } ?? .null),
                        ] + (candidate.rttExceeds.map { [("rttExceedsMs", .number(milliseconds($0)))] } ?? []))
                    })),
                ]
                return ConnectedPeer(connection: chosen, extra: extra, shutdown: shutdown)
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
                        await shutdown()
                        throw error
                    }
                }
                return ConnectedPeer(connection: try await broker.connect(peerID: peer, timeout: limit), extra: [], shutdown: shutdown)
            } else {
                return ConnectedPeer(connection: try await broker.connect(name: wantedName ?? "", timeout: limit), extra: [], shutdown: shutdown)
            }
        } catch let error as BrokerError {
            if let refusal = error.connectionError {
                printNotConnected(
                    json, to: "the \(type) peer", error: refusal,
                    advice: .connecting(host: nil, port: nil, trustOnFirstUse: trustOnFirstUse, ownID: configuration.identity?.peerID))
            } else {
                writeToStandardError("nearby: \(error.message)\n")
            }
            await shutdown()
            throw ExitCode(1)
        }
    }
}

/// A connection a command made, what its "connected" event adds, and what to shut down after it.
final class ConnectedPeer {
    let connection: PeerConnection
    let extra: [(String, OutputValue)]
    let shutdown: @Sendable () async -> Void

    init(connection: PeerConnection, extra: [(String, OutputValue)], shutdown: @escaping @Sendable () async -> Void) {
        self.connection = connection
        self.extra = extra
        self.shutdown = shutdown
    }
}

/// Resets every stream the peer opens on `connection`, saying why, until the connection ends:
/// for commands that offer streams only to open their own (send, pipe).
func refuseIncomingStreams(on connection: PeerConnection, because reason: String) {
    // Unstructured: it ends with the connection's streams, which end with the connection.
    Task {
        for await stream in connection.incomingStreams { stream.reset(reason, code: .refused) }
    }
}
