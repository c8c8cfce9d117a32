// The Swift code of the DocC articles, compiled here so that it cannot go stale: each function
// holds one article's ```swift blocks in order, between `docc:begin` and `docc:end` (blocks
// separated by `docc:next`, the imports at the top of this file). What an article assumes
// from its context is declared before `docc:begin`. DocumentationTests checks that the
// articles show exactly this code. Nothing here is run.
import ConnectionBroker
import Foundation
import NearbyDiscovery
import PeerConnection
import PeerTrust
import UnicastDNSSD

/// ConnectionBroker.docc/AutoConnectToTheNearestPeer.md
func docc_ConnectionBroker_AutoConnectToTheNearestPeer() async throws {
    let connection = PeerConnectionConfiguration(identity: try PeerIdentity.generate(), trust: TrustEvaluator(policy: .pinned([])))
    let type = try ServiceType(parsing: "_openagents._tcp")
    let discovery = try await NearbyDiscovery.start()
    // docc:begin ConnectionBroker/AutoConnectToTheNearestPeer
    var configuration = BrokerConfiguration(connection: connection, serviceType: type)
    configuration.answerWindow = .milliseconds(300)   // a slow Wi-Fi link
    let broker = try await ConnectionBroker.start(configuration, discovery: discovery)
    let (nearest, candidates) = try await broker.connectNearest(timeout: .seconds(5))
    // docc:end
    _ = (nearest, candidates)
}

/// ConnectionBroker.docc/GettingStarted.md
func docc_ConnectionBroker_GettingStarted() async throws {
    // docc:begin ConnectionBroker/GettingStarted
    // This peer's identity and the peers it trusts, from the shared state directory.
    let stateDirectory = IdentityStore.defaultDirectory
    let identity = try IdentityStore(directory: stateDirectory).loadOrCreate().identity
    let trustStore = TrustStore(directory: stateDirectory.appendingPathComponent("trust"))
    let connection = PeerConnectionConfiguration(
        identity: identity, trust: TrustEvaluator(policy: try .pinned(trustStore)))

    // Advertise and browse _openagents._tcp, and connect to every compatible peer by itself.
    var configuration = BrokerConfiguration(
        connection: connection, serviceType: try ServiceType(parsing: "_openagents._tcp"))
    configuration.autoInvite = true

    let discovery = try await NearbyDiscovery.start()
    let broker = try await ConnectionBroker.start(configuration, discovery: discovery)
    print("advertised as", broker.advertisedName ?? "-", "on port", broker.port ?? 0)

    // Measure the candidates, connect to the nearest one and ping it.
    let (nearest, measured) = try await broker.connectNearest()
    for candidate in measured {
        print(candidate.name, candidate.rtt.map { "\($0)" } ?? "no answer")
    }
    print("nearest:", nearest.peer.displayName ?? "?", try await nearest.request("ping").jsonText)

    await broker.shutdown()
    await discovery.shutdown()
    // docc:end
}

/// NearbyDiscovery.docc/AdvertiseFromAShell.md
func docc_NearbyDiscovery_AdvertiseFromAShell() async throws {
    // docc:begin NearbyDiscovery/AdvertiseFromAShell
    let discovery = try await NearbyDiscovery.start()
    var info = DiscoveryInfo()
    try info.set("version", to: "0.2.2")
    try info.setFlag("tls")
    let advertisement = try await discovery.advertise(
        "Build Box", type: try ServiceType(parsing: "_openagents._tcp"), port: 9099, info: info)
    print("Advertising", advertisement.name)
    // … until the program is asked to stop; then:
    await discovery.shutdown()
    // docc:end
}

/// NearbyDiscovery.docc/BeyondTheLink.md
func docc_NearbyDiscovery_BeyondTheLink() async throws {
    // docc:begin NearbyDiscovery/BeyondTheLink
    let key = try TSIGKey(file: "nearby.key")            // made by tsig-keygen -a hmac-sha256 nearby-key
    let discovery = try await NearbyDiscovery.start(wideArea: WideAreaSettings(key: key))
    let type = try ServiceType(parsing: "_openagents._tcp.lab.example.test")
    let ad = try await discovery.advertise("Build Box", type: type, port: 9099)

    for await event in discovery.browse(type, resolve: true, domains: ["local.", "lab.example.test."]) {
        print(event.caseName, event.service?.name ?? "", event.service?.domain ?? "")
    }
    // docc:end
    _ = ad
}

/// NearbyDiscovery.docc/BrowseFromSwift.md
func docc_NearbyDiscovery_BrowseFromSwift() async throws {
    // docc:begin NearbyDiscovery/BrowseFromSwift
    let discovery = try await NearbyDiscovery.start()
    let type = try ServiceType(parsing: "_openagents._tcp")

    for await event in discovery.browse(type, resolve: true) {
        switch event {
        case .found(let service, let resolved):
            print("found", service.name, "on", service.interface.name,
                  "at", resolved?.host ?? "?", resolved?.port ?? 0, resolved?.addresses ?? [], resolved?.info ?? DiscoveryInfo())
        case .updated(let service, let resolved):
            print("changed", service.name, resolved?.info ?? DiscoveryInfo())
        case .lost(let service):
            print("gone", service.name)
        case .interrupted(let error):
            print("cannot see the network for now:", error)
        case .restored:
            print("browsing again")
        }
    }
    // docc:next
    let service = try await discovery.resolve("Build Box", type: type, timeout: .seconds(3))
    let addresses = try await discovery.addresses(ofHost: "buildbox.local")
    print(service.host, service.port, addresses)
    // docc:next
    do {
        let discovery = try await NearbyDiscovery.start(backend: .system)
        print("using the daemon as", await discovery.hostName)
    } catch let error as DiscoveryError {
        switch error.code {
        case .libraryMissing: print("install libavahi-compat-libdnssd1, or use .embedded:", error)
        case .daemonNotRunning: print("start avahi-daemon, or use .embedded:", error)
        default: print(error)
        }
    } catch {
        print(error)
    }
    // docc:end
}

/// NearbyDiscovery.docc/GettingStarted.md
func docc_NearbyDiscovery_GettingStarted() async throws {
    // docc:begin NearbyDiscovery/GettingStarted
    // The host's avahi-daemon when it answers, otherwise Nearby's own mDNS engine.
    let discovery = try await NearbyDiscovery.start()
    let type = try ServiceType(parsing: "_openagents._tcp")

    // Publish "Build Box" on port 9099 with one TXT entry.
    var info = DiscoveryInfo()
    try info.set("version", to: "0.2.2")
    let advertisement = try await discovery.advertise("Build Box", type: type, port: 9099, info: info)
    print("published as", advertisement.name)   // "Build Box (2)" if another host held the name

    // Watch the type for a few seconds, resolving each service found.
    let watcher = Task {
        for await event in discovery.browse(type, resolve: true) {
            switch event {
            case .found(_, let resolved?), .updated(_, let resolved?):
                print(event.caseName, resolved.service.name, resolved.host, resolved.port, resolved.addresses)
            case .found, .updated:               // not resolved: only when resolve is false
                break
            case .lost(let service):
                print("lost", service.name)
            case .interrupted, .restored:        // the system daemon stopped, or came back
                print(event)
            }
        }
    }
    try await Task.sleep(for: .seconds(3))
    watcher.cancel()

    // Ask for one instance by name.
    do {
        let peer = try await discovery.resolve("Peer Box", type: type, timeout: .seconds(3))
        print("Peer Box is at", peer.host, peer.port, peer.info)
    } catch let error as DiscoveryError where error.code == .timeout {
        print("nobody answered:", error)
    }

    await advertisement.cancel()
    await discovery.shutdown()
    // docc:end
}

/// PeerConnection.docc/ConnectingToAPeer.md
func docc_PeerConnection_ConnectingToAPeer() async throws {
    let announcedPeerID = try PeerIdentity.generate().peerID
    let configuration = PeerConnectionConfiguration(identity: try PeerIdentity.generate(), trust: TrustEvaluator(policy: .pinned([])))
    let trustStore = TrustStore(directory: FileManager.default.temporaryDirectory)
    let askUser: @Sendable (String) async -> Bool = { _ in false }
    let scanned = "NEARBY:1/…"
    // docc:begin PeerConnection/ConnectingToAPeer
    do {  // docc:scope
        do {
            let connection = try await PeerConnection.connect(
                host: "192.168.1.20", port: 9099, expecting: announcedPeerID, configuration: configuration)
            print(connection.peer.protocolVersion, connection.peer.info)
        } catch {
            print(error.code, error)            // `untrusted` errors list every trust reason
        }
    }  // docc:scope
    // docc:next
    do {  // docc:scope
        // `askUser` stands for the app's own prompt: true only when the person says the codes match.
        let offer = PeerListener.PairingOffer(store: trustStore) { request in
            await askUser("Does \(request.name) show \(request.code)?")
        }
        let listener = try await PeerListener.listen(port: 9099, configuration: configuration, pairing: offer)
        _ = listener  // docc:scope
    }  // docc:scope
    // docc:next
    do {  // docc:scope
        let listener = try await PeerListener.listen(
            port: 0, configuration: configuration, invitations: PeerListener.InvitationOffer(store: trustStore))
        let invitation = try listener.invite(ttl: .seconds(600), uses: 1)
        print(invitation.text)  // NEARBY:1/…, for a link or a QR code

        // On the other device, after scanning it:
        let connection = try await PeerConnection.accept(try InvitationLink(parsing: scanned), configuration: configuration, store: trustStore)
        _ = connection  // docc:scope
    }  // docc:scope
    // docc:end
}

/// PeerConnection.docc/GettingStarted.md
func docc_PeerConnection_GettingStarted() async throws {
    // docc:begin PeerConnection/GettingStarted
    // Two peers, each trusting exactly the other's peer ID.
    let server = try PeerIdentity.generate(displayName: "Build Box")
    let client = try PeerIdentity.generate(displayName: "Laptop")
    var serverConfiguration = PeerConnectionConfiguration(
        identity: server, trust: TrustEvaluator(policy: .pinned([client.peerID])))
    serverConfiguration.info = .object(["name": "bridge", "title": "Build Box bridge", "version": "1.0.0"])
    let clientConfiguration = PeerConnectionConfiguration(
        identity: client, trust: TrustEvaluator(policy: .pinned([server.peerID])))

    // Accept trusted peers on any free port and answer "echo" with its params.
    let listener = try await PeerListener.listen(
        host: "127.0.0.1", port: 0, configuration: serverConfiguration, accept: .trusted)
    let serverTask = Task {
        for await event in listener.events {
            guard case .connected(let connection) = event else { continue }
            Task {
                for await message in connection.incoming where message.method == "echo" {
                    message.respond(with: message.params ?? .null)
                }
            }
        }
    }

    // Connect, expecting the server's peer ID; TLS, trust and initialize all happen here.
    let connection = try await PeerConnection.connect(
        host: "127.0.0.1", port: listener.port, expecting: server.peerID, configuration: clientConfiguration)
    print("connected to", connection.peer.displayName ?? "?", "in", connection.setupDuration)

    struct Note: Codable { var text: String }
    let reply: Note = try await connection.request("echo", params: Note(text: "hello"))
    print("echoed:", reply.text)

    await connection.close()
    await listener.close()
    serverTask.cancel()
    // docc:end
}

/// PeerTrust.docc/GettingStarted.md
func docc_PeerTrust_GettingStarted() async throws {
    // docc:begin PeerTrust/GettingStarted
    // Made on first use (a P-256 key and a self-signed certificate), loaded on every later run.
    let loaded = try IdentityStore().loadOrCreate(displayName: "Build Box")
    let identity = loaded.identity
    print(loaded.created ? "new peer:" : "this peer:", identity.displayName, identity.peerID)

    // The peer's chain, leaf first, and the peer ID it was announced with, if any.
    let arguments = CommandLine.arguments.dropFirst()
    let chain = try Certificate.chain(contentsOf: URL(fileURLWithPath: arguments.first ?? "peer.pem"))
    let announced = try arguments.dropFirst().first.map { try PeerID(parsing: $0) }

    // Trust whatever the trust store trusts: a chain to one of its anchors, or a pinned key.
    let store = TrustStore()
    let policy = TrustPolicy.anyOf([.anchors(try store.anchors()), try .pinned(store)])
    let evaluator = TrustEvaluator(policy: policy)

    switch evaluator.evaluate(chain: chain, expectedPeerID: announced, role: .connecting) {
    case .trusted(let peer):
        print("trusted:", peer.displayName, peer.peerID)
    case .rejected(let reasons):
        for reason in reasons { print("rejected:", reason.code, reason.message) }
    }
    // docc:end
}
