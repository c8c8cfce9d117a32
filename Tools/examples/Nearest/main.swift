import Nearby

do {
    let peer = try await connectNearest("_openagents._tcp")  // with the identity and pins `nearby` keeps
    print("nearest: \(peer.name), \(peer.rttText) away")
    print("ping:", try await peer.request("ping"))
    await peer.close()
} catch {
    fail("no connection: \(error)")
}
