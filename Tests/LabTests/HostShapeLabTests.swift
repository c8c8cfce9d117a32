import Foundation
import Testing

/// The hosts users have, made in a lab host with `Tools/lab shape`: IPv6 switched off, a
/// container bridge, a VPN tunnel, a second interface on the same LAN. Each test puts the host
/// back as it was, also when it fails.
extension LabTestSuite {
@Suite("host shapes: IPv6 off, container bridges, tunnels, a second link")
struct HostShapeLabTests {
    static var nearby: String { DiscoveryLabTests.nearby }
    let helpers = ConnectionLabTests()
    static let h4 = "198.18.1.4"

    /// Runs `body` with `shape` made in `host` and `undo` run afterwards in any case.
    func with(_ lab: Lab, _ host: String, shape: [[String]], undo: [[String]], _ body: () async throws -> Void) async throws {
        do {
            for step in shape { try await lab.run(["shape", host] + step) }
            try await body()
        } catch {
            for step in undo { _ = try? await lab.run(["shape", host] + step) }
            throw error
        }
        for step in undo { try await lab.run(["shape", host] + step) }
    }

    /// `nearby ARGS --json` in `host`, stdout and stderr together, stdin from /dev/null.
    func start(_ lab: Lab, _ host: String, _ arguments: [String], environment: [String: String] = [:]) throws -> LabProcess {
        let variables = environment.map { "\($0.key)='\($0.value)'" }.joined(separator: " ")
        let command = ([Self.nearby] + arguments + ["--json"]).map { "'\($0)'" }.joined(separator: " ")
        return try lab.start(["exec", host, "--", "sh", "-c", "exec 2>&1; exec env \(variables) \(command) < /dev/null"])
    }

    /// Advertises `name` from h4 while capturing mDNS on `interface` there; checks that h2
    /// resolves it at h4's LAN address, and returns the capture's bytes.
    func advertiseCapturing(_ lab: Lab, on interface: String, _ name: String, _ type: String, port: Int) async throws -> [UInt8] {
        let capture = try Lab.temporaryDirectory().appendingPathComponent("\(interface).pcap").path
        try await lab.run(["capture", "start", "--iface", interface, "h4", capture])
        let label = name.lowercased().filter(\.isLetter)
        let advertising: LabProcess
        do {
            advertising = try start(lab, "h4", ["advertise", name, type, String(port), "--host", label])
        } catch {
            _ = try? await lab.run(["capture", "stop", "h4", capture])
            throw error
        }
        do {
            try await lab.withProcesses([advertising]) {
                _ = try await advertising.waitForLine(containing: "\"advertising\"", timeout: .seconds(20))
                // Found on the LAN, as usual, at its LAN address only.
                let found = try await lab.run(["exec", "h2", "--", Self.nearby, "resolve", name, type, "--json", "--timeout", "5"])
                #expect(found.contains("198.18.1.4"), "\(found)")
                #expect(!found.contains("172.17.") && !found.contains("100.101."), "an address of \(interface) is announced on the LAN: \(found)")
            }
        } catch {
            _ = try? await lab.run(["capture", "stop", "h4", capture])
            throw error
        }
        try await lab.run(["capture", "stop", "h4", capture])
        defer { try? FileManager.default.removeItem(atPath: capture) }
        return Array(try Data(contentsOf: URL(fileURLWithPath: capture)))
    }

    @Test("IPv6 switched off: serve, receive, pipe --listen, invite and the broker listen on IPv4 (--verbose says so), and a peer gets in")
    func ipv6Off() async throws {
        let lab = try Lab.require(hosts: 4)
        let server = try await helpers.identity(lab, "No Six")
        let client = try await helpers.identity(lab, "Laptop")
        try await helpers.pin(lab, client.peerID, in: server.directory)
        try await helpers.pin(lab, server.peerID, in: client.directory)
        let inbox = try Lab.temporaryDirectory().path
        try await with(lab, "h4", shape: [["ipv6", "off"]], undo: [["ipv6", "on"]]) {
            let shown = try await lab.run(["exec", "h4", "--", "ip", "-6", "addr"])
            #expect(!shown.contains("inet6"), "IPv6 is not off: \(shown)")
            let serving = try start(lab, "h4", ["serve", "No Six", "_openagents._tcp", "9611", "--no-advertise", "--verbose", "--state-dir", server.directory])
            let receiving = try start(lab, "h4", ["receive", inbox, "--port", "9612", "--no-advertise", "--state-dir", server.directory])
            let piping = try start(lab, "h4", ["pipe", "--listen", "--port", "9613", "--no-advertise", "--state-dir", server.directory])
            let inviting = try start(lab, "h4", ["invite", "--port", "9614", "--qr", "off", "--state-dir", server.directory])
            let brokering = try start(lab, "h4", ["serve", "No Six Broker", "_nosix._tcp", "9615", "--auto-invite", "--host", "nosix", "--state-dir", server.directory])
            try await lab.withProcesses([serving, receiving, piping, inviting, brokering]) {
                let listening = try await serving.waitForLine(containing: "\"listening\"", timeout: .seconds(20))
                #expect(listening.contains("9611"))
                #expect(serving.output.contains("IPv4 only"), "--verbose does not say IPv4 only: \(serving.output)")
                _ = try await receiving.waitForLine(containing: "\"listening\"", timeout: .seconds(20))
                _ = try await piping.waitForLine(containing: "\"listening\"", timeout: .seconds(20))
                let link = try await inviting.waitForLine(containing: "\"addresses\"", timeout: .seconds(20))
                #expect(!link.contains("fd6e"), "an invitation from a host without IPv6 carries an IPv6 address: \(link)")
                _ = try await brokering.waitForLine(containing: "\"listening\"", timeout: .seconds(20))
                for process in [serving, receiving, piping, inviting, brokering] {
                    #expect(!process.output.contains("cannot listen"), "\(process.output)")
                    #expect(process.isRunning, "\(process.output)")
                }
                // A peer reaches serve over IPv4.
                let connecting = try AdmissionLabTests().startConnect(lab, port: 9611, state: client.directory, host: Self.h4)
                #expect(try await connecting.wait(timeout: .seconds(20)) == 0, "\(connecting.output)\(connecting.errorOutput)")
                #expect(connecting.output.contains(#""result":{}"#), "\(connecting.output)")
            }
        }
    }

    @Test("a container bridge: no mDNS is sent into it and invitations leave its address out; NEARBY_VIRTUAL_LINKS takes it in; a registrar on its address advertises on the LAN")
    func containerBridge() async throws {
        let lab = try Lab.require(hosts: 4)
        let state = try await helpers.identity(lab, "Docker Host")
        try await with(lab, "h4", shape: [["bridge", "add", "docker0", "172.17.0.1/16"]], undo: [["bridge", "del", "docker0"]]) {
            let captured = try await advertiseCapturing(lab, on: "docker0", "Docker Host", "_dock._tcp", port: 9620)
            let packets = try udpPayloads(ofPcap: captured)
            #expect(packets.isEmpty, "\(packets.count) mDNS packets went into docker0")

            // Invitations: the LAN address, not the bridge's; unless the bridge is named.
            let plain = try start(lab, "h4", ["invite", "--port", "9621", "--qr", "off", "--state-dir", state.directory])
            let named = try start(lab, "h4", ["invite", "--port", "9622", "--qr", "off", "--state-dir", state.directory],
                                  environment: ["NEARBY_VIRTUAL_LINKS": "docker0"])
            try await lab.withProcesses([plain, named]) {
                let link = try await plain.waitForLine(containing: "\"addresses\"", timeout: .seconds(20))
                #expect(link.contains("198.18.1.4") && !link.contains("172.17.0.1"), "\(link)")
                let included = try await named.waitForLine(containing: "\"addresses\"", timeout: .seconds(20))
                #expect(included.contains("172.17.0.1"), "\(included)")
            }

            // The registrar where a container's update arrives (the bridge's address), advertising
            // on the LAN: a registration sent there is resolved from h2.
            let stateFile = try Lab.temporaryDirectory().appendingPathComponent("srp.state").path
            let registrar = try start(lab, "h4", ["registrar", "--listen", "172.17.0.1", "--interface", "lan1", "--state-file", stateFile])
            try await lab.withProcesses([registrar]) {
                _ = try await registrar.waitForLine(containing: "\"registrar\"", timeout: .seconds(15))
                let requestor = try start(lab, "h4", [
                    "advertise", "Boxed In", "_dock._tcp", "9623", "--registrar", "172.17.0.1", "--register-address", Self.h4, "--host", "boxedin",
                    "--state-dir", state.directory,
                ])
                try await lab.withProcesses([requestor]) {
                    _ = try await requestor.waitForLine(containing: "\"registered\"", timeout: .seconds(15))
                    let found = try await lab.run(["exec", "h2", "--", Self.nearby, "resolve", "Boxed In", "_dock._tcp", "--json", "--timeout", "5"])
                    #expect(found.contains(Self.h4) && found.contains("9623"), "\(found)")
                }
            }
        }
    }

    /// A second interface on the same LAN (a second NIC, a docked laptop's Wi-Fi) hears what
    /// the host multicasts on the first. The embedded engine took its own probes for a rival's
    /// (each interface proposes its own addresses) and its own packets for another stack's,
    /// and never answered for its host name (RFC 6762 §14). avahi-daemon, the system backend,
    /// is the reference.
    @Test("a second interface on the same LAN, IPv6 link-local only or with IPv4 too: the advertiser is found and resolved within 6 s",
          arguments: Backend.allCases, [false, true])
    func secondLinkOnTheSameLAN(_ backend: Backend, withIPv4: Bool) async throws {
        let lab = try Lab.require(hosts: 4)
        let nearby = NearbyRunner(lab: lab, backend: backend)
        let link = ["link", "add", "lan1b", "--lan", "1"] + (withIPv4 ? ["--ipv4", "198.18.1.104/24"] : [])
        try await with(lab, "h4", shape: [link], undo: [["link", "del", "lan1b"]]) {
            // avahi-daemon starts after the link is there, so that it runs on lan1b too.
            try await lab.withAvahi(in: nearby.daemons(["h4"]) + ["h2"]) {
                let (advertiser, started) = try await nearby.advertise(
                    in: "h4", nearby.hostOption("dual") + ["--log-level", "info", "Dual Box", "_dual._tcp", "9400"])
                #expect(started["name"] as? String == "Dual Box")
                let browser = try nearby.start("h2", ["browse", "_dual._tcp", "--resolve", "--json", "--timeout", "10"])
                try await lab.withProcesses([advertiser, browser]) {
                    let line = try await browser.waitForLine(containing: "\"Dual Box\"", timeout: .seconds(6))
                    let found = try #require(jsonLines(line).first)
                    let host = nearby.hostName(of: "h4", label: "dual")
                    #expect(found["port"] as? Int == 9400)
                    #expect(found["host"] as? String == host)
                    // h4's addresses: lan1's, and lan1b's link-local (MAC 02:6e:62:01:01:04) and IPv4.
                    let h4 = [Self.h4, "198.18.1.104", "fd6e:6272:1::4", "fe80::6e:62ff:fe01:4", "fe80::6e:62ff:fe01:104"]
                    let addresses = found["addresses"] as? [String] ?? []
                    #expect(!addresses.isEmpty && addresses.allSatisfy { h4.contains($0.components(separatedBy: "%")[0]) }, "\(addresses)")
                    // An independent resolver agrees: avahi in h2 resolves the host name.
                    let resolved = try await lab.run(["avahi", "exec", "h2", "--", "avahi-resolve", "-n", String(host.dropLast())], timeout: .seconds(15))
                    #expect(h4.contains { resolved.contains($0) }, "\(resolved)")
                    // Probing and announcing are over: the name was kept, and no packet of our
                    // own was taken for another stack's (which would stop QU questions, §15.1).
                    try await Task.sleep(for: .seconds(3))
                    #expect(advertiser.isRunning)
                    #expect(!advertiser.output.contains("renamed"), "\(advertiser.output)")
                    #expect(!advertiser.errorOutput.contains("another mDNS stack"), "\(advertiser.errorOutput.suffix(2000))")
                }
            }
        }
    }

    @Test("a VPN tunnel: its addresses are in invitations, and no mDNS is sent on it")
    func tunnel() async throws {
        let lab = try Lab.require(hosts: 4)
        let state = try await helpers.identity(lab, "Tunnel Host")
        try await with(lab, "h4", shape: [["tun", "add", "tailscale0", "100.101.102.4", "fd7a:115c:a1e0::4"]], undo: [["tun", "del", "tailscale0"]]) {
            let inviting = try start(lab, "h4", ["invite", "--port", "9623", "--qr", "off", "--state-dir", state.directory])
            try await lab.withProcesses([inviting]) {
                let link = try await inviting.waitForLine(containing: "\"addresses\"", timeout: .seconds(20))
                #expect(link.contains("100.101.102.4") && link.contains("fd7a:115c:a1e0::4"), "\(link)")
                #expect(link.contains("198.18.1.4"), "\(link)")
            }
            // A tun capture has no Ethernet header: any captured packet at all is one too many.
            let bytes = try await advertiseCapturing(lab, on: "tailscale0", "Tunnel Host", "_tun._tcp", port: 9624)
            #expect(bytes.count <= 24, "\(bytes.count - 24) bytes of packets were sent into the tunnel")
        }
    }

    /// A laptop that sleeps takes its link down and brings it up again when it wakes; it must be
    /// found again at once, whatever a resolver cached while it was away.
    @Test("back from 15 s asleep (link down, then up): the advertiser is resolved again at once", arguments: Backend.allCases)
    func backFromSleep(_ backend: Backend) async throws {
        let lab = try Lab.require(hosts: 4)
        let nearby = NearbyRunner(lab: lab, backend: backend)
        try await lab.withAvahi(in: nearby.daemons(["h4", "h2"])) {
            let (advertiser, _) = try await nearby.advertise(in: "h4", nearby.hostOption("sleepy") + ["Sleepy Box", "_sleep._tcp", "9410"])
            try await lab.withProcesses([advertiser]) {
                let awake = try await nearby.run("h2", ["resolve", "Sleepy Box", "_sleep._tcp", "--json", "--timeout", "5"])
                #expect(awake.contains("\"port\":9410"), "\(awake)")
                try await lab.run(["exec", "h4", "--", "ip", "link", "set", "lan1", "down"])
                do {
                    try await Task.sleep(for: .seconds(15))
                    try await lab.run(["exec", "h4", "--", "ip", "link", "set", "lan1", "up"])
                } catch {
                    _ = try? await lab.run(["exec", "h4", "--", "ip", "link", "set", "lan1", "up"])
                    try? await lab.restoreRoutes("h4")
                    throw error
                }
                try await lab.restoreRoutes("h4")
                let woken = try await nearby.run("h2", ["resolve", "Sleepy Box", "_sleep._tcp", "--json", "--timeout", "5"])
                #expect(woken.contains("\"port\":9410") && woken.contains(Self.h4), "not resolved after waking: \(woken)")
                #expect(advertiser.isRunning, "\(advertiser.output)\(advertiser.errorOutput)")
            }
        }
    }

    /// A host renumbered on the same link (a new DHCP lease, a VM moved to another address):
    /// a browser elsewhere must hear the new address, and lose the old one, without waiting
    /// for the old record's TTL (120 s). The embedded engine hears the change from the kernel
    /// (netlink) and sends a goodbye for the old address and the new one with the cache-flush
    /// bit; with the system backend, avahi-daemon does the same on its own.
    @Test("renumbered on the same link: a browser on another host gets the new address, then a line without the old one", arguments: Backend.allCases)
    func renumbered(_ backend: Backend) async throws {
        let lab = try Lab.require(hosts: 4)
        let nearby = NearbyRunner(lab: lab, backend: backend)
        try await lab.withAvahi(in: nearby.daemons(["h4"])) {
            let (advertiser, _) = try await nearby.advertise(in: "h4", nearby.hostOption("renumbered") + ["Renumbered Box", "_renum._tcp", "9412"])
            let browser = try start(lab, "h2", ["browse", "_renum._tcp", "--resolve"])
            try await lab.withProcesses([advertiser, browser]) {
                _ = try await browser.waitForLine(containing: "\"\(Self.h4)\"", timeout: .seconds(10))
                let moved = "198.18.1.104"
                // The new address comes before the old one goes, as in a DHCP renewal; promoted
                // from secondary when the old one goes, it keeps the link's routes.
                let restore = ["exec", "h4", "--", "sh", "-c", "ip addr add \(Self.h4)/24 dev lan1; ip addr del \(moved)/24 dev lan1; true"]
                let capture = try Lab.temporaryDirectory().appendingPathComponent("renumbered.pcap").path
                defer { try? FileManager.default.removeItem(atPath: capture) }
                try await lab.run(["capture", "start", "--iface", "lan1", "h4", capture])
                do {
                    try await lab.run(["exec", "h4", "--", "sh", "-c",
                        "sysctl -qw net.ipv4.conf.lan1.promote_secondaries=1 && ip addr add \(moved)/24 dev lan1 && ip addr del \(Self.h4)/24 dev lan1"])
                    let heard = try await browser.waitForLine(containing: "\"\(moved)\"", timeout: .seconds(10))
                    #expect(heard.contains("\"updated\""), "\(heard)")
                    let settled = try await browser.waitForLine(
                        where: { $0.contains("\"\(moved)\"") && !$0.contains("\"\(Self.h4)\"") }, timeout: .seconds(10))
                    #expect(settled.contains("\"port\":9412"), "\(settled)")
                    #expect(advertiser.isRunning, "\(advertiser.output)\(advertiser.errorOutput)")
                } catch {
                    _ = try? await lab.run(["capture", "stop", "h4", capture])
                    _ = try? await lab.run(restore)
                    try? await lab.restoreRoutes("h4")
                    throw error
                }
                try await lab.run(["capture", "stop", "h4", capture])
                try await lab.run(restore)
                try await lab.restoreRoutes("h4")
                if backend == .embedded {
                    // What the embedded engine sent (RFC 6762 §8.4, §10.1): a goodbye for the old
                    // address, and no probe (the host name was ours already).
                    let frames = try await lab.run(["exec", "h4", "--", Self.nearby, "decode", capture, "--json"])
                        .split(separator: "\n")
                    let goodbye = frames.contains { $0.contains("\"type\":\"A\",\"class\":\"IN\",\"ttl\":0,") && $0.contains("\"address\":\"\(Self.h4)\"") }
                    #expect(goodbye, "no goodbye for \(Self.h4) among \(frames.count) frame(s)")
                    let probes = frames.filter { $0.contains("\"response\":false") && !$0.contains("\"authorities\":[]") }
                    #expect(probes.isEmpty, "probed again: \(probes)")
                }
            }
        }
    }
}
}
