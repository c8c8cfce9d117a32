import Foundation
import PeerTrust
import Testing

/// The broker across the virtual LAN: `serve --auto-invite` meshes, `connect TYPE --nearest`,
/// and each of DESIGN's broker rules with real processes, real mDNS and real TLS.
extension LabTestSuite {
@Suite("broker: auto-invite meshes, nearest peer, reconnects")
struct BrokerLabTests {
    static var nearby: String { DiscoveryLabTests.nearby }
    static let helpers = ConnectionLabTests()
    static let addresses = ["h1": "198.18.1.1", "h2": "198.18.1.2", "h3": "198.18.1.3", "h4": "198.18.1.4"]
    static let v6 = ["h1": "fd6e:6272:1::1", "h2": "fd6e:6272:1::2", "h3": "fd6e:6272:1::3", "h4": "fd6e:6272:1::4"]

    /// A peer's identity: its state directory and peer ID.
    struct Peer {
        var directory: String
        var id: String
        var peerID: PeerID
    }

    /// `count` fresh identities that all pin each other, ordered by peer ID (smallest first).
    func peers(_ lab: Lab, _ count: Int, pinEachOther: Bool = true) async throws -> [Peer] {
        var made: [Peer] = []
        for index in 0..<count {
            let (directory, id) = try await Self.helpers.identity(lab, "Peer \(index + 1)")
            made.append(Peer(directory: directory, id: id, peerID: try PeerID(parsing: id)))
        }
        if pinEachOther {
            for peer in made {
                for other in made where other.id != peer.id { try await Self.helpers.pin(lab, other.id, in: peer.directory) }
            }
        }
        return made.sorted { $0.peerID < $1.peerID }
    }

    /// Starts `nearby serve NAME _openagents._tcp PORT --auto-invite --json` on `host`.
    func serve(_ lab: Lab, _ host: String, _ peer: Peer, name: String, port: Int = 9500, extra: [String] = []) throws -> LabProcess {
        let arguments = [Self.nearby, "serve", name, "_openagents._tcp", String(port), "--auto-invite", "--host", "p-\(host)", "--backend", "embedded",
                         "--json", "--state-dir", peer.directory] + extra
        let command = arguments.map { "'\($0)'" }.joined(separator: " ")
        return try lab.start(["exec", host, "--", "sh", "-c", "exec 2>&1; exec \(command) < /dev/null"])
    }

    /// The JSON events a process printed with this "event".
    func events(_ process: LabProcess, _ kind: String) -> [[String: Any]] {
        jsonLines(process.output).filter { $0["event"] as? String == kind }
    }

    /// Waits until `process` printed at least `count` events of `kind`.
    func waitFor(_ process: LabProcess, _ kind: String, count: Int, timeout: Duration) async throws {
        let end = ContinuousClock.now + timeout
        while events(process, kind).count < count {
            guard ContinuousClock.now < end else {
                throw LabError("\(count) \"\(kind)\" events expected within \(timeout): \(process.output)\n\(process.errorOutput)")
            }
            guard process.isRunning else { throw LabError("the process ended: \(process.output)\n\(process.errorOutput)") }
            try await Task.sleep(for: .milliseconds(50))
        }
    }

    func firewall(_ lab: Lab, _ host: String, _ rules: [[String]]) async throws {
        for rule in rules { try await lab.run(["exec", host, "--"] + rule) }
    }

    @Test("3 peers with --auto-invite: exactly 3 connections, each initiated by the smaller ID, over 20 starts within a few ms of each other")
    func mesh() async throws {
        let lab = try Lab.require(hosts: 3)
        let peers = try await peers(lab, 3)
        let hosts = ["h1", "h2", "h3"]
        for round in 1...20 {
            let processes = try zip(hosts, peers).map { host, peer in try serve(lab, host, peer, name: "Mesh \(host)") }
            try await lab.withProcesses(processes) {
                for process in processes { try await waitFor(process, "connected", count: 2, timeout: .seconds(15)) }
                // Let any duplicate or late dial show itself before judging.
                try await Task.sleep(for: .milliseconds(800))
                for (process, me) in zip(processes, peers) {
                    let connected = events(process, "connected")
                    let remote = connected.compactMap { $0["peerID"] as? String }
                    #expect(connected.count == 2 && Set(remote).count == 2, "round \(round): \(process.output)")
                    #expect(!remote.contains(me.id))
                    for event in connected {
                        guard let other = (event["peerID"] as? String).flatMap({ PeerID($0) }), let initiator = event["initiator"] as? String else {
                            Issue.record("round \(round): a connected event without peer or initiator: \(event)")
                            continue
                        }
                        #expect(initiator == min(me.peerID, other).description, "round \(round): \(event)")
                    }
                    #expect(events(process, "rejected").isEmpty, "round \(round): \(process.output)")
                    #expect(events(process, "disconnected").isEmpty, "round \(round): \(process.output)")
                }
            }
        }
    }

    @Test("the smaller peer cannot reach the larger (a firewall): the larger dials after 3 s, and there is one connection")
    func fallback() async throws {
        let lab = try Lab.require(hosts: 2)
        let peers = try await peers(lab, 2)
        // h1 is the smaller; its TCP to h2's port 9501 is refused.
        let block: [[String]] = [
            ["iptables", "-I", "OUTPUT", "-p", "tcp", "--dport", "9501", "-j", "REJECT"],
            ["ip6tables", "-I", "OUTPUT", "-p", "tcp", "--dport", "9501", "-j", "REJECT"],
        ]
        try await firewall(lab, "h1", block)
        defer {
            Task {
                _ = try? await lab.run(["exec", "h1", "--", "iptables", "-D", "OUTPUT", "-p", "tcp", "--dport", "9501", "-j", "REJECT"])
                _ = try? await lab.run(["exec", "h1", "--", "ip6tables", "-D", "OUTPUT", "-p", "tcp", "--dport", "9501", "-j", "REJECT"])
            }
        }
        let start = ContinuousClock.now
        let smaller = try serve(lab, "h1", peers[0], name: "Small", port: 9502)
        let larger = try serve(lab, "h2", peers[1], name: "Large", port: 9501)
        try await lab.withProcesses([smaller, larger]) {
            try await waitFor(larger, "connected", count: 1, timeout: .seconds(15))
            let elapsed = ContinuousClock.now - start
            #expect(elapsed >= .seconds(3), "the larger dialed after \(elapsed), before its 3 s")
            try await waitFor(smaller, "connected", count: 1, timeout: .seconds(5))
            try await Task.sleep(for: .milliseconds(500))
            let made = events(larger, "connected")
            #expect(made.count == 1 && made.first?["initiator"] as? String == peers[1].id && made.first?["role"] as? String == "connecting", "\(larger.output)")
            #expect(events(smaller, "connected").count == 1, "\(smaller.output)")
        }
        try await lab.run(["exec", "h1", "--", "iptables", "-D", "OUTPUT", "-p", "tcp", "--dport", "9501", "-j", "REJECT"])
        try await lab.run(["exec", "h1", "--", "ip6tables", "-D", "OUTPUT", "-p", "tcp", "--dport", "9501", "-j", "REJECT"])
    }

    @Test("a peer killed with SIGKILL (its goodbye and FIN lost) and restarted is connected again by probe-and-replace, not refused as already connected")
    func killedAndRestarted() async throws {
        let lab = try Lab.require(hosts: 2)
        let peers = try await peers(lab, 2)
        let smaller = try serve(lab, "h1", peers[0], name: "Small", port: 9503)
        let first = try serve(lab, "h2", peers[1], name: "Large", port: 9504)
        try await lab.withProcesses([smaller, first]) {
            try await waitFor(smaller, "connected", count: 1, timeout: .seconds(15))
            // Nothing from h2 reaches h1 while it dies: h1 keeps believing in the old connection.
            let drop = [["iptables", "-I", "INPUT", "-s", Self.addresses["h2"] ?? "", "-p", "tcp", "-j", "DROP"],
                        ["ip6tables", "-I", "INPUT", "-s", Self.v6["h2"] ?? "", "-p", "tcp", "-j", "DROP"]]
            try await firewall(lab, "h1", drop)
            first.kill()
            _ = try await first.wait(timeout: .seconds(5))
            try await firewall(lab, "h1", drop.map { rule in rule.map { $0 == "-I" ? "-D" : $0 } })
            let restartedAt = ContinuousClock.now
            let second = try serve(lab, "h2", peers[1], name: "Large", port: 9504)
            try await lab.withProcesses([second]) {
                try await waitFor(smaller, "connected", count: 2, timeout: .seconds(15))
                let elapsed = ContinuousClock.now - restartedAt
                // The larger waits 3 s for an invitation, then dials; the old connection is probed (2 s at most).
                #expect(elapsed < .seconds(8), "reconnected only after \(elapsed)")
                try await waitFor(second, "connected", count: 1, timeout: .seconds(5))
                #expect(events(second, "rejected").isEmpty, "\(second.output)")
                #expect(!second.output.contains("already"), "\(second.output)")
            }
        }
    }

    @Test("connect --nearest: two of three servers 20 ms farther (a delaying relay): always the near one, in 20 runs; two equally near: the smaller ID whenever they measure as a tie (most runs), else the faster")
    func nearest() async throws {
        let lab = try Lab.require(hosts: 4)
        let peers = try await peers(lab, 4)
        let client = peers[3]
        let near = peers[1]
        // The two far servers listen on 9511 and are advertised at their relay's port 9512.
        var processes: [LabProcess] = [try serve(lab, "h1", near, name: "Near", port: 9510, extra: [])]
        for (host, peer) in [("h2", peers[0]), ("h3", peers[2])] {
            processes.append(try lab.start([
                "exec", host, "--", "sh", "-c",
                "exec 2>&1; exec '\(Self.nearby)' serve Far _openagents._tcp 9511 --no-advertise --json --state-dir '\(peer.directory)' < /dev/null",
            ]))
            processes.append(try lab.start(["exec", host, "--", ConnectionLabTests.python, "-u", Self.relay, "9512", "127.0.0.1", "9511", "--delay-ms", "10"]))
            processes.append(try lab.start([
                "exec", host, "--", Self.nearby, "advertise", "Far \(host)", "_openagents._tcp", "9512", "id=\(peer.id)", "pv=0.2.2", "--host", "far-\(host)",
                "--backend", "embedded",
            ]))
        }
        try await lab.withProcesses(processes) {
            _ = try await processes[0].waitForLine(containing: "listening", timeout: .seconds(20))
            for relay in [processes[2], processes[5]] { _ = try await relay.waitForLine(containing: "listening", timeout: .seconds(20)) }
            // The far servers' advertisements win their names (about a second of probing).
            try await Task.sleep(for: .seconds(2))
            for run in 1...20 {
                let (status, output) = try await connectNearest(lab, client)
                #expect(status == 0, "run \(run): \(output)")
                let connected = try #require(jsonLines(output).first { $0["event"] as? String == "connected" }, "run \(run): \(output)")
                #expect(connected["peerID"] as? String == near.id, "run \(run): \(connected)")
                let candidates = connected["candidates"] as? [[String: Any]] ?? []
                #expect(candidates.count == 3, "run \(run): \(connected)")
                for far in candidates where far["peerID"] as? String != near.id {
                    // Measured (20 ms through the relay), or not waited for once the near one was
                    // certain: then it was given the near RTT plus at least 5 ms.
                    let rtt = far["rttMs"] as? Double ?? far["rttExceedsMs"] as? Double ?? 0
                    #expect(rtt >= (far["rttMs"] is Double ? 15 : 5), "run \(run): \(far)")
                }
            }
        }
        // Two equally near servers (no relay): whenever their measured RTTs tie (within 10 % or
        // 1 ms), the smaller peer ID. On a loaded 2-core machine one server's three samples are
        // now and then all slowed by more than that (0.4 against 1.5 ms was seen): then the
        // faster one is right, by the same rule. The tie must have been met in most runs.
        let equal = [try serve(lab, "h1", peers[2], name: "Equal A", port: 9513), try serve(lab, "h2", peers[1], name: "Equal B", port: 9513)]
        let smaller = peers[1].id  // `peers` is in peer-ID order
        try await lab.withProcesses(equal) {
            for process in equal { _ = try await process.waitForLine(containing: "listening", timeout: .seconds(20)) }
            try await waitFor(equal[0], "connected", count: 1, timeout: .seconds(15))
            var tied = 0
            var late = 0
            for run in 1...20 {
                let (status, output) = try await connectNearest(lab, client)
                #expect(status == 0, "run \(run): \(output)")
                let connected = jsonLines(output).first { $0["event"] as? String == "connected" }
                let chosen = connected?["peerID"] as? String
                let rtts = (connected?["candidates"] as? [[String: Any]] ?? []).compactMap { candidate -> (id: String, rtt: Double)? in
                    guard let id = candidate["peerID"] as? String, let rtt = candidate["rttMs"] as? Double else { return nil }
                    return (id, rtt)
                }
                // One may be left unmeasured when it had not answered within the best RTT plus the
                // tie margin (at least 5 ms): then it is farther by the rule, and the measured one
                // must be chosen (a first probe now and then waits that long on a loaded machine).
                let exceeded = (connected?["candidates"] as? [[String: Any]] ?? []).compactMap { $0["rttExceedsMs"] as? Double }
                // Or not announced yet when gathering ended (its answer or resolution slowed by a
                // loaded machine past the window): the broker decides on those it has, as designed
                // for a verdict within 200 ms. Counted, and allowed in a few runs only.
                if rtts.count == 1, exceeded.isEmpty, (connected?["candidates"] as? [[String: Any]])?.count == 1, let only = rtts.first {
                    late += 1
                    #expect(chosen == only.id, "run \(run): the one gathered: \(String(describing: connected))")
                    continue
                }
                if rtts.count == 1, let only = rtts.first, let over = exceeded.first {
                    #expect(over >= only.rtt + max(only.rtt * 0.1, 1.0), "run \(run): given up too soon: \(String(describing: connected))")
                    #expect(chosen == only.id, "run \(run): the one that answered in time: \(String(describing: connected))")
                    continue
                }
                #expect(rtts.count == 2, "run \(run): \(String(describing: connected))")
                guard rtts.count == 2, let best = rtts.map(\.rtt).min() else { continue }
                let spread = abs(rtts[0].rtt - rtts[1].rtt)
                let margin = max(best * 0.1, 1.0)
                // The RTTs are printed to 0.1 ms: within that of the margin, either pick is right.
                if spread < margin - 0.1 {
                    tied += 1
                    #expect(chosen == smaller, "run \(run): a tie goes to the smaller ID: \(String(describing: connected))")
                } else if spread > margin + 0.1 {
                    #expect(chosen == rtts.min { $0.rtt < $1.rtt }?.id, "run \(run): not a tie, the faster: \(String(describing: connected))")
                }
            }
            #expect(tied >= 10, "only \(tied) of 20 runs measured the two equally near servers as a tie")
            #expect(late <= 3, "in \(late) of 20 runs one of two equally near servers was not gathered in time")
        }
    }

    static var relay: String { ConnectionLabTests.repository.appendingPathComponent("Tools/lab.d/peers/delay_relay.py").path }

    /// Runs `connect TYPE …` in h4, 1.1 s apart, as a person's are (`Tools/bench/broker
    /// --spacing 0.3` measures runs closer together).
    func connectNearest(_ lab: Lab, _ client: Peer, _ arguments: [String] = ["--nearest"]) async throws -> (Int32, String) {
        try await Task.sleep(for: .milliseconds(1100))
        let command = ([Self.nearby, "connect", "_openagents._tcp"] + arguments + ["--json", "--backend", "embedded", "--state-dir", client.directory])
            .map { "'\($0)'" }.joined(separator: " ")
        let process = try lab.start(["exec", "h4", "--", "sh", "-c", "echo '{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}' | \(command)"])
        let status = try await process.wait(timeout: .seconds(30))
        return (status, process.output + process.errorOutput)
    }

    @Test("a TXT id that is not the certificate's key is refused with the reason; an incompatible pv is skipped with the reason, never dialed")
    func wrongAnnouncements() async throws {
        let lab = try Lab.require(hosts: 4)
        let peers = try await peers(lab, 4)
        // h2 serves as peers[2] but advertises peers[1]'s ID; h3 advertises an incompatible version.
        let liar = try lab.start([
            "exec", "h2", "--", "sh", "-c",
            "exec 2>&1; exec '\(Self.nearby)' serve Liar _openagents._tcp 9520 --no-advertise --json --state-dir '\(peers[2].directory)' < /dev/null",
        ])
        let liarAd = try lab.start(["exec", "h2", "--", Self.nearby, "advertise", "Liar", "_openagents._tcp", "9520", "id=\(peers[1].id)", "pv=0.2.2", "--host", "liar", "--backend", "embedded"])
        let old = try lab.start(["exec", "h3", "--", Self.nearby, "advertise", "Old", "_openagents._tcp", "9521", "id=\(peers[3].id)", "pv=0.3.0", "--host", "old", "--backend", "embedded"])
        try await lab.withProcesses([liar, liarAd, old]) {
            try await Task.sleep(for: .seconds(2))
            let (status, output) = try await connectNearest(lab, peers[0], ["--peer", peers[1].id])
            #expect(status == 1, "\(output)")
            #expect(output.contains("peer ID mismatch"), "\(output)")
            let mesh = try serve(lab, "h1", peers[0], name: "Watcher", port: 9522)
            try await lab.withProcesses([mesh]) {
                try await waitFor(mesh, "skipped", count: 1, timeout: .seconds(10))
                let skipped = events(mesh, "skipped").first { $0["name"] as? String == "Old" }
                #expect((skipped?["reason"] as? String)?.contains("0.3.0") == true, "\(mesh.output)")
                try await Task.sleep(for: .seconds(1))
                #expect(!events(mesh, "dialFailed").contains { $0["peerID"] as? String == peers[3].id }, "\(mesh.output)")
            }
        }
    }

    @Test("reconnects: a restarted server is connected again within 2 s of its announcement; a goodbye stops redials; a crash-looping server gets at most 3 redials")
    func reconnects() async throws {
        let lab = try Lab.require(hosts: 2)
        let peers = try await peers(lab, 2)
        let client = try serve(lab, "h1", peers[0], name: "Client", port: 9530)
        try await lab.withProcesses([client]) {
            let server = try serve(lab, "h2", peers[1], name: "Server", port: 9531)
            try await waitFor(client, "connected", count: 1, timeout: .seconds(15))
            await server.stop()
            // Goodbye: no redials.
            try await Task.sleep(for: .seconds(4))
            #expect(events(client, "dialFailed").isEmpty, "\(client.output)")
            // Restarted: connected again within 2 s of its announcement ("listening" follows it).
            let restarted = try serve(lab, "h2", peers[1], name: "Server", port: 9531)
            _ = try await restarted.waitForLine(containing: "listening", timeout: .seconds(20))
            let announced = ContinuousClock.now
            try await waitFor(client, "connected", count: 2, timeout: .seconds(10))
            #expect(ContinuousClock.now - announced < .seconds(2), "reconnected \(ContinuousClock.now - announced) after the announcement")
            // Crash loop: killed (no goodbye) and restarted every 1.5 s for 30 s.
            restarted.kill()
            _ = try await restarted.wait(timeout: .seconds(5))
            let before = events(client, "connected").filter { $0["role"] as? String == "connecting" }.count + events(client, "dialFailed").count
            let loopEnd = ContinuousClock.now + .seconds(30)
            while ContinuousClock.now < loopEnd {
                let instance = try serve(lab, "h2", peers[1], name: "Server", port: 9531)
                try await Task.sleep(for: .milliseconds(1500))
                instance.kill()
                _ = try await instance.wait(timeout: .seconds(5))
            }
            let dials = events(client, "connected").filter { $0["role"] as? String == "connecting" }.count + events(client, "dialFailed").count - before
            #expect(dials <= 3, "\(dials) redials in 30 s: \(client.output)")
        }
    }

    @Test("the broker example (Documentation/Swift.md) runs to the end: it advertises, measures, connects to the nearest peer and pings it")
    func readmeExample() async throws {
        let lab = try Lab.require(hosts: 2)
        let peers = try await peers(lab, 2)
        let server = try serve(lab, "h1", peers[0], name: "Build Box", port: 9550)
        try await lab.withProcesses([server]) {
            _ = try await server.waitForLine(containing: "listening", timeout: .seconds(20))
            let example = URL(fileURLWithPath: Self.nearby).deletingLastPathComponent().appendingPathComponent("readme-broker").path
            let output = try await lab.run(["exec", "h2", "--", "env", "NEARBY_STATE_DIR=\(peers[1].directory)", example], timeout: .seconds(30))
            #expect(output.contains("measured: [\"Build Box"), "\(output)")
            #expect(output.contains("nearest: Peer ") && output.contains(" answers ping with {}"), "\(output)")
        }
    }

    @Test("README's front-door programs: advertise and browse end on SIGINT with their output written; nearest finds README's server and pings it; the server answers a pinned peer with its closure and turns a stranger away with its whole peer ID and the pin command")
    func frontDoorExamples() async throws {
        let lab = try Lab.require(hosts: 2)
        let folder = URL(fileURLWithPath: Self.nearby).deletingLastPathComponent()
        func example(_ name: String) -> String { folder.appendingPathComponent(name).path }
        // Each ends by itself on SIGINT (sent by timeout), exit status 0: --preserve-status. Their
        // stdout is a pipe, which C stdio (print) buffers: the advertiser's line by line (stdbuf),
        // so its line comes as printed; the browser's whole, so its lines come only if it exits
        // normally after the signal.
        let advertiser = try lab.start(["exec", "h1", "--", "timeout", "--preserve-status", "-s", "INT", "7", "stdbuf", "-oL", example("readme-advertise")])
        try await lab.withProcesses([advertiser]) {
            _ = try await advertiser.waitForLine(containing: "advertising as Build Box", timeout: .seconds(20))
            // SIGINT twice, 0.2 s apart, as `timeout` and terminals often deliver one (to the
            // process and to its group): the second must not kill it while it shuts down.
            let twice = "'\(example("readme-browse"))' & p=$!; sleep 3; kill -INT $p; sleep 0.2; kill -INT $p; wait $p"
            let browser = try lab.start(["exec", "h2", "--", "sh", "-c", twice])
            let status = try await browser.wait(timeout: .seconds(20))
            #expect(status == 0, "\(browser.output)\(browser.errorOutput)")
            // Written although the program was stopped by a signal, and resolved.
            #expect(browser.output.contains("Build Box [\"198.18.1.1\""), "\(browser.output)")
            #expect(browser.output.contains("9099 [\"version\": \"0.2.2\"]"), "\(browser.output)")
            #expect(try await advertiser.wait(timeout: .seconds(20)) == 0, "\(advertiser.output)\(advertiser.errorOutput)")
        }
        // README's server (readme-serve, port 9099) with Peer 1's identity: README's nearest
        // program finds it and pings it, a pinned peer's request reaches the closure, and a peer
        // nobody pinned is turned away with its whole ID and the command that lets it in.
        let peers = try await peers(lab, 2)
        let server = try lab.start([
            "exec", "h1", "--", "env", "NEARBY_STATE_DIR=\(peers[0].directory)", "timeout", "--preserve-status", "-s", "INT", "40", "stdbuf", "-oL",
            example("readme-serve"),
        ])
        try await lab.withProcesses([server]) {
            _ = try await server.waitForLine(containing: "serving as Build Box on port 9099; peers pin \(peers[0].id)", timeout: .seconds(20))
            let output = try await lab.run(["exec", "h2", "--", "env", "NEARBY_STATE_DIR=\(peers[1].directory)", example("readme-nearest")], timeout: .seconds(30))
            #expect(output.contains("nearest: Build Box, ") && output.contains(" ms away"), "\(output)")
            #expect(output.contains("ping: {}"), "\(output)")
            _ = try await server.waitForLine(containing: "connected: Peer ", timeout: .seconds(5))
            let hello = try await lab.run(["exec", "h2", "--", "sh", "-c",
                "echo '{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"hello\"}' | '\(Self.nearby)' connect --host 198.18.1.1 --port 9099 --state-dir '\(peers[1].directory)'"],
                timeout: .seconds(30))
            #expect(hello.contains("\"greeting\":\"hello, Peer "), "\(hello)")
            let stranger = try Lab.temporaryDirectory()
            defer { try? FileManager.default.removeItem(at: stranger) }
            let refused = try lab.start(["exec", "h3", "--", Self.nearby, "connect", "--host", "198.18.1.1", "--port", "9099", "--trust-on-first-use", "--state-dir", stranger.path])
            _ = try await refused.wait(timeout: .seconds(30))
            let strangerID = try await lab.run(["exec", "h3", "--", Self.nearby, "identity", "show", "--id", "--state-dir", stranger.path])
                .trimmingCharacters(in: .whitespacesAndNewlines)
            let line = try await server.waitForLine(containing: "turned away 198.18.1.3", timeout: .seconds(10))
            #expect(line.contains("(peer ID \(strangerID))") && line.contains("nearby trust pin \(strangerID)"), "\(line)")
            server.signal(SIGINT)
            #expect(try await server.wait(timeout: .seconds(15)) == 0, "\(server.output)\(server.errorOutput)")
        }
    }

    @Test("interop: connect TYPE --peer ID finds a Python websockets TLS server advertised by python-zeroconf with TXT id and pv")
    func pythonPeer() async throws {
        let lab = try Lab.require(hosts: 3)
        let peers = try await peers(lab, 2, pinEachOther: true)
        let (server, client) = (peers[0], peers[1])
        let certificate = client.directory + "/client.crt"
        try await lab.run(["exec", "h1", "--", "sh", "-c", "'\(Self.nearby)' identity export --state-dir '\(client.directory)' > '\(certificate)'"])
        let python = try lab.start([
            "exec", "h2", "--", ConnectionLabTests.python, "-u", ConnectionLabTests.wsPeer, "server", "9540", "--identity", server.directory + "/identity.pem",
            "--trust", certificate,
        ])
        let advertised = try lab.start(["zeroconf", "h2", "--", "register", "Python Box", "_openagents._tcp", "9540", "id=\(server.id)", "pv=0.2.2"])
        try await lab.withProcesses([python, advertised]) {
            _ = try await python.waitForLine(containing: "listening", timeout: .seconds(20))
            _ = try await advertised.waitForLine(containing: "registered", timeout: .seconds(20))
            let command = [Self.nearby, "connect", "_openagents._tcp", "--peer", server.id, "--json", "--backend", "embedded", "--state-dir", client.directory]
                .map { "'\($0)'" }.joined(separator: " ")
            let process = try lab.start(["exec", "h3", "--", "sh", "-c", "echo '{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"ping\"}' | \(command)"])
            let status = try await process.wait(timeout: .seconds(30))
            #expect(status == 0, "\(process.output)\(process.errorOutput)")
            let lines = jsonLines(process.output)
            #expect(lines.contains { $0["event"] as? String == "connected" && $0["peerID"] as? String == server.id }, "\(process.output)")
            #expect(lines.contains { ($0["message"] as? [String: Any])?["id"] as? Int == 7 }, "\(process.output)")
        }
    }

    @Test("serve runs as a service group: on SIGTERM its connections close with 1001, its service says goodbye, and --auto-invite prints its statistics first; exit 0")
    func gracefulShutdown() async throws {
        let lab = try Lab.require(hosts: 3)
        let peers = try await peers(lab, 2)
        let browser = try lab.start(["exec", "h3", "--", Self.nearby, "browse", "_openagents._tcp", "--json", "--backend", "embedded", "--timeout", "40"])
        try await lab.withProcesses([browser]) {
            // A plain server and a client that keeps its stdin open.
            let server = try lab.start(["exec", "h1", "--", "sh", "-c",
                "exec 2>&1; exec '\(Self.nearby)' serve 'Plain Box' _openagents._tcp 9560 --host p-h1 --backend embedded --json --state-dir '\(peers[0].directory)' < /dev/null"])
            _ = try await server.waitForLine(containing: "listening", timeout: .seconds(20))
            let client = try lab.start(["exec", "h2", "--", "sh", "-c",
                "sleep 30 | '\(Self.nearby)' connect --host 198.18.1.1 --port 9560 --json --state-dir '\(peers[1].directory)'"])
            try await lab.withProcesses([server, client]) {
                _ = try await browser.waitForLine(containing: "\"Plain Box\"", timeout: .seconds(15))
                _ = try await client.waitForLine(containing: "\"connected\"", timeout: .seconds(15))
                await server.stop()
                #expect(server.exitStatus == 0, "\(server.output)")
                let line = try await client.waitForLine(containing: "\"disconnected\"", timeout: .seconds(5))
                #expect(line.contains("1001") || line.contains("shutting down"), "\(line)")
                _ = try await browser.waitForLine(containing: "\"lost\"", timeout: .seconds(3))
            }
            // Two auto-invite peers: the one stopped prints its statistics, and the other sees it go.
            let first = try serve(lab, "h1", peers[0], name: "Mesh A", port: 9561)
            let second = try serve(lab, "h2", peers[1], name: "Mesh B", port: 9561)
            try await lab.withProcesses([first, second]) {
                try await waitFor(first, "connected", count: 1, timeout: .seconds(15))
                try await waitFor(second, "connected", count: 1, timeout: .seconds(15))
                await first.stop()
                #expect(first.exitStatus == 0, "\(first.output)")
                let statistics = try #require(events(first, "statistics").first, "\(first.output)")
                #expect((statistics["dialsSucceeded"] as? Int ?? 0) + (statistics["accepted"] as? Int ?? 0) == 1, "\(statistics)")
                // The statistics come before the connection is closed (the report shuts down first).
                let lines = first.output.split(separator: "\n")
                let reported = lines.firstIndex { $0.contains("\"statistics\"") }
                let closed = lines.firstIndex { $0.contains("\"disconnected\"") }
                #expect(reported != nil && (closed == nil || reported! < closed!), "\(first.output)")
                try await waitFor(second, "disconnected", count: 1, timeout: .seconds(5))
                let gone = try #require(events(second, "disconnected").first, "\(second.output)")
                #expect(gone["reason"] as? String != nil, "\(gone)")
                // Why, as a program reads it: Mesh A's broker closed with 1001 (going away).
                #expect(gone["end"] as? String == "closed" && gone["closeCode"] as? Int == 1001 && gone["byPeer"] as? Bool == true, "\(gone)")
                try await Task.sleep(for: .seconds(2))
                #expect(jsonLines(browser.output).contains { $0["event"] as? String == "lost" && $0["name"] as? String == "Mesh A" }, "\(browser.output)")
            }
        }
    }
}
}
