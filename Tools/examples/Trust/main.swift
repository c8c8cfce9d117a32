import Foundation
import PeerTrust

// This machine's identity: made on first use (a P-256 key, a self-signed certificate), then
// loaded from ~/.local/state/nearby (or $NEARBY_STATE_DIR).
let loaded = try IdentityStore().loadOrCreate(displayName: "Build Box")
let identity = loaded.identity
print(loaded.created ? "made a new identity:" : "I am", identity.displayName, identity.peerID)

// A peer's certificate chain, as its TLS handshake presents it (here read from a PEM file
// named on the command line), and the peer ID discovery announced for it (TXT "id"), if any.
// Bad input (no such file, a mistyped peer ID) is said in one line, with exit status 2.
let arguments = CommandLine.arguments.dropFirst()
let peerChain: [Certificate], announced: PeerID?
do {
    peerChain = try Certificate.chain(contentsOf: URL(fileURLWithPath: arguments.first ?? "peer.pem"))
    announced = try arguments.dropFirst().first.map { try PeerID(parsing: $0) }
} catch {
    FileHandle.standardError.write(Data("readme-trust: \(error) (usage: readme-trust PEER.pem [PEER-ID])\n".utf8))
    exit(2)
}

// Trust what the trust store trusts: its anchors, or a pinned peer ID.
let trust = TrustStore()
let evaluator = TrustEvaluator(policy: .anyOf([.anchors(try trust.anchors()), try .pinned(trust)]))
switch evaluator.evaluate(chain: peerChain, expectedPeerID: announced, role: .connecting) {
case .trusted(let peer): print("trusted", peer.displayName, peer.peerID)
case .rejected(let reasons): reasons.forEach { print("-", $0.code, $0) }
}
