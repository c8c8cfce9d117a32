import Nearby

do {
    for await change in try await browse("_openagents._tcp") {   // ends on Ctrl-C
        switch change {
        case .found(let service), .updated(let service): print(service.name, service.addresses, service.port, service.info)
        case .lost(let service): print("gone:", service.name)
        }
    }
} catch {
    fail("cannot browse: \(error)")
}
