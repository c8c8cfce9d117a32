import ArgumentParser
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import PeerTrust

// MARK: - trust

struct TrustCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "trust",
        abstract: "Trusted anchors and pinned peers, and checking a certificate chain against them.",
        discussion: """
            A peer is trusted when its chain leads to an anchor certificate (e.g. your \
            organisation's CA), or when its peer ID is pinned (a person said yes once). A CA's \
            certificate revocation lists (CRLs) kept here revoke what it issued. `check` \
            judges a chain exactly as the connection broker does.

            Examples:
              nearby trust anchor add company-ca.pem
              nearby trust pin 3QX7KD-... --name "Build Box"
              nearby trust crl add company-ca.crl
              nearby trust list
              nearby trust check peer.pem --role connecting
              nearby trust check peer.pem --anchor ca.pem --at 2027-01-01T00:00:00Z --json
            """,
        subcommands: [TrustList.self, TrustAnchor.self, TrustPin.self, TrustRemove.self, TrustCRL.self, TrustCheck.self]
    )
}

struct TrustList: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "list", abstract: "List anchors, pins and CRLs.",
        discussion: """
            Examples:
              nearby trust list
              nearby trust list --json
              nearby trust list --state-dir ./peer-a

            Exit status: 0 listed, empty or not; 1 a failure at run time, said on stderr; 2 bad input.
            """)
    @OptionGroup var state: StateOptions

    func run() async throws {
        try state.location.requireExisting()
        let anchors: [Certificate]
        let pins: [Pin]
        let lists: [RevocationList]
        do {
            anchors = try state.trust.anchors()
            pins = try state.trust.pins()
            lists = try state.trust.revocationLists()
        } catch {
            throw RuntimeFailure(error.message)
        }
        if state.json {
            for anchor in anchors {
                printLine(JSONText.object([("kind", .string("anchor")), ("peerID", .string(anchor.peerID.description))] + certificateMembers(anchor)))
            }
            for pin in pins {
                var members: [(String, OutputValue)] = [("kind", .string("pin")), ("peerID", .string(pin.peerID.description))]
                if let name = pin.name { members.append(("name", .string(name))) }
                members.append(("pinnedAt", .string(iso8601(pin.pinnedAt))))
                printLine(JSONText.object(members))
            }
            for list in lists { printLine(JSONText.object([("kind", .string("crl"))] + crlMembers(list))) }
            return
        }
        printLine(anchors.isEmpty ? "anchors  (none)" : "anchors")
        for anchor in anchors { printLine("  \(anchor.peerID.short)  \(anchor.subject)  until \(iso8601(anchor.notAfter))") }
        printLine(pins.isEmpty ? "pins     (none)" : "pins")
        for pin in pins { printLine("  \(pin.peerID)  \(pin.name ?? "")  pinned \(iso8601(pin.pinnedAt))") }
        if !lists.isEmpty {
            printLine("crls")
            for list in lists { printLine("  \(crlLine(list))") }
        }
    }
}

/// A CRL's facts as JSON members.
func crlMembers(_ list: RevocationList) -> [(String, OutputValue)] {
    [
        ("issuer", .string(list.issuer)), ("thisUpdate", .string(iso8601(list.thisUpdate))),
        ("nextUpdate", list.nextUpdate.map { .string(iso8601($0)) } ?? .null), ("revoked", .number(Double(list.revokedCount))),
        ("current", .bool(list.isCurrent())),
    ]
}

/// A CRL in one line: issuer, dates, how many it revokes, and whether it is stale.
func crlLine(_ list: RevocationList) -> String {
    let next = list.nextUpdate.map { "next update \(iso8601($0))" } ?? "no next update"
    let stale = list.isCurrent() ? "" : list.thisUpdate > Date() ? "  NOT VALID YET" : "  EXPIRED: get a current one"
    return "\"\(list.issuerName)\"  issued \(iso8601(list.thisUpdate)), \(next)  revokes \(list.revokedCount)\(stale)"
}

struct TrustCRL: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "crl", abstract: "Keep certificate revocation lists (CRLs) from the CAs you anchor.",
        discussion: """
            A CRL is a CA's signed list of the certificates it revoked. Kept here, it is checked \
            on every connection whose chain leads to an anchor or a system root: a certificate \
            its issuer revoked is rejected. One list per CA is kept, the newest; an older one is \
            refused. A CRL that has expired (past its next update) rejects every chain it covers \
            until a current one is added: keep them fresh (e.g. from cron). Pinned peers are \
            revoked with `nearby trust remove`, not with CRLs.

            Examples:
              nearby trust crl add company-ca.crl
              curl -s http://ca.example/ca.crl | nearby trust crl add /dev/stdin
              nearby trust crl list
              nearby trust crl remove "Example Company CA"
            """,
        subcommands: [TrustCRLAdd.self, TrustCRLList.self, TrustCRLRemove.self])
}

struct TrustCRLAdd: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "add", abstract: "Keep the CRLs in FILE (PEM or DER), replacing older ones from the same CA.",
        discussion: """
            Examples:
              nearby trust crl add company-ca.crl
              nearby trust crl add crls.pem --json

            Exit status: 0 kept; 1 a failure at run time, said on stderr; 2 bad input.
            """)
    @Argument(help: "CRL file: PEM (one or more X509 CRL blocks) or DER.")
    var file: String
    @OptionGroup var state: StateOptions

    func run() async throws {
        let lists = try RevocationFiles.read([file], option: "CRL file")
        let changes: [RevocationListChange]
        do {
            changes = try state.trust.addRevocationLists(lists)
        } catch {
            throw RuntimeFailure(error.message)
        }
        for (list, change) in zip(lists, changes) {
            let event: String
            switch change {
            case .added: event = "added"
            case .replaced: event = "replaced"
            case .unchanged: event = "present"
            }
            if state.json {
                var members: [(String, OutputValue)] = [("event", .string(event))] + crlMembers(list)
                if case .replaced(let older) = change { members.append(("replacedIssued", .string(iso8601(older)))) }
                printLine(JSONText.object(members))
            } else {
                var line = "\(event.padded(toUTF16Length: 8)) CRL \(crlLine(list))"
                if case .replaced(let older) = change { line += "  (replaced the one issued \(iso8601(older)))" }
                printLine(line)
            }
            if !list.isCurrent() {
                status("warning: this CRL is not current (\(list.thisUpdate > Date() ? "not valid yet" : "past its next update")): chains it covers are rejected until a current one is added")
            }
        }
    }
}

struct TrustCRLList: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "list", abstract: "List the CRLs kept.",
        discussion: """
            Examples:
              nearby trust crl list
              nearby trust crl list --json

            Exit status: 0 listed, empty or not; 1 a failure at run time, said on stderr; 2 bad input.
            """)
    @OptionGroup var state: StateOptions

    func run() async throws {
        let lists = try RevocationFiles.stored(state.trust)
        if state.json {
            for list in lists { printLine(JSONText.object(crlMembers(list))) }
            return
        }
        if lists.isEmpty { printLine("crls  (none)") }
        for list in lists { printLine(crlLine(list)) }
    }
}

struct TrustCRLRemove: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "remove", abstract: "Stop checking the CRL of the CA with this name.",
        discussion: """
            ISSUER is the CA's common name as `nearby trust crl list` shows it, or its whole name.

            Examples:
              nearby trust crl remove "Example Company CA"

            Exit status: 0 removed; 1 a failure at run time (no CRL of that CA), said on stderr; 2 bad input.
            """)
    @Argument(help: "The issuing CA's common name (or whole name).")
    var issuer: String
    @OptionGroup var state: StateOptions

    func run() async throws {
        let removed: [RevocationList]
        do {
            removed = try state.trust.removeRevocationLists(issuer: issuer)
        } catch {
            throw RuntimeFailure(error.message)
        }
        guard !removed.isEmpty else {
            let known = ((try? state.trust.revocationLists()) ?? []).map { "\"\($0.issuerName)\"" }
            throw RuntimeFailure("no CRL from \"\(issuer)\" in the trust store\(known.isEmpty ? " (it holds none)" : "; it holds CRLs from \(known.joined(separator: ", "))")")
        }
        for list in removed {
            printLine(state.json ? JSONText.object([("event", .string("removed"))] + crlMembers(list)) : "removed CRL \(crlLine(list))")
        }
    }
}

struct TrustAnchor: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "anchor", abstract: "Manage anchor certificates.",
        discussion: """
            Examples:
              nearby trust anchor add company-ca.pem
              nearby trust remove 3QX7KD        (an anchor goes by its key's peer ID)

            Exit status: 0 done; 1 a failure at run time, said on stderr; 2 bad input.
            """,
        subcommands: [TrustAnchorAdd.self])
}

struct TrustAnchorAdd: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "add", abstract: "Trust chains that lead to the certificates in FILE (PEM or DER).",
        discussion: """
            Examples:
              nearby trust anchor add company-ca.pem
              nearby trust anchor add root.der --json

            Exit status: 0 added; 1 a failure at run time, said on stderr; 2 bad input.
            """)
    @Argument(help: "Certificate file: PEM (one or more certificates) or DER.")
    var file: String
    @OptionGroup var state: StateOptions

    func run() async throws {
        let certificates: [Certificate]
        do {
            certificates = try Certificate.chain(contentsOf: URL(fileURLWithPath: file))
        } catch {
            throw error.code == .storage ? ValidationError(error.message) : inputError(error)
        }
        do {
            let added = try state.trust.addAnchors(certificates)
            for certificate in certificates {
                let fresh = added.contains(certificate)
                if state.json {
                    printLine(JSONText.object([
                        ("event", .string(fresh ? "added" : "present")), ("peerID", .string(certificate.peerID.description)),
                    ] + certificateMembers(certificate)))
                } else {
                    printLine("\(fresh ? "added  " : "present") anchor \(certificate.subject) (\(certificate.peerID.short))")
                }
            }
        } catch {
            throw RuntimeFailure(error.message)
        }
    }
}

struct TrustPin: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "pin", abstract: "Trust the peer with this peer ID (after checking it with its owner).",
        discussion: """
            The whole peer ID is needed here: it is what you checked with the peer's owner \
            (`nearby identity show` on their machine). To pin after comparing a six-digit code \
            instead, use `nearby pair`.

            Examples:
              nearby trust pin 3QX7KD-...-R2M4 --name "Build Box"
              nearby peers _openagents._tcp --json     (peer IDs of those nearby)

            Exit status: 0 pinned; 1 a failure at run time, said on stderr; 2 bad input.
            """)
    @Argument(help: "The peer ID, as `nearby identity show` prints it.")
    var peerID: String
    @Option(help: "What to call the peer.")
    var name: String?
    @OptionGroup var state: StateOptions

    func validate() throws {
        do { _ = try PeerID(parsing: peerID) } catch { throw ValidationError(error.message) }
    }

    func run() async throws {
        let id = try PeerID(parsing: peerID)
        do {
            try state.trust.pin(id, name: name)
        } catch {
            throw RuntimeFailure(error.message)
        }
        if state.json {
            var members: [(String, OutputValue)] = [("event", .string("pinned")), ("peerID", .string(id.description))]
            if let name { members.append(("name", .string(name))) }
            printLine(JSONText.object(members))
        } else {
            printLine("pinned \(id)\(name.map { " (\($0))" } ?? "")")
        }
    }
}

struct TrustRemove: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "remove", abstract: "Remove the pin or anchor with this peer ID.",
        discussion: """
            Any beginning of the peer ID (at least 4 characters) that only one entry has \
            will do, as `trust list` shows it; when several match, they are listed.

            Examples:
              nearby trust remove 3QX7KD
              nearby trust remove 3QX7KD-HS1B97 --state-dir ./peer-a

            Exit status: 0 removed; 1 a failure at run time (nothing with that peer ID), said on stderr; 2 bad input.
            """)
    @Argument(help: "Peer ID of the pinned peer or of the anchor's key, or its first characters (e.g. PBFJBC) when only one begins so.")
    var peerID: String
    @OptionGroup var state: StateOptions

    func run() async throws {
        try state.location.requireExisting()
        let id = try PeerIDInput.resolve(peerID, for: "the peer ID", among: PeerIDInput.trusted(state.trust), lookedIn: "the trust store")
        let removed: [String]
        do {
            removed = try state.trust.remove(id)
        } catch {
            throw RuntimeFailure(error.message)
        }
        guard !removed.isEmpty else { throw RuntimeFailure("nothing with peer ID \(id.short) in the trust store") }
        printLine(state.json
            ? JSONText.object([("event", .string("removed")), ("peerID", .string(id.description)), ("what", .array(removed.map { .string($0) }))])
            : "removed \(removed.joined(separator: " and ")) \(id.short)")
    }
}
