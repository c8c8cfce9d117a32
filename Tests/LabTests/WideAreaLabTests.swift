import Foundation
import Testing

/// DNS-SD beyond the link: BIND 9 in h4 (LAN 1), registrants in h1 (LAN 1), browsers and
/// peers in h6 (LAN 2, behind the router h5, which forwards no multicast). Each test starts
/// named with fresh zones and stops it at the end.
extension LabTestSuite {
@Suite("wide area: DNS-SD over unicast DNS with BIND 9, across a router")
struct WideAreaLabTests {
    static var nearby: String { DiscoveryLabTests.nearby }
    static let server = "198.18.1.4"
    static let domain = "lab.example.test"
    /// The records a fresh zone holds (SOA twice in an AXFR, NS, ns A/AAAA, the update SRV,
    /// five enumeration PTRs): what the zone must come back to after a withdrawal.
    static let baseRecordCount = 11

    /// named running in h4 with fresh zones, and h1, h2, h6 resolving through it with the lab
    /// domain as their search list; stopped and undone afterwards, also when `body` throws.
    func withDNS(_ lab: Lab, _ body: (_ keys: String) async throws -> Void) async throws {
        guard ProcessInfo.processInfo.environment["NEARBY_LAB_ROUTER"] == "h5" else {
            throw LabError("the wide-area tests need Tools/test's lab: h1-h4 on LAN 1, h5 the router, h6 on LAN 2")
        }
        let keys = try await lab.run(["dns", "start", "h4"]).trimmingCharacters(in: .whitespacesAndNewlines)
        for host in ["h1", "h2", "h6"] {
            try await lab.run(["dns", "resolv", host, "--nameserver", Self.server, "--search", Self.domain])
        }
        func undo() async {
            _ = try? await lab.run(["dns", "stop", "h4"])
            for host in ["h1", "h2", "h6"] { _ = try? await lab.run(["dns", "resolv", host]) }
        }
        do { try await body(keys) } catch {
            await undo()
            throw error
        }
        await undo()
    }

    /// Runs `nearby ARGS` in `host` to its end: exit status and everything it printed.
    func nearby(_ lab: Lab, _ host: String, _ arguments: [String], timeout: Duration = .seconds(30)) async throws -> (Int32, String) {
        let process = try lab.start(["exec", host, "--", Self.nearby] + arguments)
        let status = try await process.wait(timeout: timeout)
        return (status, process.output + process.errorOutput)
    }

    /// Starts `nearby ARGS` in `host` in the background.
    func start(_ lab: Lab, _ host: String, _ arguments: [String]) throws -> LabProcess {
        let command = ([Self.nearby] + arguments).map { "'\($0)'" }.joined(separator: " ")
        return try lab.start(["exec", host, "--", "sh", "-c", "exec \(command) < /dev/null"])
    }

    /// The zone's records as `dig AXFR` shows them (from h6, across the router), without TTLs.
    func zone(_ lab: Lab, _ name: String = WideAreaLabTests.domain) async throws -> [String] {
        let text = try await lab.run(["exec", "h6", "--", "dig", "@\(Self.server)", name, "AXFR", "+noall", "+answer", "+nottlid"])
        return text.split(separator: "\n").map { $0.split(whereSeparator: { $0 == " " || $0 == "\t" }).joined(separator: " ") }
    }

    /// Sends `commands` to BIND with nsupdate and the allowed key, from h1.
    func nsupdate(_ lab: Lab, keys: String, _ commands: [String]) async throws {
        let script = try Lab.temporaryDirectory().appendingPathComponent("update.txt")
        try (["server \(Self.server)", "zone \(Self.domain)"] + commands + ["send"]).joined(separator: "\n")
            .appending("\n").write(to: script, atomically: true, encoding: .utf8)
        try await lab.run(["exec", "h1", "--", "nsupdate", "-k", "\(keys)/nearby.key", script.path])
    }

    @Test("advertised with --domain on LAN 1, found and resolved from LAN 2 (mDNS alone finds nothing there); dig shows exactly Nearby's records; SIGTERM and SIGINT remove them")
    func acrossSubnets() async throws {
        let lab = try Lab.require(hosts: 6)
        try await withDNS(lab) { keys in
            for (signal, label) in [(SIGTERM, "SIGTERM"), (SIGINT, "SIGINT")] {
                let advertiser = try start(lab, "h1", [
                    "advertise", "Build Box", "_openagents._tcp", "9099", "version=0.2.2", "--domain", Self.domain, "--tsig", "\(keys)/nearby.key",
                    "--host", "buildbox", "--json",
                ])
                _ = try await advertiser.waitForLine(containing: "\"advertising\"", timeout: .seconds(15))
                let base = ["b", "db", "dr", "lb", "r"].map { "\($0)._dns-sd._udp." } + ["_dns-update._udp.", "ns.", "lab.example.test."]
                let records = try await zone(lab).filter { line in !base.contains { line.hasPrefix($0) } }
                let expected: Set<String> = [
                    "_openagents._tcp.lab.example.test. IN PTR Build\\032Box._openagents._tcp.lab.example.test.",
                    "_services._dns-sd._udp.lab.example.test. IN PTR _openagents._tcp.lab.example.test.",
                    "Build\\032Box._openagents._tcp.lab.example.test. IN SRV 0 0 9099 buildbox.lab.example.test.",
                    "Build\\032Box._openagents._tcp.lab.example.test. IN TXT \"version=0.2.2\"",
                    "buildbox.lab.example.test. IN A 198.18.1.1",
                    "buildbox.lab.example.test. IN AAAA fd6e:6272:1::1",
                ]
                let owner = records.filter { $0.hasPrefix("buildbox.lab.example.test. IN TXT \"nearby-owner=") }
                #expect(Set(records) == expected.union(owner), "\(records)")
                #expect(records.count == 7, "\(records)")
                let (status, output) = try await nearby(lab, "h6", ["browse", "_openagents._tcp", "--domain", Self.domain, "--resolve", "--json", "--timeout", "3"])
                #expect(status == 0, "\(output)")
                let found = jsonLines(output).first { $0["event"] as? String == "found" }
                #expect(found?["name"] as? String == "Build Box", "\(output)")
                #expect(found?["domain"] as? String == "lab.example.test.", "\(output)")
                #expect(found?["port"] as? Int == 9099 && (found?["addresses"] as? [String])?.contains("198.18.1.1") == true, "\(output)")
                // The negative control: the same browse over mDNS alone, from the other subnet.
                let (_, local) = try await nearby(lab, "h6", ["browse", "_openagents._tcp", "--json", "--timeout", "2", "--backend", "embedded"])
                #expect(!local.contains("\"found\""), "mDNS crossed the router: \(local)")
                advertiser.signal(signal)
                #expect(try await advertiser.wait(timeout: .seconds(10)) == 0, "\(label): \(advertiser.output)\(advertiser.errorOutput)")
                let left = try await zone(lab)
                #expect(left.count == Self.baseRecordCount, "\(label) left records: \(left)")
            }
        }
    }

    @Test("serve --auto-invite on both subnets meshes through the zone; connect --nearest --domain from LAN 1 reaches a peer")
    func broker() async throws {
        let lab = try Lab.require(hosts: 6)
        let brokers = BrokerLabTests()
        let peers = try await brokers.peers(lab, 3)
        try await withDNS(lab) { keys in
            let options = ["--domain", Self.domain, "--tsig", "\(keys)/nearby.key"]
            let near = try start(lab, "h1", ["serve", "Peer A", "_openagents._tcp", "9600", "--auto-invite", "--host", "pa", "--json", "--state-dir", peers[0].directory] + options)
            let far = try start(lab, "h6", ["serve", "Peer B", "_openagents._tcp", "9600", "--auto-invite", "--host", "pb", "--json", "--state-dir", peers[1].directory] + options)
            try await lab.withProcesses([near, far]) {
                try await brokers.waitFor(near, "connected", count: 1, timeout: .seconds(20))
                try await brokers.waitFor(far, "connected", count: 1, timeout: .seconds(20))
                let initiators = Set((brokers.events(near, "connected") + brokers.events(far, "connected")).compactMap { $0["initiator"] as? String })
                #expect(initiators == [min(peers[0].peerID, peers[1].peerID).description], "one connection, made by the smaller ID")
                let (status, output) = try await nearby(lab, "h2", [
                    "connect", "_openagents._tcp", "--nearest", "--domain", Self.domain, "--json", "--state-dir", peers[2].directory, "--timeout", "10",
                ])
                #expect(status == 0, "\(output)")
                let candidates = jsonLines(output).first { $0["event"] as? String == "connected" }?["candidates"] as? [[String: Any]]
                #expect(candidates?.count == 2, "both peers, from both subnets, were measured: \(output)")
            }
        }
    }

    @Test("interop: a service nsupdate registered by hand is browsed, resolved and listed; nearby domains reads the zone's enumeration records")
    func interop() async throws {
        let lab = try Lab.require(hosts: 6)
        try await withDNS(lab) { keys in
            try await nsupdate(lab, keys: keys, [
                "update add _printer._tcp.lab.example.test. 60 PTR Hand\\032Made._printer._tcp.lab.example.test.",
                "update add _services._dns-sd._udp.lab.example.test. 60 PTR _printer._tcp.lab.example.test.",
                "update add Hand\\032Made._printer._tcp.lab.example.test. 60 SRV 0 0 631 printer.lab.example.test.",
                "update add Hand\\032Made._printer._tcp.lab.example.test. 60 TXT \"rp=queue\" \"color\"",
                "update add printer.lab.example.test. 60 A 198.18.1.3",
            ])
            let (status, output) = try await nearby(lab, "h6", ["resolve", "Hand Made", "_printer._tcp", "--domain", Self.domain, "--json"])
            #expect(status == 0, "\(output)")
            let resolved = jsonLines(output).first
            #expect(resolved?["host"] as? String == "printer.lab.example.test.", "\(output)")
            #expect(resolved?["port"] as? Int == 631 && (resolved?["addresses"] as? [String]) == ["198.18.1.3"], "\(output)")
            #expect((resolved?["txt"] as? [String: Any])?["rp"] as? String == "queue", "\(output)")
            let (_, types) = try await nearby(lab, "h6", ["types", "--domain", Self.domain, "--timeout", "2", "--json"])
            #expect(jsonLines(types).contains { $0["type"] as? String == "_printer._tcp" }, "\(types)")
            let (domainsStatus, domains) = try await nearby(lab, "h6", ["domains", "--json"])
            #expect(domainsStatus == 0, "\(domains)")
            let row = jsonLines(domains).first { $0["domain"] as? String == Self.domain }
            #expect(Set((row?["roles"] as? [String]) ?? []) == ["browse", "default browse", "legacy browse", "register", "default register"], "\(domains)")
        }
    }

    @Test("refusals, one line each: wrong secret, unknown key, a key the zone does not allow, no key, no such zone, an unreachable server, a broken key file; a held name is renamed, not overwritten")
    func refusals() async throws {
        let lab = try Lab.require(hosts: 6)
        try await withDNS(lab) { keys in
            let cases: [(key: String?, extra: [String], domain: String, expected: String, status: Int32)] = [
                ("wrong.key", [], Self.domain, "(BADSIG)", 1),
                ("unknown.key", [], Self.domain, "(BADKEY)", 1),
                ("other.key", [], Self.domain, "this key is not allowed to update this zone", 1),
                (nil, [], Self.domain, "refused an unsigned update", 1),
                ("nearby.key", [], "nowhere.example.test", "no DNS zone holds nowhere.example.test", 1),
                ("nearby.key", ["--server", "198.18.1.3"], Self.domain, "no answer from the DNS server 198.18.1.3", 1),
                ("named.conf", [], Self.domain, "--tsig:", 2),
            ]
            for item in cases {
                let key = item.key.map { ["--tsig", "\(keys)/\($0)"] } ?? []
                let (status, output) = try await nearby(lab, "h1", ["advertise", "X", "_x._tcp", "1", "--domain", item.domain, "--host", "px"] + key + item.extra)
                #expect(status == item.status, "\(item.expected): \(output)")
                #expect(output.contains(item.expected), "\(output)")
            }
            let after = try await zone(lab)
            #expect(after.count == Self.baseRecordCount, "a refused registration changed the zone: \(after)")
            // Someone else holds "Box": ours becomes "Box (2)" and theirs stays as it was.
            try await nsupdate(lab, keys: keys, [
                "update add _openagents._tcp.lab.example.test. 60 PTR Box._openagents._tcp.lab.example.test.",
                "update add Box._openagents._tcp.lab.example.test. 60 SRV 0 0 7000 elsewhere.lab.example.test.",
            ])
            let advertiser = try start(lab, "h1", ["advertise", "Box", "_openagents._tcp", "9099", "--domain", Self.domain, "--tsig", "\(keys)/nearby.key", "--host", "px", "--json"])
            try await lab.withProcesses([advertiser]) {
                let line = try await advertiser.waitForLine(containing: "\"advertising\"", timeout: .seconds(15))
                #expect(line.contains("\"name\":\"Box (2)\"") && line.contains("\"requested\":\"Box\""), "\(line)")
                let records = try await zone(lab)
                #expect(records.contains("Box._openagents._tcp.lab.example.test. IN SRV 0 0 7000 elsewhere.lab.example.test."), "\(records)")
                #expect(records.contains("Box\\032\\(2\\)._openagents._tcp.lab.example.test. IN SRV 0 0 9099 px.lab.example.test."), "\(records)")
            }
        }
    }

    @Test("an answer too big for UDP is fetched over TCP: 40 instances, all found")
    func truncation() async throws {
        let lab = try Lab.require(hosts: 6)
        try await withDNS(lab) { keys in
            var commands: [String] = []
            for index in 1...40 {
                let name = "Instance\\032with\\032a\\032long\\032name\\032number\\032\(index)._bulk._tcp.lab.example.test."
                commands += ["update add _bulk._tcp.lab.example.test. 60 PTR \(name)", "update add \(name) 60 SRV 0 0 \(9000 + index) bulk.lab.example.test.", "update add \(name) 60 TXT \"n=\(index)\""]
            }
            try await nsupdate(lab, keys: keys, commands + ["update add bulk.lab.example.test. 60 A 198.18.1.3"])
            let (status, output) = try await nearby(lab, "h6", ["browse", "_bulk._tcp", "--domain", Self.domain, "--resolve", "--json", "--timeout", "4", "--log-level", "trace"])
            #expect(status == 0)
            let found = Set(jsonLines(output).filter { $0["event"] as? String == "found" && $0["port"] != nil }.compactMap { $0["name"] as? String })
            #expect(found.count == 40, "\(found.count) of 40 found")
            #expect(output.contains("_bulk._tcp.lab.example.test. PTR") && output.contains("over TCP"), "the PTR answer did not go over TCP")
        }
    }

    @Test("SIGKILL leaves the records in the zone: a browse still lists the service, connect --nearest finds no peer that answers, and a restart takes its own name back")
    func crash() async throws {
        let lab = try Lab.require(hosts: 6)
        let brokers = BrokerLabTests()
        let peers = try await brokers.peers(lab, 2)
        try await withDNS(lab) { keys in
            let options = ["--domain", Self.domain, "--tsig", "\(keys)/nearby.key", "--host", "crashy"]
            let first = try start(lab, "h1", ["serve", "Crashy", "_openagents._tcp", "9610", "--json", "--state-dir", peers[0].directory] + options)
            _ = try await first.waitForLine(containing: "\"listening\"", timeout: .seconds(15))
            first.signal(SIGKILL)
            _ = try await first.wait(timeout: .seconds(5))
            #expect(try await zone(lab).contains { $0.hasPrefix("Crashy._openagents._tcp.lab.example.test. IN SRV") }, "the records are gone")
            let (_, browse) = try await nearby(lab, "h6", ["browse", "_openagents._tcp", "--domain", Self.domain, "--resolve", "--json", "--timeout", "2"])
            #expect(jsonLines(browse).contains { $0["event"] as? String == "found" && $0["name"] as? String == "Crashy" }, "\(browse)")
            let (status, connect) = try await nearby(lab, "h6", [
                "connect", "_openagents._tcp", "--nearest", "--domain", Self.domain, "--json", "--state-dir", peers[1].directory, "--timeout", "4",
            ])
            #expect(status == 1, "\(connect)")
            let again = try start(lab, "h1", ["serve", "Crashy", "_openagents._tcp", "9610", "--json", "--state-dir", peers[0].directory] + options)
            try await lab.withProcesses([again]) {
                let line = try await again.waitForLine(containing: "\"listening\"", timeout: .seconds(15))
                #expect(line.contains("\"name\":\"Crashy\""), "a restart should take its own records back, not rename: \(line)")
            }
        }
    }
}
}
