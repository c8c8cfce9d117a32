#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif

/// An X.509 certificate: its DER bytes, checked on the way in, and what it says.
public struct Certificate: Hashable, Sendable, CustomStringConvertible {
    /// The DER encoding.
    public let der: [UInt8]
    /// The subject, RFC 2253 style (`CN=Build Box,O=Nearby`).
    public let subject: String
    public let issuer: String
    /// The subject's common name, or "" when it has none.
    public let commonName: String
    public let notBefore: Date
    public let notAfter: Date
    /// True when basic constraints say CA:TRUE.
    public let isCA: Bool
    /// True when issuer and subject are one and the certificate's own key verifies it.
    public let isSelfSigned: Bool
    /// The DER SubjectPublicKeyInfo, whose SHA-256 is the `PeerID`.
    public let publicKeyInfo: [UInt8]

    /// Reads one DER certificate.
    /// - Throws: ``PeerTrustError`` (`malformed`) when `der` is not exactly one certificate.
    public init(der: [UInt8]) throws(PeerTrustError) {
        let facts: OpenSSL.CertificateFacts
        do {
            facts = try OpenSSLMemo.shared.facts(of: der) { () throws(PeerTrustError) in try OpenSSL.inspect(der) }
        } catch {
            throw PeerTrustError(.malformed, "not an X.509 certificate in DER form (\(der.count) bytes)")
        }
        self.init(der: der, facts: facts)
    }

    /// The certificate, if `der` was read before in this process (no parsing: cheap enough for
    /// an event loop); nil otherwise.
    package static func remembered(der: [UInt8]) -> Certificate? {
        OpenSSLMemo.shared.rememberedFacts(of: der).map { Certificate(der: der, facts: $0) }
    }

    private init(der: [UInt8], facts: OpenSSL.CertificateFacts) {
        self.der = der
        subject = facts.subject
        issuer = facts.issuer
        commonName = facts.commonName
        notBefore = Date(timeIntervalSince1970: TimeInterval(facts.notBefore))
        notAfter = Date(timeIntervalSince1970: TimeInterval(facts.notAfter))
        isCA = facts.isCA
        isSelfSigned = facts.isSelfSigned
        publicKeyInfo = facts.publicKeyInfo
    }

    /// The peer ID of the certificate's key.
    public var peerID: PeerID { PeerID(publicKeyInfo: publicKeyInfo) }

    /// The certificate as PEM text.
    public var pem: String { PEM.encode(der, label: "CERTIFICATE") }

    public var description: String { subject.isEmpty ? "(no subject)" : subject }

    /// The most certificates a peer's chain may hold: a longer one is rejected by
    /// ``TrustEvaluator`` as too long without being read further (or more, when its
    /// `maximumIntermediates` asks for deeper chains).
    public static let maximumChainLength = 32

    /// The most certificates one PEM text may hold (a CA bundle such as
    /// /etc/ssl/certs/ca-certificates.crt holds about 150; a file beyond this is refused).
    public static let maximumPerFile = 4096

    /// Reads every certificate of a PEM text, in order (a chain: leaf first).
    /// - Throws: ``PeerTrustError`` when the text holds no certificate, a block is truncated or
    ///   not base64, a certificate does not parse, or there are more than ``maximumPerFile``.
    public static func chain(pem text: String) throws(PeerTrustError) -> [Certificate] {
        let blocks = try PEM.blocks(in: text).filter { $0.label == "CERTIFICATE" || $0.label == "X509 CERTIFICATE" || $0.label == "TRUSTED CERTIFICATE" }
        guard !blocks.isEmpty else { throw PeerTrustError(.malformed, "no certificate (no -----BEGIN CERTIFICATE----- block)") }
        guard blocks.count <= maximumPerFile else {
            throw PeerTrustError(.malformed, "\(blocks.count) certificates; a file may hold at most \(maximumPerFile)")
        }
        var certificates: [Certificate] = []
        for (index, block) in blocks.enumerated() {
            do {
                certificates.append(try Certificate(der: block.bytes))
            } catch {
                throw PeerTrustError(.malformed, "certificate \(index + 1) of \(blocks.count) is not a valid X.509 certificate")
            }
        }
        return certificates
    }

    /// Reads the certificates of a file: PEM, or a single DER certificate.
    public static func chain(contentsOf url: URL) throws(PeerTrustError) -> [Certificate] {
        guard let bytes = try Storage.readFile(url) else {
            throw PeerTrustError(.storage, "cannot read \(url.path): no such file")
        }
        if bytes.first == 0x30 {  // a DER SEQUENCE
            return [try Certificate(der: bytes)]
        }
        do {
            return try chain(pem: String(decoding: bytes, as: UTF8.self))
        } catch {
            throw PeerTrustError(error.code, "\(url.path): \(error.message)")
        }
    }
}

/// PEM text: base64 blocks between `-----BEGIN LABEL-----` and `-----END LABEL-----` lines.
enum PEM {
    struct Block {
        var label: String
        var bytes: [UInt8]
        /// RFC 1421 headers such as `Proc-Type: 4,ENCRYPTED`.
        var headers: [String]
    }

    static func blocks(in text: String) throws(PeerTrustError) -> [Block] {
        var blocks: [Block] = []
        var label: String?
        var body = ""
        var headers: [String] = []
        for rawLine in text.split(omittingEmptySubsequences: false, whereSeparator: \.isNewline) {
            let line = rawLine.trimmingBlanks()
            if let current = label {
                if line.hasPrefix("-----END ") {
                    guard line == "-----END \(current)-----" else {
                        throw PeerTrustError(.malformed, "PEM block \"\(current)\" ends with \"\(line)\"")
                    }
                    guard let data = Data(base64Encoded: body), !data.isEmpty else {
                        throw PeerTrustError(.malformed, "PEM block \"\(current)\" is not valid base64")
                    }
                    blocks.append(Block(label: current, bytes: [UInt8](data), headers: headers))
                    label = nil
                } else if line.contains(":") {
                    headers.append(line)
                } else {
                    body += line
                }
            } else if line.hasPrefix("-----BEGIN "), line.hasSuffix("-----"), line.count > 16 {
                label = String(line.dropFirst(11).dropLast(5))
                body = ""
                headers = []
            }
        }
        if let label { throw PeerTrustError(.malformed, "PEM block \"\(label)\" has no END line (truncated?)") }
        return blocks
    }

    static func encode(_ bytes: [UInt8], label: String) -> String {
        let base64 = Data(bytes).base64EncodedString()
        var lines = ["-----BEGIN \(label)-----"]
        var index = base64.startIndex
        while index < base64.endIndex {
            let end = base64.index(index, offsetBy: 64, limitedBy: base64.endIndex) ?? base64.endIndex
            lines.append(String(base64[index..<end]))
            index = end
        }
        lines.append("-----END \(label)-----")
        return lines.joined(separator: "\n") + "\n"
    }
}
