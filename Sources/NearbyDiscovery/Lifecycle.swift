public import ServiceLifecycle

/// Discovery as a long-running service (swift-service-lifecycle). Its ``run()`` is the work:
/// the embedded engine's receiver, interface watch and timekeeper run as children of it, until
/// the group shuts down gracefully (SIGTERM, say) or is cancelled; then every advertisement is
/// withdrawn with goodbyes and the network released, as ``shutdown()`` does.
///
/// ```swift
/// let discovery = try await NearbyDiscovery.prepare()
/// let group = ServiceGroup(configuration: .init(
///     services: [discovery, myService], gracefulShutdownSignals: [.sigterm, .sigint], logger: logger))
/// try await group.run()   // returns after the goodbyes went out
/// ```
///
/// `myService` advertises and browses from its own `run()`, while discovery's runs. A group
/// shuts its services down in reverse order: list discovery before the services that use it (a
/// ``ConnectionBroker``, a listener), so that it is the last to go. Discovery made with
/// ``start(backend:hostName:interfaces:logger:wideArea:multicast:)`` already works in a task of
/// its own (advertise at once, then hand it to a group): its `run()` waits for the shutdown.
extension NearbyDiscovery: Service {
    public func run() async throws {
        await withDiscardingTaskGroup { group in
            group.addTask { await self.backend.run() }
            // Graceful shutdown and cancellation end the wait alike: both mean "stop now".
            try? await gracefulShutdown()
            // The goodbyes; the backend's work ends with them.
            await shutdown()
            group.cancelAll()
        }
    }
}
