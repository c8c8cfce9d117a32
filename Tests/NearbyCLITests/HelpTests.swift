import ArgumentParser
import Testing

@testable import nearby

/// Every command's --help teaches by example, and no example is broken across lines on an
/// 80-column terminal.
@Suite("nearby --help")
struct HelpTests {
    /// Every command and subcommand, with its path ("trust anchor add").
    static func commands(_ types: [any ParsableCommand.Type] = Nearby.configuration.subcommands, path: [String] = []) -> [(String, any ParsableCommand.Type)] {
        types.flatMap { type -> [(String, any ParsableCommand.Type)] in
            let name = path + [type._commandName]
            return [(name.joined(separator: " "), type)] + commands(type.configuration.subcommands, path: name)
        }
    }

    @Test("every command's help has examples, each whole on one line at 80 columns")
    func examples() {
        let all = [("", Nearby.self as any ParsableCommand.Type)] + Self.commands()
        #expect(all.count >= 21)
        for (path, type) in all {
            let help = Nearby.helpMessage(for: type, columns: 80)
            #expect(help.contains("Examples:"), "nearby \(path) --help has no examples")
            let examples = type.configuration.discussion.split(separator: "\n")
                .map { $0.trimmingCharacters(in: .whitespaces) }.filter { $0.hasPrefix("nearby ") }
            #expect(!examples.isEmpty, "nearby \(path): no example line")
            for example in examples {
                #expect(help.contains(example), "nearby \(path) --help breaks \"\(example)\" at 80 columns:\n\(help)")
            }
        }
    }

    @Test("every command that uses the network takes --json, --verbose and --log-level, and --log-level wins over --verbose")
    func outputOptions() throws {
        let commands: [[String]] = [
            ["advertise", "Box", "_openagents._tcp", "9099"], ["browse", "_openagents._tcp"], ["resolve", "Box", "_openagents._tcp"],
            ["types"], ["serve", "Box", "_openagents._tcp", "9099"], ["connect", "--host", "127.0.0.1", "--port", "9099"], ["connect", "_openagents._tcp", "--nearest"],
            ["pair", "--host", "127.0.0.1", "--port", "9099"], ["peers", "_openagents._tcp"],
        ]
        for arguments in commands {
            for options in [["--json"], ["-v"], ["--log-level", "trace"], ["--verbose", "--log-level", "error"]] {
                #expect(throws: Never.self, "nearby \((arguments + options).joined(separator: " "))") {
                    _ = try Nearby.parseAsRoot(arguments + options)
                }
            }
        }
        let pair = try #require(try Nearby.parseAsRoot(["pair", "--host", "h", "--port", "1", "-v", "--log-level", "error"]) as? PairCommand)
        #expect(pair.output.logger().logLevel == .error)
        let peers = try #require(try Nearby.parseAsRoot(["peers", "_openagents._tcp", "-v"]) as? PeersCommand)
        #expect(peers.output.logger().logLevel == .debug)
        let connect = try #require(try Nearby.parseAsRoot(["connect", "--host", "h", "--port", "1"]) as? ConnectCommand)
        #expect(connect.logger.logLevel == .warning && !connect.json)
    }
}
