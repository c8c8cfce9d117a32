import Foundation
import NearbyDiscovery

let type = try ServiceType(parsing: "_openagents._tcp")     // constants: these throw only for a typo
var info = DiscoveryInfo()
try info.set("version", to: "0.2.2")

// Starting and advertising can fail at run time (no interface with multicast, say): a
// DiscoveryError says what failed, in words. Say it, and exit 1.
let discovery: NearbyDiscovery, ad: Advertisement
do {
    discovery = try await NearbyDiscovery.start()            // avahi-daemon if it runs, else the embedded engine
    ad = try await discovery.advertise("Build Box", type: type, port: 9099, info: info)
} catch {
    FileHandle.standardError.write(Data("readme-discovery: cannot advertise: \(error)\n".utf8))
    exit(1)
}
print("advertising as", ad.name)                             // the name won, e.g. "Build Box (2)"
try info.set("version", to: "0.2.3")
await ad.update(info: info)                                  // re-announced; browsers see "updated"

// Watch the type for three seconds. Each event is a case with what goes with it; the switch
// is exhaustive, so the compiler names any case a later version adds.
let browsing = Task {
    for await event in discovery.browse(type, resolve: true) {
        switch event {
        case .found(let service, let resolved?), .updated(let service, let resolved?):
            print(event.caseName, service.name, resolved.host, resolved.port, resolved.addresses, resolved.info)
        case .found(let service, nil), .updated(let service, nil):   // only when resolve is false
            print(event.caseName, service.name)
        case .lost(let service):
            print("lost", service.name)
        case .interrupted, .restored:                                // the system daemon stopped or came back
            print(event)
        }
    }
}
try await Task.sleep(for: .seconds(3))
browsing.cancel()

// Or ask for one service by name. Nobody answering is an outcome, not a crash.
do {
    let peer = try await discovery.resolve("Peer Box", type: type, timeout: .seconds(3))
    print("resolved Peer Box:", peer.host, peer.port, peer.addresses)
} catch {
    print(error)                                             // no answer for "Peer Box" (…) within 3.0 seconds
}
await ad.cancel()                                            // goodbyes
await discovery.shutdown()
