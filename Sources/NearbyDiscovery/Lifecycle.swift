public import ServiceLifecycle

/// Discovery as a long-running service (swift-service-lifecycle): put it in a `ServiceGroup`
/// and it runs until the group shuts down gracefully (SIGTERM, say) or is cancelled, then
/// withdraws every advertisement with goodbyes and releases the network, as ``shutdown()``
/// does.
///
/// ```swift
/// let discovery = try await NearbyDiscovery.start()
/// _ = try await discovery.advertise("Build Box", type: type, port: 9099)
/// let group = ServiceGroup(configuration: .init(
///     services: [discovery], gracefulShutdownSignals: [.sigterm, .sigint], logger: logger))
/// try await group.run()   // returns after the goodbyes went out
/// ```
///
/// A group shuts its services down in reverse order: list discovery before the services that
/// use it (a ``ConnectionBroker``, a listener), so that it is the last to go.
extension NearbyDiscovery: Service {
    public func run() async throws {
        // Graceful shutdown and cancellation end the wait alike: both mean "stop now".
        try? await gracefulShutdown()
        await shutdown()
    }
}
