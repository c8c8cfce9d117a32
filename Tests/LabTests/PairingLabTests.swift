import Foundation
import Testing

/// A named pipe a test writes a process's stdin through, answering its questions as a person
/// would: the process reads it as its standard input until the test closes it.
final class StdinPipe: @unchecked Sendable {
    let path: String
    private let descriptor: Int32

    init() throws {
        path = try Lab.temporaryDirectory().appendingPathComponent("stdin").path
        guard mkfifo(path, 0o600) == 0 else { throw LabError("mkfifo \(path) failed: errno \(errno)") }
        // Read and write: opening does not wait for a reader, and the reader sees no end of
        // input until this side closes.
        descriptor = open(path, O_RDWR)
        guard descriptor >= 0 else { throw LabError("cannot open \(path): errno \(errno)") }
    }

    func send(_ line: String) {
        let bytes = Array((line + "\n").utf8)
        _ = bytes.withUnsafeBufferPointer { write(descriptor, $0.baseAddress, $0.count) }
    }

    deinit { close(descriptor) }
}

/// `nearby pair` against `nearby serve --accept ask` across the virtual LAN: people compare
/// codes, a relay in the middle is caught by the codes, and `.local` names are looked up.
extension LabTestSuite {
@Suite("pairing and .local hosts across the lab")
struct PairingLabTests {
    static var nearby: String { DiscoveryLabTests.nearby }
    static let addresses = ["h1": "198.18.1.1", "h2": "198.18.1.2", "h3": "198.18.1.3"]
    let helpers = ConnectionLabTests()

    /// Starts `nearby ARGS --json` in `host` with its stdin on `pipe`.
    func start(_ lab: Lab, _ host: String, _ arguments: [String], stdin pipe: StdinPipe) throws -> LabProcess {
        let command = ([Self.nearby] + arguments + ["--json"]).map { "'\($0)'" }.joined(separator: " ")
        return try lab.start(["exec", host, "--", "sh", "-c", "exec 2>&1; exec \(command) < '\(pipe.path)'"])
    }

    /// The code in a process's "invitation" line.
    func code(_ process: LabProcess) async throws -> String {
        let line = try await process.waitForLine(containing: "\"code\"", timeout: .seconds(20))
        return try #require(jsonLines(line).first?["code"] as? String, "\(line)")
    }

    func pins(_ lab: Lab, _ directory: String) async throws -> [String] {
        let listed = try await lab.run(["exec", "h1", "--", Self.nearby, "trust", "list", "--json", "--state-dir", directory])
        return jsonLines(listed).filter { $0["kind"] as? String == "pin" }.compactMap { $0["peerID"] as? String }
    }

    /// Runs one pairing: serve in h1, pair from h2 (through `via` when given); each side answers
    /// as told once it shows its code. Returns both codes and pair's exit status and output.
    func pairing(
        _ lab: Lab, server: String, client: String, port: Int, serverAnswer: String, clientAnswer: String, via relay: (host: String, port: Int)? = nil
    ) async throws -> (serverCode: String, clientCode: String, status: Int32, output: String, serveOutput: String) {
        let servePipe = try StdinPipe()
        let serving = try start(lab, "h1", ["serve", "Build Box", "_openagents._tcp", String(port), "--no-advertise", "--accept", "ask", "--state-dir", server], stdin: servePipe)
        var result: (String, String, Int32, String, String) = ("", "", -1, "", "")
        try await lab.withProcesses([serving]) {
            _ = try await serving.waitForLine(containing: "\"listening\"", timeout: .seconds(20))
            let target = relay.map { (Self.addresses[$0.host] ?? "", $0.port) } ?? ("198.18.1.1", port)
            let pairPipe = try StdinPipe()
            let pairing = try start(lab, "h2", ["pair", "--host", target.0, "--port", String(target.1), "--state-dir", client], stdin: pairPipe)
            try await lab.withProcesses([pairing]) {
                let serverCode = try await code(serving)
                let clientCode = try await code(pairing)
                servePipe.send(serverAnswer)
                pairPipe.send(clientAnswer)
                let status = try await pairing.wait(timeout: .seconds(20))
                // Give serve a moment to finish its side (pin, or say why not) before it is stopped.
                if status == 0 { _ = try await serving.waitForLine(containing: "\"pinned\"", timeout: .seconds(10)) }
                result = (serverCode, clientCode, status, pairing.output, serving.output)
            }
        }
        return result
    }

    @Test("two fresh identities pair: both show the same code, each pins the other, and then each admits the other under --pinned")
    func pairThenConnectBothWays() async throws {
        let lab = try Lab.require(hosts: 2)
        let server = try await helpers.identity(lab, "Build Box")
        let client = try await helpers.identity(lab, "Laptop")
        let run = try await pairing(lab, server: server.directory, client: client.directory, port: 9421, serverAnswer: "accept", clientAnswer: "accept")
        #expect(run.serverCode == run.clientCode, "\(run.output)\n\(run.serveOutput)")
        #expect(run.serverCode.count == 6)
        #expect(run.status == 0, "\(run.output)")
        #expect(jsonLines(run.output).contains { $0["event"] as? String == "pinned" && $0["peerID"] as? String == server.peerID })
        #expect(try await pins(lab, client.directory) == [server.peerID])
        #expect(try await pins(lab, server.directory) == [client.peerID])

        // h2 connects to h1 under pins alone (the default TRUST) ...
        let (serving, port) = try await helpers.serve(lab, ["Build Box", "_openagents._tcp", "9422", "--no-advertise", "--state-dir", server.directory])
        try await lab.withProcesses([serving]) {
            let (status, output) = try await helpers.connect(
                lab, ["--host", "198.18.1.1", "--port", String(port), "--pinned", "--state-dir", client.directory],
                lines: [#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#])
            #expect(status == 0, "\(output)")
        }
        // ... and h1 connects to h2 the other way round.
        let reverse = try lab.start([
            "exec", "h2", "--", "sh", "-c",
            "exec 2>&1; exec '\(Self.nearby)' serve Laptop _openagents._tcp 9423 --no-advertise --json --state-dir '\(client.directory)' < /dev/null",
        ])
        try await lab.withProcesses([reverse]) {
            _ = try await reverse.waitForLine(containing: "\"listening\"", timeout: .seconds(20))
            let back = try await lab.run([
                "exec", "h1", "--", "sh", "-c",
                "echo '{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}' | '\(Self.nearby)' connect --host 198.18.1.2 --port 9423 --pinned --json --state-dir '\(server.directory)'",
            ])
            #expect(jsonLines(back).contains { $0["event"] as? String == "connected" && $0["peerID"] as? String == client.peerID }, "\(back)")
        }
    }

    @Test("a no on either side pins nothing on either side", arguments: ["serve", "pair"])
    func noPinsNothing(whoSaysNo: String) async throws {
        let lab = try Lab.require(hosts: 2)
        let server = try await helpers.identity(lab, "Build Box")
        let client = try await helpers.identity(lab, "Laptop")
        let run = try await pairing(
            lab, server: server.directory, client: client.directory, port: whoSaysNo == "serve" ? 9424 : 9425,
            serverAnswer: whoSaysNo == "serve" ? "decline" : "accept", clientAnswer: whoSaysNo == "pair" ? "decline" : "accept")
        #expect(run.serverCode == run.clientCode)
        #expect(run.status == 1, "\(run.output)")
        #expect(!run.output.contains("\"pinned\"") && !run.serveOutput.contains("\"pinned\""))
        #expect(try await pins(lab, client.directory).isEmpty)
        #expect(try await pins(lab, server.directory).isEmpty)
    }

    @Test("a relay in the middle that terminates TLS with its own key makes the two codes differ; nothing is pinned")
    func relayMakesCodesDiffer() async throws {
        let lab = try Lab.require(hosts: 3)
        let server = try await helpers.identity(lab, "Build Box")
        let client = try await helpers.identity(lab, "Laptop")
        let mallory = try await helpers.identity(lab, "Build Box")
        let relay = try lab.start([
            "exec", "h3", "--", ConnectionLabTests.python, "-u", ConnectionLabTests.wsPeer, "relay", "9427", "wss://198.18.1.1:9426/",
            "--identity", mallory.directory + "/identity.pem",
        ])
        try await lab.withProcesses([relay]) {
            _ = try await relay.waitForLine(containing: "listening", timeout: .seconds(20))
            // Both people see codes that differ, and say no, as the question asks them to.
            let run = try await pairing(
                lab, server: server.directory, client: client.directory, port: 9426, serverAnswer: "decline", clientAnswer: "decline",
                via: ("h3", 9427))
            #expect(run.serverCode != run.clientCode, "\(run.output)\n\(run.serveOutput)")
            #expect(run.status == 1)
            // The relay carried the real exchange (it is not a broken link that failed early).
            #expect(relay.output.contains("pair/reveal"), "\(relay.output)")
            // Each side saw the relay's key, not the other's.
            #expect(run.output.contains(mallory.peerID) && !run.output.contains(server.peerID))
            #expect(run.serveOutput.contains(mallory.peerID) && !run.serveOutput.contains(client.peerID))
            #expect(try await pins(lab, client.directory).isEmpty)
            #expect(try await pins(lab, server.directory).isEmpty)
        }
    }

    @Test("connect --host NAME.local finds the host over mDNS (the host a resolve reports) and connects")
    func connectByLocalName() async throws {
        let lab = try Lab.require(hosts: 2)
        let server = try await helpers.identity(lab, "Build Box")
        let client = try await helpers.identity(lab, "Laptop")
        try await helpers.pin(lab, client.peerID, in: server.directory)
        try await helpers.pin(lab, server.peerID, in: client.directory)
        let (serving, port) = try await helpers.serve(lab, ["Build Box", "_openagents._tcp", "9428", "--backend", "embedded", "--state-dir", server.directory])
        try await lab.withProcesses([serving]) {
            let resolved = try await lab.run(["exec", "h2", "--", Self.nearby, "resolve", "Build Box", "_openagents._tcp", "--json", "--backend", "embedded"])
            let host = try #require(jsonLines(resolved).first?["host"] as? String, "\(resolved)")
            #expect(host.hasSuffix(".local."))
            let (status, output) = try await helpers.connect(
                lab, ["--host", String(host.dropLast()), "--port", String(port), "--state-dir", client.directory],
                lines: [#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#])
            #expect(status == 0, "\(output)")
            let connected = try #require(jsonLines(output).first { $0["event"] as? String == "connected" }, "\(output)")
            #expect(connected["address"] as? String == "198.18.1.1")
            let missing = try await helpers.connect(lab, ["--host", "no-such-host.local", "--port", String(port), "--state-dir", client.directory], lines: [])
            #expect(missing.status == 1)
            #expect(missing.output.contains("no address for no-such-host.local"), "\(missing.output)")
        }
    }
}
}
