import Nearby

do {
    let server = try await serve("Build Box", type: "_openagents._tcp", port: 9099) { request in
        request.method == "hello" ? #"{"greeting": "hello, \#(request.peerName)"}"# : nil   // nil: no such method
    }
    print("serving as \(server.name) on port \(server.port); peers pin \(server.peerID)")
    for await event in server.events { print(event) }      // ends on Ctrl-C, after the goodbyes
} catch {
    fail("cannot serve: \(error)")
}
