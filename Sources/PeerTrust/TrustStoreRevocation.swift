#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif

#if canImport(Glibc)
    import Glibc
#endif

/// What adding a CRL to a trust store did.
public enum RevocationListChange: Hashable, Sendable {
    /// The first list from its issuer.
    case added
    /// It replaced an older list from the same issuer (the older one's date).
    case replaced(Date)
    /// The store holds this very list already.
    case unchanged
}

extension TrustStore {
    var revocationDirectory: URL { directory.appendingPathComponent("crls") }

    /// The CRLs kept in the store (`crls/`, one PEM file per issuer: the newest list it issued).
    /// The directory is read again only when it changed, so judging every connection stays cheap
    /// and a list added by another process meanwhile counts at once.
    /// - Throws: ``PeerTrustError`` (`damaged`) naming a file that cannot be read.
    public func revocationLists() throws(PeerTrustError) -> [RevocationList] {
        var status = stat()
        guard stat(revocationDirectory.path, &status) == 0 else { return [] }
        let version = PinFileVersion(status, size: Int64(status.st_nlink))
        if let known = revocationCache.value(at: revocationDirectory.path, version: version) { return known }
        let lists = try readRevocationLists()
        revocationCache.remember(lists, at: revocationDirectory.path, version: version)
        return lists
    }

    private func readRevocationLists() throws(PeerTrustError) -> [RevocationList] {
        try Self.readEach(in: revocationDirectory, what: "CRL") { url throws(PeerTrustError) in try RevocationList.lists(contentsOf: url) }
    }

    /// Keeps CRLs in the store: per issuer, the newest list (by its issue date). A list older
    /// than the one kept is refused, so an attacker who can replay yesterday's list cannot undo
    /// a revocation.
    /// - Returns: what happened to each list, in order.
    /// - Throws: ``PeerTrustError`` (`malformed`) for a list older than the one kept from the
    ///   same issuer (nothing is changed then); (`storage`) when the store cannot be written.
    @discardableResult
    public func addRevocationLists(_ lists: [RevocationList]) throws(PeerTrustError) -> [RevocationListChange] {
        do { return try addingRevocationLists(lists) } catch { throw error.inStateDirectory() }
    }

    private func addingRevocationLists(_ lists: [RevocationList]) throws(PeerTrustError) -> [RevocationListChange] {
        try Storage.withLock(in: directory) { () throws(PeerTrustError) -> [RevocationListChange] in
            try Storage.makeDirectory(revocationDirectory)
            var changes: [RevocationListChange] = []
            for list in lists {
                let url = revocationDirectory.appendingPathComponent(Self.revocationFileName(issuer: list.issuer))
                var change = RevocationListChange.added
                if let bytes = try Storage.readFile(url), let kept = try? RevocationList.lists(pem: String(decoding: bytes, as: UTF8.self)).first {
                    if kept.der == list.der {
                        changes.append(.unchanged)
                        continue
                    }
                    guard list.thisUpdate > kept.thisUpdate else {
                        throw PeerTrustError(
                            .malformed,
                            "the store holds a CRL from \"\(kept.issuerName)\" issued \(TrustEvaluator.day(kept.thisUpdate)); this one was issued \(TrustEvaluator.day(list.thisUpdate)), not later, so nothing was changed")
                    }
                    change = .replaced(kept.thisUpdate)
                }
                try Storage.writeFile(Array(list.pem.utf8), to: url, mode: 0o644, exclusive: false)
                changes.append(change)
            }
            return changes
        }
    }

    /// Removes the CRLs whose issuer's common name (or whole name) is `issuer`; returns them.
    @discardableResult
    public func removeRevocationLists(issuer: String) throws(PeerTrustError) -> [RevocationList] {
        do { return try removingRevocationLists(issuer: issuer) } catch { throw error.inStateDirectory() }
    }

    private func removingRevocationLists(issuer: String) throws(PeerTrustError) -> [RevocationList] {
        try Storage.withLock(in: directory) { () throws(PeerTrustError) -> [RevocationList] in
            var removed: [RevocationList] = []
            for list in try readRevocationLists() where list.issuerName == issuer || list.issuer == issuer {
                let url = revocationDirectory.appendingPathComponent(Self.revocationFileName(issuer: list.issuer))
                if unlink(url.path) == 0 { removed.append(list) }
            }
            return removed
        }
    }

    static func revocationFileName(issuer: String) -> String {
        let digest = OpenSSL.sha256(Array(issuer.utf8)).prefix(8).map { String($0, radix: 16).leftPadded(to: 2) }.joined()
        return "issuer-\(digest).pem"
    }
}
