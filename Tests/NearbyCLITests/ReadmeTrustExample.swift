import PeerTrust

/// The README's PeerTrust example, compiled with the tests so that it stays true to the API.
/// Not run here: it would use the real state directory.
func readmeTrustExample(peerChain: [Certificate], announced: PeerID?) throws {
    let identity = try IdentityStore().loadOrCreate(displayName: "Build Box")
    let trust = TrustStore()
    let evaluator = TrustEvaluator(policy: .anyOf([.anchors(try trust.anchors()), try .pinned(trust)]))
    switch evaluator.evaluate(chain: peerChain, expectedPeerID: announced, role: .connecting) {
    case .trusted(let peer): print("trusted", peer.displayName, peer.peerID)
    case .rejected(let reasons): reasons.forEach { print("-", $0) }
    }
    _ = identity
}
