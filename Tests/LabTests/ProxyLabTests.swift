import Foundation
import Testing

/// A link's services seen from another subnet with nothing set up on the advertising hosts:
/// `nearby proxy` in the router h5 answers for lan1.lab.example.test from mDNS on LAN 1; BIND in
/// h4 delegates that subdomain to it and resolves for the lab; clients in h6 (LAN 2, no multicast
/// from LAN 1) ask BIND. The services are Nearby's (h1), avahi-daemon's (h2) and
/// python-zeroconf's (h3).
extension LabTestSuite {
@Suite("discovery proxy (RFC 8766): LAN 1's services from LAN 2 through BIND's delegation")
struct ProxyLabTests {
    static var nearby: String { DiscoveryLabTests.nearby }
    static let resolver = "198.18.1.4"
    static let proxyAddress = "198.18.1.5"
    static let zone = "lan1.lab.example.test"

    func dig(_ lab: Lab, _ arguments: [String]) async throws -> String {
        try await lab.run(["exec", "h6", "--", "dig"] + arguments + ["+time=3", "+tries=2"])
    }

    /// The instance names BIND gives for `_openagents._tcp` under the zone, from h6.
    func browse(_ lab: Lab) async throws -> Set<String> {
        let text = try await dig(lab, ["@\(Self.resolver)", "_openagents._tcp.\(Self.zone)", "PTR", "+short"])
        return Set(text.split(separator: "\n").map(String.init))
    }

    func nearby(_ lab: Lab, _ host: String, _ arguments: [String], timeout: Duration = .seconds(30)) async throws -> (Int32, String) {
        let process = try lab.start(["exec", host, "--", Self.nearby] + arguments)
        let status = try await process.wait(timeout: timeout)
        return (status, process.output + process.errorOutput)
    }

    /// The router lab of Tools/test: h1-h4 on LAN 1, h5 the router, h6 on LAN 2.
    func routerLab() throws -> Lab {
        let lab = try Lab.require(hosts: 6)
        guard ProcessInfo.processInfo.environment["NEARBY_LAB_ROUTER"] == "h5" else {
            throw LabError("the proxy test needs Tools/test's lab: h1-h4 on LAN 1, h5 the router, h6 on LAN 2")
        }
        return lab
    }

    /// BIND in h4 delegating the zone to the proxy's address, and h6 resolving through it, for
    /// the time of `body`; undone also when it fails.
    func withDelegation(_ lab: Lab, _ body: () async throws -> Void) async throws {
        try await lab.run(["dns", "start", "h4", "--delegate", "lan1=\(Self.proxyAddress)"])
        try await lab.run(["dns", "resolv", "h6", "--nameserver", Self.resolver, "--search", "lab.example.test"])
        do {
            try await body()
        } catch {
            _ = try? await lab.run(["dns", "stop", "h4"])
            _ = try? await lab.run(["dns", "resolv", "h6"])
            throw error
        }
        try await lab.run(["dns", "stop", "h4"])
        try await lab.run(["dns", "resolv", "h6"])
    }

    @Test("dig through BIND, avahi-browse (wide-area) and nearby browse/connect --domain find and resolve nearby's, avahi's and python-zeroconf's services; a goodbye leaves within the TTL cap; refusals on the wire")
    func acrossTheRouter() async throws {
        let lab = try routerLab()
        let peers = try await BrokerLabTests().peers(lab, 2)
        try await withDelegation(lab) {
            try await lab.withAvahi(in: ["h2"]) {
                // h6's avahi browses wide-area through BIND (its resolv.conf), the independent DNS-SD client.
                try await lab.run(["avahi", "start", "--wide-area", "h6"])
                do {
                    try await acrossTheRouter(lab, peers)
                } catch {
                    _ = try? await lab.run(["avahi", "stop", "h6"])
                    throw error
                }
                try await lab.run(["avahi", "stop", "h6"])
            }
        }
    }

    @Test("on the system backend (avahi-daemon in the router), the proxy answers from avahi: python-zeroconf's service browsed and resolved, only LAN 1's")
    func systemBackend() async throws {
        let lab = try routerLab()
        // avahi in h5 hears both LANs; a service on LAN 2 must not appear in LAN 1's zone.
        try await lab.withAvahi(in: ["h5"]) {
            let near = try lab.start(["zeroconf", "h3", "--", "register", "Zero Box", "_openagents._tcp", "9702", "from=zeroconf"])
            let far = try lab.start(["zeroconf", "h6", "--", "register", "Far Box", "_openagents._tcp", "9703", "from=lan2"])
            let proxy = try lab.start(["avahi", "exec", "h5", "--", Self.nearby, "proxy", "lan1=\(Self.zone)", "--listen", Self.proxyAddress,
                                       "--name-server", "proxy-lan1.lab.example.test", "--backend", "system", "--json"])
            try await lab.withProcesses([near, far, proxy]) {
                let started = try await proxy.waitForLine(containing: "\"proxying\"", timeout: .seconds(20))
                #expect(started.contains("\"backend\":\"system\""), "\(started)")
                _ = try await near.waitForLine(containing: "\"registered\"", timeout: .seconds(20))
                _ = try await far.waitForLine(containing: "\"registered\"", timeout: .seconds(20))
                var names: Set<String> = []
                let deadline = ContinuousClock.now + .seconds(15)
                while !names.contains("Zero\\032Box._openagents._tcp.\(Self.zone)."), ContinuousClock.now < deadline {
                    let text = try await dig(lab, ["@\(Self.proxyAddress)", "_openagents._tcp.\(Self.zone)", "PTR", "+short", "+norec"])
                    names = Set(text.split(separator: "\n").map(String.init))
                    if !names.contains("Zero\\032Box._openagents._tcp.\(Self.zone).") { try await Task.sleep(for: .milliseconds(500)) }
                }
                #expect(names == ["Zero\\032Box._openagents._tcp.\(Self.zone)."], "LAN 1's service alone: \(names)")
                let srv = try await dig(lab, ["@\(Self.proxyAddress)", "Zero\\032Box._openagents._tcp.\(Self.zone)", "SRV", "+short", "+norec"])
                #expect(srv.hasPrefix("0 0 9702 ") && srv.contains(".\(Self.zone)."), "\(srv)")
                let txt = try await dig(lab, ["@\(Self.proxyAddress)", "Zero\\032Box._openagents._tcp.\(Self.zone)", "TXT", "+short", "+norec"])
                #expect(txt.contains("from=zeroconf"), "\(txt)")
                let target = srv.split(whereSeparator: \.isWhitespace).last.map(String.init) ?? ""
                var address = ""
                for _ in 0..<3 where !address.contains("198.18.1.3") {
                    address = try await dig(lab, ["@\(Self.proxyAddress)", target, "A", "+short", "+norec"])
                }
                #expect(address.contains("198.18.1.3"), "\(target): \(address)")
            }
        }
    }

    @Test("DNS Push: nearby browse finds the proxy's Push server and hears an arrival and a goodbye; a client written from the RFCs subscribes, reads the PUSHes, and reconfirms a killed host's record away; --push authenticated refuses the self-signed server and polls")
    func push() async throws {
        let lab = try routerLab()
        try await withDelegation(lab) { try await push(lab) }
    }

    func push(_ lab: Lab) async throws {
        let proxy = try lab.start(["exec", "h5", "--", Self.nearby, "proxy", "lan1=\(Self.zone)", "--listen", Self.proxyAddress,
                                   "--name-server", "proxy-lan1.lab.example.test", "--json", "--verbose"])
        // The log (stderr) and the events (stdout) in one stream, in order.
        let browse = try lab.start(["exec", "h6", "--", "sh", "-c",
            "exec '\(Self.nearby)' browse _openagents._tcp --domain \(Self.zone) --json --verbose 2>&1"])
        let strict = try lab.start(["exec", "h6", "--", "sh", "-c",
            "exec '\(Self.nearby)' browse _openagents._tcp --domain \(Self.zone) --json --verbose --push authenticated 2>&1"])
        // The Python client reconfirms Kill Box's PTR once this file exists.
        let trigger = try Lab.temporaryDirectory().appendingPathComponent("reconfirm-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: trigger) }
        let client = try lab.start(["exec", "h6", "--", ConnectionLabTests.python, ConnectionLabTests.repository.appendingPathComponent("Tools/lab.d/peers/dso_client.py").path,
                                    Self.proxyAddress, "853", "_openagents._tcp.\(Self.zone)", "PTR", "45", trigger, "Kill"])
        try await lab.withProcesses([proxy, browse, strict, client]) {
            let started = try await proxy.waitForLine(containing: "\"proxying\"", timeout: .seconds(20))
            #expect(started.contains("\"pushPort\":853"), "\(started)")
            // The SRV that tells clients where Push is, through BIND's delegation.
            let srv = try await dig(lab, ["@\(Self.resolver)", "_dns-push-tls._tcp.\(Self.zone)", "SRV", "+short"])
            #expect(srv.trimmingCharacters(in: .whitespacesAndNewlines) == "0 0 853 proxy-lan1.lab.example.test.", "\(srv)")
            let using = try await browse.waitForLine(containing: "DNS Push from", timeout: .seconds(20))
            #expect(using.contains("proxy-lan1.lab.example.test. port 853"), "\(using)")
            // The self-signed certificate does not pass an authenticated client, which then polls.
            let refused = try await strict.waitForLine(containing: "ended", timeout: .seconds(20))
            #expect(refused.contains("certificate is not valid for proxy-lan1.lab.example.test") && refused.contains("asking again instead"), "\(refused)")
            let keepalive = try await client.waitForLine(containing: "\"keepalive\"", timeout: .seconds(10))
            #expect(keepalive.contains("\"rcode\": 0") && keepalive.contains("\"interval_ms\": 3600000"), "\(keepalive)")
            let accepted = try await client.waitForLine(containing: "\"response\"", timeout: .seconds(10))
            #expect(accepted.contains("\"id\": 2") && accepted.contains("\"rcode\": 0"), "\(accepted)")

            let live = try lab.start(["exec", "h1", "--", Self.nearby, "advertise", "Live Box", "_openagents._tcp", "9800", "--backend", "embedded", "--json"])
            try await lab.withProcesses([live]) {
                _ = try await live.waitForLine(containing: "\"advertising\"", timeout: .seconds(20))
                let found = try await browse.waitForLine(where: { $0.contains("\"found\"") && $0.contains("Live Box") }, timeout: .seconds(20))
                #expect(found.contains(Self.zone), "\(found)")
                // JSON doubles the backslash of dnspython's \032 (a space).
                let instance = "Live\\\\032Box._openagents._tcp.\(Self.zone)."
                let added = try await client.waitForLine(where: { $0.contains("\"add\"") && $0.contains("Live") }, timeout: .seconds(10))
                #expect(added.contains("\"type\": \"PTR\"") && added.contains(instance), "\(added)")

                live.signal(SIGINT)
                _ = try await live.wait(timeout: .seconds(10))
                _ = try await browse.waitForLine(where: { $0.contains("\"lost\"") && $0.contains("Live Box") }, timeout: .seconds(20))
                let removed = try await client.waitForLine(where: { $0.contains("\"remove\"") && $0.contains("Live") }, timeout: .seconds(10))
                #expect(removed.contains(instance), "\(removed)")
            }

            // A host that vanishes without a goodbye: its PTR would stay for its TTL (75 min).
            // The client's RECONFIRM makes the proxy ask the link again (RFC 6762 §10.4), and
            // with no answer the record goes, and is pushed as gone.
            let doomed = try lab.start(["exec", "h1", "--", Self.nearby, "advertise", "Kill Box", "_openagents._tcp", "9801", "--backend", "embedded", "--json"])
            try await lab.withProcesses([doomed]) {
                _ = try await doomed.waitForLine(containing: "\"advertising\"", timeout: .seconds(20))
                _ = try await client.waitForLine(where: { $0.contains("\"add\"") && $0.contains("Kill") }, timeout: .seconds(10))
                doomed.kill()
                _ = try await doomed.wait(timeout: .seconds(10))
                #expect(FileManager.default.createFile(atPath: trigger, contents: Data()))
                _ = try await client.waitForLine(where: { $0.contains("\"reconfirmed\"") && $0.contains("Kill") }, timeout: .seconds(5))
                let removed = try await client.waitForLine(where: { $0.contains("\"remove\"") && $0.contains("Kill") }, timeout: .seconds(20))
                #expect(removed.contains("Kill\\\\032Box"), "\(removed)")
                _ = try await browse.waitForLine(where: { $0.contains("\"lost\"") && $0.contains("Kill Box") }, timeout: .seconds(10))
            }
            #expect(!client.output.contains("\"error\""), "\(client.output)")
            #expect(!proxy.errorOutput.contains("aborted"), "the proxy aborted a session: \(proxy.errorOutput)")
        }
    }

    @Test("a messy router: IPv6 off, a second NIC on LAN 1, a container bridge and a VPN tunnel; the proxy answers and pushes for LAN 1 from lan1 alone, and sends no mDNS into the bridge, the tunnel or the second NIC")
    func messyRouter() async throws {
        let lab = try routerLab()
        let shapes = HostShapeLabTests()
        let shape = [
            ["tun", "add", "tailscale0", "100.101.102.5", "fd7a:115c:a1e0::5"], ["link", "add", "lan1b", "--lan", "1", "--ipv4", "198.18.1.105/24"],
            ["bridge", "add", "docker0", "172.17.0.1/16"], ["ipv6", "off"],
        ]
        let undo = [["ipv6", "on"], ["bridge", "del", "docker0"], ["link", "del", "lan1b"], ["tun", "del", "tailscale0"]]
        let directory = try Lab.temporaryDirectory()
        let captures = ["docker0", "tailscale0", "lan1b"].map { ($0, directory.appendingPathComponent("proxy-\($0).pcap").path) }
        try await withDelegation(lab) {
            try await shapes.with(lab, "h5", shape: shape, undo: undo) {
                for (interface, file) in captures { try await lab.run(["capture", "start", "--iface", interface, "h5", file]) }
                do {
                    try await messyRouter(lab)
                } catch {
                    for (_, file) in captures { _ = try? await lab.run(["capture", "stop", "h5", file]) }
                    throw error
                }
                for (_, file) in captures { try await lab.run(["capture", "stop", "h5", file]) }
            }
        }
        // What the proxy's host sent: nothing into the bridge, nothing into the tunnel (a tun
        // capture has no link header: the 24-byte file header alone), and nothing from its
        // second NIC (which hears LAN 1's multicast, its own included, but must not speak).
        func packets(_ file: String, _ filter: String) async throws -> [Substring] {
            try await lab.run(["exec", "h5", "--", "tcpdump", "-nn", "-r", file, filter]).split(separator: "\n").filter { !$0.isEmpty }
        }
        let bridge = try await packets(captures[0].1, "udp port 5353")
        #expect(bridge.isEmpty, "mDNS sent into the container bridge: \(bridge.prefix(5))")
        let tunnel = try Data(contentsOf: URL(fileURLWithPath: captures[1].1))
        #expect(tunnel.count <= 24, "\(tunnel.count - 24) bytes of packets were sent into the tunnel")
        let second = try await packets(captures[2].1, "udp port 5353 and src host 198.18.1.105")
        #expect(second.isEmpty, "mDNS sent from the second NIC: \(second.prefix(5))")
        // The control: the second NIC's capture did hear LAN 1 (h1's announcements of Shape Box).
        let heard = try await packets(captures[2].1, "udp port 5353 and src host 198.18.1.1")
        #expect(!heard.isEmpty, "the capture on lan1b heard nothing of LAN 1, so its silence proves nothing")
        for (_, file) in captures { try? FileManager.default.removeItem(atPath: file) }
    }

    func messyRouter(_ lab: Lab) async throws {
        let proxy = try lab.start(["exec", "h5", "--", Self.nearby, "proxy", "lan1=\(Self.zone)", "--listen", Self.proxyAddress,
                                   "--name-server", "proxy-lan1.lab.example.test", "--backend", "embedded", "--json"])
        let browse = try lab.start(["exec", "h6", "--", Self.nearby, "browse", "_openagents._tcp", "--domain", Self.zone, "--json", "--resolve"])
        try await lab.withProcesses([proxy, browse]) {
            _ = try await proxy.waitForLine(containing: "\"proxying\"", timeout: .seconds(20))
            let box = try lab.start(["exec", "h1", "--", Self.nearby, "advertise", "Shape Box", "_openagents._tcp", "9810", "--backend", "embedded", "--json"])
            try await lab.withProcesses([box]) {
                _ = try await box.waitForLine(containing: "\"advertising\"", timeout: .seconds(20))
                // Through the browse (Push, or its polling): found, resolved at h1's address,
                // nothing of the router's bridge, tunnel or second NIC.
                let found = try await browse.waitForLine(where: { $0.contains("\"found\"") && $0.contains("Shape Box") }, timeout: .seconds(20))
                #expect(found.contains("198.18.1.1") && found.contains("\"port\":9810"), "\(found)")
                #expect(!found.contains("172.17.") && !found.contains("100.101.") && !found.contains("198.18.1.105"), "\(found)")
                let srv = try await dig(lab, ["@\(Self.resolver)", "Shape\\032Box._openagents._tcp.\(Self.zone)", "SRV", "+short"])
                #expect(srv.hasPrefix("0 0 9810 ") && srv.contains(".\(Self.zone)."), "\(srv)")
            }
            #expect(proxy.isRunning, "\(proxy.output)\(proxy.errorOutput)")
        }
    }

    func acrossTheRouter(_ lab: Lab, _ peers: [BrokerLabTests.Peer]) async throws {
        let serving = try lab.start(["exec", "h1", "--", "sh", "-c",
            "exec '\(Self.nearby)' serve 'Build Box' _openagents._tcp 9700 --host build-box --backend embedded --json --state-dir '\(peers[0].directory)' < /dev/null"])
        let publisher = try lab.start(["avahi", "exec", "h2", "--", "avahi-publish", "-s", "Daemon Box", "_openagents._tcp", "9701", "from=avahi"])
        let printer = try lab.start(["avahi", "exec", "h2", "--", "avahi-publish", "-s", "Daemon Printer", "_ipp._tcp", "631"])
        let registrant = try lab.start(["zeroconf", "h3", "--", "register", "Zero Box", "_openagents._tcp", "9702", "from=zeroconf"])
        let proxy = try lab.start(["exec", "h5", "--", Self.nearby, "proxy", "lan1=\(Self.zone)", "--listen", Self.proxyAddress,
                                   "--name-server", "proxy-lan1.lab.example.test", "--json"])
        try await lab.withProcesses([serving, publisher, printer, registrant, proxy]) {
            _ = try await proxy.waitForLine(containing: "\"proxying\"", timeout: .seconds(20))
            _ = try await registrant.waitForLine(containing: "\"registered\"", timeout: .seconds(20))
            _ = try await serving.waitForLine(containing: "\"listening\"", timeout: .seconds(20))
            let all: Set = ["Build\\032Box", "Daemon\\032Box", "Zero\\032Box"].map { "\($0)._openagents._tcp.\(Self.zone)." }.reduce(into: Set<String>()) { $0.insert($1) }
            // A one-shot client asks again when the TTL (10 s) has passed; BIND caches
            // what it got, so a service that appeared later may take that long.
            var seen: Set<String> = []
            let deadline = ContinuousClock.now + .seconds(25)
            while seen != all, ContinuousClock.now < deadline {
                seen = try await browse(lab)
                if seen != all { try await Task.sleep(for: .seconds(1)) }
            }
            #expect(seen == all, "through BIND: \(seen)")

            // Resolution through BIND: SRV with the host moved into the zone, its address, TTLs capped.
            let srv = try await dig(lab, ["@\(Self.resolver)", "Zero\\032Box._openagents._tcp.\(Self.zone)", "SRV", "+noall", "+answer"])
            #expect(srv.contains("9702") && srv.contains(".\(Self.zone)."), "\(srv)")
            let target = srv.split(whereSeparator: \.isWhitespace).last.map(String.init) ?? ""
            let address = try await dig(lab, ["@\(Self.resolver)", target, "A", "+short"])
            #expect(address.contains("198.18.1.3"), "\(target): \(address)")
            // Service type enumeration (RFC 6763 §9) through BIND: the link's types, from every host.
            let types = try await dig(lab, ["@\(Self.resolver)", "_services._dns-sd._udp.\(Self.zone)", "PTR", "+short"])
            let listed = Set(types.split(separator: "\n").map(String.init))
            #expect(listed.isSuperset(of: ["_openagents._tcp.\(Self.zone).", "_ipp._tcp.\(Self.zone)."]), "service types through BIND: \(types)")
            let direct = try await dig(lab, ["@\(Self.proxyAddress)", "_openagents._tcp.\(Self.zone)", "PTR", "+norec", "+noall", "+answer", "+comments"])
            #expect(direct.contains("flags: qr aa;"), "authoritative, no recursion: \(direct)")
            for line in direct.split(separator: "\n") where line.contains("IN\tPTR") || line.contains("IN PTR") {
                let ttl = line.split(whereSeparator: { $0 == " " || $0 == "\t" }).dropFirst().first.flatMap { Int($0) } ?? 99
                #expect(ttl <= 10, "TTL capped at 10 s: \(line)")
            }

            // avahi's own wide-area browser, resolving each.
            let avahi = try await lab.run(["avahi", "exec", "h6", "--", "timeout", "10", "avahi-browse", "-d", Self.zone, "-rpt", "_openagents._tcp"], timeout: .seconds(20))
            let resolved = avahi.split(separator: "\n").filter { $0.hasPrefix("=") }.map { $0.split(separator: ";").map(String.init) }
            for (name, port, addr) in [("Build\\032Box", "9700", "198.18.1.1"), ("Daemon\\032Box", "9701", "198.18.1.2"), ("Zero\\032Box", "9702", "198.18.1.3")] {
                #expect(resolved.contains { $0.count > 8 && $0[3] == name && $0[8] == port && $0[7] == addr }, "avahi-browse did not resolve \(name): \(avahi)")
            }

            // Nearby's own unicast browse and a connection by name, across the router.
            let (status, output) = try await nearby(lab, "h6", ["browse", "_openagents._tcp", "--domain", Self.zone, "--resolve", "--json", "--timeout", "3"])
            #expect(status == 0, "\(output)")
            let found = jsonLines(output).filter { $0["event"] as? String == "found" }
            #expect(Set(found.compactMap { $0["name"] as? String }) == ["Build Box", "Daemon Box", "Zero Box"], "\(output)")
            #expect(found.allSatisfy { (($0["addresses"] as? [String]) ?? []).allSatisfy { !$0.hasPrefix("fe80") } }, "a link-local address left the link: \(output)")
            let ping = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}"
            let connect = try lab.start(["exec", "h6", "--", "sh", "-c",
                "echo '\(ping)' | '\(Self.nearby)' connect _openagents._tcp --name 'Build Box' --domain \(Self.zone) --state-dir '\(peers[1].directory)'"])
            let connected = try await connect.wait(timeout: .seconds(30))
            #expect(connected == 0 && connect.output.contains("\"result\""), "\(connect.output)\(connect.errorOutput)")

            // The proxy on the wire: not a resolver; TCP answers too; a plain 512-byte client gets what fits.
            let outside = try await dig(lab, ["@\(Self.proxyAddress)", "www.example.com", "A", "+noall", "+comments"])
            #expect(outside.contains("status: REFUSED"), "\(outside)")
            // A resolver over the default UDP rate (100 a second, bursts of 200) is limited until
            // it asks over TCP, as resolvers do when told TC; then its UDP questions all go through.
            let burst = try await lab.run(["exec", "h6", "--", ConnectionLabTests.python,
                ConnectionLabTests.repository.appendingPathComponent("Tools/lab.d/peers/udp_burst.py").path, Self.proxyAddress, Self.zone, "300"], timeout: .seconds(60))
            let counts = jsonLines(burst).first ?? [:]
            #expect((counts["before"] as? Int ?? 300) < 300 && counts["tcp"] as? Bool == true && counts["after"] as? Int == 300, "a resolver's burst: \(burst)")
            let tcp = try await dig(lab, ["@\(Self.proxyAddress)", Self.zone, "SOA", "+tcp", "+short"])
            #expect(tcp.hasPrefix("proxy-lan1.lab.example.test. hostmaster.\(Self.zone). 0 7200 3600 86400 10"), "\(tcp)")
            let plain = try await dig(lab, ["@\(Self.proxyAddress)", "_openagents._tcp.\(Self.zone)", "PTR", "+noedns", "+ignore", "+noall", "+answer", "+comments"])
            #expect(plain.contains("status: NOERROR") && !plain.contains("OPT PSEUDOSECTION"), "\(plain)")

            // A goodbye on LAN 1 leaves BIND's answers within the TTL cap (10 s) and BIND's cache of it.
            registrant.signal(SIGINT)
            _ = try await registrant.wait(timeout: .seconds(10))
            let gone = ContinuousClock.now
            var left = try await browse(lab)
            while left.contains("Zero\\032Box._openagents._tcp.\(Self.zone)."), ContinuousClock.now - gone < .seconds(25) {
                try await Task.sleep(for: .milliseconds(500))
                left = try await browse(lab)
            }
            #expect(!left.contains("Zero\\032Box._openagents._tcp.\(Self.zone)."), "still listed 25 s after its goodbye: \(left)")
        }
    }
}
}
