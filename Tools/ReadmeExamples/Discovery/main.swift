import NearbyDiscovery

let discovery = try await NearbyDiscovery.start()            // avahi-daemon if it runs, else the embedded engine
let type = try ServiceType(parsing: "_openagents._tcp")
var info = DiscoveryInfo()
try info.set("version", to: "0.2.2")
let ad = try await discovery.advertise("Build Box", type: type, port: 9099, info: info)
print("advertising as", ad.name)                             // the name won, e.g. "Build Box (2)"
try info.set("version", to: "0.2.3")
await ad.update(info: info)                                  // re-announced; browsers see "updated"

// Watch the type for three seconds. Events are a kind and what goes with it; switch with a
// default, so that kinds added in later versions do not break this code.
let browsing = Task {
    for await event in discovery.browse(type, resolve: true) {
        switch event.kind {
        case .found, .updated:
            guard let service = event.service, let resolved = event.resolved else { continue }
            print(event.kind, service.name, resolved.host, resolved.port, resolved.addresses, resolved.info)
        case .lost:
            print("lost", event.service?.name ?? "?")
        default:                                             // interrupted, restored, and kinds to come
            print(event)
        }
    }
}
try await Task.sleep(for: .seconds(3))
browsing.cancel()

// Or ask for one service by name.
do {
    let peer = try await discovery.resolve("Peer Box", type: type, timeout: .seconds(3))
    print("resolved Peer Box:", peer.host, peer.port, peer.addresses)
} catch let error as DiscoveryError where error.code == .timeout {
    print("no answer:", error)
}
await ad.cancel()                                            // goodbyes
await discovery.shutdown()
