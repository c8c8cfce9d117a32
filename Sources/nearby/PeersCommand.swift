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

struct PeersCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "peers",
        abstract: "List the peers offering a service type: peer ID, name, addresses, round-trip time, protocol version, compatible, trusted.",
        discussion: """
            Browses TYPE for --timeout seconds, then measures each compatible peer with a \\
            round-trip probe (a few bytes before TLS; no connection is made). "compatible": it \\
            announces a valid TXT id and a pv compatible with --protocol-version (when not, the \\
            reason is given). "trusted": its peer ID is pinned in the trust store; null when only \\
            its certificate could tell (anchors, system roots), which peers does not fetch.

            Examples:
              nearby peers _openagents._tcp
              nearby peers _openagents._tcp --timeout 1 --json

            Exit status: 0 the list was printed, empty or not; 1 a failure at run time, said on stderr; 2 bad input.
            """)

    @Argument(help: "Service type, e.g. _openagents._tcp.")
    var type: String
    @Option(help: ArgumentHelp("Seconds to browse before measuring.", valueName: "seconds"), transform: NumberInput.seconds("--timeout", maximum: 3600))
    var timeout: Double = 2
    @Option(help: ArgumentHelp("The discovery backend (embedded, system or auto).", valueName: "embedded|system|auto"))
    var backend: BackendChoice = .automatic
    @OptionGroup(title: "DOMAINS") var wideArea: WideAreaOptions
    @OptionGroup var output: OutputOptions
    @OptionGroup(title: "TRUST") var trust: TrustOptions
    @OptionGroup var channel: ChannelOptions
    @OptionGroup var state: StateDirectory

    func validate() throws {
        _ = try parseType(type)
        guard !channel.insecure else { throw ValidationError("--insecure does not apply: peers are told apart by their peer IDs") }
        _ = try channel.version()
    }

    func run() async throws {
        let (logger, json) = (output.logger("nearby.peers"), output.json)
        // A listing creates nothing: without an identity, a throwaway one stands in.
        let configuration = try channel.configuration(state: state, trust: trust, json: json, logger: logger, creating: false)
        let pinned = Set(((try? state.trust.pins()) ?? []).map(\.peerID))
        let pinsOnly = trust.anchors.isEmpty && !trust.systemRoots
        if !json { status("Looking for \(type) peers for \(Browse.seconds(timeout)) s, then measuring them...") }
        let (discovery, broker) = try await BrowsingBroker.start(
            type: try parseType(type), configuration: configuration, backend: backend, wideArea: wideArea, logger: logger)
        let peers = await broker.peers(timeout: .milliseconds(Int64(timeout * 1000)))
        await broker.shutdown()
        await discovery.shutdown()
        for peer in peers {
            // Pinned: trusted. Not pinned: untrusted when pins are the only policy, else unknown
            // (an anchor or a system root could vouch for its certificate).
            let trusted: Bool? = peer.peerID.map { pinned.contains($0) ? true : (pinsOnly ? false : nil) } ?? false
            let rtt = peer.rtt.map { milliseconds($0) }
            printEvent(
                json,
                [
                    ("peerID", peer.peerID.map { .string($0.description) } ?? .null), ("name", .string(peer.name)),
                    ("addresses", .array(peer.addresses.map { .string($0.description) })), ("port", .number(Double(peer.port))),
                    ("rttMs", rtt.map { .number($0) } ?? .null), ("protocolVersion", peer.protocolVersion.map { .string($0) } ?? .null),
                    ("compatible", .bool(peer.compatible)), ("reason", peer.reason.map { .string($0) } ?? .null), ("trusted", trusted.map { .bool($0) } ?? .null),
                ],
                text: "\(peer.name)  \(peer.peerID?.short ?? "(no id)")  \(peer.addresses.map(\.description).joined(separator: " ")) port \(peer.port)  "
                    + "\(rtt.map { "\($0) ms" } ?? "no answer")  pv \(peer.protocolVersion ?? "?")  "
                    + (peer.compatible ? "compatible" : "not compatible: \(peer.reason ?? "")")
                    + (trusted == true ? ", trusted" : trusted == false ? ", not trusted" : ""))
        }
        if peers.isEmpty, !json {
            writeToStandardError("nearby: no peer offering \(type) answered within \(timeout) s\n")
        }
    }
}
