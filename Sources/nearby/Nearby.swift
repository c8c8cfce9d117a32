import ArgumentParser
import Foundation

/// `nearby`: find and connect to peers on the local network with mDNS/DNS-SD.
@main
struct Nearby: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "nearby",
        abstract: "Find and connect to peers on the local network with mDNS/DNS-SD.",
        discussion: """
            Exit status: 0 success, 1 runtime failure, 2 bad input.

            Examples:
              nearby advertise "Build Box" _openagents._tcp 9099 version=0.2.2
              nearby browse _openagents._tcp --resolve
              nearby resolve "Build Box" _openagents._tcp --json
              nearby types
              nearby decode capture.pcap          show the mDNS packets of a tcpdump capture
              nearby identity show                this peer's identity and peer ID
              nearby trust check peer.pem         judge a certificate chain
              nearby serve "Build Box" _openagents._tcp 9099     accept authenticated peers
              nearby connect --host 192.168.1.20 --port 9099     talk JSON-RPC to one
              nearby pair --host 192.168.1.20 --port 9099        pair with a peer by comparing a code
              nearby connect _openagents._tcp --nearest          find the nearest peer and talk to it
              nearby serve "Build Box" _openagents._tcp 9099 --auto-invite   one connection to every peer
              nearby peers _openagents._tcp                      who is on the link, how far, trusted
            """,
        version: "0.2.0",
        subcommands: [
            Advertise.self, Browse.self, Resolve.self, Types.self, Decode.self, Serve.self, ConnectCommand.self, PairCommand.self, PeersCommand.self, IdentityCommand.self,
            TrustCommand.self,
        ]
    )

    /// Runs the command with the exit statuses the documentation promises: 0 success,
    /// 1 runtime failure, 2 bad input (ArgumentParser's own default for bad input is 64).
    static func main() async {
        do {
            var command = try parseAsRoot()
            if var asyncCommand = command as? any AsyncParsableCommand {
                try await asyncCommand.run()
            } else {
                try command.run()
            }
        } catch {
            let code = exitCode(for: error)
            if code == .success {
                exit(withError: error)  // --help, --version
            }
            if let failure = error as? RuntimeFailure {
                FileHandle.standardError.write(Data("nearby: \(failure.description)\n".utf8))
                Foundation.exit(1)
            }
            if error is ValidationError {
                // Raised after parsing (a file that cannot be read, …): one line is enough.
                FileHandle.standardError.write(Data("nearby: \(message(for: error))\n".utf8))
                Foundation.exit(2)
            }
            if code == .validationFailure {
                // A malformed command line: one line saying what is wrong and where to look.
                FileHandle.standardError.write(Data("nearby: \(message(for: error)) (see nearby --help)\n".utf8))
                Foundation.exit(2)
            }
            exit(withError: error)
        }
    }
}
