import Foundation
import Testing

/// `nearby serve` and `nearby connect` across the virtual LAN, with each other and with a
/// Python `websockets` + `ssl` peer nobody here wrote (Tools/lab.d/peers/ws_peer.py).
extension LabTestSuite {
@Suite("connections: nearby serve and connect, with each other and with Python websockets")
struct ConnectionLabTests {
    static var nearby: String { DiscoveryLabTests.nearby }
    static let repository = LiveCodecLabTests.repository
    static var python: String {
        ProcessInfo.processInfo.environment["NEARBY_LAB_PYTHON"] ?? repository.appendingPathComponent(".build-venv/bin/python").path
    }
    static var wsPeer: String { repository.appendingPathComponent("Tools/lab.d/peers/ws_peer.py").path }
    static let h1 = "198.18.1.1"

    /// A fresh state directory with a new identity named `name`; returns it and its peer ID.
    func identity(_ lab: Lab, _ name: String) async throws -> (directory: String, peerID: String) {
        let directory = try Lab.temporaryDirectory().path
        try await lab.run(["exec", "h1", "--", Self.nearby, "identity", "create", "--name", name, "--state-dir", directory])
        let shown = try await lab.run(["exec", "h1", "--", Self.nearby, "identity", "show", "--json", "--state-dir", directory])
        let peerID = try #require(jsonLines(shown).first?["peerID"] as? String)
        return (directory, peerID)
    }

    func pin(_ lab: Lab, _ peerID: String, in directory: String) async throws {
        try await lab.run(["exec", "h1", "--", Self.nearby, "trust", "pin", peerID, "--state-dir", directory])
    }

    /// Starts `nearby serve` in h1 and waits for its "listening" event.
    func serve(_ lab: Lab, _ arguments: [String], stdin: String? = nil) async throws -> (LabProcess, port: Int) {
        let command = ([Self.nearby, "serve"] + arguments + ["--json"]).map { "'\($0)'" }.joined(separator: " ")
        var input = "/dev/null"
        if let stdin {
            input = try Lab.temporaryDirectory().appendingPathComponent("stdin").path
            try stdin.write(toFile: input, atomically: true, encoding: .utf8)
        }
        // `exec`, so that the stop signal reaches nearby itself, not a shell that would leave it running.
        let process = try lab.start(["exec", "h1", "--", "sh", "-c", "exec 2>&1; exec \(command) < '\(input)'"])
        let line = try await process.waitForLine(containing: "\"listening\"", timeout: .seconds(20))
        let port = try #require(jsonLines(line).first?["port"] as? Int)
        return (process, port)
    }

    /// Runs `nearby connect` in h2 with `lines` on stdin; returns its exit status and output.
    func connect(_ lab: Lab, _ arguments: [String], lines: [String]) async throws -> (status: Int32, output: String) {
        let input = lines.joined(separator: "\n").replacingOccurrences(of: "'", with: "'\\''")
        let command = ([Self.nearby, "connect", "--json"] + arguments).map { "'\($0)'" }.joined(separator: " ")
        let process = try lab.start(["exec", "h2", "--", "sh", "-c", "printf '%s\\n' '\(input)' | \(command)"])
        let status = try await process.wait(timeout: .seconds(30))
        return (status, process.output + process.errorOutput)
    }

    @Test("serve advertises TXT id and pv; connect with the announced peer ID initializes, pings and echoes")
    func serveAndConnect() async throws {
        let lab = try Lab.require(hosts: 2)
        let server = try await identity(lab, "Build Box")
        let client = try await identity(lab, "Laptop")
        try await pin(lab, client.peerID, in: server.directory)
        try await pin(lab, server.peerID, in: client.directory)
        let (serving, port) = try await serve(lab, ["Build Box", "_openagents._tcp", "9411", "version=0.2.2", "--backend", "embedded", "--state-dir", server.directory])
        try await lab.withProcesses([serving]) {
            let resolved = try await lab.run(["exec", "h2", "--", Self.nearby, "resolve", "Build Box", "_openagents._tcp", "--json", "--backend", "embedded"])
            let txt = try #require(jsonLines(resolved).first?["txt"] as? [String: Any], "\(resolved)")
            #expect(txt["id"] as? String == server.peerID)
            #expect(txt["pv"] as? String == "0.2.2")
            #expect(txt["version"] as? String == "0.2.2")
            let (status, output) = try await connect(
                lab, ["--host", Self.h1, "--port", String(port), "--peer-id", server.peerID, "--state-dir", client.directory],
                lines: [#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#, #"{"jsonrpc":"2.0","id":2,"method":"echo","params":{"a":[1,2]}}"#])
            #expect(status == 0, "\(output)")
            let events = jsonLines(output)
            let connected = try #require(events.first { $0["event"] as? String == "connected" }, "\(output)")
            #expect(connected["peerID"] as? String == server.peerID)
            #expect(connected["role"] as? String == "connecting")
            let messages = events.compactMap { $0["message"] as? [String: Any] }
            #expect(messages.contains { $0["id"] as? Int == 1 && ($0["result"] as? [String: Any])?.isEmpty == true }, "\(output)")
            #expect(messages.contains { $0["id"] as? Int == 2 && ($0["result"] as? [String: Any])?["a"] as? [Int] == [1, 2] }, "\(output)")
            let served = try await serving.waitForLine(containing: "\"disconnected\"", timeout: .seconds(10))
            #expect(served.contains(client.peerID))
        }
    }

    @Test("a Python websockets client with a client certificate initializes, pings and echoes with nearby serve")
    func pythonClient() async throws {
        let lab = try Lab.require(hosts: 2)
        let server = try await identity(lab, "Build Box")
        let client = try await identity(lab, "Python Peer")
        try await pin(lab, client.peerID, in: server.directory)
        let (serving, port) = try await serve(lab, ["Build Box", "_openagents._tcp", "9412", "--no-advertise", "--state-dir", server.directory])
        try await lab.withProcesses([serving]) {
            let certificate = server.directory + "/server.crt"
            try await lab.run(["exec", "h1", "--", "sh", "-c", "'\(Self.nearby)' identity export --state-dir '\(server.directory)' > '\(certificate)'"])
            let output = try await lab.run([
                "exec", "h2", "--", Self.python, Self.wsPeer, "client", "wss://\(Self.h1):\(port)/", "--identity", client.directory + "/identity.pem",
                "--trust", certificate, "--count", "20",
            ])
            let answers = jsonLines(output)
            #expect(answers.count == 3, "\(output)")
            let initialize = try #require(answers.first?["answer"] as? [String: Any])
            let result = try #require(initialize["result"] as? [String: Any], "\(initialize)")
            #expect(result["protocol_version"] as? String == "0.2.2")
            #expect(((result["_meta"] as? [String: Any])?["peer_id"]) as? String == server.peerID)
            let connected = try await serving.waitForLine(containing: "\"connected\"", timeout: .seconds(10))
            #expect(connected.contains(client.peerID) && connected.contains("Python Peer"))
        }
    }

    @Test("nearby connect initializes with a Python websockets TLS server that requires client certificates")
    func pythonServer() async throws {
        let lab = try Lab.require(hosts: 2)
        let server = try await identity(lab, "Python Server")
        let client = try await identity(lab, "Laptop")
        try await pin(lab, server.peerID, in: client.directory)
        let certificate = client.directory + "/client.crt"
        try await lab.run(["exec", "h1", "--", "sh", "-c", "'\(Self.nearby)' identity export --state-dir '\(client.directory)' > '\(certificate)'"])
        let python = try lab.start([
            "exec", "h1", "--", Self.python, "-u", Self.wsPeer, "server", "9413", "--identity", server.directory + "/identity.pem", "--trust", certificate,
        ])
        try await lab.withProcesses([python]) {
            _ = try await python.waitForLine(containing: "listening", timeout: .seconds(20))
            let (status, output) = try await connect(
                lab, ["--host", Self.h1, "--port", "9413", "--peer-id", server.peerID, "--state-dir", client.directory],
                lines: [#"{"jsonrpc":"2.0","id":"p","method":"ping"}"#, #"{"jsonrpc":"2.0","id":"e","method":"echo","params":["x"]}"#])
            #expect(status == 0, "\(output)")
            let messages = jsonLines(output).compactMap { $0["message"] as? [String: Any] }
            #expect(messages.contains { $0["id"] as? String == "p" && $0["result"] != nil }, "\(output)")
            #expect(messages.contains { $0["id"] as? String == "e" && $0["result"] as? [String] == ["x"] }, "\(output)")
        }
    }

    @Test("nearby connect --insecure initializes with a plain ws:// Python server speaking 0.2.2, and warns")
    func insecureBridge() async throws {
        let lab = try Lab.require(hosts: 2)
        let client = try await identity(lab, "Laptop")
        let python = try lab.start(["exec", "h1", "--", Self.python, "-u", Self.wsPeer, "server", "9414", "--version", "0.2.2"])
        try await lab.withProcesses([python]) {
            _ = try await python.waitForLine(containing: "listening", timeout: .seconds(20))
            let (status, output) = try await connect(
                lab, ["--host", Self.h1, "--port", "9414", "--insecure", "--protocol-version", "0.2.9", "--state-dir", client.directory],
                lines: [#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#])
            #expect(status == 0, "\(output)")
            #expect(output.contains("warning: --insecure"))
            let connected = try #require(jsonLines(output).first { $0["event"] as? String == "connected" }, "\(output)")
            #expect(connected["protocolVersion"] as? String == "0.2.2")
            #expect(connected["peerID"] is NSNull)
        }
    }

    @Test("trust on first use pins a new server and says so; a server with that name and another key is refused")
    func trustOnFirstUse() async throws {
        let lab = try Lab.require(hosts: 2)
        let server = try await identity(lab, "Build Box")
        let impostor = try await identity(lab, "Build Box")
        let client = try await identity(lab, "Laptop")
        for directory in [server.directory, impostor.directory] { try await pin(lab, client.peerID, in: directory) }
        let (serving, port) = try await serve(lab, ["Build Box", "_openagents._tcp", "9415", "--no-advertise", "--state-dir", server.directory])
        try await lab.withProcesses([serving]) {
            let first = try await connect(
                lab, ["--host", Self.h1, "--port", String(port), "--trust-on-first-use", "--state-dir", client.directory], lines: [])
            #expect(first.status == 0, "\(first.output)")
            #expect(jsonLines(first.output).contains { $0["event"] as? String == "pinned" && $0["peerID"] as? String == server.peerID })
            let again = try await connect(lab, ["--host", Self.h1, "--port", String(port), "--pinned", "--state-dir", client.directory], lines: [])
            #expect(again.status == 0, "\(again.output)")
        }
        let (fake, fakePort) = try await serve(lab, ["Build Box", "_openagents._tcp", "9416", "--no-advertise", "--state-dir", impostor.directory])
        try await lab.withProcesses([fake]) {
            let refused = try await connect(
                lab, ["--host", Self.h1, "--port", String(fakePort), "--trust-on-first-use", "--state-dir", client.directory], lines: [])
            #expect(refused.status == 1, "\(refused.output)")
            #expect(refused.output.contains("key changed"), "\(refused.output)")
        }
    }

    @Test("a peer flooding serve whose stdout nobody reads is held back by TCP: serve's memory stays bounded, and what it prints is every message once, in order")
    func floodWithStdoutStalled() async throws {
        let lab = try Lab.require(hosts: 2)
        let server = try await identity(lab, "Build Box")
        let client = try await identity(lab, "Python Peer")
        try await pin(lab, client.peerID, in: server.directory)
        let certificate = server.directory + "/server.crt"
        try await lab.run(["exec", "h1", "--", "sh", "-c", "'\(Self.nearby)' identity export --state-dir '\(server.directory)' > '\(certificate)'"])
        // serve's stdout goes to a reader that stops reading for 6 s after "listening" (as a
        // stalled app would), then reads all and sums up.
        let reader = Self.repository.appendingPathComponent("Tools/lab.d/peers/slow_reader.py").path
        let command = [Self.nearby, "serve", "Build Box", "_openagents._tcp", "9419", "--no-advertise", "--json", "--state-dir", server.directory]
            .map { "'\($0)'" }.joined(separator: " ")
        let serving = try lab.start(["exec", "h1", "--", "sh", "-c", "\(command) < /dev/null | '\(Self.python)' '\(reader)' 6"])
        try await lab.withProcesses([serving]) {
            _ = try await serving.waitForLine(containing: "\"listening\"", timeout: .seconds(20))
            // 1 KiB notifications as fast as the connection takes them, for 4 s, then the
            // flooder aborts its connection.
            let flooded = try await lab.run([
                "exec", "h2", "--", Self.python, Self.wsPeer, "bench", "flood", "wss://\(Self.h1):9419/", "4", "--identity", client.directory + "/identity.pem",
                "--trust", certificate,
            ])
            let sent = try #require(jsonLines(flooded).first?["sent"] as? Int, "\(flooded)")
            let summary = try await serving.waitForLine(containing: "\"printed\"", timeout: .seconds(60))
            let result = try #require(jsonLines(summary).first, "\(summary)")
            let printed = try #require(result["printed"] as? Int)
            let growth = ((result["rssPeakKib"] as? Int) ?? 0) - ((result["rssBeforeKib"] as? Int) ?? 0)
            // Held back, the flooder gets out only what the kernel's socket buffers (the
            // receiver's tcp_rmem and the sender's tcp_wmem maximum, which autotuning may reach),
            // serve's queue (64) and its stdout buffer (1 MiB) hold. A serve that kept reading
            // would take about 100 MB a second, and grow by as much (the next check).
            let buffers = try await socketBufferCeiling(lab, receiver: "h1", sender: "h2")
            let ceiling = buffers / 1024 + 64 + 1024 + 1024
            #expect(sent < ceiling, "the flooder was not held back: \(sent) messages sent, more than the \(ceiling) the buffers hold")
            #expect((result["pid"] as? Int) != nil && growth < 16 * 1024, "serve grew by \(growth) KiB while its stdout was stalled")
            #expect(result["inOrder"] as? Bool == true, "\(summary)")
            #expect(printed > 0 && printed <= sent, "printed \(printed) of \(sent)")
        }
    }

    /// The most bytes TCP may buffer between a sender and a receiver: the receiver's largest
    /// receive buffer plus the sender's largest send buffer (the third fields of tcp_rmem and
    /// tcp_wmem, what autotuning grows up to).
    func socketBufferCeiling(_ lab: Lab, receiver: String, sender: String) async throws -> Int {
        func largest(_ host: String, _ key: String) async throws -> Int {
            let text = try await lab.run(["exec", host, "--", "cat", "/proc/sys/net/ipv4/\(key)"])
            return try #require(text.split(whereSeparator: \.isWhitespace).last.flatMap { Int($0) }, "\(key) in \(host): \(text)")
        }
        return try await largest(receiver, "tcp_rmem") + largest(sender, "tcp_wmem")
    }

    @Test("--accept ask: an accept line that was there before the question admits nobody (ignored, and said so); with stdin closed the invitation is declined")
    func askOnStdin() async throws {
        let lab = try Lab.require(hosts: 2)
        let server = try await identity(lab, "Build Box")
        let client = try await identity(lab, "Laptop")
        try await pin(lab, server.peerID, in: client.directory)
        // stdin is a file holding "accept": it is read before anyone connects.
        let (asking, port) = try await serve(
            lab, ["Build Box", "_openagents._tcp", "9417", "--no-advertise", "--accept", "ask", "--state-dir", server.directory], stdin: "accept\n")
        try await lab.withProcesses([asking]) {
            _ = try await asking.waitForLine(containing: "\"answerIgnored\"", timeout: .seconds(5))
            let refused = try await connect(lab, ["--host", Self.h1, "--port", String(port), "--state-dir", client.directory], lines: [#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#])
            #expect(refused.status == 1, "\(refused.output)")
            #expect(refused.output.contains("declined"), "\(refused.output)")
            let closed = try await asking.waitForLine(containing: "\"questionClosed\"", timeout: .seconds(5))
            #expect(closed.contains(client.peerID) && closed.contains("noInput"), "\(closed)")
        }
        let (closed, closedPort) = try await serve(
            lab, ["Build Box", "_openagents._tcp", "9418", "--no-advertise", "--accept", "ask", "--state-dir", server.directory])
        try await lab.withProcesses([closed]) {
            let declined = try await connect(lab, ["--host", Self.h1, "--port", String(closedPort), "--state-dir", client.directory], lines: [])
            #expect(declined.status == 1, "\(declined.output)")
            #expect(declined.output.contains("declined"), "\(declined.output)")
        }
    }
}
}
