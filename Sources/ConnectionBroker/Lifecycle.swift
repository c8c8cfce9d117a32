public import ServiceLifecycle

/// The broker as a long-running service (swift-service-lifecycle): ``ConnectionBroker/run()``
/// is its work, until its `ServiceGroup` shuts down gracefully or is cancelled; then it withdraws
/// its advertisement, stops dialing and closes every connection (1001, going away). Make it with
/// ``ConnectionBroker/prepare(_:discovery:)`` (``ConnectionBroker/start(_:discovery:)`` runs it
/// already), and list the discovery it uses before it in the group, so that discovery goes last.
extension ConnectionBroker: Service {}
