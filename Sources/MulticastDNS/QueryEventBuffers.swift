public import DNSWire
public import NearbyBasics

/// What a query event is about: one record (its name and data) on one interface.
public struct QueryEventKey: Hashable, Sendable {
    public var name: DomainName
    public var data: RecordData
    public var interface: NetworkInterface

    public init(_ event: QueryEvent) {
        switch event {
        case .added(let record, let interface), .removed(let record, let interface):
            name = record.name
            data = record.data
            self.interface = interface
        }
    }
}

/// The policy of a continuous query's events (``MulticastDNSEngine/query(name:type:)``): at most
/// one event waits per record and interface, the newest, so a reader that falls behind reads
/// where each record stands now (an arrival then a departure reads as the departure) and never
/// loses one. What waits is bounded by the records the link has shown.
public typealias QueryEventBuffer = LatestPerKeyBuffer<QueryEvent, QueryEventKey>

extension LatestPerKeyBuffer where Element == QueryEvent, Key == QueryEventKey {
    /// The newest event per record and interface.
    public init() { self.init(key: QueryEventKey.init) }
}

/// The policy of a query group's batches (``MulticastDNSEngine/openQueryGroup()``): the events of
/// the batches a reader has not read are kept as by ``QueryEventBuffer`` (the newest per record
/// and interface) and read as one batch, in the order their records first came.
public typealias QueryBatchBuffer = LatestPerKeyBatchBuffer<QueryEvent, QueryEventKey>

extension LatestPerKeyBatchBuffer where Item == QueryEvent, Key == QueryEventKey {
    /// The newest event per record and interface.
    public init() { self.init(key: QueryEventKey.init) }
}
