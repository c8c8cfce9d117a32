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
}
