// swift-tools-version: 6.0
//
// Nearby: find and connect to peers on the local network with mDNS/DNS-SD.
// Each module has one job and depends only on the ones below it (see Documentation/Architecture.md).

import PackageDescription

let strict: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("InternalImportsByDefault"),
]

let package = Package(
    name: "Nearby",
    // Built and tested on Linux only (see Documentation/Swift.md, "Use it in your package"), which
    // takes no `platforms:` minimum; no Apple minimum is declared, since nothing is built or
    // tested there.
    products: [
        // The front door: advertise, browse, connect to the nearest or a named peer, serve, each a call.
        .library(name: "Nearby", targets: ["Nearby"]),
        // The full modules, for those who need more than the front door. The engines under
        // NearbyDiscovery (MulticastDNSCore, MulticastDNS, SystemDNSSD) are not products: their
        // work is reached through NearbyDiscovery's backends, and they may change with it.
        .library(name: "NearbyBasics", targets: ["NearbyBasics"]),
        .library(name: "DNSWire", targets: ["DNSWire"]),
        .library(name: "UnicastDNSSD", targets: ["UnicastDNSSD"]),
        .library(name: "DNSPushTLS", targets: ["DNSPushTLS"]),
        .library(name: "NearbyDiscovery", targets: ["NearbyDiscovery"]),
        .library(name: "PeerTrust", targets: ["PeerTrust"]),
        .library(name: "PeerProtocol", targets: ["PeerProtocol"]),
        .library(name: "PeerConnection", targets: ["PeerConnection"]),
        .library(name: "ConnectionBroker", targets: ["ConnectionBroker"]),
        .library(name: "FileTransfer", targets: ["FileTransfer"]),
        .library(name: "NearbyQRCode", targets: ["NearbyQRCode"]),
        .library(name: "PacketCapture", targets: ["PacketCapture"]),
        .library(name: "DiscoveryProxy", targets: ["DiscoveryProxy"]),
        .executable(name: "nearby", targets: ["nearby"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.5.0"),
        .package(url: "https://github.com/apple/swift-nio", from: "2.65.0"),
        // 1.11: LogHandler.log(event:), which the CLI's journal handler implements.
        .package(url: "https://github.com/apple/swift-log", from: "1.11.0"),
        .package(url: "https://github.com/apple/swift-nio-ssl", from: "2.27.0"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.6.0"),
        // Counters, gauges and histograms recorded by the libraries (the API only: nothing is
        // exported unless a program bootstraps a backend), and the one Prometheus exposition,
        // which only the executable links (Documentation/Operations.md lists every metric).
        .package(url: "https://github.com/apple/swift-metrics", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus", from: "2.4.1"),
        // `swift package generate-documentation`: the DocC catalogs of the public modules.
        .package(url: "https://github.com/swiftlang/swift-docc-plugin", from: "1.4.0"),
    ],
    targets: [
        // Small pieces every module may use, with nothing below it but the standard library:
        // OpenKind (every error code and event kind), hex, the JSON writer, and what the
        // long-lived shells share (the clock they take as a parameter, the Alarm their
        // timekeeping child waits on, ChildTasks).
        .target(name: "NearbyBasics", swiftSettings: strict),
        // SHA-256, HMAC-SHA-256, random bytes and a constant-time comparison in Swift: what
        // unicast DNS-SD (TSIG) and the protocol (invitation proofs, pairing) need, below both, so
        // that discovery builds without OpenSSL. Files are hashed by OpenSSL (PeerTrust), faster.
        .target(name: "NearbyCrypto", dependencies: ["NearbyBasics"], swiftSettings: strict),
        .testTarget(name: "NearbyCryptoTests", dependencies: ["NearbyCrypto", "NearbyBasics"], swiftSettings: strict),
        // What the libraries count, published through swift-metrics' API (CoreMetrics, no
        // backend): each metric's name and meaning, and counters fed from the statistics the
        // modules keep anyway. The one exposition (Prometheus) is the executable's.
        .target(name: "NearbyMetrics", dependencies: [.product(name: "CoreMetrics", package: "swift-metrics")], swiftSettings: strict),
        .testTarget(
            name: "NearbyMetricsTests", dependencies: ["NearbyMetrics", .product(name: "MetricsTestKit", package: "swift-metrics")],
            swiftSettings: strict),
        // The DNS/mDNS wire codec, DNS-SD names and TXT discovery info. Pure values, no I/O.
        .target(name: "DNSWire", dependencies: ["NearbyBasics"], swiftSettings: strict),
        .testTarget(
            name: "DNSWireTests",
            dependencies: ["DNSWire"],
            resources: [.copy("Fixtures")],
            swiftSettings: strict
        ),
        // The RFC 6762 engine without I/O: responder, querier, cache, timing. Messages and time
        // in, messages and events out. Depends on DNSWire alone, so "no I/O" is the compiler's rule.
        .target(name: "MulticastDNSCore", dependencies: ["DNSWire"], swiftSettings: strict),
        // The operating system in one place: host name and interfaces, the descriptor limit,
        // threads of our own (the one thread starter, a condition for threads that wait), reading
        // a descriptor to its end. The pure modules below never import the C library for these.
        .target(name: "NetworkPlatform", swiftSettings: strict),
        // What needs the C library's macros and GNU extensions, a file per job: the receive
        // path's recvmmsg and packet information (nearby_socket), the file transfer's renameat2
        // and sync_file_range (nearby_files), and memory given back or tuned (nearby_memory).
        .target(name: "CNearbySocket"),
        // The embedded engine on real sockets: an actor driving MulticastDNSCore with the clock
        // and a UDP multicast transport with a receive thread of its own and a bounded inbox.
        .target(
            name: "MulticastDNS",
            dependencies: [
                "DNSWire", "MulticastDNSCore", "NetworkPlatform", "CNearbySocket", "NearbyBasics",
                .product(name: "Logging", package: "swift-log"),
                "NearbyMetrics", .product(name: "CoreMetrics", package: "swift-metrics"),
            ],
            swiftSettings: strict
        ),
        .testTarget(name: "MulticastDNSTests", dependencies: ["MulticastDNSCore", "DNSWire"], swiftSettings: strict),
        .testTarget(
            name: "NearbyDiscoveryTests",
            dependencies: [
                "NearbyDiscovery", "MulticastDNS", "SystemDNSSD", "NearbyBasics", "NetworkPlatform",
                "NearbyMetrics", .product(name: "MetricsTestKit", package: "swift-metrics"),
            ],
            swiftSettings: strict),
        // The dns_sd API (Avahi's compatibility library on Linux), opened with dlopen when the
        // system backend is first asked for: nothing links it, so a program runs without it.
        // Apple platforms have dns_sd in the SDK.
        .target(name: "CDNSSD", linkerSettings: [.linkedLibrary("dl", .when(platforms: [.linux]))]),
        // The system's DNS-SD daemon (avahi-daemon, mDNSResponder) through dns_sd, C kept inside.
        .target(
            name: "SystemDNSSD",
            dependencies: [
                .target(name: "CDNSSD", condition: .when(platforms: [.linux])), "NearbyBasics", "NetworkPlatform",
            ],
            swiftSettings: strict
        ),
        // The public discovery API: advertise, browse, resolve, service types; backend choice.
        .target(
            name: "NearbyDiscovery",
            dependencies: [
                "DNSWire", "MulticastDNSCore", "MulticastDNS", "SystemDNSSD", "UnicastDNSSD", "NetworkPlatform", "NearbyBasics",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: strict
        ),
        // DNS-SD over unicast DNS (RFC 6763 §11): questions to the system's or a given DNS server,
        // registration by DNS UPDATE signed with TSIG (RFC 2136, RFC 8945), DNS Push
        // subscriptions over TLS (RFC 8765). Decisions in pure state machines (the exchange, the
        // registration, the poller, the Push session), the sockets in a thin shell.
        .target(
            name: "UnicastDNSSD",
            dependencies: [
                "DNSWire", "NearbyBasics", "NearbyCrypto", "NetworkPlatform",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ],
            swiftSettings: strict
        ),
        // DNS Push's TLS (swift-nio-ssl's BoringSSL), apart from UnicastDNSSD so that a program
        // that only discovers compiles no TLS library: it gives WideAreaSettings.pushTransport.
        .target(
            name: "DNSPushTLS",
            dependencies: [
                "UnicastDNSSD", "DNSWire",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOTLS", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
            ],
            swiftSettings: strict
        ),
        .testTarget(name: "UnicastDNSSDTests", dependencies: ["UnicastDNSSD", "DNSWire", "NearbyBasics"], swiftSettings: strict),
        // The discovery proxy's decisions (RFC 8766): which questions it answers and how, the
        // rewriting of link records into the zone, rate limits. Pure machines, no I/O.
        .target(name: "DiscoveryProxyCore", dependencies: ["DNSWire", "NearbyBasics"], swiftSettings: strict),
        .testTarget(
            name: "DiscoveryProxyTests",
            dependencies: [
                "DiscoveryProxyCore", "DiscoveryProxy", "DNSWire", "SystemDNSSD", "UnicastDNSSD", "NearbyBasics", "NearbyMetrics",
                .product(name: "MetricsTestKit", package: "swift-metrics"),
            ],
            swiftSettings: strict),
        // The SRP registrar's decisions (RFC 9665): validating an update (instructions, SIG(0)
        // with an injected verifier), first come first served per key, leases (RFC 9664), limits,
        // saved state. Pure machines, no I/O, no cryptography library.
        .target(name: "SRPRegistrarCore", dependencies: ["DNSWire", "NearbyBasics", "NearbyCrypto"], swiftSettings: strict),
        // Real SRP updates signed with P-256 keys through PeerTrust, checked by the machine.
        .testTarget(
            name: "SRPRegistrarCoreTests", dependencies: ["SRPRegistrarCore", "DNSWire", "PeerTrust", "NearbyBasics"],
            swiftSettings: strict),
        // The SRP registrar on sockets: updates over UDP and TCP, signatures checked with
        // PeerTrust, registrations advertised on the link by the mDNS engine, a state file.
        .target(
            name: "SRPRegistrar",
            dependencies: [
                "SRPRegistrarCore", "DNSWire", "MulticastDNS", "MulticastDNSCore", "PeerTrust", "NearbyBasics", "UnicastDNSSD",
                .product(name: "NIOCore", package: "swift-nio"), .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"), "NearbyMetrics", .product(name: "CoreMetrics", package: "swift-metrics"),
            ],
            swiftSettings: strict),
        .testTarget(
            name: "SRPRegistrarTests",
            dependencies: ["SRPRegistrar", "SRPRegistrarCore", "MulticastDNSCore", "DNSWire", "NearbyMetrics", .product(name: "MetricsTestKit", package: "swift-metrics")],
            swiftSettings: strict),
        // The discovery proxy on sockets: UDP and TCP answers, DNS Push over TLS, the links' mDNS
        // engine, time.
        .target(
            name: "DiscoveryProxy",
            dependencies: [
                "DiscoveryProxyCore", "DNSWire", "MulticastDNS", "MulticastDNSCore", "SystemDNSSD", "NetworkPlatform", "NearbyBasics",
                "PeerTrust", "UnicastDNSSD",
                .product(name: "Logging", package: "swift-log"),
                "NearbyMetrics", .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
            ],
            swiftSettings: strict
        ),
        // OpenSSL 3 (libcrypto, libssl) for identities and X.509 trust.
        .systemLibrary(name: "COpenSSL", pkgConfig: "openssl", providers: [.apt(["libssl-dev"])]),
        // Small C functions over OpenSSL (what its macros and callbacks hide); DER in, DER out.
        .target(name: "CPeerTrust", dependencies: ["COpenSSL"]),
        // Peer identity (key, certificate, peer ID, persistence) and X.509 trust evaluation.
        .target(name: "PeerTrust", dependencies: ["NearbyBasics", "NearbyCrypto", "CPeerTrust", "NetworkPlatform"], swiftSettings: strict),
        .testTarget(name: "PeerTrustTests", dependencies: ["PeerTrust", "NearbyCrypto"], resources: [.copy("Fixtures")], swiftSettings: strict),
        // One authenticated channel between two peers: TLS 1.3 judged by PeerTrust, WebSocket,
        // JSON-RPC 2.0, the initialize handshake, invitations and pairing.
        // The protocol's core: JSON, JSON-RPC, the handshake, pairing, invitations, the session
        // and stream machines. Bytes and time in, actions out: no sockets, no TLS, no OpenSSL,
        // no logging library (NIOCore only for its byte buffers), as MulticastDNSCore is for mDNS.
        .target(
            name: "PeerProtocol",
            dependencies: ["NearbyBasics", "NearbyCrypto", .product(name: "NIOCore", package: "swift-nio")],
            swiftSettings: strict
        ),
        .target(
            name: "PeerConnection",
            dependencies: [
                "PeerProtocol", "PeerTrust", "NearbyBasics", "NearbyCrypto", "NetworkPlatform",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "NIOWebSocket", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "Logging", package: "swift-log"),
                "NearbyMetrics", .product(name: "CoreMetrics", package: "swift-metrics"),
            ],
            swiftSettings: strict
        ),
        .testTarget(
            name: "PeerConnectionTests",
            dependencies: [
                "PeerConnection", "PeerProtocol", "PeerTrust", "NearbyBasics", "NearbyCrypto",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "NIOWebSocket", package: "swift-nio"),
                "NearbyMetrics", .product(name: "MetricsTestKit", package: "swift-metrics"),
            ],
            swiftSettings: strict
        ),
        // Real TLS connections on 127.0.0.1 (no multicast, no lab): trust, handshake and framing end to end.
        .testTarget(
            name: "ConnectionLoopbackTests",
            dependencies: [
                "PeerConnection", "PeerTrust", .product(name: "NIOCore", package: "swift-nio"), .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: strict),
        // Files over a connection's streams: the offer, the answer, resume, the SHA-256 check.
        .target(
            name: "FileTransfer",
            dependencies: [
                "PeerConnection", "PeerTrust", "NearbyBasics", "CNearbySocket", .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ],
            swiftSettings: strict),
        .testTarget(
            name: "FileTransferTests",
            dependencies: ["FileTransfer", "PeerConnection", "PeerTrust", .product(name: "NIOCore", package: "swift-nio")],
            swiftSettings: strict),
        // Discovered endpoints in, one connection per peer out: the broker's rules as a pure
        // state machine, and the async shell that performs them.
        .target(
            name: "ConnectionBroker",
            dependencies: [
                "DNSWire", "PeerConnection", "PeerTrust", "NearbyDiscovery", "NearbyBasics", .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"), "NearbyMetrics", .product(name: "CoreMetrics", package: "swift-metrics"),
            ],
            swiftSettings: strict),
        .testTarget(
            name: "ConnectionBrokerTests",
            dependencies: [
                "ConnectionBroker", "PeerConnection", "PeerTrust", "NearbyDiscovery", "NearbyBasics", "DNSWire", "NearbyMetrics",
                .product(name: "MetricsTestKit", package: "swift-metrics"),
            ],
            swiftSettings: strict),
        // The front door: the everyday jobs (advertise, also through a registrar; browse; connect
        // to the nearest or a named peer; serve) as calls with safe defaults, over the full
        // modules below.
        .target(
            name: "Nearby",
            dependencies: [
                "ConnectionBroker", "DNSPushTLS", "DNSWire", "NearbyBasics", "NearbyDiscovery", "NetworkPlatform", "PeerConnection", "PeerTrust",
                "UnicastDNSSD", .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strict),
        // The front door's own logic without the network: its errors, its events' bound, and a
        // server answering requests over loopback TCP.
        .testTarget(name: "NearbyTests", dependencies: ["Nearby", "PeerConnection", "PeerTrust", "NearbyBasics"], swiftSettings: strict),
        // libqrencode, for QR codes of invitation links.
        .systemLibrary(name: "CQREncode", pkgConfig: "libqrencode", providers: [.apt(["libqrencode-dev"])]),
        // A text as a QR code, drawn for a terminal (half blocks or ASCII) or as a PNG; C kept inside.
        .target(name: "NearbyQRCode", dependencies: ["CQREncode", "NearbyBasics"], swiftSettings: strict),
        .testTarget(name: "NearbyQRCodeTests", dependencies: ["NearbyQRCode"], swiftSettings: strict),
        // The command-line tool.
        .executableTarget(
            name: "nearby",
            dependencies: [
                "DNSWire", "NearbyDiscovery", "UnicastDNSSD", "DNSPushTLS", "PeerTrust", "PeerConnection", "ConnectionBroker", "NearbyBasics", "NearbyQRCode", "FileTransfer", "CNearbySocket", "NetworkPlatform",
                "PacketCapture", "DiscoveryProxy", "DiscoveryProxyCore", "SRPRegistrar", "SRPRegistrarCore",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                "NearbyMetrics", .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ],
            swiftSettings: strict
        ),
        .testTarget(
            name: "NearbyCLITests", dependencies: ["nearby", "DNSWire", "NearbyDiscovery", "UnicastDNSSD", "DNSPushTLS", "PeerTrust", "PeerConnection", "ConnectionBroker", "PacketCapture", .product(name: "Logging", package: "swift-log"),
                "NearbyMetrics", .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "MetricsTestKit", package: "swift-metrics"), .product(name: "NIOCore", package: "swift-nio"), .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio")],
            swiftSettings: strict),
        // Capture files as `nearby decode` reads them: pcap and pcapng, the link layers mDNS is
        // captured on (Ethernet and VLANs, Linux cooked, BSD loopback, raw IP, 802.11 and
        // radiotap), IP fragments reassembled. Bytes in, frames out: no I/O, no dependencies.
        .target(name: "PacketCapture", swiftSettings: strict),
        // Synthesized captures for every rule, and the lab's real captures (Fixtures/captures,
        // made by Tools/captures/make) compared with tshark's dissection of the same files.
        .testTarget(name: "PacketCaptureTests", dependencies: ["PacketCapture", "NearbyCrypto"], exclude: ["Fixtures"], swiftSettings: strict),
        // Tests that cross the virtual LAN built by Tools/lab. Tools/test runs them inside a lab.
        .testTarget(name: "LabTests", dependencies: ["DNSWire", "PeerTrust"], swiftSettings: strict),
        // Publishes many instances from one process, for Tools/bench/discovery.
        .executableTarget(
            name: "nearby-mass-advertise",
            dependencies: ["NearbyDiscovery"],
            path: "Tools/bench/MassAdvertise",
            swiftSettings: strict
        ),
        // The Swift examples of README and Documentation/Swift.md, built as they are shown (NearbyCLITests checks the documents against them).
        .executableTarget(name: "readme-advertise", dependencies: ["Nearby"], path: "Tools/examples/Advertise", swiftSettings: strict),
        .executableTarget(name: "readme-browse", dependencies: ["Nearby"], path: "Tools/examples/Browse", swiftSettings: strict),
        .executableTarget(name: "readme-nearest", dependencies: ["Nearby"], path: "Tools/examples/Nearest", swiftSettings: strict),
        .executableTarget(name: "readme-serve", dependencies: ["Nearby"], path: "Tools/examples/Serve", swiftSettings: strict),
        .executableTarget(name: "readme-register", dependencies: ["Nearby"], path: "Tools/examples/Register", swiftSettings: strict),
        .executableTarget(
            name: "readme-discovery", dependencies: ["NearbyDiscovery"], path: "Tools/examples/Discovery", swiftSettings: strict),
        .executableTarget(
            name: "readme-connection", dependencies: ["PeerConnection", "PeerTrust"], path: "Tools/examples/Connection", swiftSettings: strict),
        .executableTarget(
            name: "readme-broker", dependencies: ["ConnectionBroker", "NearbyDiscovery", "PeerConnection", "PeerTrust"],
            path: "Tools/examples/Broker", swiftSettings: strict),
        .executableTarget(
            name: "readme-pairing", dependencies: ["PeerConnection", "PeerTrust"], path: "Tools/examples/Pairing", swiftSettings: strict),
        .executableTarget(
            name: "readme-streams", dependencies: ["FileTransfer", "PeerConnection", "PeerTrust", .product(name: "NIOCore", package: "swift-nio")],
            path: "Tools/examples/Streams", swiftSettings: strict),
        .executableTarget(name: "readme-trust", dependencies: ["PeerTrust"], path: "Tools/examples/Trust", swiftSettings: strict),
        .executableTarget(name: "readme-wire", dependencies: ["DNSWire"], path: "Tools/examples/Wire", swiftSettings: strict),
        // Channel benchmark: `Tools/bench/connection` runs it against `nearby serve` and compares with Python websockets.
        .executableTarget(
            name: "nearby-connection-bench", dependencies: ["PeerConnection", "PeerTrust", .product(name: "NIOCore", package: "swift-nio")], path: "Tools/bench/ConnectionBenchmark", swiftSettings: strict),
        // JSON benchmark: the channel's own JSON codec against Foundation's, on the channel's messages (`Tools/bench/json`).
        .executableTarget(name: "nearby-json-bench", dependencies: ["PeerConnection"], path: "Tools/bench/JSONBenchmark", swiftSettings: strict),
        // Codec benchmark: `Tools/bench/codec` builds it in release mode and compares with python-zeroconf.
        .executableTarget(
            name: "nearby-codec-bench",
            dependencies: ["DNSWire"],
            path: "Tools/bench/CodecBenchmark",
            swiftSettings: strict
        ),
    ],
    swiftLanguageModes: [.v6]
)
