import ConnectionBroker
import Foundation
import NearbyDiscovery
import PeerConnection
import PeerTrust

// What goes wrong is said in one line on stderr, with exit status 1: no trap, no backtrace.
func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("readme-broker: \(message)\n".utf8))
    exit(1)
}

// Who we are, and whom we trust: the identity and pins `nearby identity` and `nearby trust`
// keep (in $NEARBY_STATE_DIR, else ~/.local/state/nearby). Only pinned peers are dialed or let in.
let state = IdentityStore.defaultDirectory
let pins = TrustStore(directory: state.appendingPathComponent("trust"))
let connection: PeerConnectionConfiguration
do {
    let identity = try IdentityStore(directory: state).loadOrCreate().identity
    guard try !pins.pins().isEmpty else {
        fail("nobody is pinned in \(pins.directory.path): pin the peers to connect to (nearby trust pin PEER-ID, "
            + "or nearby pair), and have them pin this one: nearby trust pin \(identity.peerID)")
    }
    connection = PeerConnectionConfiguration(identity: identity, trust: TrustEvaluator(policy: try .pinned(pins)))
} catch {
    fail("cannot use the identity and pins in \(state.path): \(error)")
}

// Advertise ourselves (TXT id and pv are added) and browse for the same service.
let discovery: NearbyDiscovery, broker: ConnectionBroker
do {
    var settings = BrokerConfiguration(connection: connection, serviceType: try ServiceType(parsing: "_openagents._tcp"))
    settings.autoInvite = true  // also connect to every compatible peer by the tiebreak
    discovery = try await NearbyDiscovery.start()
    broker = try await ConnectionBroker.start(settings, discovery: discovery)
} catch {
    fail("cannot advertise or browse: \(error)")
}

// The nearest peer: measured, chosen, connected, initialized. Finding nobody is an answer too:
// report it after the goodbyes.
var failure: (any Error)?
do {
    let (nearest, candidates) = try await broker.connectNearest()
    print("measured:", candidates.map { "\($0.name) \($0.rtt.map { "\($0)" } ?? "no answer")" })
    print("nearest:", nearest.peer.displayName ?? "?", "answers ping with", try await nearest.request("ping").jsonText)
} catch {
    failure = error
}
await broker.shutdown()
await discovery.shutdown()
if let failure { fail("no connection: \(failure)") }
