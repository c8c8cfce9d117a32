// The Swift fragments of the DocC articles, compiled here so that they cannot go stale. Whole
// programs that an article shows are the example programs in Tools/examples, which
// `swift build` builds, and are not repeated here. Each function holds one article's fragments
// in order, between `docc:begin` and `docc:end` (separated by `docc:next`; the imports are at
// the top of this file). What a fragment assumes from its context is declared before
// `docc:begin`. DocumentationTests checks that the articles show exactly this code. Nothing
// here is run.
import ConnectionBroker
import DNSPushTLS
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

/// DNSPushTLS.docc/DNSPushTLS.md
func docc_DNSPushTLS_DNSPushTLS() {
    // docc:begin DNSPushTLS/DNSPushTLS
    var settings = WideAreaSettings()
    settings.pushTransport = TLSPushTransport()   // browses in DNS zones now use Push where offered
    settings.push = .opportunistic                // encrypt; .authenticated also checks the certificate
    // docc:end
    _ = settings
}
