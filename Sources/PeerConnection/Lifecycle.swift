public import ServiceLifecycle

/// A listener as a long-running service (swift-service-lifecycle): it accepts until its
/// `ServiceGroup` shuts down gracefully or is cancelled, then stops accepting and closes every
/// open connection with 1001 ("going away"), as ``close()`` does.
extension PeerListener: Service {
    public func run() async throws {
        try? await gracefulShutdown()
        await close()
    }
}
