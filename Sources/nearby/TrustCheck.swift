public import ArgumentParser
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import PeerTrust

extension PeerRole: ExpressibleByArgument {}

struct TrustCheck: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "check",
        abstract: "Judge a certificate chain as the connection broker will; exit 0 trusted, 1 rejected, 2 unusable input.",
        discussion: """
            CHAIN is PEM: the peer's certificate first, then the intermediates it sends \
            (more may come from --untrusted files, as with `openssl verify -untrusted`). With \
            no --anchor, --system-roots or --pinned, the trust store's anchors and pins are used. \
            Always checked: validity at --at (default now), signatures, basic constraints, key \
            usage for the role, at most --max-depth intermediates, keys and signatures of at \
            least 112-bit security (RSA/DSA 2048 bits, curves 224 bits, no MD5 or SHA-1; \
            --allow-weak-keys lifts it), revocation by the trust store's CRLs and each --crl \
            (for chains to anchors or system roots: a certificate whose issuer has a CRL is \
            checked against it; an expired CRL, or one not signed by its issuer, rejects what \
            it covers), and --peer-id when given. Every reason for a rejection is printed.

            Exit status: 0 trusted; 1 rejected (whatever is wrong with the chain, however long); \
            2 unusable input (a file that cannot be read or is not PEM/DER, a bad option).

            --role connecting: the peer is the one we connect to (must be fit for a TLS server); \
            accepting: it connected to us (must be fit for a TLS client).

            Examples:
              nearby trust check peer.pem
              nearby trust check peer.pem --anchor ca.pem --role accepting
              nearby trust check leaf.pem --untrusted chain.pem --crl ca.crl
              nearby trust check peer.pem --pinned --peer-id 3QX7KD
              nearby trust check peer.pem --at 2027-01-01T00:00:00Z --json
            """)
    @Argument(help: "PEM file: leaf certificate first, then intermediates.")
    var chain: String
    @Option(name: .customLong("untrusted"), help: ArgumentHelp(
        "More intermediate certificates the peer sent, in this PEM file (repeatable); used to build the path, never trusted themselves.",
        valueName: "file"))
    var untrusted: [String] = []
    @Option(name: .customLong("anchor"), help: ArgumentHelp("Trust chains that lead to the certificates in this file (repeatable).", valueName: "file"))
    var anchors: [String] = []
    @Flag(name: .customLong("system-roots"), help: "Trust the system's root certificates.")
    var systemRoots = false
    @Flag(help: "Trust the peers pinned in the trust store.")
    var pinned = false
    @Option(name: .customLong("peer-id"), help: "The peer ID discovery announced (or the beginning of a pinned one): the certificate's key must match it.")
    var peerID: String?
    @Option(help: ArgumentHelp("connecting (judge a TLS server) or accepting (judge a TLS client).", valueName: "connecting|accepting"))
    var role: PeerRole = .connecting
    @Option(help: ArgumentHelp("Judge at this time, ISO 8601 (e.g. 2027-01-01T00:00:00Z). Default: now.", valueName: "time"))
    var at: String?
    @Option(name: .customLong("max-depth"), help: "Intermediate CA certificates allowed between leaf and anchor.",
            transform: NumberInput.integer("--max-depth", 0...64, use: "0-64"))
    var maxDepth: Int = 8
    @Option(name: .customLong("crl"), help: ArgumentHelp(
        "Also check the chain against the CRLs in this file (PEM or DER; repeatable), besides the trust store's.", valueName: "file"))
    var crls: [String] = []
    @Flag(name: .customLong("allow-weak-keys"), help: "Accept keys and signatures below 112-bit security (see above).")
    var allowWeakKeys = false
    @OptionGroup var state: StateOptions

    func validate() throws {
        if let at, parseTime(at) == nil {
            throw ValidationError("--at \(at) is not an ISO 8601 time; use e.g. 2027-01-01T00:00:00Z")
        }
    }

    func certificates(_ path: String, what: String) throws -> [Certificate] {
        do {
            return try Certificate.chain(contentsOf: URL(fileURLWithPath: path))
        } catch {
            throw ValidationError("\(what): \(error.message)")
        }
    }

    func run() async throws {
        let presented = try certificates(chain, what: "chain") + untrusted.flatMap { try certificates($0, what: "--untrusted \($0)") }
        var parts: [TrustPolicy] = []
        if !anchors.isEmpty {
            parts.append(.anchors(try anchors.flatMap { try certificates($0, what: "anchor") }))
        }
        if systemRoots { parts.append(.systemRoots) }
        do {
            if pinned { parts.append(try TrustPolicy.pinned(state.trust)) }
            if parts.isEmpty { parts.append(try state.trust.policy()) }
        } catch {
            throw ValidationError(error.message)
        }
        let lists = try RevocationFiles.read(crls, option: "--crl") + RevocationFiles.stored(state.trust)
        let evaluator = TrustEvaluator(
            policy: parts.count == 1 ? parts[0] : .anyOf(parts), maximumIntermediates: maxDepth, revocationLists: lists,
            allowsWeakKeys: allowWeakKeys)
        let expected = try peerID.map { try PeerIDInput.resolve($0, for: "--peer-id", among: PeerIDInput.trusted(state.trust), lookedIn: "the trust store") }
        let time = at.flatMap(parseTime) ?? Date()
        let verdict = evaluator.evaluate(chain: presented, expectedPeerID: expected, role: role, at: time)
        switch verdict {
        case .trusted(let peer):
            if state.json {
                printLine(JSONText.object([
                    ("verdict", .string("trusted")), ("peerID", .string(peer.peerID.description)), ("displayName", .string(peer.displayName)),
                    ("role", .string(role.rawValue)), ("at", .string(iso8601(time))),
                    ("chain", .array(peer.chain.map { .string($0.subject) })), ("reasons", .array([])),
                ]))
            } else {
                printLine("trusted: \"\(peer.displayName)\" (peer ID \(peer.peerID))")
                printLine("  chain: \(peer.chain.map(\.subject).joined(separator: "  <-  "))")
            }
        case .rejected(let reasons):
            if state.json {
                printLine(JSONText.object([
                    ("verdict", .string("rejected")), ("peerID", .string(presented[0].peerID.description)),
                    ("role", .string(role.rawValue)), ("at", .string(iso8601(time))),
                    ("reasons", .array(reasons.map { reason in
                        var members: [(String, OutputValue)] = [("message", .string(reason.message))]
                        members.append(("code", .string(reason.code.description)))
                        if let depth = reason.depth { members.append(("depth", .number(Double(depth)))) }
                        return .object(members)
                    })),
                ]))
            } else {
                // The whole peer ID: the one to pin if the check is the reason it was run.
                printLine("rejected: \(presented[0].subject) (peer ID \(presented[0].peerID))")
                for reason in reasons { printLine("  - \(reason.message)") }
            }
            throw ExitCode(1)
        }
    }
}
