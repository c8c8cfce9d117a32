import Foundation
import Testing

/// Services of devices multicast cannot reach, found on the LAN: `nearby registrar` in the
/// router h5 takes SRP updates (RFC 9665) on its LAN 2 address and advertises them on LAN 1;
/// the requestors are in h6, on LAN 2, whose multicast never reaches LAN 1 (the stand-in for a
/// container behind a routed bridge). They are Nearby's own (`nearby advertise --registrar`)
/// and one written from the RFCs in Python (Tools/lab.d/peers/srp_client.py); the LAN's
/// browsers are avahi-daemon (h2) and python-zeroconf (h3).
extension LabTestSuite {
@Suite("SRP registrar (RFC 9665): LAN 2's services advertised on LAN 1")
struct RegistrarLabTests {
    static var nearby: String { DiscoveryLabTests.nearby }
    static let registrarAddress = "198.18.2.5"
    static let deviceAddress = "198.18.2.6"
    static var client: String { ConnectionLabTests.repository.appendingPathComponent("Tools/lab.d/peers/srp_client.py").path }
    /// A README example program, built beside nearby.
    static func example(_ name: String) -> String { URL(fileURLWithPath: nearby).deletingLastPathComponent().appendingPathComponent(name).path }

    func routerLab() throws -> Lab {
        let lab = try Lab.require(hosts: 6)
        guard ProcessInfo.processInfo.environment["NEARBY_LAB_ROUTER"] == "h5" else {
            throw LabError("the registrar test needs Tools/test's lab: h1-h4 on LAN 1, h5 the router, h6 on LAN 2")
        }
        return lab
    }

    func startRegistrar(_ lab: Lab, state: URL) async throws -> LabProcess {
        let registrar = try lab.start([
            "exec", "h5", "--", Self.nearby, "registrar", "--listen", Self.registrarAddress, "--interface", "lan1", "--state-file",
            state.path, "--json", "--verbose",
        ])
        _ = try await registrar.waitForLine(containing: "\"registrar\"", timeout: .seconds(15))
        return registrar
    }

    /// The Python requestor in h6: its one JSON line.
    func python(_ lab: Lab, _ arguments: [String]) async throws -> [String: Any] {
        let output = try await lab.run(
            ["exec", "h6", "--", ConnectionLabTests.python, Self.client, "--registrar", Self.registrarAddress] + arguments, timeout: .seconds(20))
        return try #require(jsonLines(output).last, "no answer from the requestor: \(output)")
    }

    /// What avahi-browse in h2 resolves of `_openagents._tcp` (lines `=;…`).
    func avahiResolved(_ lab: Lab) async throws -> [String] {
        let output = try await lab.run(["avahi", "exec", "h2", "--", "timeout", "6", "avahi-browse", "-rpt", "_openagents._tcp"], timeout: .seconds(20))
        return output.split(separator: "\n").map(String.init).filter { $0.hasPrefix("=") }
    }

    @Test("registrations from LAN 2 (nearby advertise --registrar and an RFC-only Python requestor) are resolved by avahi and python-zeroconf on LAN 1; a registered serve is connected to by name from LAN 1; README's Swift program registers through the front door; refusals (another key, a bad signature, a name in use on the link, a flood) reach the requestor and never the link; goodbyes on exit; names survive a registrar restart")
    func registrarAdvertises() async throws {
        let lab = try routerLab()
        let directory = try Lab.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let state = directory.appendingPathComponent("srp.state")
        let keyA = directory.appendingPathComponent("a.pem").path
        let keyB = directory.appendingPathComponent("b.pem").path
        let identity = directory.appendingPathComponent("identity").path
        try await lab.withAvahi(in: ["h2"]) {
            let registrar = try await startRegistrar(lab, state: state)
            // A service already on LAN 1, advertised with mDNS by h1.
            let onLink = try lab.start(["exec", "h1", "--", Self.nearby, "advertise", "Taken Box", "_openagents._tcp", "9700", "--backend", "embedded", "--json"])
            _ = try await onLink.waitForLine(containing: "\"advertising\"", timeout: .seconds(15))
            let advertiser = try lab.start([
                "exec", "h6", "--", Self.nearby, "advertise", "Boxed", "_openagents._tcp", "9099", "from=srp", "--registrar", Self.registrarAddress,
                "--register-address", Self.deviceAddress, "--host", "boxed", "--state-dir", identity, "--json",
            ])
            try await lab.withProcesses([registrar, onLink, advertiser]) {
                let registered = try await advertiser.waitForLine(containing: "\"registered\"", timeout: .seconds(15))
                #expect(registered.contains("\"lease\":7200"))

                // The RFC-only requestor, with its own key.
                let accepted = try await python(lab, ["--host", "pybox", "--instance", "Py Box", "--address", Self.deviceAddress, "--service-port", "9100", "--key", keyA, "--txt", "from=python"])
                #expect(accepted["rcode"] as? String == "NOERROR", "\(accepted)")
                #expect(accepted["lease"] as? Int == 7200)

                // Seen on LAN 1 as ordinary local services, at the device's address on LAN 2.
                let resolved = try await avahiResolved(lab)
                let boxed = resolved.first { $0.contains(";Boxed;") }
                #expect(boxed?.contains("boxed.local;\(Self.deviceAddress);9099;") == true, "avahi-browse: \(resolved)")
                #expect(boxed?.contains("from=srp") == true)
                #expect(resolved.contains { $0.contains(";Py\\032Box;") && $0.contains("pybox.local;\(Self.deviceAddress);9100;") }, "avahi-browse: \(resolved)")
                let zeroconf = try await lab.run(["zeroconf", "h3", "--", "resolve", "Py Box", "_openagents._tcp", "--timeout", "5"], timeout: .seconds(20))
                #expect(zeroconf.contains(Self.deviceAddress) && zeroconf.contains("9100"), "python-zeroconf: \(zeroconf)")

                // Another key for the same names: YXDOMAIN (first come, first served).
                let other = try await python(lab, ["--host", "pybox", "--instance", "Py Box", "--address", "198.18.2.7", "--key", keyB])
                #expect(other["rcode"] as? String == "YXDOMAIN", "\(other)")
                // A signature that does not verify: NOTAUTH, nothing published.
                let tampered = try await python(lab, ["--host", "forged", "--instance", "Forged", "--address", Self.deviceAddress, "--key", keyB, "--tamper"])
                #expect(tampered["rcode"] as? String == "NOTAUTH", "\(tampered)")
                // A name already in use on the link: YXDOMAIN, and the link keeps its owner's.
                let takenReply = try await python(lab, ["--host", "taker", "--instance", "Taken Box", "--address", Self.deviceAddress, "--key", keyB])
                #expect(takenReply["rcode"] as? String == "YXDOMAIN", "\(takenReply)")
                // A flood from one source: the first are answered, the rest refused (5/s, burst 20).
                let flood = try await python(lab, ["--host", "flood", "--instance", "Flood", "--address", Self.deviceAddress, "--key", keyB, "--burst", "60"])
                let counts = flood["replies"] as? [String: Int] ?? [:]
                #expect((counts["REFUSED"] ?? 0) >= 30, "\(flood)")
                let after = try await avahiResolved(lab)
                #expect(!after.contains { $0.contains(";Forged;") })
                let taken = after.filter { $0.contains(";Taken\\032Box;") }
                #expect(!taken.isEmpty && taken.allSatisfy { $0.contains(";9700;") }, "the link's own Taken Box, and only it: \(after)")

                // A peer that serves from LAN 2, registered (not advertised: it has no multicast to
                // LAN 1): a client on LAN 1 finds it by name and connects, its certificate checked
                // against the TXT id the registrar accepted only from that key.
                let served = try lab.start([
                    "exec", "h6", "--", Self.nearby, "serve", "Served Box", "_openagents._tcp", "9600", "--no-advertise", "--accept", "all", "--registrar", Self.registrarAddress,
                    "--register-address", Self.deviceAddress, "--host", "served", "--state-dir", directory.appendingPathComponent("served").path, "--json",
                ])
                try await lab.withProcesses([served]) {
                    _ = try await served.waitForLine(containing: "\"registered\"", timeout: .seconds(15))
                    let ping = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}"
                    let connect = try lab.start(["exec", "h1", "--", "sh", "-c",
                        "echo '\(ping)' | '\(Self.nearby)' connect _openagents._tcp --name 'Served Box' --trust-on-first-use --backend embedded --state-dir '\(directory.appendingPathComponent("client").path)'"])
                    let connected = try await connect.wait(timeout: .seconds(30))
                    #expect(connected == 0 && connect.output.contains("\"result\""), "\(connect.output)\(connect.errorOutput)")
                }

                // README's Swift program registers through the front door (its own host name: the
                // machine's is in use on LAN 1 by h1), signed with the identity it makes.
                let frontDoor = try lab.start([
                    "exec", "h6", "--", "unshare", "--uts", "sh", "-c",
                    "hostname front-door; exec env NEARBY_STATE_DIR='\(directory.appendingPathComponent("front").path)' stdbuf -oL '\(Self.example("readme-register"))' \(Self.registrarAddress)",
                ])
                _ = try await frontDoor.waitForLine(containing: "registered as Container with \(Self.registrarAddress)", timeout: .seconds(15))
                let both = try await avahiResolved(lab)
                #expect(both.contains { $0.contains(";Container;") && $0.contains("front-door.local;\(Self.deviceAddress);9099;") }, "avahi-browse: \(both)")

                // The requestors exit: their goodbyes leave the link within 2 s.
                advertiser.signal(SIGINT)
                frontDoor.signal(SIGINT)
                #expect(try await advertiser.wait(timeout: .seconds(10)) == 0)
                #expect(try await frontDoor.wait(timeout: .seconds(10)) == 0, "\(frontDoor.output)\(frontDoor.errorOutput)")
                try await Task.sleep(for: .seconds(2))
                let gone = try await lab.run(["avahi", "exec", "h2", "--", "timeout", "3", "avahi-browse", "-pt", "_openagents._tcp"], timeout: .seconds(10))
                #expect(!gone.contains(";Boxed;") && !gone.contains(";Container;"), "still on the link after the goodbyes: \(gone)")

                // A restart keeps the names: Py Box is advertised again, and still refused to key B.
                registrar.signal(SIGTERM)
                _ = try await registrar.wait(timeout: .seconds(10))
                let restarted = try await startRegistrar(lab, state: state)
                try await lab.withProcesses([restarted]) {
                    let again = try await python(lab, ["--host", "pybox", "--instance", "Py Box", "--address", "198.18.2.7", "--key", keyB])
                    #expect(again["rcode"] as? String == "YXDOMAIN", "after a restart: \(again)")
                    try await Task.sleep(for: .seconds(2))
                    let restored = try await avahiResolved(lab)
                    #expect(restored.contains { $0.contains(";Py\\032Box;") }, "after a restart: \(restored)")
                    // Removal by the key that holds it: goodbyes.
                    let removed = try await python(lab, ["--host", "pybox", "--instance", "Py Box", "--address", Self.deviceAddress, "--key", keyA, "--remove"])
                    #expect(removed["rcode"] as? String == "NOERROR", "\(removed)")
                    restarted.signal(SIGTERM)
                    #expect(try await restarted.wait(timeout: .seconds(10)) == 0)
                }
            }
        }
    }

    @Test("one daemon on the router: nearby proxy --registrar-port names its registrar in the zone (_dnssd-srp._udp SRV); a requestor on LAN 2 that knows only the zone finds it, registers, and its service is answered in the zone from LAN 1's mDNS")
    func proxyAndRegistrar() async throws {
        let lab = try routerLab()
        let directory = try Lab.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let zone = "lan1.lab.example.test"
        let proxy = try lab.start([
            "exec", "h5", "--", Self.nearby, "proxy", "lan1=\(zone)", "--listen", "198.18.1.5", "--name-server", "ns.\(zone)", "--no-push",
            "--registrar-port", "8053", "--json",
        ])
        try await lab.run(["dns", "resolv", "h6", "--nameserver", "198.18.1.5", "--search", zone])
        do {
            try await lab.withProcesses([proxy]) {
                let ready = try await proxy.waitForLine(containing: "\"registrar\"", timeout: .seconds(15))
                #expect(ready.contains("\"port\":8053"), "\(ready)")
                let srv = try await lab.run(["exec", "h6", "--", "dig", "@198.18.1.5", "_dnssd-srp._udp.\(zone)", "SRV", "+short"])
                #expect(srv.contains("0 0 8053 ns.\(zone)."), "\(srv)")
                let advertiser = try lab.start([
                    "exec", "h6", "--", Self.nearby, "advertise", "Routed Box", "_openagents._tcp", "9400", "--registrar", zone,
                    "--register-address", Self.deviceAddress, "--host", "routed", "--state-dir", directory.appendingPathComponent("routed").path, "--json",
                ])
                try await lab.withProcesses([advertiser]) {
                    let registered = try await advertiser.waitForLine(containing: "\"registered\"", timeout: .seconds(15))
                    #expect(registered.contains("198.18.1.5:8053"), "\(registered)")
                    // The proxy answers for it in the zone, from what its own registrar told LAN 1.
                    var found = ""
                    for _ in 0..<10 {
                        found = try await lab.run(["exec", "h6", "--", "dig", "@198.18.1.5", "_openagents._tcp.\(zone)", "PTR", "+short"])
                        if found.contains("Routed") { break }
                        try await Task.sleep(for: .milliseconds(300))
                    }
                    #expect(found.contains("Routed\\032Box._openagents._tcp.\(zone)."), "\(found)")
                    let address = try await lab.run(["exec", "h6", "--", "dig", "@198.18.1.5", "routed.\(zone)", "A", "+short"])
                    #expect(address.contains(Self.deviceAddress), "\(address)")
                }
            }
        } catch {
            _ = try? await lab.run(["dns", "resolv", "h6"])
            throw error
        }
        try await lab.run(["dns", "resolv", "h6"])
    }
}
}
