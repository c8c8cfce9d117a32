import ArgumentParser
import NearbyBasics
import NetworkPlatform
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

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
              nearby decode capture.pcap        (mDNS packets of a tcpdump capture)
              nearby identity show              (this peer's identity and peer ID)
              nearby trust check peer.pem       (judge a certificate chain)
              nearby serve "Build Box" _openagents._tcp 9099
              nearby serve "Build Box" _openagents._tcp 9099 --auto-invite
              nearby connect _openagents._tcp --nearest
              nearby connect --host 192.168.1.20 --port 9099
              nearby pair --host 192.168.1.20 --port 9099
              nearby invite                     (a link or QR code another device accepts)
              nearby accept 'NEARBY:1/…'        (accept one: connect and pin each other)
              nearby peers _openagents._tcp     (who is there, how far, trusted)
              nearby proxy eth0=lan1.site.test --listen 10.0.0.5 --name-server dp.site.test
                                                (a link's services in DNS: RFC 8766)

            Each command explains itself: nearby help COMMAND, or nearby COMMAND --help.
            """,
        // The package's version, alone on the line (a package build reads it): not the
        // protocol's, which --protocol-version of the commands that connect shows.
        version: NearbyVersion.current,
        subcommands: [
            Advertise.self, Browse.self, Resolve.self, Types.self, DomainsCommand.self, Decode.self, Serve.self, ConnectCommand.self, SendCommand.self, ReceiveCommand.self, PipeCommand.self, InviteCommand.self, AcceptCommand.self, PairCommand.self, PeersCommand.self, IdentityCommand.self,
            TrustCommand.self, ProxyCommand.self, RegistrarCommand.self,
        ]
    )

    /// Runs the command with the exit statuses the documentation promises: 0 success,
    /// 1 runtime failure, 2 bad input (ArgumentParser's own default for bad input is 64).
    static func main() async {
        // Servers among the commands hold a descriptor per connection: the hard limit, not 1,024.
        NetworkPlatform.raiseDescriptorLimit()
        let arguments = NegativeNumbers.joiningOptionValues(Array(CommandLine.arguments.dropFirst()))
        do {
            var command = try parse(arguments)
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
                writeToStandardError("nearby: \(failure.description)\n")
                exitProcess(1)
            }
            if error is ValidationError {
                // Raised after parsing (a file that cannot be read, …): one line is enough.
                writeToStandardError("nearby: \(message(for: error))\n")
                exitProcess(2)
            }
            if code == .validationFailure {
                // A malformed command line: one line saying what is wrong and where to look.
                writeToStandardError("nearby: \(plain(message(for: error))) (see \(helpCommand(for: arguments)))\n")
                exitProcess(2)
            }
            exit(withError: error)
        }
    }

    /// Parses the command line. A negative number where a positional number belongs (`advertise
    /// X _t._tcp -1`) reads as an unknown option and leaves the argument missing; then the line
    /// is parsed again with the number marked as a value, and when the number's own check
    /// explains the failure, that explanation is thrown instead. What that second parse makes
    /// never runs.
    static func parse(_ arguments: [String]) throws -> any ParsableCommand {
        do {
            return try parseAsRoot(arguments)
        } catch {
            if let unknown = unknownCommand(arguments) { throw unknown }
            if let marked = NegativeNumbers.marked(arguments) {
                var parsedWhenMarked = false
                do {
                    _ = try parseAsRoot(marked)
                    parsedWhenMarked = true
                } catch let explained where message(for: explained).hasPrefix("The value '\(NegativeNumbers.mark)") {
                    throw explained
                } catch {}
                // It was meant as text (an instance name "-1"): say how to give it.
                if parsedWhenMarked, let token = arguments.first(where: { NegativeNumbers.isNegativeNumber($0) }) {
                    throw ValidationError("\(token) reads as an option; to give it as an argument, put -- before it (every word after -- is an argument)")
                }
            }
            throw error
        }
    }

    /// `nearby brwose …`: the word where a command belongs is no command; name the nearest one.
    static func unknownCommand(_ arguments: [String]) -> ValidationError? {
        var path = ["nearby"]
        var commands = configuration.subcommands
        for token in arguments {
            guard !commands.isEmpty, !token.hasPrefix("-"), token != "help" else { return nil }
            let names = commands.flatMap { [$0._commandName] + $0.configuration.aliases }
            if let next = commands.first(where: { $0._commandName == token || $0.configuration.aliases.contains(token) }) {
                path.append(token)
                commands = next.configuration.subcommands
                continue
            }
            let nearest = names.map { (name: $0, distance: editDistance(token.lowercased(), $0)) }.min { $0.distance < $1.distance }
            let guess = nearest.flatMap { $0.distance <= max(2, $0.name.count / 3) ? $0.name : nil }
                ?? names.first { $0.hasPrefix(token.lowercased()) && !token.isEmpty }
            let suggestion = guess.map { "; did you mean \"\((path + [$0]).joined(separator: " "))\"?" } ?? ""
            return ValidationError(
                "\"\(token)\" is not a command of \(path.joined(separator: " "))\(suggestion) (the commands: \(names.joined(separator: ", ")); see \((path + ["--help"]).joined(separator: " ")))")
        }
        return nil
    }

    /// Levenshtein distance: how many letters to insert, delete or change to turn `a` into `b`.
    static func editDistance(_ a: String, _ b: String) -> Int {
        let a = Array(a), b = Array(b)
        var previous = Array(0...b.count)
        for (i, x) in a.enumerated() {
            var current = [i + 1]
            for (j, y) in b.enumerated() {
                current.append(min(previous[j + 1] + 1, current[j] + 1, previous[j] + (x == y ? 0 : 1)))
            }
            previous = current
        }
        return previous[b.count]
    }

    /// ArgumentParser's "The value 'abc' is invalid for '<port>': port abc is not a whole
    /// number; use 1-65535" without its preamble, when a check of ours says it all.
    static func plain(_ message: String) -> String {
        guard message.hasPrefix("The value '"), let range = message.ranges(of: "': ").last else { return message }
        return String(message[range.upperBound...])
    }

    /// `nearby trust list --help` for `trust list --state-dir /x`: the help that holds the rules
    /// of the command that was given, not the top level's.
    static func helpCommand(for arguments: [String]) -> String {
        var path = ["nearby"]
        var commands = configuration.subcommands
        for token in arguments {
            guard let next = commands.first(where: { $0._commandName == token || $0.configuration.aliases.contains(token) }) else { break }
            path.append(token)
            commands = next.configuration.subcommands
        }
        return (path + ["--help"]).joined(separator: " ")
    }
}
