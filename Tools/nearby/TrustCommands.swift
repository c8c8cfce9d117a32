public import ArgumentParser
import Foundation
import PeerTrust

/// Where identities and trust stores live.
struct StateOptions: ParsableArguments {
    @Option(name: .customLong("state-dir"), help: ArgumentHelp(
        "Directory of the identity and trust store (default: $NEARBY_STATE_DIR, else $XDG_STATE_HOME/nearby, else ~/.local/state/nearby).",
        valueName: "dir"))
    var stateDirectory: String?

    @Flag(help: "Print JSON instead of text.")
    var json = false

    var directory: URL { stateDirectory.map { URL(fileURLWithPath: $0) } ?? IdentityStore.defaultDirectory }
    var identities: IdentityStore { IdentityStore(directory: directory) }
    var trust: TrustStore { TrustStore(directory: directory.appendingPathComponent("trust")) }
}

/// Reads a whole file named on the command line ("-": standard input); bad input exits 2.
func readInput(_ path: String, what: String) throws -> [UInt8] {
    if path == "-" { return [UInt8](FileHandle.standardInput.readDataToEndOfFile()) }
    // FileHandle, not FileManager: it also reads pipes such as <(echo secret).
    guard let handle = FileHandle(forReadingAtPath: path) else {
        throw ValidationError("cannot read \(what) \(path) (no such file, or not readable)")
    }
    defer { try? handle.close() }
    return [UInt8](handle.readDataToEndOfFile())
}

/// A passphrase from --passphrase-file (first line), else $NEARBY_PASSPHRASE.
func passphrase(from file: String?) throws -> String? {
    if let file {
        let text = String(decoding: try readInput(file, what: "passphrase file"), as: UTF8.self)
        return String(text.split(separator: "\n", omittingEmptySubsequences: false).first ?? "")
    }
    return ProcessInfo.processInfo.environment["NEARBY_PASSPHRASE"]
}

func iso8601(_ date: Date) -> String {
    let formatter = ISO8601DateFormatter()
    formatter.formatOptions = [.withInternetDateTime]
    return formatter.string(from: date)
}

/// Parses an ISO 8601 time: `2026-11-22T07:30:00Z`, with fractions or an offset, or a date.
func parseTime(_ text: String) -> Date? {
    let formatter = ISO8601DateFormatter()
    for options: ISO8601DateFormatter.Options in [
        [.withInternetDateTime], [.withInternetDateTime, .withFractionalSeconds], [.withFullDate],
    ] {
        formatter.formatOptions = options
        if let date = formatter.date(from: text) { return date }
    }
    return nil
}

/// Turns a PeerTrustError into the CLI's exit statuses: 2 for input the user gave, 1 otherwise.
func inputError(_ error: PeerTrustError) -> any Error {
    switch error.code {
    case .malformed, .passphraseRequired, .wrongPassphrase: ValidationError(error.message)
    default: RuntimeFailure(error.message)
    }
}

func certificateMembers(_ certificate: Certificate) -> [(String, JSONValue)] {
    [
        ("subject", .string(certificate.subject)), ("issuer", .string(certificate.issuer)),
        ("notBefore", .string(iso8601(certificate.notBefore))), ("notAfter", .string(iso8601(certificate.notAfter))),
    ]
}

// MARK: - identity

struct IdentityCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "identity",
        abstract: "This peer's identity: a key pair and a certificate; its peer ID is the SHA-256 of the key.",
        discussion: """
            The identity is made once and reused, so the peer ID stays the same across runs. It \
            lives in identity.pem (mode 0600) in the state directory (mode 0700).

            Examples:
              nearby identity create --name "Build Box"
              nearby identity show
              nearby identity import --pkcs12 device.p12 --passphrase-file pass.txt
              nearby identity export > build-box.pem       (the certificate, to give to others)
            """,
        subcommands: [IdentityShow.self, IdentityCreate.self, IdentityImport.self, IdentityExport.self]
    )
}

func printIdentity(_ identity: PeerIdentity, store: IdentityStore, json: Bool, event: String? = nil) {
    let leaf = identity.certificate
    if json {
        var members: [(String, JSONValue)] = []
        if let event { members.append(("event", .string(event))) }
        members += [
            ("peerID", .string(identity.peerID.description)), ("short", .string(identity.peerID.short)),
            ("displayName", .string(identity.displayName)), ("selfSigned", .bool(leaf.isSelfSigned)),
            ("chainLength", .number(Double(identity.certificateChain.count))), ("file", .string(store.identityFile.path)),
        ] + certificateMembers(leaf)
        printLine(JSONText.object(members))
        return
    }
    if let event { printLine(event == "created" ? "Created a new identity" : "Imported the identity") }
    printLine("name         \(identity.displayName)")
    printLine("peer ID      \(identity.peerID)")
    printLine("certificate  \(leaf.subject), \(leaf.isSelfSigned ? "self-signed" : "issued by \(leaf.issuer)")")
    printLine("valid        \(iso8601(leaf.notBefore)) to \(iso8601(leaf.notAfter))")
    printLine("stored in    \(store.identityFile.path)")
}

struct IdentityShow: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "show", abstract: "Show the identity and its peer ID.")
    @OptionGroup var state: StateOptions

    func run() async throws {
        let store = state.identities
        let identity: PeerIdentity?
        do {
            identity = try store.load()
        } catch {
            throw RuntimeFailure(error.message)
        }
        guard let identity else {
            throw RuntimeFailure("no identity in \(store.directory.path) yet; make one with `nearby identity create`")
        }
        printIdentity(identity, store: store, json: state.json)
    }
}

struct IdentityCreate: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "create", abstract: "Make a new key pair and self-signed certificate (P-256).")
    @Option(help: "Display name (default: the host name without .local).")
    var name: String?
    @Flag(help: "Replace an existing identity (its peer ID is lost).")
    var force = false
    @OptionGroup var state: StateOptions

    func validate() throws {
        if let name, name.utf8.count > 64 || name.contains(where: \.isNewline) {
            throw ValidationError("--name must be one line of at most 64 bytes")
        }
    }

    func run() async throws {
        let store = state.identities
        do {
            if !force {
                let existing: PeerIdentity?
                do {
                    existing = try store.load()
                } catch {
                    throw RuntimeFailure("\(error.message); --force replaces it")
                }
                if let existing {
                    throw RuntimeFailure(
                        "an identity already exists in \(store.directory.path) (peer ID \(existing.peerID.short)); --force replaces it, which changes this peer's ID")
                }
            }
            let identity = try PeerIdentity.generate(displayName: name)
            try store.save(identity, replacing: force)
            printIdentity(identity, store: store, json: state.json, event: "created")
        } catch let error as PeerTrustError where error.code == .exists {
            throw RuntimeFailure("an identity was created in \(store.directory.path) at the same time; it stands (see `nearby identity show`)")
        } catch let error as PeerTrustError {
            throw RuntimeFailure(error.message)
        }
    }
}

struct IdentityImport: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "import",
        abstract: "Use an identity issued elsewhere: PEM (chain and key) or PKCS#12.",
        discussion: """
            Everything is read and checked before anything is written: a bad file, a wrong \
            passphrase or a key that does not match the certificate leaves the stored identity as \
            it was.

            Examples:
              nearby identity import --pem chain.pem --key key.pem
              nearby identity import --pkcs12 device.p12 --passphrase-file pass.txt --force
            """)
    @Option(help: ArgumentHelp("Certificate chain in PEM, leaf first (may hold the key too).", valueName: "file"))
    var pem: String?
    @Option(help: ArgumentHelp("Private key in PEM (PKCS#8, SEC1, or encrypted PKCS#8).", valueName: "file"))
    var key: String?
    @Option(help: ArgumentHelp("PKCS#12 file with key and chain.", valueName: "file"))
    var pkcs12: String?
    @Option(name: .customLong("passphrase-file"), help: ArgumentHelp(
        "File whose first line is the passphrase (\"-\": standard input). Default: $NEARBY_PASSPHRASE.", valueName: "file"))
    var passphraseFile: String?
    @Option(help: "Display name (default: the certificate's common name).")
    var name: String?
    @Flag(help: "Replace an existing identity (its peer ID is lost).")
    var force = false
    @OptionGroup var state: StateOptions

    func validate() throws {
        guard (pem != nil) != (pkcs12 != nil) else { throw ValidationError("give either --pem FILE (with --key FILE) or --pkcs12 FILE") }
        if pkcs12 != nil && key != nil { throw ValidationError("--key goes with --pem; a PKCS#12 file holds its own key") }
    }

    func run() async throws {
        let identity: PeerIdentity
        do {
            if let pkcs12 {
                guard let secret = try passphrase(from: passphraseFile) else {
                    throw ValidationError("a PKCS#12 file needs its passphrase: --passphrase-file FILE or $NEARBY_PASSPHRASE")
                }
                identity = try PeerIdentity(pkcs12: try readInput(pkcs12, what: "PKCS#12 file"), passphrase: secret, displayName: name)
            } else if let pem {
                let chain = String(decoding: try readInput(pem, what: "certificate chain"), as: UTF8.self)
                let keyText = try key.map { String(decoding: try readInput($0, what: "private key"), as: UTF8.self) } ?? chain
                identity = try PeerIdentity(
                    certificateChainPEM: chain, privateKeyPEM: keyText, passphrase: try passphrase(from: passphraseFile), displayName: name)
            } else {
                throw ValidationError("give either --pem FILE (with --key FILE) or --pkcs12 FILE")
            }
        } catch let error as PeerTrustError {
            throw inputError(error)
        }
        let store = state.identities
        do {
            try store.save(identity, replacing: force)
        } catch where error.code == .exists {
            throw RuntimeFailure("an identity already exists in \(store.directory.path); --force replaces it, which changes this peer's ID")
        } catch {
            throw RuntimeFailure(error.message)
        }
        printIdentity(identity, store: store, json: state.json, event: "imported")
    }
}

struct IdentityExport: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "export",
        abstract: "Print the certificate chain (PEM) for others to pin or anchor; or write a PKCS#12 file.",
        discussion: """
            Examples:
              nearby identity export > build-box.pem
              nearby identity export --pkcs12 backup.p12 --passphrase-file pass.txt
            """)
    @Flag(help: "Append the private key (keep the output secret).")
    var key = false
    @Option(help: ArgumentHelp("Write key and chain as PKCS#12 to this file instead (mode 0600).", valueName: "file"))
    var pkcs12: String?
    @Option(name: .customLong("passphrase-file"), help: ArgumentHelp(
        "File whose first line protects the PKCS#12 file. Default: $NEARBY_PASSPHRASE.", valueName: "file"))
    var passphraseFile: String?
    @OptionGroup var state: StateOptions

    func run() async throws {
        let store = state.identities
        guard let identity = try { () throws -> PeerIdentity? in
            do { return try store.load() } catch let error as PeerTrustError { throw RuntimeFailure(error.message) }
        }() else {
            throw RuntimeFailure("no identity in \(store.directory.path) yet; make one with `nearby identity create`")
        }
        if let pkcs12 {
            guard let secret = try passphrase(from: passphraseFile), !secret.isEmpty else {
                throw ValidationError("a PKCS#12 file needs a passphrase: --passphrase-file FILE or $NEARBY_PASSPHRASE")
            }
            do {
                let bytes = try identity.pkcs12(passphrase: secret)
                let url = URL(fileURLWithPath: pkcs12)
                guard FileManager.default.createFile(atPath: url.path, contents: Data(bytes), attributes: [.posixPermissions: 0o600]) else {
                    throw RuntimeFailure("cannot write \(url.path)")
                }
            } catch let error as PeerTrustError {
                throw RuntimeFailure(error.message)
            }
            return
        }
        if key { FileHandle.standardError.write(Data("nearby: warning: the output holds the private key\n".utf8)) }
        FileHandle.standardOutput.write(Data(identity.pem(includingPrivateKey: key).utf8))
    }
}

// MARK: - trust

struct TrustCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "trust",
        abstract: "Trusted anchors and pinned peers, and checking a certificate chain against them.",
        discussion: """
            A peer is trusted when its chain leads to an anchor certificate (e.g. your \
            organisation's CA), or when its peer ID is pinned (a person said yes once). `check` \
            judges a chain exactly as the connection broker does.

            Examples:
              nearby trust anchor add company-ca.pem
              nearby trust pin 3QX7KD-... --name "Build Box"
              nearby trust list
              nearby trust check peer.pem --role connecting
              nearby trust check peer.pem --anchor ca.pem --at 2027-01-01T00:00:00Z --json
            """,
        subcommands: [TrustList.self, TrustAnchor.self, TrustPin.self, TrustRemove.self, TrustCheck.self]
    )
}

struct TrustList: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "list", abstract: "List anchors and pins.")
    @OptionGroup var state: StateOptions

    func run() async throws {
        let anchors: [Certificate]
        let pins: [Pin]
        do {
            anchors = try state.trust.anchors()
            pins = try state.trust.pins()
        } catch {
            throw RuntimeFailure(error.message)
        }
        if state.json {
            for anchor in anchors {
                printLine(JSONText.object([("kind", .string("anchor")), ("peerID", .string(anchor.peerID.description))] + certificateMembers(anchor)))
            }
            for pin in pins {
                var members: [(String, JSONValue)] = [("kind", .string("pin")), ("peerID", .string(pin.peerID.description))]
                if let name = pin.name { members.append(("name", .string(name))) }
                members.append(("pinnedAt", .string(iso8601(pin.pinnedAt))))
                printLine(JSONText.object(members))
            }
            return
        }
        printLine(anchors.isEmpty ? "anchors  (none)" : "anchors")
        for anchor in anchors { printLine("  \(anchor.peerID.short)  \(anchor.subject)  until \(iso8601(anchor.notAfter))") }
        printLine(pins.isEmpty ? "pins     (none)" : "pins")
        for pin in pins { printLine("  \(pin.peerID)  \(pin.name ?? "")  pinned \(iso8601(pin.pinnedAt))") }
    }
}

struct TrustAnchor: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "anchor", abstract: "Manage anchor certificates.", subcommands: [TrustAnchorAdd.self])
}

struct TrustAnchorAdd: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "add", abstract: "Trust chains that lead to the certificates in FILE (PEM or DER).")
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
        commandName: "pin", abstract: "Trust the peer with this peer ID (after checking it with its owner).")
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
            var members: [(String, JSONValue)] = [("event", .string("pinned")), ("peerID", .string(id.description))]
            if let name { members.append(("name", .string(name))) }
            printLine(JSONText.object(members))
        } else {
            printLine("pinned \(id)\(name.map { " (\($0))" } ?? "")")
        }
    }
}

struct TrustRemove: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "remove", abstract: "Remove the pin or anchor with this peer ID.")
    @Argument(help: "Peer ID of the pinned peer or of the anchor's key.")
    var peerID: String
    @OptionGroup var state: StateOptions

    func validate() throws {
        do { _ = try PeerID(parsing: peerID) } catch { throw ValidationError(error.message) }
    }

    func run() async throws {
        let id = try PeerID(parsing: peerID)
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

extension PeerRole: ExpressibleByArgument {}

struct TrustCheck: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "check",
        abstract: "Judge a certificate chain as the connection broker will; exit 0 trusted, 1 rejected, 2 unusable input.",
        discussion: """
            CHAIN is PEM: the peer's certificate first, then the intermediates it sends. With \
            no --anchor, --system-roots or --pinned, the trust store's anchors and pins are used. \
            Always checked: validity at --at (default now), signatures, basic constraints, key \
            usage for the role, at most --max-depth intermediates, and --peer-id when given. \
            Every reason for a rejection is printed.

            --role connecting: the peer is the one we connect to (must be fit for a TLS server); \
            accepting: it connected to us (must be fit for a TLS client).
            """)
    @Argument(help: "PEM file: leaf certificate first, then intermediates.")
    var chain: String
    @Option(name: .customLong("anchor"), help: ArgumentHelp("Trust chains that lead to the certificates in this file (repeatable).", valueName: "file"))
    var anchors: [String] = []
    @Flag(name: .customLong("system-roots"), help: "Trust the system's root certificates.")
    var systemRoots = false
    @Flag(help: "Trust the peers pinned in the trust store.")
    var pinned = false
    @Option(name: .customLong("peer-id"), help: "The peer ID discovery announced: the certificate's key must match it.")
    var peerID: String?
    @Option(help: ArgumentHelp("connecting (judge a TLS server) or accepting (judge a TLS client).", valueName: "connecting|accepting"))
    var role: PeerRole = .connecting
    @Option(help: ArgumentHelp("Judge at this time, ISO 8601 (e.g. 2027-01-01T00:00:00Z). Default: now.", valueName: "time"))
    var at: String?
    @Option(name: .customLong("max-depth"), help: "Intermediate CA certificates allowed between leaf and anchor.")
    var maxDepth: Int = 8
    @OptionGroup var state: StateOptions

    func validate() throws {
        if let peerID {
            do { _ = try PeerID(parsing: peerID) } catch { throw ValidationError(error.message) }
        }
        if let at, parseTime(at) == nil {
            throw ValidationError("--at \(at) is not an ISO 8601 time; use e.g. 2027-01-01T00:00:00Z")
        }
        guard (0...64).contains(maxDepth) else { throw ValidationError("--max-depth \(maxDepth) is out of range; use 0-64") }
    }

    func certificates(_ path: String, what: String) throws -> [Certificate] {
        do {
            return try Certificate.chain(contentsOf: URL(fileURLWithPath: path))
        } catch {
            throw ValidationError("\(what): \(error.message)")
        }
    }

    func run() async throws {
        let presented = try certificates(chain, what: "chain")
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
        let evaluator = TrustEvaluator(policy: parts.count == 1 ? parts[0] : .anyOf(parts), maximumIntermediates: maxDepth)
        let expected = try peerID.map { try PeerID(parsing: $0) }
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
                        var members: [(String, JSONValue)] = [("message", .string(reason.message))]
                        members.append(("code", .string(reason.code.description)))
                        if let depth = reason.depth { members.append(("depth", .number(Double(depth)))) }
                        return .object(members)
                    })),
                ]))
            } else {
                printLine("rejected: \(presented[0].subject) (peer ID \(presented[0].peerID.short))")
                for reason in reasons { printLine("  - \(reason.message)") }
            }
            throw ExitCode(1)
        }
    }
}
