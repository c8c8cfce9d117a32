public import NearbyBasics

/// The policy of every browse stream: browse events that wait for a slow application are merged
/// per service, the latest state winning, so at most one event per service (and one for the
/// browse's own state) waits, however busy the network. What the application reads still tells
/// it the truth about what it has seen:
///
/// - `found` then `updated` waits as `found` with the newest resolution; `updated` then
///   `updated` as the newer `updated`;
/// - a service the application has not been told of that leaves before it reads (`found` then
///   `lost`) is never reported; one it knows of is reported `lost`;
/// - a service it knows of that leaves and comes back before it reads (`lost` then `found`) is
///   reported `found` again, with the new resolution;
/// - `interrupted` then `restored` cancel out; otherwise the newer of the two waits.
public struct BrowseEventBuffer: EventBuffer {
    private enum Slot: Hashable {
        case service(DiscoveredService)
        case browse
    }

    private var order = FIFO<Slot>()
    private var placed: Set<Slot> = []
    private var waiting: [Slot: BrowseEvent] = [:]
    /// The services the application was told of (found or updated read, lost not yet read).
    private var told: Set<DiscoveredService> = []
    public private(set) var merged = 0

    public init() {}

    public var count: Int { waiting.count }

    public mutating func push(_ event: BrowseEvent) {
        let slot: Slot = event.service.map { .service($0) } ?? .browse
        guard let old = waiting[slot] else {
            waiting[slot] = event
            if placed.insert(slot).inserted { order.append(slot) }
            return
        }
        merged += 1
        let combined = Self.combine(old, event, told: event.service.map { told.contains($0) } ?? false)
        if combined == nil { merged += 1 }
        waiting[slot] = combined
    }

    /// The one event that says what `old` followed by `new` says, or nil when they cancel out.
    private static func combine(_ old: BrowseEvent, _ new: BrowseEvent, told: Bool) -> BrowseEvent? {
        switch (old, new) {
        case (.interrupted, .restored): return nil
        case (_, .interrupted), (_, .restored): return new
        case (_, .lost): return told ? new : nil
        case (.updated, .updated) where told: return new
        case (_, .found(let service, let resolved)), (_, .updated(let service, let resolved)): return .found(service, resolved)
        }
    }

    public mutating func pop() -> BrowseEvent? {
        while let slot = order.popFirst() {
            placed.remove(slot)
            guard let event = waiting.removeValue(forKey: slot) else { continue }
            switch event {
            case .found(let service, _), .updated(let service, _): told.insert(service)
            case .lost(let service): told.remove(service)
            case .interrupted, .restored: break
            }
            return event
        }
        return nil
    }
}

extension ServiceType {
    /// The policy of service-type streams: each type is reported once, so at most one event per
    /// type waits for the application.
    static var eachOnce: LatestPerKeyBuffer<ServiceType, ServiceType> { LatestPerKeyBuffer(key: { $0 }) }
}
