import Foundation
import Testing

/// What a newcomer meets when things go wrong in ordinary ways: the exact words for a port
/// where nothing listens, a name that does not resolve, a port in use, a state directory that
/// cannot be made, a mistyped command and a browse that finds nothing. Run as the built binary.
extension LabTestSuite {
@Suite("a newcomer's errors, in our words")
struct NewcomerLabTests {
    static var nearby: String { DiscoveryLabTests.nearby }

    /// Runs `nearby ARGS` in `host`; returns its exit status and stdout + stderr.
    func nearby(_ lab: Lab, in host: String = "h2", _ arguments: [String]) async throws -> (status: Int32, output: String) {
        let command = ([Self.nearby] + arguments).map { "'\($0)'" }.joined(separator: " ")
        let process = try lab.start(["exec", host, "--", "sh", "-c", "exec 2>&1; exec \(command) < /dev/null"])
        let status = try await process.wait(timeout: .seconds(30))
        return (status, process.output)
    }

    @Test("network failures say what happened, where, and what to do, with no library text")
    func networkFailures() async throws {
        let lab = try Lab.require(hosts: 2)
        let state = try Lab.temporaryDirectory().path
        let refused = try await nearby(lab, ["connect", "--host", "198.18.1.1", "--port", "9440", "--state-dir", state])
        #expect(refused.status == 1)
        #expect(refused.output.contains(
            "nearby: cannot connect to 198.18.1.1 port 9440: nothing listens there (connection refused); check the port, and that the server runs"),
            "\(refused.output)")
        let unknown = try await nearby(lab, ["connect", "--host", "no-such-host.invalid", "--port", "9440", "--state-dir", state])
        #expect(unknown.status == 1)
        #expect(unknown.output.contains("nearby: cannot find the host \"no-such-host.invalid\": the name does not resolve"), "\(unknown.output)")
        for output in [refused.output, unknown.output] {
            for libraryText in ["errno", "(error set)", "SocketAddressError", "descriptor:"] { #expect(!output.contains(libraryText), "\(output)") }
        }

        // A port in use: serve once, then again on the same port.
        let first = try lab.start(["exec", "h1", "--", Self.nearby, "serve", "One", "_openagents._tcp", "9441", "--no-advertise", "--state-dir", state])
        try await lab.withProcesses([first]) {
            _ = try await first.waitForLine(containing: "Listening on port 9441", timeout: .seconds(20))
            let second = try await nearby(lab, in: "h1", ["serve", "Two", "_openagents._tcp", "9441", "--no-advertise", "--state-dir", state])
            #expect(second.status == 1)
            #expect(second.output.contains(
                "nearby: cannot listen on port 9441: another program already uses it (address in use); stop that program, or choose another port (0 picks a free one)"),
                "\(second.output)")
        }
    }

    @Test("connect --nearest to a peer nobody pinned: the whole peer ID, and the commands that trust it")
    func nearestNotPinned() async throws {
        let lab = try Lab.require(hosts: 2)
        let server = try Lab.temporaryDirectory().path
        let client = try Lab.temporaryDirectory().path
        let serving = try lab.start(["exec", "h1", "--", Self.nearby, "serve", "Build Box", "_newcomer._tcp", "9442", "--state-dir", server])
        try await lab.withProcesses([serving]) {
            let listening = try await serving.waitForLine(containing: "Listening on port 9442", timeout: .seconds(20))
            let serverID = try #require(listening.components(separatedBy: "peer ID ").last)
            let refused = try await nearby(lab, ["connect", "_newcomer._tcp", "--nearest", "--state-dir", client])
            #expect(refused.status == 1, "\(refused.output)")
            #expect(refused.output.contains("not pinned: peer ID \(serverID) is not among the 0 pinned peers"), "\(refused.output)")
            #expect(refused.output.contains(": nearby trust pin \(serverID)\n"), "\(refused.output)")
            #expect(refused.output.contains("nearby pair --host ADDRESS --port PORT") && refused.output.contains("--trust-on-first-use"), "\(refused.output)")
        }
    }

    @Test("a state directory that cannot be made, a mistyped command, and a browse that finds nothing")
    func everydayMistakes() async throws {
        let lab = try Lab.require(hosts: 2)
        let proc = try await nearby(lab, ["identity", "create", "--state-dir", "/proc/nope"])
        #expect(proc.status == 1)
        #expect(proc.output.contains("cannot create the directory /proc/nope: making /proc/nope failed (No such file or directory)"), "\(proc.output)")
        let typo = try await nearby(lab, ["brwose", "_openagents._tcp"])
        #expect(typo.status == 2)
        #expect(typo.output.contains("\"brwose\" is not a command of nearby; did you mean \"nearby browse\"?"), "\(typo.output)")
        let nothing = try await nearby(lab, ["browse", "_nobody-here._tcp", "--timeout", "1"])
        #expect(nothing.status == 0)
        #expect(nothing.output.contains("nearby: found no _nobody-here._tcp service in 1"), "\(nothing.output)")
    }
}
}
