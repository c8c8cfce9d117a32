#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
import NetworkPlatform

/// A private key, kept as PKCS#8 DER. Never printed.
struct PrivateKey: Hashable, Sendable, CustomStringConvertible {
    let pkcs8: [UInt8]
    var description: String { "PrivateKey(…)" }
    var pem: String { PEM.encode(pkcs8, label: "PRIVATE KEY") }
}

/// This peer's identity: a key pair and a certificate chain (leaf first) for it, self-signed
/// by default or issued by an organisation's CA. Its ``peerID`` stays the same as long as the
/// key does.
public struct PeerIdentity: Sendable, Equatable {
    /// The certificate chain, leaf first.
    public let certificateChain: [Certificate]
    let privateKey: PrivateKey
    /// The name people see: configured, else the certificate's common name.
    public let displayName: String

    /// The leaf certificate.
    public var certificate: Certificate { certificateChain[0] }
    public var peerID: PeerID { certificate.peerID }
    /// The private key as PKCS#8 DER, for this package's TLS layer (never printed or logged).
    package var privateKeyPKCS8: [UInt8] { privateKey.pkcs8 }

    init(certificateChain: [Certificate], privateKey: PrivateKey, displayName: String?) throws(PeerTrustError) {
        guard let leaf = certificateChain.first else { throw PeerTrustError(.malformed, "an identity needs a certificate") }
        guard OpenSSL.key(privateKey.pkcs8, matches: leaf.der) else {
            throw PeerTrustError(.malformed, "the private key does not belong to the first certificate (\(leaf.subject))")
        }
        self.certificateChain = certificateChain
        self.privateKey = privateKey
        let configured = displayName?.trimmingBlanks(newlines: true)
        self.displayName = configured.flatMap { $0.isEmpty ? nil : $0 } ?? (leaf.commonName.isEmpty ? Self.defaultDisplayName() : leaf.commonName)
    }

    /// How long a generated certificate is valid.
    public static let generatedValidity: TimeInterval = 20 * 365 * 24 * 3600

    /// Makes a new P-256 key and a self-signed certificate for it (fit for TLS server and
    /// client, not a CA), named `displayName` or ``defaultDisplayName()``.
    public static func generate(displayName: String? = nil, now: Date = Date()) throws(PeerTrustError) -> PeerIdentity {
        let name = displayName.flatMap { $0.isEmpty ? nil : $0 } ?? defaultDisplayName()
        let key = try OpenSSL.generateP256()
        let start = Int64(now.timeIntervalSince1970) - 3600  // an hour of slack for clocks that lag
        let template = OpenSSL.Template(
            commonName: String(name.prefix(64)), organization: "Nearby", serial: UInt64.random(in: 1...UInt64(Int64.max)),
            notBefore: start, notAfter: start + Int64(generatedValidity))
        let der = try OpenSSL.makeCertificate(template, subjectKey: key, issuer: nil, issuerKey: key)
        return try PeerIdentity(certificateChain: [try Certificate(der: der)], privateKey: PrivateKey(pkcs8: key), displayName: name)
    }

    /// An identity issued elsewhere, as PEM: the certificate chain (leaf first) and the
    /// private key (PKCS#8, SEC1, or encrypted PKCS#8 with `passphrase`).
    /// - Throws: ``PeerTrustError``: `passphraseRequired` for an encrypted key without a
    ///   passphrase, `wrongPassphrase`, `malformed` for anything unreadable or a key that does
    ///   not match the leaf.
    public init(certificateChainPEM: String, privateKeyPEM: String, passphrase: String? = nil, displayName: String? = nil) throws(PeerTrustError) {
        let chain = try Certificate.chain(pem: certificateChainPEM)
        let blocks = try PEM.blocks(in: privateKeyPEM)
        guard let block = blocks.first(where: { $0.label.hasSuffix("PRIVATE KEY") }) else {
            throw PeerTrustError(.malformed, "no private key (no -----BEGIN PRIVATE KEY----- block)")
        }
        let encrypted = block.label == "ENCRYPTED PRIVATE KEY" || block.headers.contains { $0.contains("ENCRYPTED") }
        if encrypted && (passphrase ?? "").isEmpty {
            throw PeerTrustError(.passphraseRequired, "the private key is protected by a passphrase; give it (--passphrase-file)")
        }
        let key: [UInt8]
        do {
            key = try OpenSSL.key(fromPEM: privateKeyPEM, passphrase: encrypted ? passphrase : nil)
        } catch {
            if encrypted { throw PeerTrustError(.wrongPassphrase, "the passphrase does not open the private key") }
            throw PeerTrustError(.malformed, "the private key cannot be read: \(error.message)")
        }
        try self.init(certificateChain: chain, privateKey: PrivateKey(pkcs8: key), displayName: displayName)
    }

    /// An identity from a PKCS#12 file (how managed devices often receive one).
    public init(pkcs12: [UInt8], passphrase: String, displayName: String? = nil) throws(PeerTrustError) {
        let contents: (key: [UInt8], certificates: [[UInt8]])
        do {
            contents = try OpenSSL.readPKCS12(pkcs12, passphrase: passphrase)
        } catch {
            if error.message.contains("wrong passphrase") {
                throw PeerTrustError(.wrongPassphrase, "the passphrase does not open the PKCS#12 file")
            }
            throw PeerTrustError(.malformed, error.message)
        }
        var chain: [Certificate] = []
        for der in contents.certificates { chain.append(try Certificate(der: der)) }
        try self.init(certificateChain: chain, privateKey: PrivateKey(pkcs8: contents.key), displayName: displayName)
    }

    /// The certificate chain as PEM, and the private key after it when asked.
    public func pem(includingPrivateKey: Bool = false) -> String {
        certificateChain.map(\.pem).joined() + (includingPrivateKey ? privateKey.pem : "")
    }

    /// The identity as a PKCS#12 file protected by `passphrase`.
    public func pkcs12(passphrase: String) throws(PeerTrustError) -> [UInt8] {
        try OpenSSL.writePKCS12(key: privateKey.pkcs8, certificates: certificateChain.map(\.der), passphrase: passphrase, name: displayName)
    }

    /// The machine's host name without `.local`, else "Nearby peer".
    public static func defaultDisplayName() -> String {
        guard var name = NetworkPlatform.hostName() else { return "Nearby peer" }
        if name.lowercased().hasSuffix(".local") { name.removeLast(6) }
        name = name.trimmingBlanks()
        return name.isEmpty || name == "localhost" ? "Nearby peer" : name
    }

    public static func == (lhs: PeerIdentity, rhs: PeerIdentity) -> Bool {
        lhs.certificateChain == rhs.certificateChain && lhs.privateKey == rhs.privateKey && lhs.displayName == rhs.displayName
    }
}
