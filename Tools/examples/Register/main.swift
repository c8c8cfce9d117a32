import Nearby

// In a container: register with `nearby registrar` on its host (the address is an argument).
let registrar = CommandLine.arguments.dropFirst().first ?? "172.17.0.1"
do {
    let service = try await advertise("Container", type: "_openagents._tcp", port: 9099, registrar: registrar)
    print("registered as \(service.name) with \(registrar); Ctrl-C to stop")
    await interrupted()
    await service.withdraw()                                 // removed: the LAN sees it leave
} catch {
    fail("cannot register: \(error)")
}
