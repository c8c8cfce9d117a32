import Foundation
import Testing

/// The rules the architecture rests on, read from the sources themselves: the cores import
/// nothing that can reach a socket, a file, a clock or a C library, so "no I/O" stays true as
/// code is added, not only while someone remembers it.
@Suite("module rules")
struct ModuleRulesTests {
    static let sources = ReadmeExamplesTests.repository.appendingPathComponent("Sources")

    /// The modules each core may import (Foundation's pieces only for JSON's `Data` and `Date`).
    static let allowed: [String: Set<String>] = [
        "DNSWire": ["NearbyBasics"],
        "DiscoveryProxyCore": ["DNSWire", "NearbyBasics"],
        "MulticastDNSCore": ["DNSWire"],
        "PacketCapture": [],
        "NearbyBasics": ["Synchronization"],
        "NearbyCrypto": ["NearbyBasics"],
        "NearbyMetrics": ["CoreMetrics"],
        "PeerProtocol": ["NearbyBasics", "NearbyCrypto", "NIOCore", "FoundationEssentials", "Foundation"],
        "SRPRegistrarCore": ["DNSWire", "NearbyBasics", "NearbyCrypto"],
    ]

    /// Single files allowed more, each with its reason.
    static let exceptions: [String: Set<String>] = [
        // vsnprintf, the one correctly rounded `%.Nf`; the file reads and writes nothing.
        "NearbyBasics/Formatting.swift": ["Glibc", "Musl", "Darwin"]
    ]

    /// `import X`, `public import X`, `@_exported import struct X.Y`, … → X.
    static func imports(of file: URL) throws -> Set<String> {
        let text = try String(contentsOf: file, encoding: .utf8)
        var modules: Set<String> = []
        for line in text.split(separator: "\n") {
            let words = line.split(separator: " ").map(String.init)
            guard let index = words.firstIndex(of: "import"), index + 1 < words.count,
                words[..<index].allSatisfy({ ["public", "package", "internal", "@_exported", "@testable"].contains($0) })
            else { continue }
            let kinds: Set<String> = ["struct", "enum", "class", "func", "protocol", "typealias", "var", "let"]
            let path = kinds.contains(words[index + 1]) && index + 2 < words.count ? words[index + 2] : words[index + 1]
            modules.insert(String(path.split(separator: ".")[0]))
        }
        return modules
    }

    @Test("each core imports only what its rule allows", arguments: allowed.keys.sorted())
    func coreImports(_ module: String) throws {
        let directory = Self.sources.appendingPathComponent(module)
        let files = try FileManager.default.contentsOfDirectory(atPath: directory.path).filter { $0.hasSuffix(".swift") }
        #expect(!files.isEmpty, "no Swift files in \(directory.path)")
        for file in files {
            let allowed = (Self.allowed[module] ?? []).union(Self.exceptions["\(module)/\(file)"] ?? [])
            let extra = try Self.imports(of: directory.appendingPathComponent(file)).subtracting(allowed)
            #expect(extra.isEmpty, "\(module)/\(file) imports \(extra.sorted()); \(module) may import only \(Self.allowed[module]?.sorted() ?? [])")
        }
    }

    @Test("the libraries only record metrics (swift-metrics' API); the one exposition, Prometheus', is the executable's")
    func oneExposition() throws {
        let modules = try FileManager.default.contentsOfDirectory(atPath: Self.sources.path).filter { $0 != "nearby" }
        for module in modules {
            let directory = Self.sources.appendingPathComponent(module)
            guard let files = FileManager.default.enumerator(atPath: directory.path) else { continue }
            for case let file as String in files where file.hasSuffix(".swift") {
                let imports = try Self.imports(of: directory.appendingPathComponent(file))
                #expect(imports.isDisjoint(with: ["Prometheus", "Metrics", "MetricsTestKit"]), "\(module)/\(file) imports \(imports.sorted())")
            }
        }
    }

    @Test("the import reader sees every form of import the sources use")
    func readerSeesImports() throws {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("imports-\(UUID().uuidString).swift")
        defer { try? FileManager.default.removeItem(at: file) }
        try """
            import NIOPosix
            public import Logging
            package import NIOSSL
            @_exported import struct PeerTrust.Identity
            // import NotThis
            let text = "import NorThis"
            """.write(to: file, atomically: true, encoding: .utf8)
        #expect(try Self.imports(of: file) == ["NIOPosix", "Logging", "NIOSSL", "PeerTrust"])
    }

    /// Where a raw `AsyncStream` is made in `Sources/` without a buffering policy: file and line
    /// of each, and whether a comment just above (or on the line) says what bounds it.
    static func rawStreams() throws -> [(place: String, explained: Bool)] {
        var found: [(place: String, explained: Bool)] = []
        let files = FileManager.default.enumerator(atPath: sources.path)?.compactMap { $0 as? String }.filter { $0.hasSuffix(".swift") } ?? []
        for file in files.sorted() {
            let lines = try String(contentsOf: sources.appendingPathComponent(file), encoding: .utf8).split(separator: "\n", omittingEmptySubsequences: false)
            for (index, line) in lines.enumerated() {
                let code = line.split(separator: "//", maxSplits: 1, omittingEmptySubsequences: false).first.map(String.init) ?? ""
                let makes = code.contains("AsyncStream") && (code.contains(".makeStream(") || code.contains("(unfolding") || (code.hasSuffix("> {") && !code.contains("func ")))
                guard makes, !code.contains("bufferingPolicy") else { continue }
                let above = lines[max(0, index - 4)...index].filter { $0.contains("//") }.joined(separator: " ").lowercased()
                let explained = ["bound", "pulled", "once", "not an eventstream"].contains { above.contains($0) }
                found.append(("\(file):\(index + 1)", explained))
            }
        }
        return found
    }

    @Test("every stream from the network to its consumer is bounded: a raw AsyncStream without a buffering policy says, just above, what bounds it")
    func rawStreamsSayWhatBoundsThem() throws {
        let streams = try Self.rawStreams()
        #expect(!streams.isEmpty, "the reader found no raw stream at all: it is broken, not the code perfect")
        for stream in streams where !stream.explained {
            Issue.record("\(stream.place) makes an AsyncStream without a buffering policy and without a comment just above saying what bounds it (use an EventStream with an EventBuffer policy, or say why none is needed)")
        }
    }
}
