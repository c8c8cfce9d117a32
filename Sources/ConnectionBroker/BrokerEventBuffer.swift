import NearbyBasics
import PeerConnection
import PeerTrust

/// The policy of ``ConnectionBroker/events`` for an application that reads slowly or not at
/// all: what waits is bounded by the peers, not by time.
///
/// - `connected` always waits (it carries a live connection), unless its `disconnected` comes
///   before the application read it: then neither is reported (the connection is already over).
/// - `dialFailed` waits once per peer and `skipped` once per instance name, the newest reason
///   winning.
/// - Refusals (`rejected`, `strangers`, refused invitations) wait one by one up to
///   ``ConnectionBroker/noticesWaiting``; beyond that they are folded into one `strangers`
///   summary (each `rejected` counted in ``StrangerSummary/failedUnreported``).
struct BrokerEventBuffer: EventBuffer {
    private enum Key: Hashable {
        case connection(ConnectionID)
        case dial(PeerID)
        case skipped(String)

        /// Whether a newer event with this key takes the waiting one's place (a connection's
        /// `connected` comes once).
        var replacesWaiting: Bool {
            if case .connection = self { false } else { true }
        }
    }

    private var waiting: [Int: BrokerEvent] = [:]
    private var first = 0
    private var next = 0
    private var keyed: [Key: Int] = [:]
    private var summaryAt: Int?
    private var noticesWaiting = 0
    private let limit: Int
    private(set) var merged = 0

    init(limit: Int = ConnectionBroker.noticesWaiting) {
        self.limit = max(1, limit)
    }

    var count: Int { waiting.count }

    private static func key(_ event: BrokerEvent) -> Key? {
        switch event {
        case .connected(let connection, _): .connection(connection.id)
        case .dialFailed(let peer, _): .dial(peer)
        case .skipped(let name, _): .skipped(name)
        default: nil
        }
    }

    private static func isNotice(_ event: BrokerEvent) -> Bool {
        switch event {
        case .rejected, .strangers: true
        case .invitation(let attempt): if case .refused = attempt.outcome { true } else { false }
        default: false
        }
    }

    private mutating func append(_ event: BrokerEvent) {
        if let key = Self.key(event) { keyed[key] = next }
        waiting[next] = event
        next += 1
    }

    mutating func push(_ event: BrokerEvent) {
        if case .disconnected(_, let id, _) = event, let at = keyed[.connection(id)] {
            // Connected and gone before the application looked: nothing to tell.
            waiting[at] = nil
            keyed[.connection(id)] = nil
            merged += 2
            return
        }
        if let key = Self.key(event), key.replacesWaiting, let at = keyed[key] {
            waiting[at] = event
            merged += 1
            return
        }
        guard Self.isNotice(event) else { return append(event) }
        if noticesWaiting < limit, summaryAt == nil {
            noticesWaiting += 1
            return append(event)
        }
        var sum = StrangerSummary(interval: .zero)
        if let at = summaryAt, case .strangers(let so)? = waiting[at] { sum = so }
        if case .strangers(let more) = event { sum = sum.adding(more) } else { sum.failedUnreported += 1 }
        if summaryAt == nil {
            summaryAt = next
            next += 1
        }
        if let at = summaryAt { waiting[at] = .strangers(sum) }
        merged += 1
    }

    mutating func pop() -> BrokerEvent? {
        while first < next {
            let at = first
            first += 1
            guard let event = waiting.removeValue(forKey: at) else { continue }
            if let key = Self.key(event), keyed[key] == at { keyed[key] = nil }
            if at == summaryAt {
                summaryAt = nil
            } else if Self.isNotice(event) {
                noticesWaiting -= 1
            }
            return event
        }
        return nil
    }
}
