import Foundation
import Testing

/// The embedded engine in situations of its own: two nearby advertisers, sharing a host with avahi-daemon.
/// (What both backends do alike is in BackendLabTests.)
extension LabTestSuite {
@Suite("the embedded engine: two nearby advertisers, a host shared with avahi-daemon")
struct DiscoveryLabTests {
    /// The nearby binary Tools/test built (NEARBY_BIN), else the debug build next to the tests.
    static var nearby: String {
        if let path = ProcessInfo.processInfo.environment["NEARBY_BIN"] { return path }
        return LabTestSuite.LiveCodecLabTests.repository.appendingPathComponent(".build/debug/nearby").path
    }

    func advertise(_ lab: Lab, in host: String, _ arguments: [String]) async throws -> (LabProcess, [String: Any]) {
        let process = try lab.start(["exec", host, "--", Self.nearby, "advertise", "--json"] + arguments)
        let line = try await process.waitForLine(containing: "\"advertising\"", timeout: .seconds(10))
        let object = try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any] ?? [:]
        return (process, object)
    }

    @Test("two nearby advertisers with one name: one keeps it, the other is renamed, both stay visible")
    func nearbyConflict() async throws {
        let lab = try Lab.require(hosts: 3)
        let first = try lab.start(["exec", "h1", "--", Self.nearby, "advertise", "--json", "--host", "c1", "Same Name", "_openagents._tcp", "9301"])
        let second = try lab.start(["exec", "h2", "--", Self.nearby, "advertise", "--json", "--host", "c2", "Same Name", "_openagents._tcp", "9302"])
        try await lab.withProcesses([first, second]) {
            let a = try await first.waitForLine(containing: "\"advertising\"", timeout: .seconds(15))
            let b = try await second.waitForLine(containing: "\"advertising\"", timeout: .seconds(15))
            let names = Set([a, b].compactMap { (jsonLines($0).first?["name"] as? String) })
            #expect(names == ["Same Name", "Same Name (2)"])
            #expect([a, b].filter { $0.contains("\"requested\":\"Same Name\"") }.count == 1)
            let output = try await lab.run(["exec", "h3", "--", Self.nearby, "browse", "_openagents._tcp", "--json", "--timeout", "3"], timeout: .seconds(15))
            let seen = Set(jsonLines(output).compactMap { $0["event"] as? String == "found" ? $0["name"] as? String : nil })
            #expect(seen == ["Same Name", "Same Name (2)"])
        }
    }

    @Test("nearby and avahi-daemon on one host, with one host name: both keep working, nobody renames")
    func coexistence() async throws {
        let lab = try Lab.require(hosts: 3)
        let hostLabel = "\(lab.name)-h1"  // the name the lab's avahi-daemon in h1 uses
        try await lab.withAvahi(in: ["h1", "h2"]) {
            let publisher = try lab.start(["avahi", "exec", "h1", "--", "avahi-publish", "-s", "Avahi Side", "_openagents._tcp", "9601"])
            let (advertiser, started) = try await advertise(lab, in: "h1", ["--host", hostLabel, "Nearby Side", "_openagents._tcp", "9602"])
            try await lab.withProcesses([publisher, advertiser]) {
                #expect(started["name"] as? String == "Nearby Side")
                try await Task.sleep(for: .seconds(3))
                // From another host, avahi resolves both, on the same unrenamed host name.
                let browse = try await lab.run(["avahi", "exec", "h2", "--", "timeout", "8", "avahi-browse", "-rpt", "_openagents._tcp"], timeout: .seconds(20))
                let resolved = browse.split(separator: "\n").filter { $0.hasPrefix("=;lan1;IPv4;") }
                #expect(resolved.contains { $0.contains(";Avahi\\032Side;") && $0.contains(";\(hostLabel).local;198.18.1.1;9601;") }, "\(browse)")
                #expect(resolved.contains { $0.contains(";Nearby\\032Side;") && $0.contains(";\(hostLabel).local;198.18.1.1;9602;") }, "\(browse)")
                // avahi-daemon in h1 did not have to give up its host name.
                let state = try await lab.run(["avahi", "exec", "h1", "--", "avahi-resolve", "-n", "\(hostLabel).local"], timeout: .seconds(15))
                #expect(state.contains("198.18.1.1") || state.contains("fd6e:6272:1::1"))
                #expect(!advertiser.output.contains("renamed"))
            }
        }
    }
}
}

extension LabTestSuite {
@Suite("nearby browse: changes and failures")
struct BrowseChangeLabTests {
    var nearby: String { LabTestSuite.DiscoveryLabTests.nearby }

    @Test("a SIGKILLed advertiser is reported lost by a resolving browser before its TTL runs out")
    func killedAdvertiser() async throws {
        let lab = try Lab.require(hosts: 3)
        let browser = try lab.start(["exec", "h2", "--", nearby, "browse", "_openagents._tcp", "--resolve", "--json", "--timeout", "30"])
        let advertiser = try lab.start(["exec", "h1", "--", nearby, "advertise", "--json", "--host", "doomed", "--ttl", "8", "Doomed Box", "_openagents._tcp", "9702"])
        try await lab.withProcesses([browser, advertiser]) {
            _ = try await browser.waitForLine(containing: "\"Doomed Box\"", timeout: .seconds(10))
            let killed = ContinuousClock.now
            advertiser.kill()  // SIGKILL: no goodbye
            _ = try await browser.waitForLine(containing: "\"lost\"", timeout: .seconds(12))
            // Failure detection or, at the latest, the 8 s TTL.
            #expect(ContinuousClock.now - killed <= .seconds(10))
        }
    }
}
}

extension LabTestSuite {
@Suite("nearby: IPv6 only, changing interfaces, two LANs")
struct NetworkShapeLabTests {
    var nearby: String { LabTestSuite.DiscoveryLabTests.nearby }

    @Test("IPv6 only: with no IPv4 on either host, advertise and resolve still work")
    func ipv6Only() async throws {
        let lab = try Lab.require(hosts: 3)
        for host in ["h1", "h2"] {
            try await lab.run(["exec", host, "--", "ip", "-4", "addr", "flush", "dev", "lan1"])
        }
        do {
            let advertiser = try lab.start(["exec", "h1", "--", nearby, "advertise", "--json", "--host", "six", "Six Box", "_openagents._tcp", "9803"])
            try await lab.withProcesses([advertiser]) {
                _ = try await advertiser.waitForLine(containing: "\"advertising\"", timeout: .seconds(10))
                let output = try await lab.run(["exec", "h2", "--", nearby, "resolve", "Six Box", "_openagents._tcp", "--json"], timeout: .seconds(15))
                let resolved = try #require(jsonLines(output).first)
                let addresses = resolved["addresses"] as? [String] ?? []
                #expect(addresses.contains("fd6e:6272:1::1"))
                #expect(!addresses.contains { $0.contains(".") })
                #expect(resolved["port"] as? Int == 9803)
            }
        } catch {
            try await restoreIPv4(lab)
            throw error
        }
        try await restoreIPv4(lab)
    }

    private func restoreIPv4(_ lab: Lab) async throws {
        for (host, address) in [("h1", "198.18.1.1/24"), ("h2", "198.18.1.2/24")] {
            try await lab.run(["exec", host, "--", "ip", "addr", "add", address, "dev", "lan1"])
            try await lab.restoreRoutes(host)
        }
    }

    @Test("under a flood of hostile packets and valid queries on both families, every resolve during and after it is answered, over IPv4 and over IPv6, and the bad packets are counted")
    func flood() async throws {
        let lab = try Lab.require(hosts: 4)
        // One resolver per family, so that neither can stand in for the other: h3 has IPv6 only
        // and asks for multicast replies only (another socket holds port 5353 there, as
        // avahi-daemon's would, §15.1), so only h1's IPv6 multicast answers can reach it; h4
        // has IPv4 only.
        try await lab.run(["exec", "h3", "--", "ip", "-4", "addr", "flush", "dev", "lan1"])
        do {
            try await lab.run(["shape", "h4", "ipv6", "off"])
            try await floodAndResolve(lab)
        } catch {
            try? await restoreFloodHosts(lab)
            throw error
        }
        try await restoreFloodHosts(lab)
    }

    private func restoreFloodHosts(_ lab: Lab) async throws {
        try await lab.run(["exec", "h3", "--", "ip", "addr", "replace", "198.18.1.3/24", "dev", "lan1"])
        try await lab.restoreRoutes("h3")
        try await lab.run(["shape", "h4", "ipv6", "on"])
    }

    /// `nearby resolve "Flood Box"` in `host`: whether it answered with the port and `address`,
    /// and what it said (a miss is reported, not thrown, so every resolve of a run is judged).
    private func resolveFloodBox(_ lab: Lab, in host: String, expecting address: String) async throws -> (answered: Bool, output: String) {
        let started = ContinuousClock.now
        let process = try lab.start(
            ["exec", host, "--", nearby, "resolve", "Flood Box", "_openagents._tcp", "--backend", "embedded", "--timeout", "3", "--json"])
        let status = try await process.wait(timeout: .seconds(15))
        let output = process.output
        let answered = status == 0 && output.contains("\"port\":9731") && output.contains(address)
        return (answered, "\(host) exited \(status) after \(ContinuousClock.now - started): \(output) \(process.errorOutput)")
    }

    private func floodAndResolve(_ lab: Lab) async throws {
        let sender = LabTestSuite.LiveCodecLabTests.repository.appendingPathComponent("Tools/bench/helpers/flood_sender.py").path
        let holdPort = """
            import signal, socket
            s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
            s.bind(("0.0.0.0", 5353))
            print("holding", flush=True)
            signal.pause()
            """
        let holder = try lab.start(["exec", "h3", "--", "python3", "-c", holdPort])
        let advertiser = try lab.start(
            ["exec", "h1", "--", nearby, "advertise", "--json", "--log-level", "debug", "--backend", "embedded", "--host", "flooded",
             "Flood Box", "_openagents._tcp", "9731"])
        try await lab.withProcesses([holder, advertiser]) {
            _ = try await holder.waitForLine(containing: "holding", timeout: .seconds(10))
            _ = try await advertiser.waitForLine(containing: "\"advertising\"", timeout: .seconds(10))
            try await Task.sleep(for: .seconds(2))  // probing and announcing are over
            // Both families at once, 30,000 packets a second in all, for 15 s; the resolvers
            // hear it too: both ends are under it.
            let flood = try lab.start(["exec", "h2", "--", "python3", sender, "--family", "both", "--rate", "30000", "--seconds", "15"])
            try await lab.withProcesses([flood]) {
                let floodStart = ContinuousClock.now
                try await Task.sleep(for: .seconds(1))
                var rounds = 0
                while ContinuousClock.now - floodStart < .seconds(11) {
                    #expect(flood.isRunning, "the flood ended before the resolves did: \(flood.output) \(flood.errorOutput)")
                    let six = try await resolveFloodBox(lab, in: "h3", expecting: "fd6e:6272:1::1")
                    #expect(six.answered, "a resolve over IPv6 during the flood went unanswered: \(six.output)\n\(advertiser.errorOutput.suffix(2000))")
                    let four = try await resolveFloodBox(lab, in: "h4", expecting: "198.18.1.1")
                    #expect(four.answered, "a resolve over IPv4 during the flood went unanswered: \(four.output)\n\(advertiser.errorOutput.suffix(2000))")
                    rounds += 1
                    try await Task.sleep(for: .milliseconds(500))
                }
                #expect(rounds >= 3, "only \(rounds) rounds of resolves during the flood")
                #expect(try await flood.wait(timeout: .seconds(30)) == 0, "\(flood.errorOutput)")
            }
            for (host, address) in [("h3", "fd6e:6272:1::1"), ("h4", "198.18.1.1")] {
                let after = try await resolveFloodBox(lab, in: host, expecting: address)
                #expect(after.answered, "a resolve after the flood went unanswered: \(after.output)")
            }
            // Hostile packets were counted and logged (every 2 s at most), not dropped in silence.
            try await Task.sleep(for: .seconds(2.5))
            #expect(advertiser.isRunning)
            #expect(advertiser.errorOutput.contains("undecodable datagram"), "\(advertiser.errorOutput.suffix(2000))")
        }
    }

    @Test("addresses and links that come and go are noticed within 5 s")
    func interfaceChanges() async throws {
        let lab = try Lab.require(hosts: 3)
        let advertiser = try lab.start(["exec", "h1", "--", nearby, "advertise", "--json", "--host", "mover", "Moving Box", "_openagents._tcp", "9821"])
        let browser = try lab.start(["exec", "h2", "--", nearby, "browse", "_openagents._tcp", "--resolve", "--json", "--timeout", "40"])
        try await lab.withProcesses([advertiser, browser]) {
            _ = try await browser.waitForLine(containing: "\"Moving Box\"", timeout: .seconds(10))
            // A new address on the advertiser's link is announced and reaches the browser.
            try await lab.run(["exec", "h1", "--", "ip", "addr", "add", "198.18.1.101/24", "dev", "lan1"])
            var start = ContinuousClock.now
            _ = try await browser.waitForLine(containing: "198.18.1.101", timeout: .seconds(6))
            #expect(ContinuousClock.now - start <= .seconds(5))
            try await lab.run(["exec", "h1", "--", "ip", "addr", "del", "198.18.1.101/24", "dev", "lan1"])
            // The browser's own link goes down: what it learned there is dropped (lost)…
            try await lab.run(["exec", "h2", "--", "ip", "link", "set", "lan1", "down"])
            start = ContinuousClock.now
            _ = try await browser.waitForLine(containing: "\"lost\"", timeout: .seconds(6))
            #expect(ContinuousClock.now - start <= .seconds(5))
            // …and when it comes back, the service is found again (counted from before the link
            // comes up: the engine hears it from the kernel and may find the service again
            // before the routes are restored).
            let before = browser.output.components(separatedBy: "\"found\"").count
            try await lab.run(["exec", "h2", "--", "ip", "link", "set", "lan1", "up"])
            try await lab.restoreRoutes("h2")
            start = ContinuousClock.now
            while browser.output.components(separatedBy: "\"found\"").count == before {
                guard ContinuousClock.now - start < .seconds(10) else { break }
                try await Task.sleep(for: .milliseconds(100))
            }
            #expect(browser.output.components(separatedBy: "\"found\"").count > before, "\(browser.output)")
        }
    }

    @Test("a host on two LANs sees services on both and reports the right interface")
    func twoLANs() async throws {
        let outer = try Lab.require(hosts: 1)
        // A lab of its own: every host on LAN 1, h2 and h3 also on LAN 2; h3 advertises on
        // LAN 2 only (--interface), so h2 must see it there and nowhere else.
        let name = "twolan"
        try await outer.run(["up", "--name", name, "--hosts", "3", "--lans", "2", "--lan2-hosts", "2,3"])
        let lab = Lab(script: outer.script, name: "nb-\(name)", hosts: 3)
        do {
            let one = try lab.start(["exec", "--name", name, "h1", "--", nearby, "advertise", "--json", "--host", "one", "On LAN One", "_openagents._tcp", "9811"])
            let two = try lab.start(["exec", "--name", name, "h3", "--", nearby, "advertise", "--json", "--host", "two", "--interface", "lan2", "On LAN Two", "_openagents._tcp", "9812"])
            try await lab.withProcesses([one, two]) {
                _ = try await one.waitForLine(containing: "\"advertising\"", timeout: .seconds(10))
                _ = try await two.waitForLine(containing: "\"advertising\"", timeout: .seconds(10))
                let output = try await lab.run(["exec", "--name", name, "h2", "--", nearby, "browse", "_openagents._tcp", "--resolve", "--json", "--timeout", "3"], timeout: .seconds(15))
                let found = jsonLines(output).filter { $0["event"] as? String == "found" }
                let first = try #require(found.first { $0["name"] as? String == "On LAN One" })
                let second = try #require(found.first { $0["name"] as? String == "On LAN Two" })
                #expect(first["interface"] as? String == "lan1")
                #expect(second["interface"] as? String == "lan2")
                #expect(!found.contains { $0["name"] as? String == "On LAN Two" && $0["interface"] as? String == "lan1" })
                #expect((first["addresses"] as? [String])?.contains("198.18.1.1") == true)
                #expect((second["addresses"] as? [String])?.contains("198.18.2.3") == true)
            }
        } catch {
            _ = try? await outer.run(["down", "--name", name])
            throw error
        }
        try await outer.run(["down", "--name", name])
    }
}
}
