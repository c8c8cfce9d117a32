import NearbyBasics
import Testing

@testable import NearbyDiscovery

/// A backend whose work is its run(): it records starting and ending, and ends at shutdown().
final class WorkingBackend: RecordingBackend, @unchecked Sendable {
    struct State {
        var started = false
        var ended = false
        var shutdowns = 0
    }
    let state = Locked(State())
    private let (stopped, stop) = AsyncStream<Never>.makeStream()

    override func run() async {
        state.withLockedValue { $0.started = true }
        for await _ in stopped {}
        state.withLockedValue { $0.ended = true }
    }
    override func shutdown() async {
        state.withLockedValue { $0.shutdowns += 1 }
        stop.finish()
    }
}

@Suite("discovery's run() is its work")
struct DiscoveryRunTests {
    @Test("run() runs the backend's work as its child; cancelling it shuts discovery down (goodbyes) and ends the work")
    func runOwnsTheWork() async throws {
        let backend = WorkingBackend()
        let discovery = NearbyDiscovery(backend: backend)
        let running = Task { try await discovery.run() }
        // The backend's work starts as a child of run() (no sleeps: wait for the report).
        while !backend.state.withLockedValue({ $0.started }) { await Task.yield() }
        let endedEarly = backend.state.withLockedValue { $0.ended }
        #expect(!endedEarly)
        running.cancel()
        try await running.value
        let state = backend.state.withLockedValue { $0 }
        #expect(state.ended)
        #expect(state.shutdowns == 1)
    }

    @Test("a backend without work of its own (the daemon's) runs nothing; run() still ends with the shutdown")
    func noWork() async throws {
        let discovery = NearbyDiscovery(backend: RecordingBackend())
        let running = Task { try await discovery.run() }
        running.cancel()
        try await running.value
    }
}
