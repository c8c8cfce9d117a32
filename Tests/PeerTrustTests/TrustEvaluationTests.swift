import Foundation
import Testing

@testable import PeerTrust

@Suite("trust evaluation")
struct TrustEvaluationTests {
    func codes(_ verdict: TrustVerdict) -> [TrustReason.Code] {
        guard case .rejected(let reasons) = verdict else { return [] }
        return reasons.map(\.code)
    }

    func messages(_ verdict: TrustVerdict) -> String {
        guard case .rejected(let reasons) = verdict else { return "" }
        return reasons.map(\.message).joined(separator: " | ")
    }

    @Test("a valid chain to an anchor is trusted for both roles, with the validated chain")
    func validChain() throws {
        let pki = try TestPKI.chain()
        let evaluator = TrustEvaluator(policy: .anchors([pki.root.certificate]))
        for role in PeerRole.allCases {
            let verdict = evaluator.evaluate(
                chain: [pki.leaf.certificate, pki.intermediate.certificate], role: role, at: TestPKI.now)
            guard case .trusted(let peer) = verdict else {
                Issue.record("rejected: \(messages(verdict))")
                continue
            }
            #expect(peer.peerID == pki.leaf.certificate.peerID)
            #expect(peer.displayName == "Build Box")
            #expect(peer.chain.map(\.commonName) == ["Build Box", "Test Intermediate", "Test Root"])
        }
    }

    @Test("expired and not-yet-valid leaves and intermediates are rejected with their dates")
    func validityPeriods() throws {
        let root = try TestPKI.make("Root", ca: true, from: TestPKI.now - 5 * TestPKI.year, until: TestPKI.now + 5 * TestPKI.year)
        let goodCA = try TestPKI.make("CA", issuedBy: root, ca: true)
        let expired = try TestPKI.make("Old Box", issuedBy: goodCA, from: TestPKI.now - 2 * TestPKI.year, until: Date(timeIntervalSince1970: 1_767_398_400))
        let early = try TestPKI.make("Future Box", issuedBy: goodCA, from: TestPKI.now + TestPKI.day, until: TestPKI.now + TestPKI.year)
        let expiredCA = try TestPKI.make("Old CA", issuedBy: root, ca: true, from: TestPKI.now - 3 * TestPKI.year, until: TestPKI.now - TestPKI.day)
        let earlyCA = try TestPKI.make("Future CA", issuedBy: root, ca: true, from: TestPKI.now + TestPKI.day, until: TestPKI.now + 3 * TestPKI.year)
        let underExpired = try TestPKI.make("Box A", issuedBy: expiredCA, from: TestPKI.now - 4 * TestPKI.year)
        let underEarly = try TestPKI.make("Box B", issuedBy: earlyCA)
        let evaluator = TrustEvaluator(policy: .anchors([root.certificate]))
        func judge(_ leaf: Issued, _ ca: Issued) -> TrustVerdict {
            evaluator.evaluate(chain: [leaf.certificate, ca.certificate], role: .connecting, at: TestPKI.now)
        }
        #expect(codes(judge(expired, goodCA)) == [.expired])
        #expect(messages(judge(expired, goodCA)) == "certificate \"Old Box\" expired on 2026-01-03 00:00 UTC")
        #expect(codes(judge(early, goodCA)) == [.notYetValid])
        #expect(messages(judge(early, goodCA)).contains("is not valid until 2026-05-29"))
        #expect(codes(judge(underExpired, expiredCA)).contains(.expired))
        #expect(messages(judge(underExpired, expiredCA)).contains("CA certificate \"Old CA\" expired on"))
        #expect(codes(judge(underEarly, earlyCA)).contains(.notYetValid))
        // The same chains are fine at a time inside every window.
        #expect(evaluator.evaluate(chain: [expired.certificate, goodCA.certificate], role: .connecting, at: TestPKI.now - TestPKI.year).isTrusted)
    }

    @Test("an unknown issuer and a missing intermediate say the issuer is not among the anchors")
    func unknownIssuer() throws {
        let pki = try TestPKI.chain()
        let other = try TestPKI.make("Other Root", ca: true)
        let stranger = TrustEvaluator(policy: .anchors([other.certificate]))
        let verdict = stranger.evaluate(chain: [pki.leaf.certificate, pki.intermediate.certificate], role: .connecting, at: TestPKI.now)
        #expect(!verdict.isTrusted)
        #expect(codes(verdict).contains(.unknownIssuer), "\(codes(verdict))")
        #expect(messages(verdict).contains("not among the 1 trusted anchor"), "\(messages(verdict))")
        let missing = TrustEvaluator(policy: .anchors([pki.root.certificate, other.certificate]))
            .evaluate(chain: [pki.leaf.certificate], role: .connecting, at: TestPKI.now)
        #expect(codes(missing).contains(.unknownIssuer))
        #expect(messages(missing).contains("issuer not among the 2 trusted anchors: \"Build Box\" was issued by \"Test Intermediate\""))
    }

    @Test("a self-signed leaf is rejected unless pinned; pinned, its dates still count")
    func selfSignedAndPinned() throws {
        let pki = try TestPKI.chain()
        let lone = try TestPKI.make("Lone Box")
        let anchored = TrustEvaluator(policy: .anchors([pki.root.certificate]))
        let unpinned = anchored.evaluate(chain: [lone.certificate], role: .accepting, at: TestPKI.now)
        #expect(codes(unpinned) == [.selfSignedNotTrusted])
        let pinned = TrustEvaluator(policy: .pinned([lone.certificate.peerID]))
        #expect(pinned.evaluate(chain: [lone.certificate], role: .accepting, at: TestPKI.now).isTrusted)
        let notPinned = TrustEvaluator(policy: .pinned([pki.leaf.certificate.peerID]))
            .evaluate(chain: [lone.certificate], role: .accepting, at: TestPKI.now)
        #expect(codes(notPinned) == [.notPinned])
        // The whole peer ID: the one a person pins (nearby trust pin ID) if it is the peer meant.
        #expect(messages(notPinned) == "not pinned: peer ID \(lone.certificate.peerID) is not among the 1 pinned peer")
        let later = pinned.evaluate(chain: [lone.certificate], role: .accepting, at: TestPKI.now + 2 * TestPKI.year)
        #expect(codes(later) == [.expired])
        // A tampered self-signed certificate fails its own signature even when its key is pinned.
        let forged = try TestPKI.tampered(lone.certificate)
        let forgedVerdict = TrustEvaluator(policy: .pinned([forged.peerID])).evaluate(chain: [forged], role: .accepting, at: TestPKI.now)
        #expect(!forgedVerdict.isTrusted)
        #expect(codes(forgedVerdict) == [.badSignature])
    }

    @Test("extended key usage must fit the role: a TLS server when connecting, a TLS client when accepting")
    func keyUsageForRole() throws {
        let server = try TestPKI.chain(leafUsage: 1)
        let client = try TestPKI.chain(leafUsage: 2)
        let none = try TestPKI.chain(leafUsage: 0)
        func judge(_ pki: (root: Issued, intermediate: Issued, leaf: Issued), _ role: PeerRole) -> TrustVerdict {
            TrustEvaluator(policy: .anchors([pki.root.certificate]))
                .evaluate(chain: [pki.leaf.certificate, pki.intermediate.certificate], role: role, at: TestPKI.now)
        }
        #expect(judge(server, .connecting).isTrusted)
        #expect(codes(judge(server, .accepting)) == [.wrongUsage])
        #expect(messages(judge(server, .accepting)).contains("not fit for a TLS client"))
        #expect(judge(client, .accepting).isTrusted)
        #expect(codes(judge(client, .connecting)) == [.wrongUsage])
        #expect(messages(judge(client, .connecting)).contains("not fit for a TLS server"))
        #expect(judge(none, .connecting).isTrusted && judge(none, .accepting).isTrusted)
    }

    @Test("a tampered signature is rejected")
    func tampered() throws {
        let pki = try TestPKI.chain()
        let forged = try TestPKI.tampered(pki.leaf.certificate)
        let verdict = TrustEvaluator(policy: .anchors([pki.root.certificate]))
            .evaluate(chain: [forged, pki.intermediate.certificate], role: .connecting, at: TestPKI.now)
        #expect(codes(verdict) == [.badSignature])
        #expect(messages(verdict).contains("does not verify"))
    }

    @Test("a chain longer than the maximum depth is rejected; a longer limit lets it through")
    func depth() throws {
        let root = try TestPKI.make("Deep Root", ca: true, from: TestPKI.now - 5 * TestPKI.year, until: TestPKI.now + 5 * TestPKI.year)
        var issuer = root
        var intermediates: [Issued] = []
        for level in 1...10 {
            issuer = try TestPKI.make("Level \(level)", issuedBy: issuer, ca: true)
            intermediates.append(issuer)
        }
        let leaf = try TestPKI.make("Deep Box", issuedBy: issuer)
        let chain = [leaf.certificate] + intermediates.reversed().map(\.certificate)
        let strict = TrustEvaluator(policy: .anchors([root.certificate]), maximumIntermediates: 8)
        #expect(codes(strict.evaluate(chain: chain, role: .connecting, at: TestPKI.now)).contains(.chainTooLong))
        #expect(messages(strict.evaluate(chain: chain, role: .connecting, at: TestPKI.now)).contains("at most 8 intermediate"))
        let loose = TrustEvaluator(policy: .anchors([root.certificate]), maximumIntermediates: 10)
        #expect(loose.evaluate(chain: chain, role: .connecting, at: TestPKI.now).isTrusted)
    }

    @Test("CA constraints: a non-CA issuer, a path length exceeded, a root that is not an anchor")
    func caConstraints() throws {
        let pki = try TestPKI.chain()
        let anchored = TrustEvaluator(policy: .anchors([pki.root.certificate]))
        let notCA = try TestPKI.make("Not CA", issuedBy: pki.root)
        let underNotCA = try TestPKI.make("Under Not CA", issuedBy: notCA)
        let bad = anchored.evaluate(chain: [underNotCA.certificate, notCA.certificate], role: .connecting, at: TestPKI.now)
        guard case .rejected(let reasons) = bad else {
            Issue.record("a chain through a non-CA was trusted")
            return
        }
        #expect(reasons.contains { $0.code == .notACA && $0.depth == 1 }, "\(codes(bad))")
        #expect(messages(bad).contains("\"Not CA\" signs other certificates but is not a CA"))
        let noSubCAs = try TestPKI.make("No Sub-CAs", issuedBy: pki.root, ca: true, pathLength: 0)
        let subCA = try TestPKI.make("Sub-CA", issuedBy: noSubCAs, ca: true)
        let deep = try TestPKI.make("Deep Box", issuedBy: subCA)
        let tooDeep = anchored.evaluate(chain: [deep.certificate, subCA.certificate, noSubCAs.certificate], role: .connecting, at: TestPKI.now)
        #expect(codes(tooDeep) == [.pathLengthExceeded])
        let other = try TestPKI.make("Other Root", ca: true)
        let foreignRoot = TrustEvaluator(policy: .anchors([other.certificate]))
            .evaluate(chain: [pki.leaf.certificate, pki.intermediate.certificate, pki.root.certificate], role: .connecting, at: TestPKI.now)
        #expect(codes(foreignRoot) == [.untrustedRoot])
    }

    @Test("the peer ID discovery announced must be the leaf's key, whatever the policy says")
    func peerIDBinding() throws {
        let pki = try TestPKI.chain()
        let other = try TestPKI.make("Impostor")
        let evaluator = TrustEvaluator(policy: .anchors([pki.root.certificate]))
        let chain = [pki.leaf.certificate, pki.intermediate.certificate]
        #expect(evaluator.evaluate(chain: chain, expectedPeerID: pki.leaf.certificate.peerID, role: .connecting, at: TestPKI.now).isTrusted)
        let verdict = evaluator.evaluate(chain: chain, expectedPeerID: other.certificate.peerID, role: .connecting, at: TestPKI.now)
        #expect(codes(verdict) == [.peerIDMismatch])
        #expect(messages(verdict) == "peer ID mismatch: discovery announced \(other.certificate.peerID.short), the certificate's key is \(pki.leaf.certificate.peerID)")
    }

    @Test("an anchor may be an intermediate: the chain ends there")
    func intermediateAnchor() throws {
        let pki = try TestPKI.chain()
        let verdict = TrustEvaluator(policy: .anchors([pki.intermediate.certificate]))
            .evaluate(chain: [pki.leaf.certificate], role: .connecting, at: TestPKI.now)
        guard case .trusted(let peer) = verdict else {
            Issue.record("rejected: \(messages(verdict))")
            return
        }
        #expect(peer.chain.map(\.commonName) == ["Build Box", "Test Intermediate"])
    }

    @Test("every reason is reported, not only the first")
    func everyReason() throws {
        let pki = try TestPKI.chain()
        let old = try TestPKI.make("Old Server", issuedBy: pki.intermediate, from: TestPKI.now - 2 * TestPKI.year, until: TestPKI.now - TestPKI.day, usage: 1)
        let verdict = TrustEvaluator(policy: .anchors([pki.root.certificate]))
            .evaluate(chain: [old.certificate, pki.intermediate.certificate], expectedPeerID: pki.leaf.certificate.peerID, role: .accepting, at: TestPKI.now)
        #expect(codes(verdict).first == .peerIDMismatch)
        #expect(Set(codes(verdict)) == [.peerIDMismatch, .expired, .wrongUsage])
        #expect(messages(verdict).hasPrefix("peer ID mismatch"))
    }

    @Test("policies compose: any-of trusts when one does, all-of only when all do")
    func composition() throws {
        let pki = try TestPKI.chain()
        let lone = try TestPKI.make("Lone Box")
        let chain = [lone.certificate]
        let anchors = TrustPolicy.anchors([pki.root.certificate])
        let pins = TrustPolicy.pinned([lone.certificate.peerID])
        #expect(TrustEvaluator(policy: .anyOf([anchors, pins])).evaluate(chain: chain, role: .connecting, at: TestPKI.now).isTrusted)
        let both = TrustEvaluator(policy: .allOf([anchors, pins])).evaluate(chain: chain, role: .connecting, at: TestPKI.now)
        #expect(codes(both) == [.selfSignedNotTrusted])
        let nothing = TrustEvaluator(policy: .anyOf([])).evaluate(chain: chain, role: .connecting, at: TestPKI.now)
        #expect(codes(nothing) == [.nothingTrusted])
        #expect(messages(nothing).hasPrefix("nothing is trusted yet: no anchors and no pinned peers"))
        let noAnchors = TrustEvaluator(policy: .anchors([])).evaluate(chain: chain, role: .connecting, at: TestPKI.now)
        #expect(codes(noAnchors) == [.noAnchors])
        #expect(messages(noAnchors) == "no trusted anchors are configured")
        let system = TrustEvaluator(policy: .systemRoots).evaluate(chain: [pki.leaf.certificate, pki.intermediate.certificate], role: .connecting, at: TestPKI.now)
        #expect(codes(system).contains(.unknownIssuer), "\(codes(system))")
        #expect(messages(system).contains("the system's trusted roots"), "\(messages(system))")
        let empty = TrustEvaluator(policy: anchors).evaluate(chain: [], role: .connecting)
        #expect(!empty.isTrusted)
        #expect(codes(empty) == [.noCertificate])
    }

    @Test("a pinned but expired certificate is rejected as expired; an unpinned one as not pinned")
    func pinnedCodes() throws {
        let old = try TestPKI.make("Old Box", from: TestPKI.now - 2 * TestPKI.year, until: TestPKI.now - TestPKI.day)
        let fresh = try TestPKI.make("Fresh Box")
        let pins = TrustEvaluator(policy: .pinned([old.certificate.peerID]))
        let expired = pins.evaluate(chain: [old.certificate], role: .connecting, at: TestPKI.now)
        #expect(codes(expired) == [.expired])
        guard case .rejected(let reasons) = expired else { return }
        #expect(reasons.map(\.depth) == [0])
        #expect(codes(pins.evaluate(chain: [fresh.certificate], role: .connecting, at: TestPKI.now)) == [.notPinned])
    }

    @Test("OpenSSL's verification errors map to codes of PeerTrust's own, depth kept")
    func openSSLMapping() {
        let expected: [(Int, TrustReason.Code)] = [
            (10, .expired), (9, .notYetValid), (2, .unknownIssuer), (20, .unknownIssuer), (21, .unknownIssuer),
            (18, .selfSignedNotTrusted), (19, .untrustedRoot), (7, .badSignature), (4, .unreadableSignature),
            (6, .unreadableSignature), (26, .wrongUsage), (22, .chainTooLong), (79, .notACA), (25, .pathLengthExceeded),
            (37, .unexpectedCA), (66, .weakKey), (67, .weakKey), (68, .weakSignature), (23, .revoked), (12, .staleRevocationList),
            (11, .staleRevocationList), (8, .badRevocationList), (5, .badRevocationList), (35, .badRevocationList),
            (1, .other), (50, .other), (12_345, .other),
        ]
        for (number, code) in expected {
            let issue = OpenSSL.Issue(
                code: number, depth: 2, notBefore: 0, notAfter: 0, subject: "CN=Some CA,O=Test PKI", issuer: "CN=Some Root")
            let reason = TrustEvaluator.reason(for: issue, role: .connecting, anchorCount: 1, limit: 8)
            #expect(reason.code == code, "X509_V_ERR \(number)")
            #expect(reason.depth == 2)
            #expect(!reason.message.isEmpty)
        }
    }

    @Test("every code's description is distinct and lowerCamelCase")
    func codeNames() {
        let names = TrustReason.Code.all.map(\.description)
        #expect(names.count == 24)
        #expect(Set(names).count == names.count, "\(names)")
        #expect(Set(TrustReason.Code.all).count == names.count)
        for name in names {
            #expect(name.first.map { $0.isLowercase && $0.isASCII } == true, "\(name)")
            #expect(name.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber) }, "\(name)")
        }
        #expect(TrustReason.Code.expired.description == "expired")
        #expect(TrustReason.Code.notACA.description == "notACA")
        #expect(TrustReason.Code.peerIDMismatch.description == "peerIDMismatch")
        #expect("\(TrustReason.Code.verificationFailed)" == "verificationFailed")
        let reason = TrustReason(.other, "something")
        #expect(reason.code == .other && reason.depth == nil && reason.description == "something")
    }
}
