import Foundation
import Testing

@testable import PeerTrust

@Suite("peer IDs")
struct PeerIDTests {
    let id = PeerID(publicKeyInfo: Array("some public key".utf8))

    @Test("printed as nine groups of six; parsed back whatever the case, dashes or look-alikes")
    func roundTrip() throws {
        let text = id.description
        #expect(text.count == 54 + 8)
        #expect(text.split(separator: "-").map(\.count) == Array(repeating: 6, count: 9))
        #expect(try PeerID(parsing: text) == id)
        #expect(try PeerID(parsing: text.lowercased().replacingOccurrences(of: "-", with: " ")) == id)
        let lookalikes = text.replacingOccurrences(of: "0", with: "o").replacingOccurrences(of: "1", with: "l")
        #expect(try PeerID(parsing: lookalikes) == id)
        #expect(id.short == String(text.prefix(6)) + "…")
        #expect(PeerID(text) == id && PeerID("nonsense") == nil)
    }

    @Test("every single mistyped character is caught by the check characters")
    func typos() {
        let characters = Array(id.description.replacingOccurrences(of: "-", with: ""))
        for index in characters.indices {
            for replacement in PeerID.alphabet where replacement != characters[index] {
                var typo = characters
                typo[index] = replacement
                #expect(throws: PeerIDError.self) { try PeerID(parsing: String(typo)) }
            }
        }
    }

    @Test("bad input says what is wrong")
    func badInput() {
        #expect(throws: PeerIDError("\"ABC\" is not a peer ID: it has 3 characters, a peer ID has 54 (nine groups of six)")) {
            try PeerID(parsing: "ABC")
        }
        #expect(throws: PeerIDError.self) { try PeerID(parsing: String(repeating: "U", count: 54)) }
        #expect(throws: PeerIDError.self) { try PeerID(parsing: "") }
    }

    @Test("order is bytewise; the verification code is the same from both sides and differs per pair")
    func orderAndCode() throws {
        let low = try #require(PeerID(bytes: [0] + Array(repeating: 0xFF, count: 31)))
        let high = try #require(PeerID(bytes: [1] + Array(repeating: 0, count: 31)))
        #expect(low < high)
        #expect([high, low].sorted() == [low, high])
        let code = low.verificationCode(with: high)
        #expect(code == high.verificationCode(with: low))
        #expect(code.count == 14 && code.split(separator: " ").map(\.count) == [4, 4, 4])
        #expect(code != low.verificationCode(with: id))
        #expect(PeerID(bytes: [1, 2]) == nil)
    }
}

@Suite("peer identity")
struct IdentityTests {
    func temporaryDirectory() -> URL {
        FileManager.default.temporaryDirectory.appendingPathComponent("nearby-identity-\(UUID().uuidString)")
    }

    @Test("a generated identity is a self-signed P-256 certificate for TLS server and client, named as asked")
    func generate() throws {
        let identity = try PeerIdentity.generate(displayName: "Build Box", now: TestPKI.now)
        #expect(identity.displayName == "Build Box")
        #expect(identity.certificate.commonName == "Build Box")
        #expect(identity.certificate.isSelfSigned && !identity.certificate.isCA)
        #expect(identity.peerID == PeerID(publicKeyInfo: identity.certificate.publicKeyInfo))
        let pinned = TrustEvaluator(policy: .pinned([identity.peerID]))
        for role in PeerRole.allCases {
            #expect(pinned.evaluate(chain: identity.certificateChain, role: role, at: TestPKI.now).isTrusted)
        }
        #expect(!PeerIdentity.defaultDisplayName().isEmpty)
        #expect(try PeerIdentity.generate(displayName: "").displayName == PeerIdentity.defaultDisplayName())
    }

    @Test("PEM and PKCS#12 round trips keep the peer ID; a wrong passphrase is refused")
    func imports() throws {
        let identity = try PeerIdentity.generate(displayName: "Round Trip")
        let text = identity.pem(includingPrivateKey: true)
        let again = try PeerIdentity(certificateChainPEM: text, privateKeyPEM: text)
        #expect(again.peerID == identity.peerID)
        let bundle = try identity.pkcs12(passphrase: "correct horse")
        #expect(try PeerIdentity(pkcs12: bundle, passphrase: "correct horse").peerID == identity.peerID)
        #expect(throws: PeerTrustError(.wrongPassphrase, "the passphrase does not open the PKCS#12 file")) {
            try PeerIdentity(pkcs12: bundle, passphrase: "battery staple")
        }
        let issued = try TestPKI.chain()
        let chainPEM = issued.leaf.certificate.pem + issued.intermediate.certificate.pem
        let keyPEM = PrivateKey(pkcs8: issued.leaf.key).pem
        let imported = try PeerIdentity(certificateChainPEM: chainPEM, privateKeyPEM: keyPEM, displayName: "Managed Box")
        #expect(imported.certificateChain.count == 2 && imported.displayName == "Managed Box")
        #expect(imported.peerID == issued.leaf.certificate.peerID)
    }

    @Test("hostile input: garbage, truncated PEM and DER, a file of 4,097 certificates, a foreign key, an encrypted key without a passphrase")
    func hostileInput() throws {
        let identity = try PeerIdentity.generate()
        let certificatePEM = identity.certificate.pem
        #expect(throws: PeerTrustError.self) { try Certificate.chain(pem: "garbage\u{0}\u{7F}") }
        #expect(throws: PeerTrustError.self) { try Certificate.chain(pem: String(certificatePEM.prefix(certificatePEM.count / 2))) }
        #expect(throws: PeerTrustError.self) { try Certificate(der: Array(identity.certificate.der.prefix(100))) }
        #expect(throws: PeerTrustError.self) { try Certificate(der: []) }
        #expect(throws: PeerTrustError.self) { try Certificate(der: identity.certificate.der + [0]) }
        let notBase64 = "-----BEGIN CERTIFICATE-----\n!!!!\n-----END CERTIFICATE-----\n"
        #expect(throws: PeerTrustError.self) { try Certificate.chain(pem: notBase64) }
        // Counted before anything is parsed: 4,097 small blocks are refused at once.
        let flood = String(repeating: "-----BEGIN CERTIFICATE-----\nMAA=\n-----END CERTIFICATE-----\n", count: 4097)
        #expect(throws: PeerTrustError(.malformed, "4097 certificates; a file may hold at most 4096")) { try Certificate.chain(pem: flood) }
        let stranger = try PeerIdentity.generate()
        #expect(throws: PeerTrustError.self) {
            try PeerIdentity(certificateChainPEM: certificatePEM, privateKeyPEM: stranger.privateKey.pem)
        }
        let encrypted = "-----BEGIN ENCRYPTED PRIVATE KEY-----\nAAAA\n-----END ENCRYPTED PRIVATE KEY-----\n"
        #expect(throws: PeerTrustError(.passphraseRequired, "the private key is protected by a passphrase; give it (--passphrase-file)")) {
            try PeerIdentity(certificateChainPEM: certificatePEM, privateKeyPEM: encrypted)
        }
        #expect(throws: PeerTrustError.self) { try PeerIdentity(pkcs12: Array("not pkcs12".utf8), passphrase: "x") }
        #expect(throws: PeerTrustError.self) { try PeerIdentity(pkcs12: [], passphrase: "x") }
    }

    @Test("stored once and reused: same peer ID after reload, private files, a damaged file refused and left alone")
    func persistence() throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let store = IdentityStore(directory: directory)
        #expect(try store.load() == nil)
        let made = try store.loadOrCreate(displayName: "Kept Box")
        #expect(made.created && made.unusedName == nil)
        let first = made.identity
        let again = try IdentityStore(directory: directory).loadOrCreate(displayName: "Other Name")
        let second = again.identity
        #expect(second.peerID == first.peerID && second.displayName == "Kept Box")
        // Loading says what it did not do: no key written, the name asked for not used.
        #expect(!again.created && again.unusedName == "Other Name")
        let plain = try store.loadOrCreate()
        #expect(!plain.created && plain.unusedName == nil)
        #expect(try store.loadOrCreate(displayName: " Kept Box ").unusedName == nil)
        let directoryMode = try FileManager.default.attributesOfItem(atPath: directory.path)[.posixPermissions] as? Int
        let fileMode = try FileManager.default.attributesOfItem(atPath: store.identityFile.path)[.posixPermissions] as? Int
        #expect(directoryMode == 0o700 && fileMode == 0o600)
        #expect(throws: PeerTrustError.self) { try store.save(try PeerIdentity.generate(), replacing: false) }
        #expect(try store.load()?.peerID == first.peerID)

        let original = try Data(contentsOf: store.identityFile)
        let damaged = original.prefix(original.count - 40)
        try damaged.write(to: store.identityFile)
        do {
            _ = try store.loadOrCreate()
            Issue.record("a damaged identity was accepted or replaced")
        } catch {
            #expect(error.code == .damaged)
            #expect(error.message.contains("is damaged") && error.message.contains("changes this peer's ID"))
        }
        #expect(try Data(contentsOf: store.identityFile) == damaged)
    }

    @Test("a refusal of access says what to check: who owns what, with which mode, and whom the process runs as")
    func accessFactsText() {
        let other = AccessFacts(path: "/srv/state", isDirectory: true, owner: "root", ownerID: 0, mode: 0o700, user: "nobody", userID: 65534)
        #expect(
            other.text
                == "(the directory /srv/state belongs to root (uid 0), mode 0700, and this process runs as nobody (uid 65534)): run as root, or make it this user's (chown) or open its mode to this user (chmod)")
        let own = AccessFacts(path: "/home/a/identity.pem", isDirectory: false, owner: nil, ownerID: 1000, mode: 0o000, user: nil, userID: 1000)
        #expect(
            own.text
                == "(the file /home/a/identity.pem belongs to uid 1000, mode 0000, and this process runs as uid 1000): its mode lets its owner in no further: chmod u+rw /home/a/identity.pem")
        let refused = Storage.accessFailure("cannot read /x/identity.pem", EACCES, checking: "/", for: R_OK)
        #expect(refused?.code == .storage)
        #expect(refused?.message.hasPrefix("cannot read /x/identity.pem: Permission denied") == true)
        // In a state directory, the other way out is said once, however often it is wrapped.
        let stated = refused?.inStateDirectory().inStateDirectory()
        #expect(
            stated?.message.hasSuffix("; or give this user a state directory of its own (nearby's --state-dir DIR, or NEARBY_STATE_DIR=DIR)") == true)
        #expect(stated?.message.components(separatedBy: "--state-dir").count == 2)
        #expect(Storage.accessFailure("cannot read /x", ENOSPC, checking: "/x", for: R_OK) == nil)
        #expect(PeerTrustError(.storage, "disk full").inStateDirectory().message == "disk full")
    }

    @Test("racing creators end with one identity that all of them use")
    func concurrentCreation() async throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let ids: [PeerID?] = await withTaskGroup(of: PeerID?.self) { group in
            for _ in 0..<8 {
                group.addTask { () -> PeerID? in (try? IdentityStore(directory: directory).loadOrCreate())?.identity.peerID }
            }
            var ids: [PeerID?] = []
            for await id in group { ids.append(id) }
            return ids
        }
        let created = ids.compactMap { $0 }
        #expect(created.count == 8)
        #expect(Set(created).count == 1)
        let stored = try IdentityStore(directory: directory).load()
        #expect(stored?.peerID == created.first)
        let leftovers = try FileManager.default.contentsOfDirectory(atPath: directory.path).filter { $0.hasSuffix(".tmp") }
        #expect(leftovers.isEmpty)
    }
}

@Suite("trust store")
struct TrustStoreTests {
    @Test("anchors and pins persist, update atomically and can be removed by peer ID")
    func anchorsAndPins() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("nearby-trust-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let store = TrustStore(directory: directory)
        #expect(try store.anchors().isEmpty && store.pins().isEmpty)
        let pki = try TestPKI.chain()
        #expect(try store.addAnchors([pki.root.certificate]).count == 1)
        #expect(try store.addAnchors([pki.root.certificate]).isEmpty)
        #expect(try store.anchors() == [pki.root.certificate])
        let peer = try TestPKI.make("Pinned Box")
        try store.pin(peer.certificate.peerID, name: "Pinned Box", at: TestPKI.now)
        let pins = try TrustStore(directory: directory).pins()
        #expect(pins == [Pin(peerID: peer.certificate.peerID, name: "Pinned Box", pinnedAt: TestPKI.now)])
        let evaluator = TrustEvaluator(policy: try store.policy())
        #expect(evaluator.evaluate(chain: [peer.certificate], role: .connecting, at: TestPKI.now).isTrusted)
        #expect(evaluator.evaluate(chain: [pki.leaf.certificate, pki.intermediate.certificate], role: .connecting, at: TestPKI.now).isTrusted)
        #expect(try store.remove(peer.certificate.peerID) == ["pin"])
        #expect(try store.remove(pki.root.certificate.peerID) == ["anchor"])
        #expect(try store.remove(pki.root.certificate.peerID).isEmpty)
        #expect(try store.anchors().isEmpty && store.pins().isEmpty)
        try Data("{not json".utf8).write(to: store.pinFile)
        #expect(throws: PeerTrustError.self) { try store.pins() }
    }
}
