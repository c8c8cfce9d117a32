#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif

/// A certificate revocation list (RFC 5280 §5): the serial numbers a CA has revoked, signed by
/// that CA, valid from ``thisUpdate`` until ``nextUpdate``.
///
/// Give lists to ``TrustEvaluator/revocationLists`` (or keep them in a ``TrustStore``): every
/// certificate of an anchored chain whose issuer has a list is checked against it. A list that
/// has expired, is not valid yet, or is not signed by its issuer's key rejects the chains it
/// covers (a stale or forged list proves nothing), and says so. Certificates whose issuer has no
/// list are not checked: revocation is checked where a list is held. Pins are revoked by
/// removing the pin, not by a list.
public struct RevocationList: Hashable, Sendable, CustomStringConvertible {
    /// The list's DER bytes.
    public let der: [UInt8]
    /// The issuing CA's name, RFC 2253 one-line form (`CN=Example CA,O=Example`).
    public let issuer: String
    /// When the list was issued.
    public let thisUpdate: Date
    /// When the next list is due; after it this one is stale (nil: the list does not say).
    public let nextUpdate: Date?
    /// How many certificates it revokes.
    public let revokedCount: Int

    /// Reads one DER-encoded list.
    /// - Throws: ``PeerTrustError`` (`malformed`) when the bytes are not one X.509 CRL.
    public init(der: [UInt8]) throws(PeerTrustError) {
        let facts = try OpenSSL.inspectCRL(der)
        self.der = der
        issuer = facts.issuer
        thisUpdate = Date(timeIntervalSince1970: TimeInterval(facts.thisUpdate))
        nextUpdate = facts.nextUpdate.map { Date(timeIntervalSince1970: TimeInterval($0)) }
        revokedCount = facts.revokedCount
    }

    /// The list as PEM (`-----BEGIN X509 CRL-----`).
    public var pem: String { PEM.encode(der, label: "X509 CRL") }

    /// The issuer's common name when it has one, else the whole name.
    public var issuerName: String { TrustEvaluator.commonName(of: issuer) }

    public var description: String { "CRL from \"\(issuerName)\" of \(TrustEvaluator.day(thisUpdate))" }

    /// Whether the list is stale or not yet valid at `time`.
    public func isCurrent(at time: Date = Date()) -> Bool {
        thisUpdate <= time && (nextUpdate.map { time <= $0 } ?? true)
    }

    /// The most lists one file may hold.
    public static let maximumPerFile = 256

    /// Reads every list of a PEM text (`X509 CRL` blocks), in order.
    /// - Throws: ``PeerTrustError`` (`malformed`) when the text holds no list, a block is
    ///   damaged, or a list does not parse.
    public static func lists(pem text: String) throws(PeerTrustError) -> [RevocationList] {
        let blocks = try PEM.blocks(in: text).filter { $0.label == "X509 CRL" }
        guard !blocks.isEmpty else { throw PeerTrustError(.malformed, "no CRL (no -----BEGIN X509 CRL----- block)") }
        guard blocks.count <= maximumPerFile else {
            throw PeerTrustError(.malformed, "\(blocks.count) CRLs; a file may hold at most \(maximumPerFile)")
        }
        var lists: [RevocationList] = []
        for (index, block) in blocks.enumerated() {
            do {
                lists.append(try RevocationList(der: block.bytes))
            } catch {
                throw PeerTrustError(.malformed, "CRL \(index + 1) of \(blocks.count) is not a valid X.509 CRL")
            }
        }
        return lists
    }

    /// Reads the lists of a file: PEM (`openssl ca -gencrl` writes it), or one DER list (as CAs
    /// publish them at their distribution points).
    public static func lists(contentsOf url: URL) throws(PeerTrustError) -> [RevocationList] {
        guard let bytes = try Storage.readFile(url) else {
            throw PeerTrustError(.storage, "cannot read \(url.path): no such file")
        }
        do throws(PeerTrustError) {
            if bytes.first == 0x30 {  // a DER SEQUENCE
                do {
                    return [try RevocationList(der: bytes)]
                } catch {
                    throw PeerTrustError(.malformed, "not an X.509 CRL (DER); a certificate is not a CRL")
                }
            }
            return try lists(pem: String(decoding: bytes, as: UTF8.self))
        } catch {
            throw PeerTrustError(error.code, "\(url.path): \(error.message)")
        }
    }
}
