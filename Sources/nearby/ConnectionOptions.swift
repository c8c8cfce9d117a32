import ArgumentParser
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Logging
import PeerConnection
import PeerTrust

/// TRUST: whom `serve` admits and whom `connect` believes.
struct TrustOptions: ParsableArguments {
    @Option(name: .customLong("anchor"), help: ArgumentHelp("Trust peers whose chain leads to the certificates in this PEM file (repeatable).", valueName: "file"))
    var anchors: [String] = []
    @Flag(name: .customLong("system-roots"), help: "Trust peers whose chain leads to the system's root certificates.")
    var systemRoots = false
    @Flag(help: "Trust the peers pinned in the trust store (the default when no other TRUST option is given).")
    var pinned = false
    @Flag(name: .customLong("trust-on-first-use"), help: ArgumentHelp(
        "Pin a peer never seen before on its first connection, and say so (like ssh's accept-new). A peer whose name is pinned under another key is refused."))
    var trustOnFirstUse = false
    @Option(name: .customLong("crl"), help: ArgumentHelp(
        "Also check anchored chains against the CRLs in this file (PEM or DER; repeatable). The trust store's CRLs (nearby trust crl add) are always checked.",
        valueName: "file"))
    var crls: [String] = []
    @Flag(name: .customLong("allow-weak-keys"), help: ArgumentHelp(
        "Accept keys and signatures below 112-bit security (RSA/DSA under 2048 bits, curves under 224 bits, MD5 or SHA-1 signatures). Only for old devices that cannot be re-issued."))
    var allowWeakKeys = false

    /// The CRLs named by --crl, read now.
    func revocationLists() throws -> [RevocationList] {
        try RevocationFiles.read(crls, option: "--crl")
    }

    /// Anchors (read from their files now) and system roots, as policies.
    func anchorsAndRoots() throws -> [TrustPolicy] {
        var parts: [TrustPolicy] = []
        for file in anchors {
            do {
                parts.append(.anchors(try Certificate.chain(contentsOf: URL(fileURLWithPath: file))))
            } catch {
                throw ValidationError("--anchor \(file): \(error.message)")
            }
        }
        if systemRoots { parts.append(.systemRoots) }
        return parts
    }

    /// The verdict function: the policy the options describe, and with --trust-on-first-use,
    /// pinning of peers never seen before. Pins are read again for every peer, so pins made
    /// meanwhile (by another command, or on first use) count.
    func judge(_ store: TrustStore, announce: @escaping @Sendable (PeerID, String) -> Void) throws
        -> @Sendable ([Certificate], PeerID?, PeerRole) -> TrustVerdict
    {
        let fixed = try anchorsAndRoots()
        let usePins = pinned || trustOnFirstUse || fixed.isEmpty
        let tofu = trustOnFirstUse
        let given = try revocationLists()
        let weak = allowWeakKeys
        _ = try RevocationFiles.stored(store)  // a damaged store is reported now, not at the first peer
        return { chain, expected, role in
            let pins = usePins ? ((try? store.pins()) ?? []) : []
            let parts = fixed + (usePins ? [TrustPolicy.pinned(Set(pins.map(\.peerID)))] : [])
            // The store's CRLs are read again when they changed (nearby trust crl add meanwhile).
            let lists: [RevocationList]
            do throws(PeerTrustError) {
                lists = given + (try store.revocationLists())
            } catch {
                return .rejected([TrustReason(.verificationFailed, "the trust store's CRLs cannot be read: \(error.message)")])
            }
            let verdict = TrustEvaluator(
                policy: parts.count == 1 ? parts[0] : .anyOf(parts), revocationLists: lists, allowsWeakKeys: weak
            ).evaluate(chain: chain, expectedPeerID: expected, role: role)
            guard tofu, case .rejected(let reasons) = verdict, let leaf = chain.first else { return verdict }
            // Only a peer nobody has vouched for is pinned: not one whose key contradicts the
            // peer ID expected, and not one whose name is pinned under another key.
            guard !reasons.contains(where: { $0.code == .peerIDMismatch }) else { return verdict }
            let name = leaf.commonName.isEmpty ? leaf.subject : leaf.commonName
            if let other = pins.first(where: { $0.name == name && $0.peerID != leaf.peerID }) {
                return .rejected([TrustReason(
                    .notPinned,
                    "\"\(name)\" is pinned with peer ID \(other.peerID.short), but this peer's key is \(leaf.peerID.short): its key changed, or it is an impostor (nearby trust pin \(leaf.peerID) if the change is expected)")])
            }
            do {
                try store.pin(leaf.peerID, name: name)
            } catch {
                return .rejected(reasons + [TrustReason(.other, "could not pin it on first use: \(error)")])
            }
            announce(leaf.peerID, name)
            return TrustEvaluator(policy: .pinned([leaf.peerID]), allowsWeakKeys: weak).evaluate(chain: chain, expectedPeerID: expected, role: role)
        }
    }
}

/// What a connection says about itself, and how it is carried.
struct ChannelOptions: ParsableArguments {
    @Option(name: .customLong("protocol-version"), help: ArgumentHelp(
        "Protocol version spoken in initialize; peers must share the major number (and the minor one for 0.x).", valueName: "version"))
    var protocolVersion: String = ProtocolVersion.current.description
    @Flag(help: "Plain ws:// without TLS: nothing proves who the peer is. Only for bridges that have no TLS.")
    var insecure = false
    func version() throws -> ProtocolVersion {
        do { return try ProtocolVersion(parsing: protocolVersion) } catch { throw ValidationError("--protocol-version: \(error.description)") }
    }

    /// The connection configuration for `identity` (loaded or created in the state directory).
    /// With `creating` false (commands that only look), a missing identity is not created: a
    /// throwaway one made in memory stands in, and nothing is written.
    /// The connection's settings: the identity (made when `creating` and missing), the trust
    /// options, and `streams` (nil: the command takes no streams).
    func configuration(
        state: StateDirectory, trust: TrustOptions, json: Bool, logger: Logger, creating: Bool = true, streams: StreamSettings? = nil
    ) throws -> PeerConnectionConfiguration {
        let identity: PeerIdentity
        do {
            if creating {
                identity = try state.identityMadeIfMissing()
            } else {
                try state.requireExisting()
                identity = try state.identities.load() ?? PeerIdentity.generate(displayName: PeerIdentity.defaultDisplayName())
            }
        } catch let error as PeerTrustError { throw inputError(error) }
        let store = state.trust
        var configuration = PeerConnectionConfiguration(
            identity: insecure ? nil : identity, trust: TrustEvaluator(policy: .pinned([])), protocolVersion: try version())
        configuration.insecure = insecure
        configuration.logger = logger
        // Streams only where a command takes them (send and pipe ask for them, serve sets its
        // own): a peer that opens one here learns at once that it is not offered, instead of
        // waiting.
        configuration.streams = streams
        configuration.waitingForAdmission = { wait in
            if json {
                printLine(JSONText.object([
                    ("event", .string("waiting")), ("reason", .string("the peer asks someone there whether to let us in")),
                    ("timeoutMs", .number(milliseconds(wait).rounded())),
                ]))
            } else {
                status("Waiting for the other side to accept this connection (someone there is asked; up to \(wholeSeconds(wait)) s)...")
            }
        }
        configuration.judge = try trust.judge(store) { peerID, name in
            printEvent(json, [("event", .string("pinned")), ("peerID", .string(peerID.description)), ("name", .string(name))],
                       text: "pinned \"\(name)\" (peer ID \(peerID)) on first use")
        }
        if insecure {
            writeToStandardError("nearby: warning: --insecure: plain ws:// without TLS; anyone on the path can read and change the messages, and nothing proves who the peer is\n")
        }
        return configuration
    }
}

/// Prints an event: a JSON object, or a line of text.
func printEvent(_ json: Bool, _ members: [(String, OutputValue)], text: @autoclosure () -> String) {
    printLine(json ? JSONText.object(members) : text())
}

/// A PeerConnection JSON value, for output (copied as its JSON text).
func output(_ value: JSONValue) -> OutputValue { .raw(value.jsonText) }

/// A `disconnected` event's `end` (the kind: closed, lost, deadPeer, violation, overLimit,
/// openingFailed, failed), `closeCode` (null without a close frame) and `byPeer`.
func endMembers(_ end: ConnectionEnd) -> [(String, OutputValue)] {
    [("end", .string(end.kind.description)), ("closeCode", end.closeCode.map { .number(Double($0.value)) } ?? .null), ("byPeer", .bool(end.byPeer))]
}

/// Reading CRL files for the options that take them.
enum RevocationFiles {
    static func read(_ files: [String], option: String) throws -> [RevocationList] {
        var lists: [RevocationList] = []
        for file in files {
            do {
                lists += try RevocationList.lists(contentsOf: URL(fileURLWithPath: file))
            } catch {
                throw ValidationError("\(option): \(error.message)")  // the message names the file
            }
        }
        return lists
    }

    /// The trust store's CRLs; a damaged store is a runtime failure with the file named.
    static func stored(_ store: TrustStore) throws -> [RevocationList] {
        do {
            return try store.revocationLists()
        } catch {
            throw RuntimeFailure(error.message)
        }
    }
}

/// How a listening command treats connections that have not proven who they are yet.
struct AdmissionOptions: ParsableArguments {
    @Option(name: .customLong("max-setting-up"), help: ArgumentHelp(
        "Connections that may be setting up (before TLS proves who they are) at once (default 256); one more closes the least advanced of them, so a peer that sends its TLS hello at once always gets a place.",
        valueName: "n"), transform: NumberInput.integer("--max-setting-up", 1...100_000, use: "1-100000"))
    var maximumSettingUp = AdmissionSettings().maximumSettingUp
    @Option(name: .customLong("max-per-source"), help: ArgumentHelp(
        "Of those, how many may come from one IPv4 address or IPv6 /64 (default 32); one more closes that source's own oldest.",
        valueName: "n"), transform: NumberInput.integer("--max-per-source", 1...100_000, use: "1-100000"))
    var maximumPerSource = AdmissionSettings().maximumPerSource
    @Option(name: .customLong("hello-within"), help: ArgumentHelp(
        "Seconds a new connection has to send its whole TLS hello (default 3); a slower one is closed.", valueName: "seconds"),
        transform: NumberInput.seconds("--hello-within", maximum: 600))
    var helloWithin = 3.0
    @Option(name: .customLong("stranger-handshakes"), help: ArgumentHelp(
        "TLS handshakes at once for sources that have not shown a trusted key in the last hour (default 8); more wait their turn (at most 2 from one address; a turn lasts at most 3 s). A pinned peer that connected from the same address within the hour never waits.",
        valueName: "n"), transform: NumberInput.integer("--stranger-handshakes", 1...100_000, use: "1-100000"))
    var strangerHandshakes = AdmissionSettings().maximumStrangerHandshakes
    @Option(name: .customLong("refusal-penalty"), help: ArgumentHelp(
        "Seconds a source whose key was refused waits before its next handshake (default 1; twice as long after each refusal in a row, up to 30 s or this); 0: no wait.",
        valueName: "seconds"), transform: NumberInput.secondsOrZero("--refusal-penalty", maximum: 600))
    var refusalPenalty = 1.0

    /// The settings, checked.
    func settings() throws -> AdmissionSettings {
        let penalty = Duration.milliseconds(Int64(refusalPenalty * 1000))
        let settings = AdmissionSettings(
            maximumSettingUp: maximumSettingUp, maximumPerSource: maximumPerSource, helloDeadline: .milliseconds(Int64(helloWithin * 1000)),
            maximumStrangerHandshakes: strangerHandshakes, refusalPenalty: penalty,
            maximumRefusalPenalty: max(penalty, AdmissionSettings().maximumRefusalPenalty))
        if let problem = settings.problem { throw ValidationError(problem) }
        return settings
    }
}
