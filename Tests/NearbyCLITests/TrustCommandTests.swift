import ArgumentParser
import Foundation
import PeerTrust
import Testing

@testable import nearby

/// `nearby identity` and `nearby trust`, run in-process against temporary state directories.
@Suite("nearby identity and trust")
struct TrustCommandTests {
    func temporaryDirectory() -> URL {
        FileManager.default.temporaryDirectory.appendingPathComponent("nearby-cli-\(UUID().uuidString)")
    }

    func run(_ arguments: [String]) async throws {
        var command = try #require(try Nearby.parseAsRoot(arguments) as? any AsyncParsableCommand)
        try await command.run()
    }

    @Test("bad command lines are refused with what is wrong", arguments: [
        (["trust", "pin", "ABC"], "is not a peer ID"),
        (["trust", "check", "x.pem", "--at", "tomorrow"], "is not an ISO 8601 time"),
        (["trust", "check", "x.pem", "--role", "server"], "server"),
        (["trust", "check", "x.pem", "--max-depth", "100"], "out of range"),
        (["identity", "import"], "give either --pem FILE"),
        (["identity", "import", "--pkcs12", "a.p12", "--key", "k.pem"], "--key goes with --pem"),
    ])
    func refusals(_ arguments: [String], _ words: String) {
        do {
            _ = try Nearby.parseAsRoot(arguments)
            Issue.record("accepted \(arguments)")
        } catch {
            #expect(Nearby.message(for: error).contains(words), "\(Nearby.message(for: error))")
        }
    }

    @Test("a PKCS#12 file with the wrong passphrase, garbage, or a foreign key: a clear error and nothing written")
    func nothingWritten() async throws {
        let work = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: work) }
        try FileManager.default.createDirectory(at: work, withIntermediateDirectories: true)
        let identity = try PeerIdentity.generate(displayName: "Source")
        let bundle = work.appendingPathComponent("id.p12")
        try Data(try identity.pkcs12(passphrase: "right")).write(to: bundle)
        let wrong = work.appendingPathComponent("wrong")
        try Data("wrong\n".utf8).write(to: wrong)
        let garbage = work.appendingPathComponent("garbage.pem")
        try Data("-----BEGIN CERTIFICATE-----\nAAAA".utf8).write(to: garbage)
        let state = work.appendingPathComponent("state").path
        let attempts: [([String], String)] = [
            (["identity", "import", "--pkcs12", bundle.path, "--passphrase-file", wrong.path], "passphrase does not open"),
            (["identity", "import", "--pem", garbage.path], "has no END line"),
            (["identity", "import", "--pem", garbage.path, "--key", garbage.path], "has no END line"),
        ]
        for (arguments, words) in attempts {
            do {
                try await run(arguments + ["--state-dir", state])
                Issue.record("accepted \(arguments)")
            } catch let error as ValidationError {
                #expect(error.message.contains(words), "\(error.message)")
            }
        }
        #expect(!FileManager.default.fileExists(atPath: state))
        let right = work.appendingPathComponent("right")
        try Data("right\n".utf8).write(to: right)
        try await run(["identity", "import", "--pkcs12", bundle.path, "--passphrase-file", right.path, "--state-dir", state])
        #expect(try IdentityStore(directory: URL(fileURLWithPath: state)).load()?.peerID == identity.peerID)
    }

    @Test("trust check: pinned after `trust pin`, rejected (exit 1) before; a damaged identity is not replaced by create")
    func pinAndCheck() async throws {
        let work = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: work) }
        let state = work.appendingPathComponent("state")
        let store = IdentityStore(directory: state)
        let identity = try store.loadOrCreate(displayName: "Pinned Peer").identity
        let chain = work.appendingPathComponent("peer.pem")
        try Data(identity.pem().utf8).write(to: chain)
        await #expect(throws: ExitCode(1)) { try await run(["trust", "check", chain.path, "--state-dir", state.path]) }
        try await run(["trust", "pin", identity.peerID.description, "--name", "peer", "--state-dir", state.path])
        try await run(["trust", "check", chain.path, "--peer-id", identity.peerID.description, "--state-dir", state.path])
        try await run(["trust", "remove", identity.peerID.description, "--state-dir", state.path])
        await #expect(throws: ExitCode(1)) { try await run(["trust", "check", chain.path, "--state-dir", state.path]) }

        try Data("-----BEGIN PRIVATE KEY-----\nAAAA\n".utf8).write(to: store.identityFile)
        do {
            try await run(["identity", "create", "--state-dir", state.path])
            Issue.record("create replaced a damaged identity")
        } catch let error as RuntimeFailure {
            #expect(error.description.contains("is damaged") && error.description.contains("--force replaces it"))
        }
    }
}
