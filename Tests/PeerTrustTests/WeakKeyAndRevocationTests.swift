import Foundation
import Testing

@testable import PeerTrust

/// Weak keys and digests, CRLs, and over-long chains, on the certificates and CRLs of
/// Fixtures/weak-and-revoked (made by its make.sh with the openssl CLI; fixed dates, judged at
/// 2030-01-01).
@Suite("trust: weak keys, revocation lists, chain length")
struct WeakKeyAndRevocationTests {
    static let at = Date(timeIntervalSince1970: 1_893_456_000)  // 2030-01-01T00:00:00Z

    func certificate(_ name: String) throws -> Certificate {
        let url = try #require(Bundle.module.url(forResource: name, withExtension: "pem", subdirectory: "Fixtures/weak-and-revoked"))
        return try #require(try Certificate.chain(contentsOf: url).first)
    }

    func crl(_ name: String) throws -> RevocationList {
        let url = try #require(Bundle.module.url(forResource: name, withExtension: "pem", subdirectory: "Fixtures/weak-and-revoked"))
        return try #require(try RevocationList.lists(contentsOf: url).first)
    }

    func verdict(
        _ chain: [String], anchors: [String] = ["root"], crls: [String] = [], allowsWeakKeys: Bool = false, role: PeerRole = .connecting
    ) throws -> TrustVerdict {
        let evaluator = TrustEvaluator(
            policy: .anchors(try anchors.map(certificate)), revocationLists: try crls.map(crl), allowsWeakKeys: allowsWeakKeys)
        return evaluator.evaluate(chain: try chain.map(certificate), role: role, at: Self.at)
    }

    func reasons(_ verdict: TrustVerdict) -> [TrustReason] {
        guard case .rejected(let reasons) = verdict else { return [] }
        return reasons
    }

    // MARK: weak keys

    @Test(
        "keys under 112-bit security anywhere in the chain are rejected as weakKey, naming the key; --allow-weak-keys accepts them",
        arguments: [
            (["leaf-under-rsa1024"], "rsa1024-root", 1, "RSA 1024-bit"),
            (["leaf-under-p192"], "p192-root", 1, "EC prime192v1"),
            (["rsa1024-leaf", "intermediate"], "root", 0, "RSA 1024-bit"),
            (["p192-leaf", "intermediate"], "root", 0, "EC prime192v1"),
            (["dsa1024-leaf", "intermediate"], "root", 0, "DSA 1024-bit"),
        ])
    func weakKeys(chain: [String], anchor: String, depth: Int, key: String) throws {
        let rejected = try verdict(chain, anchors: [anchor])
        let weak = try #require(reasons(rejected).first { $0.code == .weakKey }, "\(rejected)")
        #expect(weak.depth == depth)
        #expect(weak.message.contains(key), "\(weak.message)")
        #expect(weak.message.contains("below the 112-bit security required") && weak.message.contains("--allow-weak-keys"), "\(weak.message)")
        #expect(reasons(rejected).allSatisfy { $0.code == .weakKey }, "only the key is wrong: \(rejected)")
        #expect(try verdict(chain, anchors: [anchor], allowsWeakKeys: true).isTrusted)
    }

    @Test("certificates signed with SHA-1 or MD5 are rejected as weakSignature, naming the digest; --allow-weak-keys accepts them")
    func weakDigests() throws {
        for (chain, anchor, digest) in [(["sha1-leaf", "intermediate"], "root", "SHA1"), (["md5-leaf"], "rsa2048-root", "MD5")] {
            let rejected = try verdict(chain, anchors: [anchor])
            let weak = try #require(reasons(rejected).first { $0.code == .weakSignature }, "\(rejected)")
            #expect(weak.depth == 0 && weak.message.contains("signed with \(digest)"), "\(weak.message)")
            #expect(try verdict(chain, anchors: [anchor], allowsWeakKeys: true).isTrusted)
        }
    }

    @Test("the boundary and what is not judged: a P-224 leaf, RSA-2048 keys, and a root's SHA-1 signature on itself are trusted")
    func strongEnough() throws {
        #expect(try verdict(["p224-leaf", "intermediate"]).isTrusted)
        #expect(try verdict(["leaf-under-rsa2048"], anchors: ["rsa2048-root"]).isTrusted)
    }

    @Test("a pinned leaf with a weak key is rejected too (its key is what the pin trusts)")
    func weakPinnedLeaf() throws {
        let leaf = try certificate("rsa1024-leaf")
        let pinned = TrustEvaluator(policy: .pinned([leaf.peerID]))
        #expect(reasons(pinned.evaluate(chain: [leaf], role: .connecting, at: Self.at)).contains { $0.code == .weakKey })
        #expect(TrustEvaluator(policy: .pinned([leaf.peerID]), allowsWeakKeys: true).evaluate(chain: [leaf], role: .connecting, at: Self.at).isTrusted)
    }

    // MARK: revocation

    @Test("a CRL reads back its issuer, dates and entries; a certificate is not a CRL")
    func readsCRLs() throws {
        let list = try crl("intermediate-current")
        #expect(list.issuerName == "Fixture Intermediate")
        #expect(list.issuer.contains("O=Nearby fixtures"))
        #expect(list.thisUpdate == Date(timeIntervalSince1970: 1_735_689_600))  // 2025-01-01
        #expect(list.nextUpdate == Date(timeIntervalSince1970: 2_051_222_400))  // 2035-01-01
        #expect(list.revokedCount == 1)
        #expect(list.isCurrent(at: Self.at))
        #expect(!(try crl("intermediate-expired")).isCurrent(at: Self.at))
        #expect(try RevocationList.lists(pem: list.pem) == [list])
        #expect(throws: PeerTrustError.self) { try RevocationList(der: try certificate("leaf").der) }
        let url = try #require(Bundle.module.url(forResource: "leaf", withExtension: "pem", subdirectory: "Fixtures/weak-and-revoked"))
        #expect { try RevocationList.lists(contentsOf: url) } throws: { ($0 as? PeerTrustError)?.message.contains("no CRL") == true }
    }

    @Test("a certificate its issuer revoked is rejected as revoked, with the date and reason; its sibling is not")
    func revokedLeaf() throws {
        let rejected = try verdict(["other-leaf", "intermediate"], crls: ["intermediate-current"])
        let revoked = try #require(reasons(rejected).first, "\(rejected)")
        #expect(revoked.code == .revoked && revoked.depth == 0)
        #expect(
            revoked.message.contains("\"Fixture Other Leaf\" was revoked by \"Fixture Intermediate\" on 2024-06-01")
                && revoked.message.contains("key compromise") && revoked.message.contains("CRL of 2025-01-01"), "\(revoked.message)")
        #expect(try verdict(["leaf", "intermediate"], crls: ["intermediate-current"]).isTrusted)
        #expect(try verdict(["other-leaf", "intermediate"]).isTrusted, "without the CRL nothing is known")
    }

    @Test("a revoked intermediate (in the root's CRL) rejects the chains below it, though the intermediate has no CRL of its own")
    func revokedIntermediate() throws {
        let rejected = try verdict(["leaf-under-revoked", "revoked-intermediate"], crls: ["root-current"])
        #expect(reasons(rejected).map(\.code) == [.revoked], "\(rejected)")
        #expect(reasons(rejected).first?.depth == 1)
        #expect(reasons(rejected).first?.message.contains("CA certificate \"Fixture Revoked Intermediate\"") == true)
        #expect(try verdict(["leaf", "intermediate"], crls: ["root-current"]).isTrusted)
    }

    @Test("an expired CRL rejects what it covers (revocation unknown), naming when it was due; chains of other issuers are not affected")
    func expiredCRL() throws {
        let rejected = try verdict(["leaf", "intermediate"], crls: ["intermediate-expired"])
        let stale = try #require(reasons(rejected).first, "\(rejected)")
        #expect(stale.code == .staleRevocationList)
        #expect(stale.message.contains("the CRL from \"Fixture Intermediate\" expired on 2026-01-01"), "\(stale.message)")
        #expect(try verdict(["leaf-under-rsa2048"], anchors: ["rsa2048-root"], crls: ["intermediate-expired"]).isTrusted)
        // Judged while it was current, the same CRL is fine.
        let evaluator = TrustEvaluator(policy: .anchors([try certificate("root")]), revocationLists: [try crl("intermediate-expired")])
        let before = Date(timeIntervalSince1970: 1_750_000_000)  // 2025-06-15
        #expect(evaluator.evaluate(chain: [try certificate("leaf"), try certificate("intermediate")], role: .connecting, at: before).isTrusted)
    }

    @Test("a CRL in the issuer's name but signed by another key is refused as badRevocationList, not believed")
    func forgedCRL() throws {
        let rejected = try verdict(["leaf", "intermediate"], crls: ["intermediate-forged"])
        let bad = try #require(reasons(rejected).first, "\(rejected)")
        #expect(bad.code == .badRevocationList)
        #expect(bad.message.contains("not signed by that CA's key"), "\(bad.message)")
    }

    @Test("CRLs do not apply to pins: a pinned leaf is trusted whatever a CRL says of it (trust remove revokes pins)")
    func pinsIgnoreCRLs() throws {
        let leaf = try certificate("other-leaf")
        let evaluator = TrustEvaluator(policy: .pinned([leaf.peerID]), revocationLists: [try crl("intermediate-current")])
        #expect(evaluator.evaluate(chain: [leaf], role: .connecting, at: Self.at).isTrusted)
    }

    @Test("a remembered verdict is not reused across CRL sets or weak-key settings")
    func memoKeepsSettingsApart() throws {
        let chain = [try certificate("other-leaf"), try certificate("intermediate")]
        let root = try certificate("root")
        for _ in 0..<2 {
            #expect(TrustEvaluator(policy: .anchors([root])).evaluate(chain: chain, role: .connecting, at: Self.at).isTrusted)
            #expect(!TrustEvaluator(policy: .anchors([root]), revocationLists: [try crl("intermediate-current")])
                .evaluate(chain: chain, role: .connecting, at: Self.at).isTrusted)
        }
        let weak = [try certificate("sha1-leaf"), try certificate("intermediate")]
        for _ in 0..<2 {
            #expect(!TrustEvaluator(policy: .anchors([root])).evaluate(chain: weak, role: .connecting, at: Self.at).isTrusted)
            #expect(TrustEvaluator(policy: .anchors([root]), allowsWeakKeys: true).evaluate(chain: weak, role: .connecting, at: Self.at).isTrusted)
        }
    }

    // MARK: the store's CRLs

    @Test("the store keeps the newest CRL per issuer: a newer one replaces it, an older one is refused, the same one is unchanged")
    func storeKeepsNewest() throws {
        let store = TrustStore(directory: FileManager.default.temporaryDirectory.appendingPathComponent("nearby-crl-\(UUID().uuidString)"))
        defer { try? FileManager.default.removeItem(at: store.directory) }
        #expect(try store.revocationLists().isEmpty)
        let older = try crl("intermediate-older"), current = try crl("intermediate-current"), root = try crl("root-current")
        #expect(try store.addRevocationLists([older, root]) == [.added, .added])
        #expect(Set(try store.revocationLists()) == [older, root])
        #expect(try store.addRevocationLists([current]) == [.replaced(older.thisUpdate)])
        #expect(Set(try store.revocationLists()) == [current, root], "read again after the change")
        #expect(try store.addRevocationLists([current]) == [.unchanged])
        #expect { try store.addRevocationLists([older]) } throws: {
            ($0 as? PeerTrustError)?.message.contains("the store holds a CRL from \"Fixture Intermediate\" issued 2025-01-01") == true
        }
        #expect(Set(try store.revocationLists()) == [current, root], "the refused one changed nothing")
        #expect(try store.removeRevocationLists(issuer: "Fixture Intermediate") == [current])
        #expect(try store.revocationLists() == [root])
    }

    // MARK: chain length

    @Test("a chain longer than any allowed is rejected as chainTooLong, not refused as input; reading a CA bundle is not limited to 32")
    func overlongChain() throws {
        let leaf = try certificate("leaf"), intermediate = try certificate("intermediate")
        let long = [leaf] + Array(repeating: intermediate, count: 40)
        let rejected = TrustEvaluator(policy: .anchors([try certificate("root")])).evaluate(chain: long, role: .connecting, at: Self.at)
        let reason = try #require(reasons(rejected).first)
        #expect(reason.code == .chainTooLong)
        #expect(reason.message.contains("41 certificates were presented, at most 32 are read"), "\(reason.message)")
        // Deeper chains allowed: more may be presented (the path itself decides then).
        let deep = TrustEvaluator(policy: .anchors([try certificate("root")]), maximumIntermediates: 45)
        #expect(deep.evaluate(chain: long, role: .connecting, at: Self.at).isTrusted)
        let bundle = String(repeating: intermediate.pem, count: 150)
        #expect(try Certificate.chain(pem: bundle).count == 150)
    }
}
