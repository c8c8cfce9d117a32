import ArgumentParser
import Foundation
import NearbyDiscovery
import Testing

@testable import nearby

/// `--backend`: parsed, checked, and bad input refused alike on both backends before any
/// backend starts (so these tests never touch a network or a daemon).
@Suite("nearby --backend")
struct BackendOptionTests {
    /// The message a command line is refused with, or nil when it is accepted.
    func refusal(_ arguments: [String]) -> String? {
        do {
            _ = try Nearby.parseAsRoot(arguments)
            return nil
        } catch {
            return Nearby.message(for: error)
        }
    }

    @Test("embedded, system and auto are accepted; auto is the default")
    func choices() throws {
        for (text, choice) in [("embedded", BackendChoice.embedded), ("system", .system), ("auto", .automatic)] {
            let command = try #require(try Nearby.parseAsRoot(["browse", "_openagents._tcp", "--backend", text]) as? Browse)
            #expect(command.network.backend == choice)
        }
        let command = try #require(try Nearby.parseAsRoot(["browse", "_openagents._tcp"]) as? Browse)
        #expect(command.network.backend == .automatic)
        let refused = try #require(refusal(["browse", "_openagents._tcp", "--backend", "avahi"]))
        #expect(refused.contains("avahi") && refused.contains("embedded"), "\(refused)")
    }

    @Test("bad input is refused with the same words on every backend", arguments: [
        ["advertise", "Box", "_openagents._tcp", "9099", String(repeating: "k", count: 200) + "=" + String(repeating: "v", count: 60)],
        ["advertise", "Box", "_bad_type._tcp", "9099"],
        ["advertise", "Box", "_openagents._tcp", "0"],
        ["advertise", "", "_openagents._tcp", "9099"],
        ["advertise", "Box", "_openagents._tcp", "9099", "=novalue"],
        ["browse", "openagents"],
        ["resolve", "Box", "_x._quic"],
    ])
    func sameRefusals(_ arguments: [String]) throws {
        let embedded = try #require(refusal(arguments + ["--backend", "embedded"]))
        let system = try #require(refusal(arguments + ["--backend", "system"]))
        #expect(embedded == system)
    }

    @Test("an oversized TXT entry names its key and the 255-byte limit")
    func oversizedEntry() throws {
        let entry = String(repeating: "k", count: 200) + "=" + String(repeating: "v", count: 60)
        let message = try #require(refusal(["advertise", "Box", "_openagents._tcp", "9099", entry, "--backend", "system"]))
        #expect(message.contains("255"), "\(message)")
    }

    @Test("options only the embedded engine has are refused with --backend system, and pick embedded under auto")
    func embeddedOnlyOptions() throws {
        let host = try #require(refusal(["advertise", "Box", "_openagents._tcp", "9099", "--host", "box", "--backend", "system"]))
        #expect(host.contains("--host needs --backend embedded"), "\(host)")
        let ttl = try #require(refusal(["advertise", "Box", "_openagents._tcp", "9099", "--ttl", "10", "--backend", "system"]))
        #expect(ttl.contains("--ttl needs --backend embedded"), "\(ttl)")
        let auto = try #require(try Nearby.parseAsRoot(["advertise", "Box", "_openagents._tcp", "9099", "--ttl", "10"]) as? Advertise)
        #expect(auto.embeddedOnlyOption == "--ttl")
        let interfaces = try #require(refusal(["browse", "_openagents._tcp", "--interface", "a", "--interface", "b", "--backend", "system"]))
        #expect(interfaces.contains("all interfaces or on one"), "\(interfaces)")
    }

    @Test("--txt-file: a missing file is refused; its lines are TXT entries")
    func txtFile() throws {
        let missing = try #require(refusal(["advertise", "Box", "_openagents._tcp", "9099", "--txt-file", "/nonexistent/nearby-txt"]))
        #expect(missing.contains("cannot read --txt-file /nonexistent/nearby-txt"), "\(missing)")
        let path = "/tmp/nearby-txt-\(UInt64.random(in: 0...UInt64.max))"
        try "version=2\n\nflag\n".write(toFile: path, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(atPath: path) }
        let command = try #require(try Nearby.parseAsRoot(["advertise", "Box", "_openagents._tcp", "9099", "a=1", "--txt-file", path]) as? Advertise)
        let info = try command.discoveryInfo()
        #expect(info.entries.map(\.key) == ["a", "version", "flag"])
    }
}
