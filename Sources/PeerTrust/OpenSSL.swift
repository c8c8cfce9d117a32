import CPeerTrust

/// Swift over the C functions of CPeerTrust: byte arrays in, byte arrays out. Nothing of
/// OpenSSL leaves this file.
enum OpenSSL {
    static func sha256(_ bytes: [UInt8]) -> [UInt8] {
        var digest = [UInt8](repeating: 0, count: 32)
        bytes.withUnsafeBufferPointer { input in
            digest.withUnsafeMutableBufferPointer { output in
                nearby_sha256(input.baseAddress, input.count, output.baseAddress)
            }
        }
        return digest
    }

    /// Runs a C call that fills a buffer or an error message.
    static func call(
        _ code: PeerTrustError.Code = .crypto, _ body: (UnsafeMutablePointer<nearby_buffer>, UnsafeMutablePointer<CChar>, Int) -> Int32
    ) throws(PeerTrustError) -> [UInt8] {
        var buffer = nearby_buffer(bytes: nil, count: 0)
        var message = [CChar](repeating: 0, count: 512)
        let result = message.withUnsafeMutableBufferPointer { text in
            body(&buffer, text.baseAddress!, text.count)
        }
        defer { nearby_buffer_free(&buffer) }
        guard result == 0 else { throw PeerTrustError(code, text(message)) }
        guard let bytes = buffer.bytes else { return [] }
        return Array(UnsafeBufferPointer(start: bytes, count: buffer.count))
    }

    static func text(_ characters: [CChar]) -> String {
        String(decoding: characters.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    static func generateP256() throws(PeerTrustError) -> [UInt8] {
        try call { nearby_key_generate_p256($0, $1, $2) }
    }

    static func key(fromPEM pem: String, passphrase: String?) throws(PeerTrustError) -> [UInt8] {
        let bytes = Array(pem.utf8)
        return try call(.malformed) { buffer, error, size in
            bytes.withUnsafeBufferPointer { input in
                input.withMemoryRebound(to: CChar.self) { characters in
                    if let passphrase {
                        return nearby_key_from_pem(characters.baseAddress, characters.count, passphrase, buffer, error, size)
                    }
                    return nearby_key_from_pem(characters.baseAddress, characters.count, nil, buffer, error, size)
                }
            }
        }
    }

    static func key(_ pkcs8: [UInt8], matches certificate: [UInt8]) -> Bool {
        pkcs8.withUnsafeBufferPointer { key in
            certificate.withUnsafeBufferPointer { der in
                nearby_key_matches_certificate(key.baseAddress, key.count, der.baseAddress, der.count) == 1
            }
        }
    }

    struct CertificateFacts {
        var notBefore: Int64
        var notAfter: Int64
        var isCA: Bool
        var isSelfSigned: Bool
        var subject: String
        var issuer: String
        var commonName: String
        var publicKeyInfo: [UInt8]
    }

    static func inspect(_ der: [UInt8]) throws(PeerTrustError) -> CertificateFacts {
        var info = nearby_certificate_info()
        let spki = try call(.malformed) { buffer, error, size in
            der.withUnsafeBufferPointer { nearby_certificate_inspect($0.baseAddress, $0.count, &info, buffer, error, size) }
        }
        return CertificateFacts(
            notBefore: info.not_before, notAfter: info.not_after, isCA: info.is_ca != 0, isSelfSigned: info.self_signed != 0,
            subject: withUnsafeBytes(of: info.subject) { text($0) }, issuer: withUnsafeBytes(of: info.issuer) { text($0) },
            commonName: withUnsafeBytes(of: info.common_name) { text($0) }, publicKeyInfo: spki)
    }

    static func text(_ raw: UnsafeRawBufferPointer) -> String {
        String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
    }

    /// Certificates as one buffer: each a 4-byte big-endian length, then its DER.
    static func list(_ certificates: [[UInt8]]) -> [UInt8] {
        var bytes: [UInt8] = []
        for der in certificates {
            let count = UInt32(der.count)
            bytes += [UInt8(count >> 24), UInt8(count >> 16 & 0xFF), UInt8(count >> 8 & 0xFF), UInt8(count & 0xFF)]
            bytes += der
        }
        return bytes
    }

    static func unlist(_ bytes: [UInt8]) -> [[UInt8]] {
        var items: [[UInt8]] = []
        var offset = 0
        while offset + 4 <= bytes.count {
            let count = Int(bytes[offset]) << 24 | Int(bytes[offset + 1]) << 16 | Int(bytes[offset + 2]) << 8 | Int(bytes[offset + 3])
            offset += 4
            guard count <= bytes.count - offset else { break }
            items.append(Array(bytes[offset..<(offset + count)]))
            offset += count
        }
        return items
    }

    struct Template {
        var commonName: String
        var organization: String?
        var serial: UInt64
        var notBefore: Int64
        var notAfter: Int64
        var basicConstraints = true
        var isCA = false
        var pathLength = -1
        /// bit 0: serverAuth, bit 1: clientAuth; 0: no extension.
        var extendedKeyUsage: Int32 = 3
    }

    static func makeCertificate(
        _ template: Template, subjectKey: [UInt8], issuer: [UInt8]?, issuerKey: [UInt8]
    ) throws(PeerTrustError) -> [UInt8] {
        try call { buffer, error, size in
            template.commonName.withCString { commonName in
                withOptionalCString(template.organization) { organization in
                    var raw = nearby_certificate_template(
                        common_name: commonName, organization: organization, serial: template.serial,
                        not_before: template.notBefore, not_after: template.notAfter,
                        basic_constraints: template.basicConstraints ? 1 : 0, is_ca: template.isCA ? 1 : 0,
                        path_length: Int32(template.pathLength), extended_key_usage: template.extendedKeyUsage)
                    return subjectKey.withUnsafeBufferPointer { subject in
                        issuerKey.withUnsafeBufferPointer { signer in
                            if let issuer {
                                return issuer.withUnsafeBufferPointer { issuerBytes in
                                    nearby_certificate_create(
                                        &raw, subject.baseAddress, subject.count, issuerBytes.baseAddress, issuerBytes.count,
                                        signer.baseAddress, signer.count, buffer, error, size)
                                }
                            }
                            return nearby_certificate_create(
                                &raw, subject.baseAddress, subject.count, nil, 0, signer.baseAddress, signer.count, buffer, error, size)
                        }
                    }
                }
            }
        }
    }

    static func readPKCS12(_ bytes: [UInt8], passphrase: String?) throws(PeerTrustError) -> (key: [UInt8], certificates: [[UInt8]]) {
        var certificates: [UInt8] = []
        let key = try call(.malformed) { keyBuffer, error, size in
            var list = nearby_buffer(bytes: nil, count: 0)
            defer { nearby_buffer_free(&list) }
            let result = bytes.withUnsafeBufferPointer { input in
                withOptionalCString(passphrase) { pass in
                    nearby_pkcs12_read(input.baseAddress, input.count, pass, keyBuffer, &list, error, size)
                }
            }
            if result == 0, let items = list.bytes { certificates = Array(UnsafeBufferPointer(start: items, count: list.count)) }
            return result
        }
        return (key, unlist(certificates))
    }

    static func writePKCS12(key: [UInt8], certificates: [[UInt8]], passphrase: String, name: String) throws(PeerTrustError) -> [UInt8] {
        let list = list(certificates)
        return try call { buffer, error, size in
            key.withUnsafeBufferPointer { keyBytes in
                list.withUnsafeBufferPointer { listBytes in
                    nearby_pkcs12_write(
                        keyBytes.baseAddress, keyBytes.count, listBytes.baseAddress, listBytes.count, passphrase, name, buffer, error, size)
                }
            }
        }
    }

    /// One problem X509_verify_cert reported.
    struct Issue {
        /// OpenSSL's X509_V_ERR_* number (see ``VerifyError``). Internal: public reasons carry a
        /// `TrustReason.Code` instead.
        var code: Int
        var depth: Int
        var notBefore: Int64
        var notAfter: Int64
        var subject: String
        var issuer: String
        /// The certificate's key in words ("RSA 1024-bit (80-bit security)"), "" when unknown.
        var key = ""
        /// The digest of its signature ("SHA1"), "" when unknown.
        var digest = ""
        /// The CRL involved, when the issue is about revocation.
        var crl: CRLFacts?
        /// For a revoked certificate: when, and the CRLReason code (nil when the entry has none).
        var revokedAt: Int64?
        var revocationReason: Int?
    }

    /// A CRL's issuer and dates (seconds since 1970; nextUpdate nil when absent).
    struct CRLFacts: Hashable {
        var issuer: String
        var thisUpdate: Int64
        var nextUpdate: Int64?
        var revokedCount = 0
    }

    /// Parses one DER CRL.
    static func inspectCRL(_ der: [UInt8]) throws(PeerTrustError) -> CRLFacts {
        var info = nearby_crl_info()
        var message = [CChar](repeating: 0, count: 512)
        let status = der.withUnsafeBufferPointer { bytes in
            message.withUnsafeMutableBufferPointer { nearby_crl_inspect(bytes.baseAddress, bytes.count, &info, $0.baseAddress, $0.count) }
        }
        guard status == 0 else { throw PeerTrustError(.malformed, text(message)) }
        return CRLFacts(
            issuer: withUnsafeBytes(of: &info.issuer) { text(UnsafeRawBufferPointer($0)) }, thisUpdate: info.this_update,
            nextUpdate: info.next_update == 0 ? nil : info.next_update, revokedCount: Int(info.revoked_count))
    }

    /// The X509_V_ERR_* numbers (openssl/x509_vfy.h, OpenSSL 3) that ``TrustEvaluator`` tells
    /// apart; every other one becomes `TrustReason.Code.other`.
    enum VerifyError {
        static let unableToGetIssuerCert = 2  // X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT
        static let unableToDecryptCertSignature = 4  // X509_V_ERR_UNABLE_TO_DECRYPT_CERT_SIGNATURE
        static let unableToDecodeIssuerPublicKey = 6  // X509_V_ERR_UNABLE_TO_DECODE_ISSUER_PUBLIC_KEY
        static let certSignatureFailure = 7  // X509_V_ERR_CERT_SIGNATURE_FAILURE
        static let certNotYetValid = 9  // X509_V_ERR_CERT_NOT_YET_VALID
        static let certHasExpired = 10  // X509_V_ERR_CERT_HAS_EXPIRED
        static let depthZeroSelfSignedCert = 18  // X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT
        static let selfSignedCertInChain = 19  // X509_V_ERR_SELF_SIGNED_CERT_IN_CHAIN
        static let unableToGetIssuerCertLocally = 20  // X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY
        static let unableToVerifyLeafSignature = 21  // X509_V_ERR_UNABLE_TO_VERIFY_LEAF_SIGNATURE
        static let certChainTooLong = 22  // X509_V_ERR_CERT_CHAIN_TOO_LONG
        static let pathLengthExceeded = 25  // X509_V_ERR_PATH_LENGTH_EXCEEDED
        static let invalidPurpose = 26  // X509_V_ERR_INVALID_PURPOSE
        static let invalidNonCA = 37  // X509_V_ERR_INVALID_NON_CA
        static let invalidCA = 79  // X509_V_ERR_INVALID_CA
        static let unableToDecryptCRLSignature = 5  // X509_V_ERR_UNABLE_TO_DECRYPT_CRL_SIGNATURE
        static let crlSignatureFailure = 8  // X509_V_ERR_CRL_SIGNATURE_FAILURE
        static let crlNotYetValid = 11  // X509_V_ERR_CRL_NOT_YET_VALID
        static let crlHasExpired = 12  // X509_V_ERR_CRL_HAS_EXPIRED
        static let certRevoked = 23  // X509_V_ERR_CERT_REVOKED
        static let keyUsageNoCRLSign = 35  // X509_V_ERR_KEYUSAGE_NO_CRL_SIGN
        static let eeKeyTooSmall = 66  // X509_V_ERR_EE_KEY_TOO_SMALL
        static let caKeyTooSmall = 67  // X509_V_ERR_CA_KEY_TOO_SMALL
        static let caDigestTooWeak = 68  // X509_V_ERR_CA_MD_TOO_WEAK
    }

    enum Verification {
        case trusted(chain: [[UInt8]])
        case rejected([Issue])
    }

    enum Purpose: Int32 {
        case none = 0, server = 1, client = 2
    }

    static func verify(
        leaf: [UInt8], untrusted: [[UInt8]], anchors: [[UInt8]], systemRoots: Bool, purpose: Purpose, time: Int64,
        maximumIntermediates: Int, checkSelfSignature: Bool, crls: [[UInt8]] = [], authenticationLevel: Int32 = -1
    ) throws(PeerTrustError) -> Verification {
        let untrustedList = list(untrusted)
        let anchorList = list(anchors)
        let crlList = list(crls)
        var issues = [nearby_verify_issue](repeating: nearby_verify_issue(), count: 32)
        var issueCount: Int32 = 0
        var verdict: Int32 = -1
        let chain = try call(.malformed) { buffer, error, size in
            leaf.withUnsafeBufferPointer { leafBytes in
                untrustedList.withUnsafeBufferPointer { untrustedBytes in
                    anchorList.withUnsafeBufferPointer { anchorBytes in
                        crlList.withUnsafeBufferPointer { crlBytes in
                            var request = nearby_verify_request(
                                leaf: leafBytes.baseAddress, leaf_count: leafBytes.count,
                                untrusted: untrustedBytes.baseAddress, untrusted_count: untrustedBytes.count,
                                anchors: anchorBytes.baseAddress, anchors_count: anchorBytes.count,
                                system_roots: systemRoots ? 1 : 0, purpose: purpose.rawValue, time: time,
                                max_intermediates: Int32(maximumIntermediates), check_self_signature: checkSelfSignature ? 1 : 0,
                                crls: crlBytes.baseAddress, crls_count: crlBytes.count, auth_level: authenticationLevel)
                            verdict = issues.withUnsafeMutableBufferPointer { output in
                                nearby_verify(&request, output.baseAddress, Int32(output.count), &issueCount, buffer, error, size)
                            }
                            return verdict < 0 ? -1 : 0
                        }
                    }
                }
            }
        }
        if verdict == 1 { return .trusted(chain: unlist(chain)) }
        return .rejected(issues.prefix(Int(issueCount)).map { issue in
            var copy = issue
            let crlIssuer = withUnsafeBytes(of: &copy.crl_issuer) { text(UnsafeRawBufferPointer($0)) }
            return Issue(
                code: Int(issue.code), depth: Int(issue.depth), notBefore: issue.not_before, notAfter: issue.not_after,
                subject: withUnsafeBytes(of: &copy.subject) { text(UnsafeRawBufferPointer($0)) },
                issuer: withUnsafeBytes(of: &copy.issuer) { text(UnsafeRawBufferPointer($0)) },
                key: withUnsafeBytes(of: &copy.key) { text(UnsafeRawBufferPointer($0)) },
                digest: withUnsafeBytes(of: &copy.digest) { text(UnsafeRawBufferPointer($0)) },
                crl: issue.crl_this_update == 0 && crlIssuer.isEmpty
                    ? nil
                    : CRLFacts(issuer: crlIssuer, thisUpdate: issue.crl_this_update, nextUpdate: issue.crl_next_update == 0 ? nil : issue.crl_next_update),
                revokedAt: issue.revoked_at == 0 ? nil : issue.revoked_at,
                revocationReason: issue.revocation_reason < 0 ? nil : Int(issue.revocation_reason))
        })
    }

    static func verifyErrorText(_ code: Int) -> String {
        nearby_verify_error_string(Int32(code)).map { String(cString: $0) } ?? "error \(code)"
    }
}

private func withOptionalCString<R>(_ text: String?, _ body: (UnsafePointer<CChar>?) -> R) -> R {
    guard let text else { return body(nil) }
    return text.withCString { body($0) }
}

/// SHA-256 of `bytes`, for the package's other modules (pairing commitments and codes).
package func sha256(_ bytes: [UInt8]) -> [UInt8] { OpenSSL.sha256(bytes) }

/// SHA-256 over bytes given a piece at a time (a file as it is sent or received).
package final class SHA256Hasher {
    private let context: UnsafeMutableRawPointer
    private var digest: [UInt8]?

    /// Nil only when OpenSSL cannot make a digest context (out of memory).
    package init?() {
        guard let context = nearby_sha256_new() else { return nil }
        self.context = context
    }

    private init(context: UnsafeMutableRawPointer) { self.context = context }

    deinit { nearby_sha256_free(context) }

    /// A hasher that has seen what this one has (this one goes on unchanged); nil when OpenSSL fails.
    package func copy() -> SHA256Hasher? {
        guard digest == nil, let copied = nearby_sha256_copy(context) else { return nil }
        return SHA256Hasher(context: copied)
    }

    package func update(_ bytes: UnsafeRawBufferPointer) {
        guard digest == nil, let base = bytes.baseAddress else { return }
        _ = nearby_sha256_update(context, base.assumingMemoryBound(to: UInt8.self), bytes.count)
    }

    package func update(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { update($0) }
    }

    /// The digest of everything given; the hasher takes nothing more after it.
    package func finish() -> [UInt8] {
        if let digest { return digest }
        var value = [UInt8](repeating: 0, count: 32)
        _ = value.withUnsafeMutableBufferPointer { nearby_sha256_final(context, $0.baseAddress) }
        digest = value
        return value
    }
}

