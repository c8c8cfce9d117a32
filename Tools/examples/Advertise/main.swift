import Nearby

do {
    let service = try await advertise("Build Box", type: "_openagents._tcp", port: 9099, info: ["version": "0.2.2"])
    print("advertising as \(service.name); Ctrl-C to stop")
    await interrupted()                                      // SIGINT or SIGTERM
    await service.withdraw()                                 // goodbyes, so browsers see it leave at once
} catch {
    fail("cannot advertise: \(error)")                      // on stderr, exit status 1
}
