import ArgumentParser
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Logging
import PeerConnection
import PeerTrust

struct PairCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "pair",
        abstract: "Pair with a peer that does not trust you yet: compare a 6-digit code, then each side pins the other.",
        discussion: """
            Connects over TLS to a peer that offers pairing (`nearby serve … --pairing`, or \
            `--accept ask`), \
            runs a commit-then-reveal exchange of random nonces, and shows a 6-digit code made \
            from both keys and both nonces. The other device shows its code too. Answer y only \
            if the two codes are the same: a device in the middle makes them differ, and gets \
            one guess in a million at matching them. Each side pins the other (trust store: \
            peer ID, name, time) only when both people answered yes; afterwards the default \
            trust policy (--pinned) admits the peer both ways.

            The answer is a line on stdin (y or n) typed after the question is shown; anything \
            typed before it is ignored. With --json: the question is an "invitation" event with \
            "code", answered by an `accept` or `decline` line; success prints a "pinned" event.

            Exit status: 0 paired; 1 not paired (declined on either side, codes refused, \
            too many failed attempts at the peer, no answer in time, unreachable); 2 bad input.

            Examples:
              nearby pair --host 192.168.1.20 --port 9099
              nearby pair --host buildbox.local --port 9099 --json
            """)

    @Option(help: "The peer's address: IPv4, IPv6 (fe80::1%eth0 for link-local), a .local name or a DNS name.")
    var host: String
    @Option(help: "The peer's TCP port, 1-65535.", transform: NumberInput.integer("--port", 1...65535, use: "1-65535"))
    var port: Int
    @Option(name: .customLong("peer-id"), help: "The peer ID expected (from discovery's TXT id): any other key is refused.")
    var peerID: String?
    @Option(help: ArgumentHelp("Seconds for the whole pairing, the people's answers included.", valueName: "seconds"),
            transform: NumberInput.seconds("--timeout", maximum: 3600))
    var timeout: Double = 60
    @OptionGroup var output: OutputOptions
    @OptionGroup var state: StateDirectory

    func validate() throws {
        guard !host.isEmpty else { throw ValidationError("--host is empty; give an IP address or a name") }
    }

    func run() async throws {
        let logger = output.logger("nearby.pairing")
        let json = output.json
        let identity: PeerIdentity
        do { identity = try state.identityMadeIfMissing() } catch { throw inputError(error) }
        var configuration = PeerConnectionConfiguration(identity: identity, trust: TrustEvaluator(policy: .pinned([])))
        configuration.logger = logger
        configuration.setupTimeout = .milliseconds(Int64(min(timeout, 10) * 1000))
        let expected = try peerID.map { try PeerIDInput.resolve($0, for: "--peer-id", among: PeerIDInput.trusted(state.trust), lookedIn: "the trust store") }
        let address = try await HostLookup.address(of: host, logger: logger)
        let desk = AdmissionDesk(json: json)
        desk.start()
        do {
            let result = try await PeerConnection.pair(
                host: address, port: port, expecting: expected, configuration: configuration, store: state.trust,
                timeout: .milliseconds(Int64(timeout * 1000)), confirm: { request in await desk.confirm(request) })
            printPinned(json, result)
        } catch {
            if error.code == .invalidInput { throw ValidationError(error.message) }
            printNotConnected(json, to: "\(host) port \(port)", error: error)
            throw ExitCode(1)
        }
    }
}
