import Foundation
import Testing

/// The `nearby` CLI (embedded engine) against avahi-daemon and python-zeroconf, both ways.
extension LabTestSuite {
@Suite("nearby advertise/browse/resolve against real peers")
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

    @Test("nearby advertise is resolved by avahi-browse and by python-zeroconf")
    func advertisedToPeers() async throws {
        let lab = try Lab.require(hosts: 3)
        let (advertiser, started) = try await advertise(lab, in: "h1", ["--host", "nearby-h1", "Lab Box", "_openagents._tcp", "9201", "version=1.0", "beta", "empty="])
        #expect(started["name"] as? String == "Lab Box")
        #expect(started["requested"] == nil)
        try await lab.withProcesses([advertiser]) {
            try await lab.withAvahi(in: ["h2"]) {
                let browse = try await lab.run(["avahi", "exec", "h2", "--", "timeout", "8", "avahi-browse", "-rpt", "_openagents._tcp"], timeout: .seconds(20))
                let line = try #require(browse.split(separator: "\n").first { $0.hasPrefix("=;lan1;IPv4;Lab\\032Box;") })
                let fields = line.split(separator: ";", omittingEmptySubsequences: false).map(String.init)
                #expect(fields[6] == "nearby-h1.local")
                #expect(fields[7] == "198.18.1.1")
                #expect(fields[8] == "9201")
                #expect(fields[9].contains("\"version=1.0\"") && fields[9].contains("\"beta\"") && fields[9].contains("\"empty=\""))
            }
            let resolved = try await lab.run(["zeroconf", "h3", "--", "resolve", "Lab Box", "_openagents._tcp", "--timeout", "5"], timeout: .seconds(20))
            let object = try #require(jsonLines(resolved).first { $0["event"] as? String == "resolved" })
            #expect(object["port"] as? Int == 9201)
            #expect(object["host"] as? String == "nearby-h1.local.")
            #expect((object["addresses"] as? [String])?.contains("198.18.1.1") == true)
            #expect((object["addresses"] as? [String])?.contains("fd6e:6272:1::1") == true)
            let txt = object["txt"] as? [String: Any]
            #expect(txt?["version"] as? String == "1.0")
        }
    }

    @Test("services of avahi-publish and python-zeroconf are found and resolved by nearby browse --resolve")
    func peersToBrowse() async throws {
        let lab = try Lab.require(hosts: 3)
        try await lab.withAvahi(in: ["h1"]) {
            let publisher = try lab.start(["avahi", "exec", "h1", "--", "avahi-publish", "-s", "Avahi Box", "_openagents._tcp", "9202", "from=avahi"])
            let registrant = try lab.start(["zeroconf", "h3", "--", "register", "Zero Box", "_openagents._tcp", "9203", "from=zeroconf", "flag"])
            try await lab.withProcesses([publisher, registrant]) {
                _ = try await registrant.waitForLine(containing: "\"registered\"", timeout: .seconds(20))
                let output = try await lab.run(["exec", "h2", "--", Self.nearby, "browse", "_openagents._tcp", "--resolve", "--json", "--timeout", "4"], timeout: .seconds(20))
                let found = jsonLines(output).filter { $0["event"] as? String == "found" }
                let avahi = try #require(found.first { $0["name"] as? String == "Avahi Box" })
                #expect(avahi["port"] as? Int == 9202)
                #expect((avahi["addresses"] as? [String])?.contains("198.18.1.1") == true)
                #expect((avahi["txt"] as? [String: Any])?["from"] as? String == "avahi")
                #expect(avahi["interface"] as? String == "lan1")
                let zero = try #require(found.first { $0["name"] as? String == "Zero Box" })
                #expect(zero["port"] as? Int == 9203)
                #expect((zero["addresses"] as? [String])?.contains("198.18.1.3") == true)
                #expect((zero["txt"] as? [String: Any])?["flag"] as? Bool == true)
            }
        }
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

    @Test("nearby against avahi-publish with one name: nearby, coming second, is renamed; both stay visible")
    func avahiConflict() async throws {
        let lab = try Lab.require(hosts: 3)
        try await lab.withAvahi(in: ["h1"]) {
            let publisher = try lab.start(["avahi", "exec", "h1", "--", "avahi-publish", "-s", "Clash", "_openagents._tcp", "9401"])
            try await lab.withProcesses([publisher]) {
                try await Task.sleep(for: .seconds(2))  // avahi has won the name
                let (advertiser, started) = try await advertise(lab, in: "h2", ["--host", "nearby-h2", "Clash", "_openagents._tcp", "9402"])
                try await lab.withProcesses([advertiser]) {
                    #expect(started["name"] as? String == "Clash (2)")
                    #expect(started["requested"] as? String == "Clash")
                    let output = try await lab.run(["exec", "h3", "--", Self.nearby, "browse", "_openagents._tcp", "--json", "--resolve", "--timeout", "3"], timeout: .seconds(15))
                    let found = jsonLines(output).filter { $0["event"] as? String == "found" }
                    #expect(found.first { $0["name"] as? String == "Clash" }?["port"] as? Int == 9401)
                    #expect(found.first { $0["name"] as? String == "Clash (2)" }?["port"] as? Int == 9402)
                }
            }
        }
    }

    @Test("a graceful stop is reported lost within 2 s")
    func gracefulStop() async throws {
        let lab = try Lab.require(hosts: 3)
        let browser = try lab.start(["exec", "h3", "--", Self.nearby, "browse", "_openagents._tcp", "--json", "--timeout", "20"])
        try await lab.withProcesses([browser]) {
            let (advertiser, _) = try await advertise(lab, in: "h1", ["--host", "leaver", "Leaving Box", "_openagents._tcp", "9501"])
            _ = try await browser.waitForLine(containing: "\"Leaving Box\"", timeout: .seconds(10))
            let stopped = ContinuousClock.now
            await advertiser.stop()  // SIGTERM: goodbyes, exit 0
            #expect(advertiser.exitStatus == 0)
            _ = try await browser.waitForLine(containing: "\"lost\"", timeout: .seconds(2))
            #expect(ContinuousClock.now - stopped <= .seconds(2))
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

    @Test("a TXT update by python-zeroconf is reported updated with the new TXT")
    func txtUpdate() async throws {
        let lab = try Lab.require(hosts: 3)
        let browser = try lab.start(["exec", "h2", "--", nearby, "browse", "_openagents._tcp", "--resolve", "--json", "--timeout", "15"])
        let registrant = try lab.start([
            "zeroconf", "h1", "--", "register", "Changing Box", "_openagents._tcp", "9701", "state=old",
            "--update-txt", "state=new", "--update-after", "4",
        ])
        try await lab.withProcesses([browser, registrant]) {
            _ = try await registrant.waitForLine(containing: "\"updated\"", timeout: .seconds(20))
            let line = try await browser.waitForLine(containing: "\"state\":\"new\"", timeout: .seconds(5))
            let event = try #require(jsonLines(line).first)
            #expect(event["event"] as? String == "updated")
            #expect(event["name"] as? String == "Changing Box")
            let events = jsonLines(browser.output).filter { $0["name"] as? String == "Changing Box" }
            #expect(events.first?["event"] as? String == "found")
            #expect((events.first?["txt"] as? [String: Any])?["state"] as? String == "old")
        }
    }

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
@Suite("nearby: types, subtypes, IPv6 only, two LANs")
struct NetworkShapeLabTests {
    var nearby: String { LabTestSuite.DiscoveryLabTests.nearby }

    @Test("nearby types lists advertised types; a subtype browse finds only services listed under it")
    func typesAndSubtypes() async throws {
        let lab = try Lab.require(hosts: 3)
        let plain = try lab.start(["exec", "h1", "--", nearby, "advertise", "--json", "--host", "t1", "Plain", "_openagents._tcp", "9801"])
        let bridge = try lab.start(["exec", "h2", "--", nearby, "advertise", "--json", "--host", "t2", "--subtype", "_bridge", "Bridge", "_openagents._tcp", "9802"])
        try await lab.withProcesses([plain, bridge]) {
            _ = try await plain.waitForLine(containing: "\"advertising\"", timeout: .seconds(10))
            _ = try await bridge.waitForLine(containing: "\"advertising\"", timeout: .seconds(10))
            let types = try await lab.run(["exec", "h3", "--", nearby, "types", "--json", "--timeout", "2"], timeout: .seconds(15))
            #expect(jsonLines(types).contains { $0["type"] as? String == "_openagents._tcp" })
            let sub = try await lab.run(["exec", "h3", "--", nearby, "browse", "_bridge._sub._openagents._tcp", "--json", "--timeout", "2"], timeout: .seconds(15))
            let names = Set(jsonLines(sub).compactMap { $0["event"] as? String == "found" ? $0["name"] as? String : nil })
            #expect(names == ["Bridge"])
        }
    }

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
            try await lab.run(["exec", host, "--", "ip", "route", "replace", "224.0.0.0/4", "dev", "lan1"])
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
            // …and when it comes back, the service is found again.
            try await lab.run(["exec", "h2", "--", "ip", "link", "set", "lan1", "up"])
            try await lab.run(["exec", "h2", "--", "ip", "route", "replace", "224.0.0.0/4", "dev", "lan1"])
            let before = browser.output.components(separatedBy: "\"found\"").count
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
