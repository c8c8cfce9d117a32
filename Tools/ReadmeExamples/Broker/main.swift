import ConnectionBroker
import NearbyDiscovery
import PeerConnection
import PeerTrust

// Who we are, and whom we trust: the identity and pins `nearby identity` and `nearby trust`
// keep (in $NEARBY_STATE_DIR, else ~/.local/state/nearby).
let state = IdentityStore.defaultDirectory
let identity = try IdentityStore(directory: state).loadOrCreate()
let pins = TrustStore(directory: state.appendingPathComponent("trust"))
let connection = PeerConnectionConfiguration(identity: identity, trust: TrustEvaluator(policy: try .pinned(pins)))

// Advertise ourselves (TXT id and pv are added) and browse for the same service.
var settings = BrokerConfiguration(connection: connection, serviceType: try ServiceType(parsing: "_openagents._tcp"))
settings.autoInvite = true  // also connect to every compatible peer by the tiebreak
let discovery = try await NearbyDiscovery.start()
let broker = try await ConnectionBroker.start(settings, discovery: discovery)

// The nearest peer: measured, chosen, connected, initialized.
let (nearest, candidates) = try await broker.connectNearest()
print("measured:", candidates.map { "\($0.name) \($0.rtt.map { "\($0)" } ?? "no answer")" })
print("nearest:", nearest.peer.displayName ?? "?", "answers ping with", try await nearest.request("ping").jsonText)

await broker.shutdown()
await discovery.shutdown()
