import Foundation

@testable import PeerTrust

/// A PKI made at test time with OpenSSL (through PeerTrust's own certificate maker): keys and
/// certificates with chosen dates, usages and constraints.
struct Issued {
    let certificate: Certificate
    let key: [UInt8]
}

enum TestPKI {
    /// The evaluation time of most tests: 2026-05-28.
    static let now = Date(timeIntervalSince1970: 1_780_000_000)
    static let day: TimeInterval = 86_400
    static let year: TimeInterval = 365 * day

    static func make(
        _ name: String, issuedBy issuer: Issued? = nil, ca: Bool = false, from start: Date = now - year, until end: Date = now + year,
        usage: Int32 = 3, basicConstraints: Bool = true, pathLength: Int = -1
    ) throws -> Issued {
        let key = try OpenSSL.generateP256()
        let template = OpenSSL.Template(
            commonName: name, organization: "Test PKI", serial: UInt64.random(in: 1...UInt64(Int64.max)),
            notBefore: Int64(start.timeIntervalSince1970), notAfter: Int64(end.timeIntervalSince1970),
            basicConstraints: basicConstraints, isCA: ca, pathLength: pathLength, extendedKeyUsage: ca ? 0 : usage)
        let der = try OpenSSL.makeCertificate(template, subjectKey: key, issuer: issuer?.certificate.der, issuerKey: issuer?.key ?? key)
        return Issued(certificate: try Certificate(der: der), key: key)
    }

    /// root → intermediate → leaf, all valid around `now`.
    static func chain(leafUsage: Int32 = 3) throws -> (root: Issued, intermediate: Issued, leaf: Issued) {
        let root = try make("Test Root", ca: true, from: now - 5 * year, until: now + 10 * year)
        let intermediate = try make("Test Intermediate", issuedBy: root, ca: true, from: now - 2 * year, until: now + 5 * year)
        let leaf = try make("Build Box", issuedBy: intermediate, usage: leafUsage)
        return (root, intermediate, leaf)
    }

    /// The DER with one byte of the signature (at the very end) flipped.
    static func tampered(_ certificate: Certificate) throws -> Certificate {
        var der = certificate.der
        der[der.count - 3] ^= 0x5A
        return try Certificate(der: der)
    }
}
