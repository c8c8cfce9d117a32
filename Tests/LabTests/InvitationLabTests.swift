import Foundation
import Testing

/// Invitations across the lab's router, which forwards unicast but no multicast: the inviter in
/// h1 (LAN 1), the invitee in h6 (alone on LAN 2), where browsing finds nothing. A link pins both
/// sides and a connection by address works at once; every way it can be refused says so in
/// its own words; and a Python invitee written from Documentation/Protocols.md alone
/// (Tools/lab.d/peers/invitee.py) is admitted too.
extension LabTestSuite {
@Suite("invitations: a link across a router that forwards no multicast, and every refusal")
struct InvitationLabTests {
    static var nearby: String { DiscoveryLabTests.nearby }
    static var invitee: String { ConnectionLabTests.repository.appendingPathComponent("Tools/lab.d/peers/invitee.py").path }
    static let h1 = "198.18.1.1"
    /// h6's addresses, as the inviter sees them: the invitee came from the other subnet.
    static let h6 = ["198.18.2.6", "fd6e:6272:2::6"]
    static let ping = #"{"jsonrpc":"2.0","id":1,"method":"ping"}"#
    let helpers = ConnectionLabTests()
    let pairs = PairingLabTests()

    /// Tools/test's lab: h1..h4 on LAN 1, h5 the router, h6 alone on LAN 2.
    func routerLab() async throws -> Lab {
        let lab = try Lab.require(hosts: 6)
        let environment = ProcessInfo.processInfo.environment
        guard environment["NEARBY_LAB_ROUTER"] == "h5", environment["NEARBY_LAB_LAN2_HOSTS"] == "5,6" else {
            throw LabError("invitation tests need Tools/test's lab: h6 alone on LAN 2 behind the router h5 (NEARBY_LAB_ROUTER=h5)")
        }
        // Earlier tests reset links and addresses, which takes their routes with them.
        for host in ["h1", "h2", "h3", "h4"] { try await lab.restoreRoutes(host) }
        return lab
    }

    /// Starts `nearby ARGS` in `host` (stdout and stderr together, stdin empty).
    func start(_ lab: Lab, _ host: String, _ arguments: [String]) throws -> LabProcess {
        let command = ([Self.nearby] + arguments).map { "'\($0)'" }.joined(separator: " ")
        // `exec`, so that a stop signal reaches nearby itself.
        return try lab.start(["exec", host, "--", "sh", "-c", "exec 2>&1; exec \(command) < /dev/null"])
    }

    /// Runs `nearby ARGS` in `host` to its end; returns its exit status and output.
    func run(_ lab: Lab, _ host: String, _ arguments: [String]) async throws -> (status: Int32, output: String) {
        let process = try start(lab, host, arguments)
        let status = try await process.wait(timeout: .seconds(30))
        return (status, process.output)
    }

    /// Starts `nearby invite ARGS` or `nearby serve ARGS --invite` in h1; returns it and its link.
    func inviter(_ lab: Lab, _ arguments: [String]) async throws -> (process: LabProcess, link: String) {
        let process = try start(lab, "h1", arguments + ["--qr", "off", "--json"])
        let line = try await process.waitForLine(containing: "\"invitationLink\"", timeout: .seconds(20))
        let link = try #require(jsonLines(line).first?["link"] as? String, "\(line)")
        #expect(link.hasPrefix("NEARBY:1/") && link.contains("/\(Self.h1):"), "\(link)")
        return (process, link)
    }

    /// `nearby accept LINK --json` in h6.
    func accept(_ lab: Lab, _ link: String, state: String) async throws -> (status: Int32, output: String) {
        try await run(lab, "h6", ["accept", link, "--json", "--state-dir", state])
    }

    /// `nearby connect --json ARGS` in h6 with a ping on stdin.
    func connectFromH6(_ lab: Lab, _ arguments: [String]) async throws -> (status: Int32, output: String) {
        let command = ([Self.nearby, "connect", "--json"] + arguments).map { "'\($0)'" }.joined(separator: " ")
        let process = try lab.start(["exec", "h6", "--", "sh", "-c", "printf '%s\\n' '\(Self.ping)' | \(command) 2>&1"])
        let status = try await process.wait(timeout: .seconds(30))
        return (status, process.output)
    }

    /// Runs Tools/lab.d/peers/invitee.py LINK --json ARGS in h6; returns its exit status and output.
    func python(_ lab: Lab, _ link: String, identity: String, _ arguments: [String] = []) async throws -> (status: Int32, output: String) {
        let process = try lab.start(["exec", "h6", "--", ConnectionLabTests.python, Self.invitee, link, "--identity-dir", identity, "--json"] + arguments)
        let status = try await process.wait(timeout: .seconds(30))
        return (status, process.output + process.errorOutput)
    }

    /// The first event named `name` in a command's output.
    func event(_ name: String, in output: String) -> [String: Any]? {
        jsonLines(output).first { $0["event"] as? String == name }
    }

    /// The message of accept's refusal (empty when there is none).
    func refusal(_ output: String) -> String {
        event("invitationRefused", in: output)?["message"] as? String ?? ""
    }

    /// The link's fields: NEARBY:1, peer ID, invitation ID, secret, expiry, addresses...
    func fields(_ link: String) -> [String] {
        link.split(separator: "/", omittingEmptySubsequences: false).map(String.init)
    }

    /// The link with field `index` replaced.
    func replacing(_ index: Int, of link: String, with value: String) -> String {
        var parts = fields(link)
        parts[index] = value
        return parts.joined(separator: "/")
    }

    /// The link with its addresses replaced by `address` (HOST:PORT).
    func readdressed(_ link: String, to address: String) -> String {
        (fields(link).prefix(5) + [address]).joined(separator: "/")
    }

    /// The port of the link's first address.
    func port(of link: String) throws -> Int {
        let address = fields(link)[5]
        return try #require(address.split(separator: ":").last.flatMap { Int($0) }, "\(link)")
    }

    /// Waits until the link's expiry (whole seconds since 1970) has passed by this machine's clock.
    func waitUntilExpired(_ link: String) async throws {
        let expires = try #require(TimeInterval(fields(link)[4]), "\(link)")
        let left = expires - Date().timeIntervalSince1970 + 0.3
        #expect(left < 5, "the link expires \(left) s from now, not within its --ttl")
        if left > 0 { try await Task.sleep(for: .milliseconds(Int(left * 1000))) }
    }

    @Test("nearby invite in h1, nearby accept in h6 behind the router: both pin each other, and connect --host works under the pins where browse finds nothing")
    func inviteAcrossTheRouter() async throws {
        let lab = try await routerLab()
        let server = try await helpers.identity(lab, "Build Box")
        let client = try await helpers.identity(lab, "Laptop")
        let (inviting, link) = try await inviter(lab, ["invite", "--state-dir", server.directory])
        try await lab.withProcesses([inviting]) {
            let accepted = try await accept(lab, link, state: client.directory)
            #expect(accepted.status == 0, "\(accepted.output)")
            #expect(event("pinned", in: accepted.output)?["peerID"] as? String == server.peerID, "\(accepted.output)")
            #expect(event("connected", in: accepted.output)?["peerID"] as? String == server.peerID, "\(accepted.output)")
            // Used up: invite says who took it, from the other subnet, and ends with 0.
            #expect(try await inviting.wait(timeout: .seconds(10)) == 0, "\(inviting.output)")
            let taken = try #require(event("invitationAccepted", in: inviting.output), "\(inviting.output)")
            #expect(taken["peerID"] as? String == client.peerID && taken["name"] as? String == "Laptop", "\(taken)")
            #expect(Self.h6.contains(taken["address"] as? String ?? ""), "\(taken)")
        }
        #expect(try await pairs.pins(lab, server.directory) == [client.peerID])
        #expect(try await pairs.pins(lab, client.directory) == [server.peerID])

        // The same identity serves (and advertises) in h1: h6 cannot see it, but reaches it by
        // address under the pins alone (the default TRUST); h2, on h1's LAN, sees it.
        let (serving, port) = try await helpers.serve(lab, ["Build Box", "_openagents._tcp", "9451", "--backend", "embedded", "--state-dir", server.directory])
        try await lab.withProcesses([serving]) {
            let far = try start(lab, "h6", ["browse", "_openagents._tcp", "--timeout", "2", "--backend", "embedded"])
            let near = try start(lab, "h2", ["browse", "_openagents._tcp", "--timeout", "2", "--backend", "embedded", "--json"])
            try await lab.withProcesses([far, near]) {
                let connected = try await connectFromH6(
                    lab, ["--host", Self.h1, "--port", String(port), "--peer-id", server.peerID, "--state-dir", client.directory])
                #expect(connected.status == 0, "\(connected.output)")
                #expect(event("connected", in: connected.output)?["peerID"] as? String == server.peerID, "\(connected.output)")
                #expect(connected.output.contains(#""result":{}"#), "\(connected.output)")
                #expect(try await far.wait(timeout: .seconds(10)) == 0, "\(far.output)")
                #expect(far.output.contains("found no _openagents._tcp service in"), "\(far.output)")
                #expect(!far.output.contains("Build Box"), "\(far.output)")
                #expect(try await near.wait(timeout: .seconds(10)) == 0, "\(near.output)")
                #expect(jsonLines(near.output).contains { $0["event"] as? String == "found" && $0["name"] as? String == "Build Box" }, "\(near.output)")
            }
            let admitted = try await serving.waitForLine(containing: "\"connected\"", timeout: .seconds(10))
            #expect(admitted.contains(client.peerID), "\(admitted)")
        }
    }

    @Test("serve --invite keeps serving: the invitee's next connect --host gets in at once (the pin applies live), and accepting again uses nothing")
    func serveInviteAppliesLive() async throws {
        let lab = try await routerLab()
        let server = try await helpers.identity(lab, "Build Box")
        let client = try await helpers.identity(lab, "Laptop")
        let (serving, link) = try await inviter(
            lab, ["serve", "Build Box", "_openagents._tcp", "0", "--invite", "--no-advertise", "--state-dir", server.directory])
        try await lab.withProcesses([serving]) {
            let accepted = try await accept(lab, link, state: client.directory)
            #expect(accepted.status == 0, "\(accepted.output)")
            let taken = try await serving.waitForLine(containing: "\"invitationAccepted\"", timeout: .seconds(10))
            #expect(taken.contains(client.peerID) && taken.contains(#""usesLeft":0"#), "\(taken)")

            // No restart: the running serve admits its new pin under --accept trusted.
            let listening = try port(of: link)
            let connected = try await connectFromH6(lab, ["--host", Self.h1, "--port", String(listening), "--state-dir", client.directory])
            #expect(connected.status == 0, "\(connected.output)")
            #expect(event("connected", in: connected.output)?["peerID"] as? String == server.peerID, "\(connected.output)")
            #expect(connected.output.contains(#""result":{}"#), "\(connected.output)")

            // Trusted now: the link just connects, and nothing is used.
            let again = try await accept(lab, link, state: client.directory)
            #expect(again.status == 0, "\(again.output)")
            let notNeeded = try await serving.waitForLine(containing: "\"invitationNotNeeded\"", timeout: .seconds(10))
            #expect(notNeeded.contains(client.peerID), "\(notNeeded)")
            #expect(serving.isRunning)
        }
        #expect(try await pairs.pins(lab, server.directory) == [client.peerID])
        #expect(try await pairs.pins(lab, client.directory) == [server.peerID])
    }

    @Test("a used link is refused to the next peer, who pins nothing")
    func usedUp() async throws {
        let lab = try await routerLab()
        let server = try await helpers.identity(lab, "Build Box")
        let first = try await helpers.identity(lab, "Laptop")
        let second = try await helpers.identity(lab, "Latecomer")
        let (serving, link) = try await inviter(
            lab, ["serve", "Build Box", "_openagents._tcp", "0", "--invite", "--no-advertise", "--state-dir", server.directory])
        try await lab.withProcesses([serving]) {
            #expect(try await accept(lab, link, state: first.directory).status == 0)
            let refused = try await accept(lab, link, state: second.directory)
            #expect(refused.status == 1, "\(refused.output)")
            #expect(refusal(refused.output).contains("this invitation was already used (it allowed 1 use)"), "\(refused.output)")
            #expect(event("invitationRefused", in: refused.output)?["reason"] as? String == "usedUp", "\(refused.output)")
            let said = try await serving.waitForLine(containing: "\"usedUp\"", timeout: .seconds(10))
            #expect(said.contains(second.peerID), "\(said)")
        }
        #expect(try await pairs.pins(lab, server.directory) == [first.peerID])
        #expect(try await pairs.pins(lab, second.directory).isEmpty)
    }

    @Test("an expired link is refused by the invitee before it dials, and by the inviter when dialed anyway; nearby invite ends with 1")
    func expired() async throws {
        let lab = try await routerLab()
        let server = try await helpers.identity(lab, "Build Box")
        let client = try await helpers.identity(lab, "Laptop")
        let pythonIdentity = try Lab.temporaryDirectory().path
        let (serving, link) = try await inviter(
            lab, ["serve", "Build Box", "_openagents._tcp", "0", "--invite", "--ttl", "2", "--no-advertise", "--state-dir", server.directory])
        let (inviting, _) = try await inviter(lab, ["invite", "--ttl", "2", "--state-dir", server.directory])
        try await lab.withProcesses([serving, inviting]) {
            try await waitUntilExpired(link)
            let refused = try await accept(lab, link, state: client.directory)
            #expect(refused.status == 1, "\(refused.output)")
            #expect(refusal(refused.output).contains("this invitation expired at "), "\(refused.output)")
            #expect(!serving.output.contains(client.peerID), "the invitee dialed an expired link: \(serving.output)")
            // The inviter checks too (the Python invitee dials past the expiry on purpose).
            let dialed = try await python(lab, link, identity: pythonIdentity, ["--skip-expiry-check"])
            #expect(dialed.status == 1, "\(dialed.output)")
            let refusedThere = try #require(event("refused", in: dialed.output), "\(dialed.output)")
            #expect(refusedThere["code"] as? Int == -32005 && refusedThere["reason"] as? String == "expired", "\(refusedThere)")
            #expect((refusedThere["message"] as? String ?? "").contains("this invitation expired at "), "\(refusedThere)")
            // nearby invite gives up when its invitation expires unused.
            #expect(try await inviting.wait(timeout: .seconds(10)) == 1, "\(inviting.output)")
            #expect(event("invitationOver", in: inviting.output)?["reason"] as? String == "expired", "\(inviting.output)")
        }
        #expect(try await pairs.pins(lab, server.directory).isEmpty)
        #expect(try await pairs.pins(lab, client.directory).isEmpty)
    }

    @Test("a stopped inviter revokes its link (nothing answers), and one restarted since does not know it")
    func revoked() async throws {
        let lab = try await routerLab()
        let server = try await helpers.identity(lab, "Build Box")
        let client = try await helpers.identity(lab, "Laptop")
        let (inviting, link) = try await inviter(lab, ["invite", "--state-dir", server.directory])
        await inviting.stop()  // SIGTERM
        let unanswered = try await accept(lab, link, state: client.directory)
        #expect(unanswered.status == 1, "\(unanswered.output)")
        let message = refusal(unanswered.output)
        let stopped = try port(of: link)
        #expect(message.contains("no address of the invitation answered (\(Self.h1):\(stopped)"), "\(unanswered.output)")
        #expect(message.contains("): the inviter stopped, which revokes its invitations, or cannot be reached from here"), "\(unanswered.output)")

        // serve --invite on a fixed port, stopped and started again: the old link is unknown there.
        let arguments = ["serve", "Build Box", "_openagents._tcp", "9462", "--invite", "--no-advertise", "--state-dir", server.directory]
        let (before, old) = try await inviter(lab, arguments)
        await before.stop()
        let (after, _) = try await inviter(lab, arguments)
        try await lab.withProcesses([after]) {
            let unknown = try await accept(lab, old, state: client.directory)
            #expect(unknown.status == 1, "\(unknown.output)")
            #expect(refusal(unknown.output).contains("this invitation is not known here: it was revoked"), "\(unknown.output)")
            let said = try await after.waitForLine(containing: "\"invitationRefused\"", timeout: .seconds(10))
            #expect(said.contains(#""reason":"unknown""#) && said.contains(client.peerID), "\(said)")
        }
        #expect(try await pairs.pins(lab, client.directory).isEmpty)
    }

    @Test("a changed secret is a wrong proof; after 3 the right link is refused as void")
    func wrongProofsMakeItVoid() async throws {
        let lab = try await routerLab()
        let server = try await helpers.identity(lab, "Build Box")
        let client = try await helpers.identity(lab, "Guesser")
        let (serving, link) = try await inviter(
            lab, ["serve", "Build Box", "_openagents._tcp", "0", "--invite", "--no-advertise", "--state-dir", server.directory])
        try await lab.withProcesses([serving]) {
            // One character of the secret changed to another valid one (not the last, whose low bits must be zero).
            let secret = fields(link)[3]
            let changed = replacing(3, of: link, with: String(secret.first == "1" ? "2" : "1") + String(secret.dropFirst()))
            #expect(changed != link)
            let expected = [
                "the proof does not match this invitation's secret (a changed or mistyped link?); 2 more wrong proofs make it void",
                "the proof does not match this invitation's secret (a changed or mistyped link?); 1 more wrong proof makes it void",
                "the proof does not match this invitation's secret (a changed or mistyped link?); it is now void",
            ]
            for message in expected {
                let wrong = try await accept(lab, changed, state: client.directory)
                #expect(wrong.status == 1, "\(wrong.output)")
                #expect(refusal(wrong.output).contains(message), "\(wrong.output)")
            }
            let void = try await accept(lab, link, state: client.directory)
            #expect(void.status == 1, "\(void.output)")
            #expect(refusal(void.output).contains("this invitation is void: 3 wrong proofs were tried with it"), "\(void.output)")
            #expect(event("invitationRefused", in: void.output)?["reason"] as? String == "void", "\(void.output)")
            _ = try await serving.waitForLine(containing: "\"void\"", timeout: .seconds(10))
            #expect(serving.output.components(separatedBy: "\"wrongProof\"").count - 1 == 3, "\(serving.output)")
        }
        #expect(try await pairs.pins(lab, server.directory).isEmpty)
        #expect(try await pairs.pins(lab, client.directory).isEmpty)
    }

    @Test("another server at the link's address, or a link whose peer ID was changed: refused in the TLS handshake, nothing sent, nothing pinned")
    func notTheInviter() async throws {
        let lab = try await routerLab()
        let server = try await helpers.identity(lab, "Build Box")
        let other = try await helpers.identity(lab, "Other Box")
        let client = try await helpers.identity(lab, "Laptop")
        let (inviting, link) = try await inviter(lab, ["invite", "--state-dir", server.directory])
        // A server that admits anyone (--accept all), at h2 port 9461.
        let impostor = try start(lab, "h2", ["serve", "Other Box", "_openagents._tcp", "9461", "--no-advertise", "--accept", "all", "--json", "--state-dir", other.directory])
        try await lab.withProcesses([inviting, impostor]) {
            _ = try await impostor.waitForLine(containing: "\"listening\"", timeout: .seconds(20))
            let moved = try await accept(lab, readdressed(link, to: "198.18.1.2:9461"), state: client.directory)
            #expect(moved.status == 1, "\(moved.output)")
            #expect(refusal(moved.output).contains(
                "the peer at 198.18.1.2:9461 is not the inviter: its key is \(other.peerID), the invitation is for \(server.peerID.prefix(6))…; nothing was sent to it"),
                "\(moved.output)")
            // The impostor saw a handshake end, and not even the invitee's certificate.
            _ = try await impostor.waitForLine(containing: "\"rejected\"", timeout: .seconds(10))
            #expect(!impostor.output.contains("\"connected\"") && !impostor.output.contains(client.peerID), "\(impostor.output)")

            // The real inviter, under a link that names another peer ID.
            let renamed = try await accept(lab, replacing(1, of: link, with: other.peerID.replacingOccurrences(of: "-", with: "")), state: client.directory)
            #expect(renamed.status == 1, "\(renamed.output)")
            #expect(refusal(renamed.output).contains(
                "is not the inviter: its key is \(server.peerID), the invitation is for \(other.peerID.prefix(6))…; nothing was sent to it"),
                "\(renamed.output)")
            #expect(!inviting.output.contains(client.peerID), "\(inviting.output)")
            #expect(inviting.isRunning, "the invitation was not used, so invite still waits: \(inviting.output)")
        }
        #expect(try await pairs.pins(lab, client.directory).isEmpty)
        #expect(try await pairs.pins(lab, server.directory).isEmpty)
    }

    @Test("a proof recorded in one session is refused in another (another challenge)")
    func replayedProof() async throws {
        let lab = try await routerLab()
        let server = try await helpers.identity(lab, "Build Box")
        let identity = try Lab.temporaryDirectory().path
        let proof = try Lab.temporaryDirectory().appendingPathComponent("proof.json").path
        let (inviting, link) = try await inviter(lab, ["invite", "--state-dir", server.directory])
        try await lab.withProcesses([inviting]) {
            let recorded = try await python(lab, link, identity: identity, ["--replay-record", proof])
            #expect(recorded.status == 0, "\(recorded.output)")
            #expect(event("recorded", in: recorded.output) != nil, "\(recorded.output)")
            let replayed = try await python(lab, link, identity: identity, ["--replay-use", proof])
            #expect(replayed.status == 1, "\(replayed.output)")
            let refused = try #require(event("refused", in: replayed.output), "\(replayed.output)")
            #expect(refused["code"] as? Int == -32005 && refused["reason"] as? String == "wrongProof", "\(refused)")
            #expect((refused["message"] as? String ?? "").contains("the proof does not match this invitation's secret"), "\(refused)")
            let said = try await inviting.waitForLine(containing: "\"invitationRefused\"", timeout: .seconds(10))
            #expect(said.contains(#""reason":"wrongProof""#), "\(said)")
            #expect(inviting.isRunning)
        }
        #expect(try await pairs.pins(lab, server.directory).isEmpty)
    }

    @Test("a link that does not parse: exit 2, naming what is wrong")
    func malformed() async throws {
        let lab = try await routerLab()
        let state = try Lab.temporaryDirectory().path
        let good = "NEARBY:1/WNZ8DDC9NK6RA936FT1HW338J2MQNKFHJM6MD5RJC3JTVF33GD7H0B/GFR7MKQP/PQQJBNWXCFNN3BDDZ93MKHT59M/1795553335/198.18.1.1:9099"
        let cases = [
            ("hello", "this is not a Nearby invitation"),
            ("NEARBY:2/X", "this invitation is for version 2 of the invitation protocol"),
            (replacing(1, of: good, with: "WNZ8DDC9NK6RA936FT1HW338J2MQNKFHJM6MD5RJC3JTVF33GD7H0C"), "a check character does not match"),
            (fields(good).prefix(5).joined(separator: "/"), "this invitation is cut short"),
        ]
        for (link, message) in cases {
            let parsed = try await run(lab, "h6", ["accept", link, "--state-dir", state])
            #expect(parsed.status == 2, "\(link): \(parsed.output)")
            #expect(parsed.output.contains(message), "\(link): \(parsed.output)")
        }
    }

    @Test("the Python invitee, written from Documentation/Protocols.md alone, accepts nearby invite from h6 and is pinned under the peer ID it computed, though it waits 0.6 s between its proof and initialize (invite, its one use gone, still serves it)")
    func pythonInvitee() async throws {
        let lab = try await routerLab()
        let server = try await helpers.identity(lab, "Build Box")
        let identity = try Lab.temporaryDirectory().path
        let (inviting, link) = try await inviter(lab, ["invite", "--state-dir", server.directory])
        try await lab.withProcesses([inviting]) {
            let accepted = try await python(lab, link, identity: identity, ["--pause", "0.6"])
            #expect(accepted.status == 0, "\(accepted.output)")
            let said = try #require(event("accepted", in: accepted.output), "\(accepted.output)")
            #expect(said["inviter"] as? String == server.peerID, "\(said)")
            let me = try #require(said["self"] as? String, "\(said)")
            #expect(me.replacingOccurrences(of: "-", with: "").count == 54 && me.split(separator: "-").count == 9, "\(me)")
            #expect(event("initialized", in: accepted.output)?["protocolVersion"] as? String == "0.2.2", "\(accepted.output)")
            #expect((event("ping", in: accepted.output)?["result"] as? [String: Any])?.isEmpty == true, "\(accepted.output)")
            #expect(try await inviting.wait(timeout: .seconds(10)) == 0, "\(inviting.output)")
            let taken = try #require(event("invitationAccepted", in: inviting.output), "\(inviting.output)")
            #expect(taken["peerID"] as? String == me && taken["name"] as? String == "Python Invitee", "\(taken)")
            #expect(try await pairs.pins(lab, server.directory) == [me])
        }
    }
}
}
