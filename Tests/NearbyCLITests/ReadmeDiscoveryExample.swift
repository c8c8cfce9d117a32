import NearbyDiscovery

/// The README's NearbyDiscovery example, compiled with the tests so that it stays true to the
/// API. It is not run here (it needs a network); the lab tests exercise the same calls through
/// the CLI.
func readmeDiscoveryExample() async throws {
    let discovery = try await NearbyDiscovery.start()
    let type = try ServiceType(parsing: "_openagents._tcp")
    var info = DiscoveryInfo()
    try info.set("version", to: "0.2.2")
    let ad = try await discovery.advertise("Build Box", type: type, port: 9099, info: info)
    print(ad.name)
    try info.set("version", to: "0.2.3")
    await ad.update(info: info)

    for await event in discovery.browse(type, resolve: true) {
        switch event {
        case .found(let service, let resolved), .updated(let service, let resolved):
            print(service.name, service.interface, resolved?.host ?? "", resolved?.port ?? 0)
        case .lost(let service):
            print("gone", service.name)
        case .interrupted(let error):
            print("paused:", error)
        case .restored:
            print("watching again")
        }
    }
    let one = try await discovery.resolve("Build Box", type: type, timeout: .seconds(5))
    print(one.addresses)
    await ad.cancel()
    await discovery.shutdown()
}
