public import ServiceLifecycle

/// The broker as a long-running service (swift-service-lifecycle): it connects until its
/// `ServiceGroup` shuts down gracefully or is cancelled, then withdraws its advertisement,
/// stops dialing and closes every connection (1001, going away), as ``shutdown()`` does.
/// List the discovery it uses before it in the group, so that discovery goes last.
extension ConnectionBroker: Service {
    public func run() async throws {
        try? await gracefulShutdown()
        await shutdown()
    }
}
