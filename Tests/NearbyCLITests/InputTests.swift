import ArgumentParser
import Logging
import Foundation
import PeerTrust
import Testing

@testable import nearby

/// Careless input, as a newcomer types it: negative and non-numeric numbers, peer IDs cut
/// short, directories that are not there. Each gets one line saying what was wrong and what
/// is allowed, and points to the help of the command that was given.
@Suite("nearby: careless input")
struct InputTests {
    /// What `nearby ARGUMENTS` prints on stderr when it refuses the command line (nil: accepted),
    /// through the same steps as `main`.
    func refusal(_ arguments: [String]) -> String? {
        let prepared = NegativeNumbers.joiningOptionValues(arguments)
        do {
            _ = try Nearby.parse(prepared)
            return nil
        } catch {
            return Nearby.plain(Nearby.message(for: error))
        }
    }

    @Test("numbers: negative, non-numeric and too large values get the same kind of message", arguments: [
        (["advertise", "X", "_t._tcp", "-1"], "port -1 is out of range; use 1-65535"),
        (["advertise", "X", "_t._tcp", "abc"], "port abc is not a whole number; use 1-65535"),
        (["advertise", "X", "_t._tcp", "70000"], "port 70000 is out of range; use 1-65535"),
        (["advertise", "X", "_t._tcp", "80", "--ttl", "-3"], "--ttl -3 is out of range; use 1-4500 seconds"),
        (["advertise", "X", "_t._tcp", "80", "--ttl=0"], "--ttl 0 is out of range; use 1-4500 seconds"),
        (["browse", "_t._tcp", "--timeout", "-1"], "--timeout -1 is out of range; use a number of seconds above 0, at most 86400"),
        (["browse", "_t._tcp", "--timeout", "soon"], "--timeout soon is not a number; use a number of seconds above 0, at most 86400"),
        (["resolve", "X", "_t._tcp", "--timeout", "0"], "--timeout 0 is out of range; use a number of seconds above 0, at most 86400"),
        (["browse", "_t._tcp", "--timeout", "1e300"], "--timeout 1e300 is out of range; use a number of seconds above 0, at most 86400"),
        (["serve", "X", "_t._tcp", "-5"], "port -5 is out of range; use 1-65535, or 0 for any free port"),
        (["connect", "--host", "127.0.0.1", "--port", "-1"], "--port -1 is out of range; use 1-65535"),
        (["connect", "--host", "127.0.0.1", "--port", "9", "--timeout", "7200"], "--timeout 7200 is out of range; use a number of seconds above 0, at most 3600"),
        (["pair", "--host", "127.0.0.1", "--port", "x"], "--port x is not a whole number; use 1-65535"),
        (["peers", "_t._tcp", "--timeout", "-0.5"], "--timeout -0.5 is out of range; use a number of seconds above 0, at most 3600"),
        (["trust", "check", "x.pem", "--max-depth", "-1"], "--max-depth -1 is out of range; use 0-64"),
    ])
    func numbers(_ arguments: [String], _ message: String) {
        #expect(refusal(arguments) == message)
    }

    @Test("a negative number meant as text is told how to give it; one after -- is taken as it is")
    func negativeText() throws {
        #expect(refusal(["advertise", "-1", "_t._tcp", "80"])
            == "-1 reads as an option; to give it as an argument, put -- before it (every word after -- is an argument)")
        let command = try #require(try Nearby.parse(NegativeNumbers.joiningOptionValues(["advertise", "--", "-1", "_t._tcp", "80"])) as? Advertise)
        #expect(command.name == "-1" && command.port == 80)
        // An option's value that merely looks negative stays untouched text.
        let named = try #require(try Nearby.parse(NegativeNumbers.joiningOptionValues(["advertise", "X", "_t._tcp", "80", "--interface", "-7"])) as? Advertise)
        #expect(named.network.interfaces == ["-7"])
    }

    @Test("refusals point to the help of the command given, not the top level's")
    func helpPointers() {
        #expect(Nearby.helpCommand(for: ["trust", "list", "--state-dir", "x"]) == "nearby trust list --help")
        #expect(Nearby.helpCommand(for: ["advertise", "X", "_t._tcp", "-1"]) == "nearby advertise --help")
        #expect(Nearby.helpCommand(for: ["identity", "--bogus"]) == "nearby identity --help")
        #expect(Nearby.helpCommand(for: ["nosuch"]) == "nearby --help")
    }

    static let low = PeerID(bytes: Array(repeating: 0, count: 32))!
    static let lowNeighbour = PeerID(bytes: Array(repeating: 0, count: 31) + [1])!
    static let high = PeerID(bytes: Array(repeating: 0xFF, count: 32))!
    static var known: [(id: PeerID, label: String)] { [(low, "Low"), (lowNeighbour, "Neighbour"), (high, "High")] }

    @Test("peer IDs: a prefix only one known peer has is that peer, in any case and with or without dashes")
    func prefixes() throws {
        let typed = String(Self.high.description.prefix(8)).lowercased()  // "zzzzzz-z"
        #expect(try PeerIDInput.resolve(typed, for: "--peer", among: Self.known, lookedIn: "the trust store") == Self.high)
        #expect(try PeerIDInput.resolve(Self.high.description.replacingOccurrences(of: "-", with: "").prefix(10).description,
                                        for: "--peer", among: Self.known, lookedIn: "the trust store") == Self.high)
        // A whole peer ID needs no match.
        let stranger = PeerID(bytes: Array(repeating: 7, count: 32))!
        #expect(try PeerIDInput.resolve(stranger.description, for: "--peer", among: [], lookedIn: "the trust store") == stranger)
    }

    @Test("peer IDs: an ambiguous prefix lists the matches; one that matches nothing says where it looked")
    func prefixRefusals() {
        do {
            _ = try PeerIDInput.resolve("000000", for: "the peer ID", among: Self.known, lookedIn: "the trust store")
            Issue.record("an ambiguous prefix was accepted")
        } catch let error as ValidationError {
            #expect(error.message.hasPrefix("the peer ID \"000000\" is ambiguous: 2 peer IDs in the trust store begin with it: "), "\(error.message)")
            #expect(error.message.contains("\(Self.low) (Low)") && error.message.contains("\(Self.lowNeighbour) (Neighbour)"))
            #expect(error.message.hasSuffix("; type more characters"))
        } catch {
            Issue.record("\(error)")
        }
        do {
            _ = try PeerIDInput.resolve("QQQQ", for: "--peer-id", among: Self.known, lookedIn: "the trust store")
            Issue.record("a prefix of nothing was accepted")
        } catch let error as ValidationError {
            #expect(error.message == "--peer-id \"QQQQ\" is neither a whole peer ID (it has 4 characters, a peer ID has 54 (nine groups of six)) nor the beginning of one in the trust store")
        } catch {
            Issue.record("\(error)")
        }
    }

    @Test("trust remove takes a prefix; trust list and identity show refuse a --state-dir that does not exist")
    func stateDirectories() async throws {
        let work = FileManager.default.temporaryDirectory.appendingPathComponent("nearby-input-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: work) }
        let store = TrustStore(directory: work.appendingPathComponent("trust"))
        try store.pin(Self.high, name: "High")
        try store.pin(Self.low, name: "Low")
        let remove = try #require(try Nearby.parse(["trust", "remove", "zzzz", "--state-dir", work.path]) as? TrustRemove)
        try await remove.run()
        #expect(try store.pins().map(\.peerID) == [Self.low])
        let missing = work.appendingPathComponent("no-such").path
        for arguments in [["trust", "list", "--state-dir", missing], ["identity", "show", "--state-dir", missing]] {
            var command = try #require(try Nearby.parse(arguments) as? any AsyncParsableCommand)
            do {
                try await command.run()
                Issue.record("\(arguments) ran")
            } catch let error as ValidationError {
                #expect(error.message == "--state-dir \(missing) does not exist (nearby identity create --state-dir \(missing) makes one)")
            }
        }
    }

    @Test("a host name that is no DNS label is refused with the rule", arguments: [
        ("bad host!", "it has \"!\", a space"),
        ("box-", "it begins or ends with a hyphen"),
        ("box.lan", "it has \".\""),
        (String(repeating: "a", count: 64), "it has 64 bytes"),
        ("b\u{fc}ro", "it has \"\u{fc}\""),
    ])
    func hostLabels(_ host: String, _ detail: String) {
        for command in [["advertise", "X", "_t._tcp", "80"], ["serve", "X", "_t._tcp", "80"]] {
            let message = refusal(command + ["--host", host])
            #expect(message == "--host \"\(host)\" is not a usable host name: \(detail); use 1-63 letters, digits and hyphens, not beginning or ending with a hyphen (for example build-box)")
        }
        #expect(refusal(["advertise", "X", "_t._tcp", "80", "--host", "build-box-2"]) == nil)
    }

    @Test("TXT keys that repeat in another case are refused naming both; serve keeps id and pv for itself")
    func duplicateKeys() {
        #expect(refusal(["advertise", "X", "_t._tcp", "80", "a=1", "A=2"])
            == "TXT entry \"A=2\" repeats the key of \"a=1\" (keys are case-insensitive, and a record holds each key once); keep one of them")
        #expect(refusal(["advertise", "X", "_t._tcp", "80", "tls", "TLS=no"])?.contains("repeats the key of \"tls\"") == true)
        #expect(refusal(["serve", "X", "_t._tcp", "80", "ID=me"]) == "TXT id is serve's own (the peer ID); use another key than \"ID\"")
        #expect(refusal(["advertise", "X", "_t._tcp", "80", "a=1", "b=1"]) == nil)
    }

    @Test("a word that is no command names the nearest one, at any level")
    func unknownCommands() {
        #expect(refusal(["brwose", "_t._tcp"])
            == "\"brwose\" is not a command of nearby; did you mean \"nearby browse\"? (the commands: advertise, browse, resolve, types, domains, decode, serve, connect, send, receive, pipe, invite, accept, pair, peers, identity, trust, proxy, registrar; see nearby --help)")
        #expect(refusal(["trust", "lsit"])?.hasPrefix("\"lsit\" is not a command of nearby trust; did you mean \"nearby trust list\"?") == true)
        #expect(refusal(["identity", "shwo"])?.contains("did you mean \"nearby identity show\"?") == true)
        #expect(refusal(["frobnicate"])?.hasPrefix("\"frobnicate\" is not a command of nearby (the commands:") == true)
    }

    @Test("a peer-ID prefix shorter than 4 characters is refused as too short to be sure")
    func shortPrefixes() {
        for typed in ["9", "zz", "ZZ-Z"] {
            do {
                _ = try PeerIDInput.resolve(typed, for: "the peer ID", among: Self.known, lookedIn: "the trust store")
                Issue.record("\(typed) was accepted")
            } catch let error as ValidationError {
                #expect(error.message == "the peer ID \"\(typed)\" is too short to be sure which peer it means: type at least 4 characters of the peer ID (nearby trust list shows them)")
            } catch {
                Issue.record("\(error)")
            }
        }
    }

    @Test("trust pin again without --name keeps the name; with --name it changes")
    func repinKeepsName() async throws {
        let work = FileManager.default.temporaryDirectory.appendingPathComponent("nearby-input-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: work) }
        try FileManager.default.createDirectory(at: work, withIntermediateDirectories: true)
        let store = TrustStore(directory: work.appendingPathComponent("trust"))
        func pin(_ extra: [String]) async throws {
            var command = try #require(try Nearby.parse(["trust", "pin", Self.high.description, "--state-dir", work.path] + extra) as? any AsyncParsableCommand)
            try await command.run()
        }
        try await pin(["--name", "Build Box"])
        try await pin([])
        #expect(try store.pins().map(\.name) == ["Build Box"])
        try await pin(["--name", "Renamed"])
        #expect(try store.pins().map(\.name) == ["Renamed"])
    }

    @Test("a command that connects makes the identity it needs and says so once, with the peer ID to pin; later runs load it quietly")
    func connectingMakesAnIdentityAndSaysSo() throws {
        let work = FileManager.default.temporaryDirectory.appendingPathComponent("nearby-input-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: work) }
        let state = try StateDirectory.parse(["--state-dir", work.path])
        var said: [String] = []
        let made = try state.identityMadeIfMissing { said.append($0) }
        #expect(said == [
            "made a new identity in \(work.path) (peer ID \(made.peerID)); peers must pin it before they trust this one: nearby trust pin \(made.peerID)\n"
        ])
        #expect(try state.identities.load()?.peerID == made.peerID)
        let again = try state.identityMadeIfMissing { said.append($0) }
        #expect(again.peerID == made.peerID)
        #expect(said.count == 1)
    }

    @Test("a command that only looks (peers) creates no identity: without one, a throwaway stands in and nothing is written")
    func lookingCreatesNothing() throws {
        let work = FileManager.default.temporaryDirectory.appendingPathComponent("nearby-input-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: work) }
        try FileManager.default.createDirectory(at: work, withIntermediateDirectories: true)
        let state = try StateDirectory.parse(["--state-dir", work.path])
        let configuration = try ChannelOptions.parse([]).configuration(
            state: state, trust: try TrustOptions.parse([]), json: true, logger: .init(label: "test"), creating: false)
        #expect(configuration.identity != nil)
        #expect(try FileManager.default.contentsOfDirectory(atPath: work.path).isEmpty)
        #expect(try state.identities.load() == nil)
        // A --state-dir that does not exist is a typo here too.
        let missing = try StateDirectory.parse(["--state-dir", work.appendingPathComponent("no-such").path])
        #expect(throws: ValidationError.self) {
            _ = try ChannelOptions.parse([]).configuration(
                state: missing, trust: try TrustOptions.parse([]), json: true, logger: .init(label: "test"), creating: false)
        }
    }
}

extension InputTests {
    @Test("nearby proxy: each bad input is refused with what was wrong and what to give", arguments: [
        (["proxy", "eth0=lan1.example.test", "--listen", "192.0.2.5"], "give --name-server NAME"),
        (["proxy", "eth0=lan1.example.test", "--name-server", "p.example.test"], "give --listen ADDRESS"),
        (["proxy", "eth0", "--listen", "192.0.2.5", "--name-server", "p.example.test"], "\"eth0\" is not INTERFACE=ZONE; write it as eth0=lan1.example.test"),
        (["proxy", "eth0=lan1.local", "--listen", "192.0.2.5", "--name-server", "p.example.test"], "is under local., which is the link's own domain"),
        (["proxy", "eth0=lan1.example.test", "--listen", "proxy.local", "--name-server", "p.example.test"], "--listen proxy.local is not an IP address"),
        (["proxy", "eth0=lan1.example.test", "eth1=a.lan1.example.test", "--listen", "192.0.2.5", "--name-server", "p.example.test"], "overlap; give each link a zone of its own"),
        (["proxy", "eth0=lan1.example.test", "--listen", "192.0.2.5", "--name-server", "p.example.test", "--rate", "-1"], "--rate must be 0 to 1000000"),
        (["proxy", "eth0=lan1.example.test", "--listen", "192.0.2.5", "--name-server", "p.example.test", "--rate", "9223372036854775807"], "--rate must be 0 to 1000000"),
        (["proxy", "eth0=lan1.example.test", "eth0=lan2.example.test", "--listen", "192.0.2.5", "--name-server", "p.example.test"], "the interface eth0 is given twice"),
        (["proxy", "eth0=lan1.example.test", "--listen", "192.0.2.5", "--name-server", "p.example.test", "--tls-certificate", "dp.pem"], "--tls-certificate and --tls-key go together"),
        (["proxy", "eth0=lan1.example.test", "--listen", "192.0.2.5", "--name-server", "p.example.test", "--no-push", "--tls-certificate", "dp.pem", "--tls-key", "dp.key"], "which --no-push turns off"),
        (["proxy", "eth0=lan1.example.test", "--listen", "192.0.2.5", "--name-server", "p.example.test", "--push-port", "70000"], "--push-port"),
        (["browse", "_openagents._tcp", "--push", "off"], "--push applies to DNS domains; add --domain DOMAIN"),
        (["browse", "_openagents._tcp", "--domain", "lab.example.test", "--push", "sometimes"], "--push"),
    ])
    func proxyInput(_ example: (arguments: [String], expected: String)) {
        let message = refusal(example.arguments)
        #expect(message?.contains(example.expected) == true, "\(example.arguments): \(message ?? "accepted")")
    }

    @Test("nearby proxy: a good command line parses, several links and addresses included")
    func proxyAccepted() {
        #expect(refusal(["proxy", "eth1=lan1.example.test", "eth2=lan2.example.test", "--listen", "192.0.2.5", "--listen", "2001:db8::5",
                         "--name-server", "p.example.test", "--port", "5300", "--backend", "embedded"]) == nil)
        #expect(refusal(["proxy", "eth1=lan1.example.test", "--listen", "192.0.2.5", "--name-server", "p.example.test", "--push-port", "0", "--no-push"]) == nil)
        #expect(refusal(["browse", "_openagents._tcp", "--domain", "lab.example.test", "--push", "authenticated"]) == nil)
    }
}
