import Foundation
import PeerConnection
import PeerTrust

// Two devices that have never met, each with its own identity and trust store.
let buildBox = try PeerIdentity.generate(displayName: "Build Box")
let laptop = try PeerIdentity.generate(displayName: "Laptop")
let scratch = FileManager.default.temporaryDirectory.appendingPathComponent("pairing-\(UUID().uuidString)")
let buildBoxStore = TrustStore(directory: scratch.appendingPathComponent("build-box"))
let laptopStore = TrustStore(directory: scratch.appendingPathComponent("laptop"))
let nobody = TrustEvaluator(policy: .pinned([]))

// Build Box admits trusted peers and offers the others pairing. A real app shows the code
// and asks its user whether the other device shows the same; this one says yes.
let offer = PeerListener.PairingOffer(store: buildBoxStore) { request in
    print("Build Box shows \(request.code) for \(request.name)")
    return true
}
let listener = try await PeerListener.listen(
    host: "127.0.0.1", port: 0, configuration: PeerConnectionConfiguration(identity: buildBox, trust: nobody), pairing: offer)

// The laptop pairs. Both devices show the same six digits; both people said yes, so each
// side pins the other (peer ID, name, time) in its own store.
let paired = try await PeerConnection.pair(
    host: "127.0.0.1", port: listener.port, configuration: PeerConnectionConfiguration(identity: laptop, trust: nobody),
    store: laptopStore
) { request in
    print("Laptop shows \(request.code) for \(request.name)")
    return true
}
// Each side pins on its own: Build Box says so on its listener's events once it has.
for await event in listener.events {
    guard case .paired(let result) = event else { continue }
    print("Build Box paired with", result.name)
    break
}
print("pinned on the laptop:", try laptopStore.pins().compactMap(\.name), "on Build Box:", try buildBoxStore.pins().compactMap(\.name))
print("the laptop now trusts Build Box:", TrustEvaluator(policy: try .pinned(laptopStore)).evaluate(chain: buildBox.certificateChain, role: .connecting).isTrusted)
await listener.close()
try? FileManager.default.removeItem(at: scratch)
