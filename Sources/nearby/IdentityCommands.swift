import ArgumentParser
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import PeerTrust

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
              nearby identity export > build-box.pem   (the certificate, for others)
            """,
        subcommands: [IdentityShow.self, IdentityCreate.self, IdentityImport.self, IdentityExport.self]
    )
}

func printIdentity(_ identity: PeerIdentity, store: IdentityStore, json: Bool, event: String? = nil) {
    let leaf = identity.certificate
    if json {
        var members: [(String, OutputValue)] = []
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
    static let configuration = CommandConfiguration(
        commandName: "show", abstract: "Show the identity and its peer ID.",
        discussion: """
            Examples:
              nearby identity show
              nearby identity show --json
              nearby identity show --state-dir /var/lib/nearby
              nearby identity show --id         (the bare peer ID)

            Exit status: 0 shown; 1 a failure at run time (no identity yet, or one that cannot be read), said on stderr; 2 bad input.
            """)
    @OptionGroup var state: StateOptions
    @Flag(name: .customLong("id"), help: "Print only the peer ID (one line).")
    var idOnly = false

    func validate() throws {
        if idOnly, state.json { throw ValidationError("--id prints the bare peer ID; it does not go with --json") }
    }

    func run() async throws {
        try state.location.requireExisting()
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
        if idOnly {
            printLine(identity.peerID.description)
            return
        }
        printIdentity(identity, store: store, json: state.json)
    }
}

struct IdentityCreate: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "create", abstract: "Make a new key pair and self-signed certificate (P-256).",
        discussion: """
            Refuses to replace an identity that exists (its peer ID would be lost) unless \
            --force is given.

            Examples:
              nearby identity create --name "Build Box"
              nearby identity create --state-dir ./peer-a --name "Peer A"

            Exit status: 0 made and stored; 1 a failure at run time (an identity exists and --force was not given, or the directory cannot be written), said on stderr; 2 bad input.
            """)
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

            Exit status: 0 imported and stored; 1 a failure at run time, said on stderr; 2 bad input.
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

            Exit status: 0 written; 1 a failure at run time (no identity yet, a file that cannot be written), said on stderr; 2 bad input.
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
        if key { writeToStandardError("nearby: warning: the output holds the private key\n") }
        StandardOutput.shared.enqueue(identity.pem(includingPrivateKey: key))
    }
}
