import Foundation
import Testing

/// What a test can pin of the documents a newcomer reads: README and Documentation/*.md link
/// only to files and headings that exist, their shell examples use commands and options
/// `nearby` has, and every test RFC-Compliance.md names as proof exists.
@Suite("the documents say what exists")
struct DocumentationTests {
    static let repository = ReadmeExamplesTests.repository

    /// README.md and Documentation/*.md, as paths relative to the repository.
    static func documents() throws -> [String] {
        let folder = repository.appendingPathComponent("Documentation")
        let pages = try FileManager.default.contentsOfDirectory(atPath: folder.path).filter { $0.hasSuffix(".md") }.sorted()
        return ["README.md"] + pages.map { "Documentation/\($0)" }
    }

    static func text(_ path: String) throws -> String {
        try String(contentsOf: repository.appendingPathComponent(path), encoding: .utf8)
    }

    /// The lines outside ``` fences, and the lines inside fences of the given language.
    static func split(_ text: String) -> (prose: [Substring], fenced: [(language: Substring, line: Substring)]) {
        var prose: [Substring] = []
        var fenced: [(Substring, Substring)] = []
        var language: Substring?
        for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
            if line.hasPrefix("```") {
                language = language == nil ? line.dropFirst(3) : nil
            } else if let language {
                fenced.append((language, line))
            } else {
                prose.append(line)
            }
        }
        return (prose, fenced)
    }

    /// GitHub's anchor for a heading: lower case; letters, digits, `-`, `_` and spaces kept,
    /// spaces made `-`; a repeated heading gets `-1`, `-2`, ….
    static func anchors(_ text: String) -> Set<String> {
        var found: Set<String> = []
        var seen: [String: Int] = [:]
        for line in split(text).prose {
            guard let heading = line.wholeMatch(of: #/#{1,6}\s+(.*?)\s*/#)?.output.1 else { continue }
            let slug = String(
                heading.lowercased().unicodeScalars.filter {
                    CharacterSet.alphanumerics.contains($0) || $0 == "-" || $0 == "_" || $0 == " "
                }.map(Character.init)
            ).replacingOccurrences(of: " ", with: "-")
            let count = seen[slug, default: 0]
            found.insert(count == 0 ? slug : "\(slug)-\(count)")
            seen[slug] = count + 1
        }
        return found
    }

    @Test("every relative link of README and Documentation/ names a file that exists, and a heading that exists")
    func linksResolve() throws {
        var checked = 0
        for document in try Self.documents() {
            let text = try Self.text(document)
            // Links in prose only (code may show link-like text), with inline code taken out.
            let prose = Self.split(text).prose.map { $0.replacing(#/`[^`]*`/#, with: "") }.joined(separator: "\n")
            for match in prose.matches(of: #/\]\(([^)\s]+)\)/#) {
                let target = String(match.output.1)
                if target.contains(":") { continue }  // https:, mailto:
                checked += 1
                let parts = target.split(separator: "#", maxSplits: 1, omittingEmptySubsequences: false)
                let base = URL(fileURLWithPath: document, relativeTo: Self.repository).deletingLastPathComponent()
                let file = parts[0].isEmpty ? Self.repository.appendingPathComponent(document) : base.appendingPathComponent(String(parts[0])).standardizedFileURL
                #expect(FileManager.default.fileExists(atPath: file.path), "\(document): \(target): no such file")
                guard parts.count == 2, FileManager.default.fileExists(atPath: file.path) else { continue }
                let anchor = String(parts[1])
                let headings = Self.anchors(try String(contentsOf: file, encoding: .utf8))
                #expect(headings.contains(anchor), "\(document): \(target): no heading #\(anchor) in \(file.lastPathComponent)")
            }
        }
        #expect(checked > 100, "only \(checked) links found: the parser has gone wrong")
    }

    /// `nearby` commands in the ```sh blocks: the subcommand (one or two words) and the
    /// `--options` after it, as shown.
    static func shownCommands() throws -> [(document: String, words: [String], options: [String])] {
        var commands: [(String, [String], [String])] = []
        for document in try Self.documents() {
            for (language, line) in split(try Self.text(document)).fenced where language == "sh" {
                let code = line.split(separator: "#", maxSplits: 1, omittingEmptySubsequences: false)[0]
                // Every `nearby …` on the line: at its start, after a pipe, `&&`, `$(`, or `sudo`.
                for match in code.matches(of: #/(?:^|[|;&(]\s*|sudo\s+)nearby\s+([^|;&()$]*)/#) {
                    let tokens = match.output.1.split(whereSeparator: \.isWhitespace).map(String.init)
                    let words = tokens.prefix { $0.allSatisfy { $0.isLetter } }.prefix(2)
                    guard !words.isEmpty else { continue }
                    let options = tokens.filter { $0.hasPrefix("--") }.map { String($0.split(separator: "=")[0]) }
                    commands.append((document, Array(words), options))
                }
            }
        }
        return commands
    }

    @Test("the nearby commands shown in README and Documentation/ exist, with the options shown (their --help names each)")
    func shownCommandsExist() async throws {
        let commands = try Self.shownCommands()
        #expect(commands.count > 40, "only \(commands.count) commands found: the parser has gone wrong")
        let top = try await Self.help([])
        var helps: [String: String] = [:]
        for command in commands {
            // The first word is a subcommand; a second word may be one of its subcommands, or an argument.
            guard top.contains("  \(command.words[0]) ") || top.contains("  \(command.words[0])\n") else {
                Issue.record("\(command.document): `nearby \(command.words.joined(separator: " "))`: no subcommand \(command.words[0])")
                continue
            }
            let first: String
            if let known = helps[command.words[0]] { first = known } else { first = try await Self.help([command.words[0]]) }
            helps[command.words[0]] = first
            var path = [command.words[0]]
            if command.words.count == 2, first.contains("SUBCOMMANDS:"), first.contains("  \(command.words[1])") {
                path.append(command.words[1])
            }
            let key = path.joined(separator: " ")
            let help: String
            if let known = helps[key] { help = known } else { help = try await Self.help(path) }
            helps[key] = help
            for option in command.options where !["--help", "--version"].contains(option) {
                #expect(help.contains(option), "\(command.document): `nearby \(key) … \(option)`: `nearby \(key) --help` has no \(option)")
            }
        }
    }

    static func help(_ path: [String]) async throws -> String {
        let (status, output) = try await ReadmeExamplesTests.run("nearby", path + ["--help"])
        #expect(status == 0, "nearby \(path.joined(separator: " ")) --help: \(output)")
        return output
    }

    /// The subcommands a help text lists under SUBCOMMANDS.
    static func subcommands(in help: String) -> [String] {
        guard let section = help.range(of: "SUBCOMMANDS:") else { return [] }
        return help[section.upperBound...].split(separator: "\n").compactMap { line in
            guard line.hasPrefix("  "), !line.hasPrefix("   ") else { return nil }
            return line.split(separator: " ").first.map(String.init)
        }.filter { $0 != "See" && $0 != "help" }
    }

    @Test("every subcommand's help, and so its man page, has examples and its exit statuses")
    func everySubcommandTeaches() async throws {
        var checked = 0
        var queue = Self.subcommands(in: try await Self.help([])).map { [$0] }
        while let path = queue.first {
            queue.removeFirst()
            let help = try await Self.help(path)
            let children = Self.subcommands(in: help)
            if !children.isEmpty {
                queue += children.map { path + [$0] }
                continue
            }
            checked += 1
            let name = "nearby " + path.joined(separator: " ")
            #expect(help.contains("Example"), "\(name) --help shows no example")
            #expect(help.contains("Exit status: 0"), "\(name) --help does not say its exit statuses")
        }
        #expect(checked >= 20, "only \(checked) commands found: the parser has gone wrong")
    }

    @Test("every library product has a DocC catalog, and Tools/test builds its documentation with warnings as errors")
    func everyProductHasACatalog() throws {
        let package = try Self.text("Package.swift")
        let products = package.matches(of: #/\.library\(name: "([A-Za-z]+)", targets: \["([A-Za-z]+)"\]/#).map { (String($0.output.1), String($0.output.2)) }
        #expect(products.count >= 10, "only \(products.count) products found: the parser has gone wrong")
        let runner = try Self.text("Tools/test")
        let built = runner.firstMatch(of: #/doc_targets=\(([^)]*)\)/#).map { Set($0.output.1.split(separator: " ").map(String.init)) } ?? []
        for (product, target) in products {
            let catalog = Self.repository.appendingPathComponent("Sources/\(target)/\(target).docc/\(target).md")
            #expect(FileManager.default.fileExists(atPath: catalog.path), "the product \(product) has no DocC catalog (Sources/\(target)/\(target).docc)")
            #expect(built.contains(target), "Tools/test does not build the documentation of \(target)")
        }
    }

    @Test("README's first commands exist: Tools/demo, Tools/test, Tools/package and Tools/install are executable scripts")
    func firstCommandsExist() throws {
        let readme = try Self.text("README.md")
        for tool in ["Tools/demo", "Tools/test", "Tools/package", "Tools/install"] {
            #expect(readme.contains(tool))
            #expect(FileManager.default.isExecutableFile(atPath: Self.repository.appendingPathComponent(tool).path), "\(tool) is not executable")
        }
    }

    /// The ```swift blocks of each DocC article, keyed "Catalog/Article".
    static func doccBlocks() throws -> [String: [String]] {
        var found: [String: [String]] = [:]
        let sources = repository.appendingPathComponent("Sources")
        for module in try FileManager.default.contentsOfDirectory(atPath: sources.path).sorted() {
            let catalog = sources.appendingPathComponent(module).appendingPathComponent("\(module).docc")
            guard let articles = try? FileManager.default.contentsOfDirectory(atPath: catalog.path) else { continue }
            for article in articles where article.hasSuffix(".md") {
                let text = try String(contentsOf: catalog.appendingPathComponent(article), encoding: .utf8)
                let list = ReadmeExamplesTests.swiftBlocks(of: text)
                if !list.isEmpty { found["\(module)/\(article.dropLast(3))"] = list }
            }
        }
        return found
    }

    /// A DocC block is compiled one of two ways: it is one of the example programs the package
    /// builds (Tools/examples, the same programs README and Documentation/Swift.md show),
    /// whole and to the letter; or it is a fragment that DocCExamples.swift holds in a function
    /// that gives it its context.
    @Test("every code block of the DocC catalogs is compiled: an example program to the letter, or a fragment DocCExamples.swift holds")
    func doccBlocksAreCompiled() throws {
        let articles = try Self.doccBlocks()
        #expect(articles.count >= 12, "only \(articles.count) articles with code: the parser has gone wrong")
        var programs: [String: String] = [:]
        for example in ReadmeExamplesTests.examples {
            programs[try Self.text("Tools/examples/\(example)/main.swift")] = example
        }
        #expect(programs.count == ReadmeExamplesTests.examples.count, "two example programs have the same text")
        let compiled = try Self.text("Tests/NearbyCLITests/DocCExamples.swift")
        let lines = compiled.split(separator: "\n", omittingEmptySubsequences: false)
        let imports = Set(lines.filter { $0.hasPrefix("import ") })
        var regions: [String: [String]] = [:]
        var key: String?
        var block: [Substring] = []
        func finish() {
            // The block as the article shows it: its own indentation taken away.
            let indent = block.filter { !$0.trimmingCharacters(in: .whitespaces).isEmpty }.map { $0.prefix { $0 == " " }.count }.min() ?? 0
            regions[key ?? "", default: []].append(block.map { String($0.dropFirst(min(indent, $0.count))) }.joined(separator: "\n"))
            block = []
        }
        for line in lines {
            let trimmed = line.trimmingCharacters(in: .whitespaces)
            if trimmed.hasPrefix("// docc:begin ") {
                key = String(trimmed.dropFirst("// docc:begin ".count))
            } else if key != nil, trimmed == "// docc:next" {
                finish()
            } else if key != nil, trimmed == "// docc:end" {
                finish()
                key = nil
            } else if key != nil, !trimmed.hasSuffix("// docc:scope") {
                block.append(line)
            }
        }
        var fragments: [String: [String]] = [:]
        var programsShown: Set<String> = []
        for (article, blocks) in articles {
            var shown: [String] = []
            for block in blocks {
                if let program = programs[block + "\n"] {
                    programsShown.insert(program)
                    continue
                }
                var rows = block.split(separator: "\n", omittingEmptySubsequences: false)
                // An article's imports are the compiled file's.
                while let first = rows.first, first.hasPrefix("import ") {
                    #expect(imports.contains(first), "\(article): \(first) is not imported by DocCExamples.swift")
                    rows.removeFirst()
                }
                while rows.first?.isEmpty == true { rows.removeFirst() }
                shown.append(rows.joined(separator: "\n"))
            }
            if !shown.isEmpty { fragments[article] = shown }
        }
        #expect(Set(regions.keys) == Set(fragments.keys), "articles with fragments \(fragments.keys.sorted()), compiled \(regions.keys.sorted())")
        for (article, shown) in fragments {
            #expect(regions[article] == shown, "\(article): the article's code differs from DocCExamples.swift and from every example program")
        }
        // README's programs are DocC's too: each is shown, whole, by some article.
        let missing = Set(ReadmeExamplesTests.examples).subtracting(programsShown)
        #expect(missing.isEmpty, "no DocC article shows the example programs \(missing.sorted()) (Tools/examples/NAME/main.swift, to the letter)")
    }

    @Test("every test RFC-Compliance.md names as proof exists in the file it names (… stands for words left out)")
    func complianceTestsExist() throws {
        let table = try Self.text("Documentation/RFC-Compliance.md")
        let named = table.matches(of: #/"([^"]+)" \(([A-Za-z]+/[A-Za-z]+\.swift)\)/#)
        #expect(named.count > 80, "only \(named.count) tests named: the parser has gone wrong")
        for entry in named {
            let name = String(entry.output.1)
            let path = String(entry.output.2)
            let file = Self.repository.appendingPathComponent("Tests").appendingPathComponent(path)
            guard let source = try? String(contentsOf: file, encoding: .utf8) else {
                Issue.record("RFC-Compliance.md names \(path), which does not exist")
                continue
            }
            let declared = source.matches(of: #/@Test\("((?:[^"\\]|\\.)*)"/#).map { String($0.output.1) }
            let pieces = name.components(separatedBy: "…").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
            let found = declared.contains { test in
                var rest = test[...]
                for piece in pieces {
                    guard let range = rest.range(of: piece) else { return false }
                    rest = rest[range.upperBound...]
                }
                return true
            }
            #expect(found, "RFC-Compliance.md names \"\(name)\" in \(path), which has no such test")
        }
    }
}
