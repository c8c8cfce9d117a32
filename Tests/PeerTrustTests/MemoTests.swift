import Foundation
import Testing

@testable import PeerTrust

/// What PeerTrust remembers between evaluations must never change a verdict: the same chain
/// judged again at another time, against other pins or after a pin file changed, gets the
/// verdict a fresh process would give.
@Suite("trust memo and pin cache")
struct MemoTests {
    func isTrusted(_ verdict: TrustVerdict) -> Bool { verdict.isTrusted }

    @Test("the interval between validity boundaries: notBefore opens, the second after notAfter closes")
    func intervals() {
        let periods: [(notBefore: Int64, notAfter: Int64)] = [(100, 200), (150, 400)]
        #expect(OpenSSLMemo.interval(around: 50, validity: periods) == (Int64.min, 100))
        #expect(OpenSSLMemo.interval(around: 100, validity: periods) == (100, 150))
        #expect(OpenSSLMemo.interval(around: 200, validity: periods) == (150, 201))
        #expect(OpenSSLMemo.interval(around: 201, validity: periods) == (201, 401))
        #expect(OpenSSLMemo.interval(around: 500, validity: periods) == (401, Int64.max))
        #expect(OpenSSLMemo.interval(around: 7, validity: []) == (Int64.min, Int64.max))
    }

    @Test("one chain judged in one process: valid, then expired a second later, then valid again at an earlier time")
    func expiryIsNeverRemembered() throws {
        let root = try TestPKI.make("Memo Root", ca: true, from: TestPKI.now - 5 * TestPKI.year, until: TestPKI.now + 5 * TestPKI.year)
        let end = TestPKI.now + TestPKI.day
        let leaf = try TestPKI.make("Memo Box", issuedBy: root, from: TestPKI.now - TestPKI.year, until: end)
        let evaluator = TrustEvaluator(policy: .anchors([root.certificate]))
        let chain = [leaf.certificate]
        #expect(isTrusted(evaluator.evaluate(chain: chain, role: .connecting, at: TestPKI.now)))
        #expect(isTrusted(evaluator.evaluate(chain: chain, role: .connecting, at: end)))
        let after = evaluator.evaluate(chain: chain, role: .connecting, at: end + 1)
        guard case .rejected(let reasons) = after else { Issue.record("trusted after expiry"); return }
        #expect(reasons.map(\.code) == [.expired])
        #expect(isTrusted(evaluator.evaluate(chain: chain, role: .connecting, at: TestPKI.now)))
        // Not yet valid, before its notBefore, though a trusted verdict is remembered.
        #expect(!isTrusted(evaluator.evaluate(chain: chain, role: .connecting, at: TestPKI.now - 2 * TestPKI.year)))
    }

    @Test("a remembered verdict is offered only for the same role, anchors and time interval, and only once computed")
    func rememberedVerdicts() throws {
        let root = try TestPKI.make("Recall Root", ca: true, from: TestPKI.now - 5 * TestPKI.year, until: TestPKI.now + 5 * TestPKI.year)
        let leaf = try TestPKI.make("Recall Box", issuedBy: root)
        let other = try TestPKI.make("Other Root", ca: true)
        let evaluator = TrustEvaluator(policy: .anchors([root.certificate]))
        let chain = [leaf.certificate]
        #expect(evaluator.rememberedVerdict(chain: chain, expectedPeerID: nil, role: .accepting, at: TestPKI.now) == nil)
        let computed = evaluator.evaluate(chain: chain, role: .accepting, at: TestPKI.now)
        #expect(evaluator.rememberedVerdict(chain: chain, expectedPeerID: nil, role: .accepting, at: TestPKI.now + 60) == computed)
        #expect(evaluator.rememberedVerdict(chain: chain, expectedPeerID: nil, role: .connecting, at: TestPKI.now) == nil)
        #expect(TrustEvaluator(policy: .anchors([other.certificate])).rememberedVerdict(chain: chain, expectedPeerID: nil, role: .accepting, at: TestPKI.now) == nil)
        #expect(evaluator.rememberedVerdict(chain: chain, expectedPeerID: nil, role: .accepting, at: TestPKI.now + 2 * TestPKI.year) == nil)
        // The expected peer ID is still checked on a remembered verdict.
        let stranger = try TestPKI.make("Stranger", issuedBy: root)
        let mismatch = evaluator.rememberedVerdict(chain: chain, expectedPeerID: stranger.certificate.peerID, role: .accepting, at: TestPKI.now)
        guard case .rejected(let reasons)? = mismatch else { Issue.record("not rejected: \(String(describing: mismatch))"); return }
        #expect(reasons.map(\.code) == [.peerIDMismatch])
        // System roots are read from disk: never remembered.
        #expect(TrustEvaluator(policy: .systemRoots).rememberedVerdict(chain: chain, expectedPeerID: nil, role: .accepting) == nil)
    }

    @Test("pins: a pin added or removed (by this process or another writer) is seen at once")
    func pinChangesAreSeen() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("nearby-pins-\(UUID().uuidString)")
        let store = TrustStore(directory: directory)
        let first = try TestPKI.make("First").certificate.peerID
        let second = try TestPKI.make("Second").certificate.peerID
        #expect(try store.pins().isEmpty)
        try store.pin(first, name: "First")
        #expect(try store.pins().map(\.peerID) == [first])
        #expect(try store.pins().map(\.peerID) == [first])
        // Another store value over the same directory (as another process would) pins too.
        try TrustStore(directory: directory).pin(second, name: "Second")
        #expect(try store.pins().map(\.peerID) == [first, second])
        try store.remove(first)
        #expect(try store.pins().map(\.peerID) == [second])
        // A file rewritten in place with the same size is still read again (its time changed).
        let file = directory.appendingPathComponent("pins.json")
        let text = try String(contentsOf: file, encoding: .utf8)
        try text.replacingOccurrences(of: "\"Second\"", with: "\"Secund\"").write(to: file, atomically: false, encoding: .utf8)
        #expect(try store.pins().first?.name == "Secund")
        try FileManager.default.removeItem(at: file)
        #expect(try store.pins().isEmpty)
    }
}
