import Foundation
import PeerTrust
import Testing

/// README's Swift examples are the programs in Tools/examples, built with the package:
/// these tests check that README and Documentation/Swift.md show them to the letter, and that
/// they run to the end. The discovery example, which needs a network, runs in the lab (LabTests).
@Suite("README's Swift examples")
struct ReadmeExamplesTests {
    static let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    /// The files that show the examples, in the order their ```swift blocks are read: README.md
    /// first, then the documentation page that holds the rest.
    static let exampleFiles = ["README.md", "Documentation/Swift.md"]

    /// The ```swift blocks of the given files (README.md alone by default), file after file, in order.
    static func readmeBlocks(in files: [String] = ["README.md"]) throws -> [String] {
        try files.flatMap { file in swiftBlocks(of: try String(contentsOf: repository.appendingPathComponent(file), encoding: .utf8)) }
    }

    /// The ```swift blocks of a Markdown text, in order.
    static func swiftBlocks(of text: String) -> [String] {
        var blocks: [String] = []
        var current: [Substring]?
        for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
            if current == nil, line.hasPrefix("```swift") {
                current = []
            } else if let lines = current, line.hasPrefix("```") {
                blocks.append(lines.joined(separator: "\n"))
                current = nil
            } else {
                current?.append(line)
            }
        }
        return blocks
    }

    static let examples = ["Advertise", "Browse", "Nearest", "Serve", "Register", "Broker", "Streams", "Discovery", "Trust", "Connection", "Pairing", "Wire"]

    /// A ```swift block that is a package manifest (a consumer's Package.swift), not a program.
    static func isManifest(_ block: String) -> Bool { block.hasPrefix("// swift-tools-version") }

    @Test("README shows exactly the example programs that are built", arguments: Array(examples.enumerated()))
    func readmeShowsTheBuiltCode(_ example: (offset: Int, element: String)) throws {
        let blocks = try Self.readmeBlocks(in: Self.exampleFiles).filter { !Self.isManifest($0) }
        #expect(blocks.count == Self.examples.count, "\(Self.exampleFiles) have \(blocks.count) swift blocks")
        let file = Self.repository.appendingPathComponent("Tools/examples/\(example.element)/main.swift")
        let source = try String(contentsOf: file, encoding: .utf8)
        let block = try #require(blocks.dropFirst(example.offset).first)
        #expect(block + "\n" == source, "block \(example.offset + 1) of \(Self.exampleFiles) differs from \(file.path)")
    }

    @Test("README's manifest depends on this package by path and names products Package.swift declares")
    func readmeManifestNamesRealProducts() throws {
        let manifests = try Self.readmeBlocks().filter(Self.isManifest)
        #expect(manifests.count == 1, "README has \(manifests.count) package manifests")
        let manifest = try #require(manifests.first)
        let package = try String(contentsOf: Self.repository.appendingPathComponent("Package.swift"), encoding: .utf8)
        let declared = Set(package.matches(of: #/\.library\(name: "([A-Za-z]+)"/#).map { String($0.output.1) })
        let used = manifest.matches(of: #/\.product\(name: "([^"]+)", package: "([^"]+)"\)/#)
        #expect(!used.isEmpty, "README's manifest names no product")
        // A path dependency's package identity is the directory's name, lower-cased: ../nearby is "nearby".
        #expect(manifest.contains(".package(path: \"../nearby\")"))
        for product in used {
            #expect(declared.contains(String(product.output.1)), "README names \(product.output.1); Package.swift declares \(declared.sorted())")
            #expect(product.output.2 == "nearby", "README's manifest says package: \"\(product.output.2)\" for ../nearby")
        }
    }

    /// Runs a built example; returns its exit status and output.
    static func run(_ product: String, _ arguments: [String] = [], environment: [String: String] = [:]) async throws -> (Int32, String) {
        try await onOwnThread { try runBlocking(product, arguments, environment: environment) }
    }

    static func runBlocking(_ product: String, _ arguments: [String], environment: [String: String]) throws -> (Int32, String) {
        let binary = repository.appendingPathComponent(".build/debug/\(product)")
        let process = Process()
        process.executableURL = binary
        process.arguments = arguments
        process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = pipe
        try process.run()
        let output = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: output, as: UTF8.self))
    }

    @Test("the PeerConnection example connects on 127.0.0.1 and echoes")
    func connectionExampleRuns() async throws {
        let (status, output) = try await Self.run("readme-connection")
        #expect(status == 0, "\(output)")
        #expect(output.contains("connected to Build Box Build Box bridge"), "\(output)")
        #expect(output.contains("echo: hello"), "\(output)")
    }

    @Test("the streams example echoes a stream and sends a file that arrives verified")
    func streamsExampleRuns() async throws {
        let (status, output) = try await Self.run("readme-streams")
        #expect(status == 0, "\(output)")
        #expect(output.contains("echoed: hello, stream"), "\(output)")
        #expect(output.contains("done: report.txt 3000000 bytes, SHA-256"), "\(output)")
        #expect(output.contains("received report.txt"), "\(output)")
    }

    @Test("the pairing example: two strangers show one code, pin each other, and the pins then trust")
    func pairingExampleRuns() async throws {
        let (status, output) = try await Self.run("readme-pairing")
        #expect(status == 0, "\(output)")
        let codes = output.split(separator: "\n").compactMap { line -> Substring? in
            let words = line.split(separator: " ")
            guard let index = words.firstIndex(of: "shows"), index + 1 < words.count else { return nil }
            return words[index + 1]
        }
        #expect(codes.count == 2 && codes[0] == codes[1] && codes[0].count == 6, "\(output)")
        #expect(output.contains("Build Box paired with Laptop"), "\(output)")
        #expect(output.contains("pinned on the laptop: [\"Build Box\"] on Build Box: [\"Laptop\"]"), "\(output)")
        #expect(output.contains("the laptop now trusts Build Box: true"), "\(output)")
    }

    @Test("the DNSWire example runs to the end")
    func wireExampleRuns() async throws {
        let (status, output) = try await Self.run("readme-wire")
        #expect(status == 0, "\(output)")
        #expect(output.contains("Build\\032Box._openagents._tcp.local."))
        #expect(output.contains("2 answers; 0.2.2 9099 true"), "\(output)")
    }

    @Test("the PeerTrust example runs to the end: a pinned peer is trusted, an unknown one rejected with its code")
    func trustExampleRuns() async throws {
        let state = FileManager.default.temporaryDirectory.appendingPathComponent("nearby-readme-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: state) }
        let peer = try PeerIdentity.generate(displayName: "Peer Box")
        let stranger = try PeerIdentity.generate(displayName: "Stranger")
        try FileManager.default.createDirectory(at: state, withIntermediateDirectories: true)
        let peerFile = state.appendingPathComponent("peer.pem")
        let strangerFile = state.appendingPathComponent("stranger.pem")
        try peer.certificate.pem.write(to: peerFile, atomically: true, encoding: .utf8)
        try stranger.certificate.pem.write(to: strangerFile, atomically: true, encoding: .utf8)
        try TrustStore(directory: state.appendingPathComponent("trust")).pin(peer.peerID, name: "Peer Box")
        let environment = ["NEARBY_STATE_DIR": state.path]

        let (status, output) = try await Self.run("readme-trust", [peerFile.path, peer.peerID.description], environment: environment)
        #expect(status == 0, "\(output)")
        // The first run makes the identity and says so; the next one loads the same one.
        let made = try #require(try IdentityStore(directory: state).load())
        #expect(output.contains("made a new identity: Build Box \(made.peerID)"), "\(output)")
        #expect(output.contains("trusted Peer Box \(peer.peerID)"), "\(output)")

        let (again, rejected) = try await Self.run("readme-trust", [strangerFile.path], environment: environment)
        #expect(again == 0, "\(rejected)")
        #expect(rejected.contains("I am Build Box \(made.peerID)"), "\(rejected)")
        #expect(rejected.contains("- notPinned"), "\(rejected)")
    }
}
