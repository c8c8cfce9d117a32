import Foundation
import Testing

/// Who gets in, as a person at a terminal meets it: `nearby serve --accept ask` on a real pty
/// (through `script`), answered by lines typed into it, and `serve --pairing` under trusted.
extension LabTestSuite {
@Suite("admission: questions on a terminal, and pairing under --accept trusted")
struct AdmissionLabTests {
    static var nearby: String { DiscoveryLabTests.nearby }
    let helpers = ConnectionLabTests()
    let pairs = PairingLabTests()

    /// `nearby serve ARGS` in h1 on a pseudo-terminal (`script` makes one), typed into through `pipe`.
    func serveOnTerminal(_ lab: Lab, _ arguments: [String], typing pipe: StdinPipe) throws -> LabProcess {
        let inner = ([Self.nearby, "serve"] + arguments).map { "'\($0)'" }.joined(separator: " ")
        return try lab.start(["exec", "h1", "--", "sh", "-c", "exec script -qfec \"\(inner)\" /dev/null < '\(pipe.path)'"])
    }

    /// `nearby connect --json` in `from` (default h2) to `host` (default h1) with a ping,
    /// started and left running.
    func startConnect(
        _ lab: Lab, port: Int, state: String, from: String = "h2", host: String = ConnectionLabTests.h1, options: [String] = []
    ) throws -> LabProcess {
        let command = ([Self.nearby, "connect", "--json", "--host", host, "--port", String(port), "--state-dir", state] + options)
            .map { "'\($0)'" }.joined(separator: " ")
        return try lab.start(["exec", from, "--", "sh", "-c", #"printf '%s\n' '{"jsonrpc":"2.0","id":1,"method":"ping"}' | "# + command])
    }

    /// The number of times `text` occurs in `output`.
    func count(_ text: String, in output: String) -> Int { output.components(separatedBy: text).count - 1 }

    @Test("on a terminal: a y typed ahead admits nobody; strangers are asked one at a time by name; a late answer answers nothing; an accepted peer is not asked again")
    func terminal() async throws {
        let lab = try Lab.require(hosts: 2)
        let server = try await helpers.identity(lab, "Build Box")
        var strangers: [(directory: String, peerID: String)] = []
        for name in ["Stranger One", "Stranger Two", "Stranger Three"] {
            let stranger = try await helpers.identity(lab, name)
            try await helpers.pin(lab, server.peerID, in: stranger.directory)
            strangers.append(stranger)
        }
        let keys = try StdinPipe()
        let serving = try serveOnTerminal(
            lab, ["Build Box", "_openagents._tcp", "9431", "--no-advertise", "--accept", "ask", "--answer-within", "4", "--state-dir", server.directory],
            typing: keys)
        try await lab.withProcesses([serving]) {
            _ = try await serving.waitForLine(containing: "Listening on port 9431", timeout: .seconds(20))
            // Typed ahead, while nothing is asked: ignored, and said so.
            keys.send("y")
            _ = try await serving.waitForLine(containing: "nothing was being asked", timeout: .seconds(5))

            // A stranger: asked by name, not admitted by the y typed before; waits, and is told why.
            let first = try startConnect(lab, port: 9431, state: strangers[0].directory)
            let question = try await serving.waitForLine(containing: "Question 1:", timeout: .seconds(10))
            #expect(question.contains("\"Stranger One\"") && question.contains(strangers[0].peerID) && question.contains("not trusted"), "\(question)")
            _ = try await first.waitForLine(containing: "\"waiting\"", timeout: .seconds(5))
            try await Task.sleep(for: .milliseconds(300))  // a person reads the question
            keys.send("y")
            #expect(try await first.wait(timeout: .seconds(10)) == 0, "\(first.output)\(first.errorOutput)")
            #expect(first.output.contains("\"connected\"") && first.output.contains(#""result":{}"#), "\(first.output)")

            // Two strangers at once: one question at a time. The first gets y; the second
            // times out, and a y typed after that answers nothing.
            let second = try startConnect(lab, port: 9431, state: strangers[1].directory)
            let third = try startConnect(lab, port: 9431, state: strangers[2].directory)
            let asked = try await serving.waitForLine(containing: "Question 2:", timeout: .seconds(10))
            try await Task.sleep(for: .milliseconds(300))
            keys.send("y")
            _ = try await serving.waitForLine(containing: "Question 3:", timeout: .seconds(10))
            _ = try await serving.waitForLine(containing: "no answer to question 3 in time", timeout: .seconds(10))
            keys.send("y")
            _ = try await serving.waitForLine(containing: "ignored \"y\": nothing was being asked", timeout: .seconds(5))
            let (admitted, declined) = asked.contains("Stranger Two") ? (second, third) : (third, second)
            #expect(try await admitted.wait(timeout: .seconds(10)) == 0, "\(admitted.output)\(admitted.errorOutput)")
            #expect(try await declined.wait(timeout: .seconds(10)) == 1, "\(declined.output)\(declined.errorOutput)")
            #expect(declined.output.contains("nobody accepted within 4 s"), "\(declined.output)")

            // Accepted once: the next connection gets in without a question.
            let again = try startConnect(lab, port: 9431, state: strangers[0].directory)
            #expect(try await again.wait(timeout: .seconds(10)) == 0, "\(again.output)\(again.errorOutput)")
            #expect(!serving.output.contains("Question 4:"), "\(serving.output)")
            #expect(count("Question ", in: serving.output) == 3, "\(serving.output)")
        }
    }

    @Test("serve --pairing under --accept trusted: a stranger is told to pair first, pairs, and then gets in without a restart")
    func pairingUnderTrusted() async throws {
        let lab = try Lab.require(hosts: 2)
        let server = try await helpers.identity(lab, "Build Box")
        let client = try await helpers.identity(lab, "Laptop")
        try await helpers.pin(lab, server.peerID, in: client.directory)
        let serveInput = try StdinPipe()
        let serving = try pairs.start(
            lab, "h1", ["serve", "Build Box", "_openagents._tcp", "9432", "--no-advertise", "--pairing", "--state-dir", server.directory],
            stdin: serveInput)
        try await lab.withProcesses([serving]) {
            _ = try await serving.waitForLine(containing: "\"listening\"", timeout: .seconds(20))
            let before = try startConnect(lab, port: 9432, state: client.directory)
            #expect(try await before.wait(timeout: .seconds(10)) == 1)
            #expect(before.output.contains("pair with it first"), "\(before.output)")

            let pairInput = try StdinPipe()
            let pairing = try pairs.start(lab, "h2", ["pair", "--host", ConnectionLabTests.h1, "--port", "9432", "--state-dir", client.directory], stdin: pairInput)
            try await lab.withProcesses([pairing]) {
                let serverCode = try await pairs.code(serving)
                let clientCode = try await pairs.code(pairing)
                #expect(serverCode == clientCode)
                serveInput.send("accept")
                pairInput.send("accept")
                #expect(try await pairing.wait(timeout: .seconds(20)) == 0, "\(pairing.output)")
                _ = try await serving.waitForLine(containing: "\"pinned\"", timeout: .seconds(10))
            }
            let after = try startConnect(lab, port: 9432, state: client.directory)
            #expect(try await after.wait(timeout: .seconds(10)) == 0, "\(after.output)\(after.errorOutput)")
            #expect(after.output.contains(#""result":{}"#), "\(after.output)")
        }
    }

    @Test("strangers from 20 addresses hold idle and half-sent connections and fail TLS in a loop: the pinned peer gets in every time, the places stay bounded, and serve prints a summary, not one line each")
    func strangers() async throws {
        let lab = try Lab.require(hosts: 3)
        let server = try await helpers.identity(lab, "Pinned Box")
        let client = try await helpers.identity(lab, "Laptop")
        let stranger = try await helpers.identity(lab, "Stranger")
        try await helpers.pin(lab, client.peerID, in: server.directory)
        try await helpers.pin(lab, server.peerID, in: client.directory)
        let sources = (50..<70).map { "198.18.1.\($0)" }
        for address in sources { try await lab.run(["exec", "h2", "--", "ip", "addr", "add", "\(address)/32", "dev", "lan1"]) }
        do {
            try await strangersAttack(lab, server: server.directory, client: client.directory, stranger: stranger.directory)
        } catch {
            for address in sources { _ = try? await lab.run(["exec", "h2", "--", "ip", "addr", "del", "\(address)/32", "dev", "lan1"]) }
            throw error
        }
        for address in sources { try await lab.run(["exec", "h2", "--", "ip", "addr", "del", "\(address)/32", "dev", "lan1"]) }
    }

    private func strangersAttack(_ lab: Lab, server: String, client: String, stranger: String) async throws {
        let serving = try pairs.start(
            lab, "h1", ["serve", "Pinned Box", "_openagents._tcp", "9440", "--no-advertise", "--max-setting-up", "64", "--state-dir", server],
            stdin: try StdinPipe())
        try await lab.withProcesses([serving]) {
            _ = try await serving.waitForLine(containing: "\"listening\"", timeout: .seconds(20))
            let helper = ConnectionLabTests.repository.appendingPathComponent("Tools/bench/helpers/strangers.py").path
            // 400 idle and 100 half-sent connections (20 addresses, 25 each: under the per-source
            // share, so the 64 places are what holds them), re-opened as they are closed, and one
            // loop of TLS handshakes with a certificate the server has not pinned.
            let attack = try lab.start([
                "exec", "h2", "--", "sh", "-c", #"ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)"; exec "$@""#, "sh",
                ConnectionLabTests.python, helper, "attack", "--host", ConnectionLabTests.h1, "--port", "9440", "--kind", "tls", "--seconds", "12",
                "--idle", "400", "--half", "100", "--loops", "1", "--sources", "198.18.1.50-198.18.1.69", "--half-bytes", "64",
                "--cert", "\(stranger)/identity.pem",
            ])
            try await lab.withProcesses([attack]) {
                try await Task.sleep(for: .seconds(3))
                for _ in 0..<3 {
                    let peer = try startConnect(lab, port: 9440, state: client, from: "h3", options: ["--timeout", "5"])
                    #expect(try await peer.wait(timeout: .seconds(20)) == 0, "the pinned peer was kept out: \(peer.output)\(peer.errorOutput)")
                    #expect(peer.output.contains(#""result":{}"#), "\(peer.output)")
                    try await Task.sleep(for: .seconds(1))
                }
                #expect(try await attack.wait(timeout: .seconds(40)) == 0, "\(attack.errorOutput)")
                let report = try #require(jsonLines(attack.output).first, "\(attack.output)")
                #expect((report["opened_total"] as? Int ?? 0) > 600, "the strangers opened too few connections to say anything: \(report)")
            }
            // The summary comes at the end of its 10 s interval.
            let line = try await serving.waitForLine(containing: "\"strangers\"", timeout: .seconds(15))
            let summary = try #require(jsonLines(line).first)
            #expect((summary["turnedAway"] as? Int ?? 0) > 100, "\(line)")
            #expect((summary["peakSettingUp"] as? Int ?? 0) <= 64, "\(line)")
            #expect((summary["madeRoom"] as? Int ?? 0) > 0, "\(line)")
            let events = jsonLines(serving.output)
            let rejected = events.filter { $0["event"] as? String == "rejected" }.count
            let summaries = events.filter { $0["event"] as? String == "strangers" }.count
            // 5 one by one per 10 s interval at most: the attack spans two or three intervals.
            #expect(rejected <= 5 * (summaries + 1), "\(rejected) rejections printed one by one, \(summaries) summaries")
        }
    }

    @Test("connect TYPE --name through the broker waits while a person decides, past its own --timeout")
    func brokerWaits() async throws {
        let lab = try Lab.require(hosts: 2)
        let server = try await helpers.identity(lab, "Asking Box")
        let client = try await helpers.identity(lab, "Laptop")
        try await helpers.pin(lab, server.peerID, in: client.directory)
        let answers = try StdinPipe()
        let serving = try pairs.start(
            lab, "h1", ["serve", "Asking Box", "_openagents._tcp", "9433", "--accept", "ask", "--answer-within", "10", "--host", "asking-box",
                        "--state-dir", server.directory], stdin: answers)
        try await lab.withProcesses([serving]) {
            _ = try await serving.waitForLine(containing: "\"listening\"", timeout: .seconds(20))
            let command = [Self.nearby, "connect", "_openagents._tcp", "--name", "Asking Box", "--timeout", "2", "--json", "--state-dir", client.directory]
                .map { "'\($0)'" }.joined(separator: " ")
            let connecting = try lab.start(["exec", "h2", "--", "sh", "-c", #"printf '%s\n' '{"jsonrpc":"2.0","id":1,"method":"ping"}' | "# + command])
            _ = try await serving.waitForLine(containing: "\"invitation\"", timeout: .seconds(10))
            _ = try await connecting.waitForLine(containing: "\"waiting\"", timeout: .seconds(5))
            // Longer than connect's --timeout 2: the answer still gets through.
            try await Task.sleep(for: .seconds(3))
            answers.send("accept")
            #expect(try await connecting.wait(timeout: .seconds(15)) == 0, "\(connecting.output)\(connecting.errorOutput)")
            #expect(connecting.output.contains(#""result":{}"#), "\(connecting.output)")
        }
    }
}
}