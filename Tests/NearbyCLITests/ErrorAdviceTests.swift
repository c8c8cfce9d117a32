import ArgumentParser
import Foundation
import PeerConnection
import PeerTrust
import Testing

@testable import nearby

/// The messages a newcomer meets when something is refused (issue 49): each says what fixes it,
/// names a peer by its whole ID where a person may pin it, and says each thing once. The
/// built `nearby` runs as a child process, on loopback only (serve with --no-advertise sends no
/// mDNS).
@Suite("errors that say what to do")
struct ErrorAdviceTests {
    static let binary = ReadmeExamplesTests.repository.appendingPathComponent(".build/debug/nearby")

    func temporaryDirectory() throws -> URL {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("nearby-advice-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        return directory
    }

    /// The message a command line is refused with before it runs, or nil when it is accepted.
    func refusal(_ arguments: [String]) -> String? {
        do {
            _ = try Nearby.parseAsRoot(arguments)
            return nil
        } catch {
            return Nearby.message(for: error)
        }
    }

    static func notPinned(_ peerID: PeerID, pinned: Int = 0) -> PeerConnectionError {
        PeerConnectionError(
            .untrusted, "the peer's certificate is not trusted",
            reasons: [TrustReason(.notPinned, "not pinned: peer ID \(peerID) is not among the \(pinned) pinned peers")], peerID: peerID)
    }

    // MARK: The advice, as text

    @Test("a peer that is not pinned: the connecting side is told the whole ID to pin, pairing, and --trust-on-first-use")
    func connectingAdvice() throws {
        let peer = try PeerIdentity.generate(displayName: "Build Box").peerID
        let advice = try #require(trustAdvice(Self.notPinned(peer), peerID: peer, side: .connecting(host: "192.168.1.20", port: 9099, trustOnFirstUse: false)))
        #expect(
            advice == """
                  To trust it, once its owner confirms that this is its peer ID (nearby identity show --id, there): nearby trust pin \(peer)
                  Or pair with it (while it serves with --pairing): nearby pair --host 192.168.1.20 --port 9099; or connect with --trust-on-first-use, which pins a peer never seen before
                """)
        let found = try #require(trustAdvice(Self.notPinned(peer), peerID: peer, side: .connecting(host: nil, port: nil, trustOnFirstUse: false)))
        #expect(found.contains("nearby pair --host ADDRESS --port PORT (nearby peers TYPE lists them); or connect with --trust-on-first-use"))
    }

    @Test("a peer that is not pinned: the serving side is told to pin it, or let it pair, or trust on first use where serve can")
    func acceptingAdvice() throws {
        let peer = try PeerIdentity.generate(displayName: "Laptop").peerID
        let plain = try #require(trustAdvice(Self.notPinned(peer), peerID: peer, side: .accepting(pairing: false, trustOnFirstUse: false)))
        #expect(
            plain == """
                  To let it in, once its owner confirms that this is its peer ID (nearby identity show --id, there): nearby trust pin \(peer)
                  Or let it pair: serve with --pairing, and run nearby pair --host THIS-HOST --port PORT there; or serve with --trust-on-first-use, which pins a peer never seen before
                """)
        let pairing = try #require(trustAdvice(Self.notPinned(peer), peerID: peer, side: .accepting(pairing: true, trustOnFirstUse: nil, port: 9099)))
        #expect(pairing.hasSuffix("  Or let it pair: nearby pair --host THIS-HOST --port 9099, there"))
    }

    @Test("a peer that refused our certificate in TLS: the connecting side is told the command that pins this side, to run there")
    func refusedUsAdvice() throws {
        let own = try PeerIdentity.generate(displayName: "Laptop").peerID
        let refused = PeerConnectionError(.tls, "the peer refused the TLS handshake; it may not trust our certificate (BoringSSL: tlsv1 alert unknown ca)")
        #expect(
            trustAdvice(refused, peerID: nil, side: .connecting(host: "10.0.0.2", port: 9099, trustOnFirstUse: false, ownID: own)) == """
                  If it does not trust this side, on it: nearby trust pin \(own)
                  Or pair with it (while it serves with --pairing): nearby pair --host 10.0.0.2 --port 9099
                """)
        let other = PeerConnectionError(.tls, "the peer does not speak TLS 1.3 (BoringSSL: unsupported protocol)")
        #expect(trustAdvice(other, peerID: nil, side: .connecting(host: nil, port: nil, trustOnFirstUse: false, ownID: own)) == nil)
    }

    @Test("no advice where pinning does not help: an expired certificate, a key other than the one announced, a key changed under --trust-on-first-use")
    func noAdvice() throws {
        let peer = try PeerIdentity.generate(displayName: "Build Box").peerID
        let expired = PeerConnectionError(.untrusted, "the peer's certificate is not trusted", reasons: [TrustReason(.expired, "expired")], peerID: peer)
        #expect(trustAdvice(expired, peerID: peer, side: .connecting(host: nil, port: nil, trustOnFirstUse: false)) == nil)
        var mismatch = Self.notPinned(peer)
        mismatch.reasons.append(TrustReason(.peerIDMismatch, "peer ID mismatch"))
        #expect(trustAdvice(mismatch, peerID: peer, side: .connecting(host: nil, port: nil, trustOnFirstUse: false)) == nil)
        #expect(trustAdvice(Self.notPinned(peer), peerID: peer, side: .connecting(host: nil, port: nil, trustOnFirstUse: true)) == nil)
        #expect(trustAdvice(Self.notPinned(peer), peerID: nil, side: .accepting(pairing: false, trustOnFirstUse: false)) == nil)
    }

    // MARK: The built tool

    @Test("nearby connect to a peer nobody pinned: exit 1, the whole peer ID in the reason and in the command that pins it")
    func connectNotPinned() async throws {
        let work = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: work) }
        let server = try PeerIdentity.generate(displayName: "Build Box")
        let listener = try await PeerListener.listen(
            host: "127.0.0.1", port: 0, configuration: PeerConnectionConfiguration(identity: server, trust: TrustEvaluator(policy: .pinned([]))))
        let (status, output) = try await Self.run(
            ["connect", "--host", "127.0.0.1", "--port", String(listener.port), "--state-dir", work.appendingPathComponent("state").path, "--timeout", "20"])
        await listener.close()
        #expect(status == 1, "\(output)")
        #expect(output.contains("not pinned: peer ID \(server.peerID) is not among the 0 pinned peers"), "\(output)")
        #expect(output.contains(": nearby trust pin \(server.peerID)\n"), "\(output)")
        #expect(output.contains("nearby pair --host 127.0.0.1 --port \(listener.port)"), "\(output)")
        #expect(output.contains("--trust-on-first-use"), "\(output)")
    }

    @Test("nearby connect to a peer that has not pinned this one: exit 1, and the command that pins this side, to run there")
    func connectRefusedByPeer() async throws {
        let work = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: work) }
        let server = try PeerIdentity.generate(displayName: "Build Box")
        let listener = try await PeerListener.listen(
            host: "127.0.0.1", port: 0, configuration: PeerConnectionConfiguration(identity: server, trust: TrustEvaluator(policy: .pinned([]))))
        let state = work.appendingPathComponent("state")
        try TrustStore(directory: state.appendingPathComponent("trust")).pin(server.peerID, name: "Build Box")
        let (status, output) = try await Self.run(["connect", "--host", "127.0.0.1", "--port", String(listener.port), "--state-dir", state.path, "--timeout", "20"])
        await listener.close()
        let own = try #require(try IdentityStore(directory: state).load()).peerID
        #expect(status == 1, "\(output)")
        #expect(output.contains("may not trust our certificate"), "\(output)")
        #expect(output.contains("If it does not trust this side, on it: nearby trust pin \(own)\n"), "\(output)")
    }

    @Test("nearby serve turning away a client nobody pinned: the whole peer ID on the Rejected line, and how to let it in")
    func serveRejectsNotPinned() async throws {
        let work = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: work) }
        let serving = try Running(
            Self.binary, ["serve", "Build Box", "_openagents._tcp", "0", "--no-advertise", "--state-dir", work.appendingPathComponent("server").path])
        defer { serving.stop() }
        let listening = try #require(
            await serving.line { $0.hasPrefix("Listening on port ") }, "serve did not listen: \(serving.output)")
        let words = listening.split(separator: " ")
        let port = try #require(Int(words[3]), "\(listening)")
        let serverID = try PeerID(parsing: String(try #require(listening.components(separatedBy: "peer ID ").last)))
        let client = try PeerIdentity.generate(displayName: "Laptop")
        _ = try? await PeerConnection.connect(
            host: "127.0.0.1", port: port,
            configuration: PeerConnectionConfiguration(identity: client, trust: TrustEvaluator(policy: .pinned([serverID]))))
        let advice = await serving.line { $0.contains("To let it in") }
        let output = serving.output
        #expect(advice != nil, "\(output)")
        #expect(output.contains("Rejected 127.0.0.1 (peer ID \(client.peerID)): "), "\(output)")
        #expect(output.contains(": nearby trust pin \(client.peerID)\n"), "\(output)")
        #expect(output.contains("serve with --pairing, and run nearby pair --host THIS-HOST --port \(port) there"), "\(output)")
        #expect(output.contains("or serve with --trust-on-first-use"), "\(output)")
    }

    @Test("an identity this user may not read, or a state directory it may not write: what to check, and --state-dir")
    func identityPermission() async throws {
        let work = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: work) }
        let state = work.appendingPathComponent("state")
        try IdentityStore(directory: state).save(try PeerIdentity.generate(displayName: "Owned"), replacing: false)
        // As root the system grants everything: the tool runs as nobody, and the directory is
        // root's (0700). As anyone else, the directory is made unreadable to its own owner.
        let asRoot = geteuid() == 0
        if !asRoot { chmod(state.path, 0) }
        defer { chmod(state.path, 0o700) }
        let (readStatus, read) = try await Self.run(["identity", "show", "--state-dir", state.path], asNobody: asRoot, in: work)
        #expect(readStatus == 1, "\(read)")
        #expect(read.contains("cannot read \(state.path)/identity.pem: Permission denied (the directory \(state.path) belongs to "), "\(read)")
        #expect(read.contains("mode 0\(asRoot ? "700" : "000")"), "\(read)")
        #expect(read.contains(asRoot ? "and this process runs as nobody (uid 65534)): run as root" : "chmod u+rwx \(state.path)"), "\(read)")
        #expect(read.hasSuffix("or give this user a state directory of its own (nearby's --state-dir DIR, or NEARBY_STATE_DIR=DIR)\n"), "\(read)")

        // Creating one where this user cannot write.
        let parent = work.appendingPathComponent("locked")
        try FileManager.default.createDirectory(at: parent, withIntermediateDirectories: true)
        chmod(parent.path, asRoot ? 0o755 : 0o500)
        defer { chmod(parent.path, 0o700) }
        let fresh = parent.appendingPathComponent("state")
        let (createStatus, create) = try await Self.run(["identity", "create", "--state-dir", fresh.path], asNobody: asRoot, in: work)
        #expect(createStatus == 1, "\(create)")
        #expect(create.contains("cannot create the directory \(fresh.path): Permission denied (the directory \(parent.path) belongs to "), "\(create)")
        #expect(create.contains("--state-dir DIR, or NEARBY_STATE_DIR=DIR"), "\(create)")
    }

    @Test("service types, instance names and TXT entries: each thing said once, a long value quoted by its beginning")
    func discoveryInputTexts() throws {
        #expect(
            refusal(["browse", "openagents._tcp"])
                == #""openagents._tcp" is not a service type: the service name must begin with an underscore, as in "_openagents._tcp""#)
        #expect(
            refusal(["advertise", "", "_openagents._tcp", "9099"])
                == #""" is not an instance name: it is empty; an instance name has 1 to 63 bytes of UTF-8"#)
        let value = String(repeating: "v", count: 297)
        let txt = try #require(refusal(["advertise", "Box", "_openagents._tcp", "9099", "version=" + value]))
        #expect(txt == "TXT entry \"version=\(String(repeating: "v", count: 32))…\" is 305 bytes; an entry (key, \"=\" and value) holds at most 255")
    }

    @Test("nearby --version prints the package's version alone, not the protocol's")
    func version() async throws {
        let (status, output) = try await Self.run(["--version"])
        #expect(status == 0)
        #expect(output == Nearby.configuration.version + "\n")
        #expect(output.wholeMatch(of: /\d+\.\d+\.\d+\n/) != nil, "\(output)")
        #expect(Nearby.configuration.version != ProtocolVersion.current.description)
        let changelog = try String(contentsOf: ReadmeExamplesTests.repository.appendingPathComponent("CHANGELOG.md"), encoding: .utf8)
        #expect(changelog.contains("## [\(Nearby.configuration.version)]"), "CHANGELOG.md has no section for \(Nearby.configuration.version)")
    }

    // MARK: Running the tool

    /// Runs the built tool to its end; its exit status, and stdout and stderr together.
    /// `asNobody`: as the user nobody (setpriv), from a copy of the binary that nobody can reach.
    static func run(_ arguments: [String], asNobody: Bool = false, in work: URL? = nil) async throws -> (Int32, String) {
        try await onOwnThread {
            let process = Process()
            if asNobody, let work {
                let copy = work.appendingPathComponent("nearby")
                if !FileManager.default.fileExists(atPath: copy.path) { try FileManager.default.copyItem(at: binary, to: copy) }
                chmod(work.path, 0o755)
                process.executableURL = URL(fileURLWithPath: "/usr/bin/setpriv")
                process.arguments = ["--reuid=nobody", "--regid=nogroup", "--clear-groups", copy.path] + arguments
            } else {
                process.executableURL = binary
                process.arguments = arguments
            }
            let pipe = Pipe()
            process.standardOutput = pipe
            process.standardError = pipe
            process.standardInput = FileHandle.nullDevice
            try process.run()
            let output = pipe.fileHandleForReading.readDataToEndOfFile()
            process.waitUntilExit()
            return (process.terminationStatus, String(decoding: output, as: UTF8.self))
        }
    }
}

/// A tool running in the background: what it printed so far (stdout and stderr), lines waited
/// for (at most 30 s each), stopped with SIGTERM.
final class Running: @unchecked Sendable {
    private let process = Process()
    private let lock = NSLock()
    private var text = ""

    init(_ binary: URL, _ arguments: [String]) throws {
        process.executableURL = binary
        process.arguments = arguments
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = pipe
        process.standardInput = FileHandle.nullDevice
        pipe.fileHandleForReading.readabilityHandler = { [weak self] handle in
            let data = handle.availableData
            guard let self, !data.isEmpty else { return }
            self.lock.withLock { self.text += String(decoding: data, as: UTF8.self) }
        }
        try process.run()
    }

    var output: String { lock.withLock { text } }

    /// The first complete line that `matches`, once printed; nil if none came within 30 s.
    func line(_ matches: (String) -> Bool) async -> String? {
        for _ in 0..<1500 {
            let lines = output.split(separator: "\n", omittingEmptySubsequences: false).dropLast()
            if let found = lines.first(where: { matches(String($0)) }) { return String(found) }
            try? await Task.sleep(for: .milliseconds(20))
        }
        return nil
    }

    func stop() {
        if process.isRunning { process.terminate() }
        process.waitUntilExit()
    }
}
