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
///
/// The buffer sees an event only through its ``BrokerEventRole``, so the policy is tested with
/// events that need no live connection.
struct BrokerEventBuffer<Event: BufferedBrokerEvent>: EventBuffer {
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

    private var waiting: [Int: Event] = [:]
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

    private static func key(_ event: Event) -> Key? {
        switch event.bufferRole {
        case .opened(let id): .connection(id)
        case .failedDial(let peer): .dial(peer)
        case .skipped(let name): .skipped(name)
        default: nil
        }
    }

    private static func isNotice(_ event: Event) -> Bool {
        switch event.bufferRole {
        case .notice, .summary: true
        default: false
        }
    }

    private mutating func append(_ event: Event) {
        if let key = Self.key(event) { keyed[key] = next }
        waiting[next] = event
        next += 1
    }

    mutating func push(_ event: Event) {
        if case .closed(let id) = event.bufferRole, let at = keyed[.connection(id)] {
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
        if let at = summaryAt, let so = waiting[at], case .summary(let earlier) = so.bufferRole { sum = earlier }
        if case .summary(let more) = event.bufferRole { sum = sum.adding(more) } else { sum.failedUnreported += 1 }
        if summaryAt == nil {
            summaryAt = next
            next += 1
        }
        if let at = summaryAt { waiting[at] = Event.strangers(sum) }
        merged += 1
    }

    mutating func pop() -> Event? {
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

/// What ``BrokerEventBuffer`` needs to know of an event to apply its policy.
enum BrokerEventRole {
    /// A live connection the application must see (unless its end comes first).
    case opened(ConnectionID)
    /// That connection's end.
    case closed(ConnectionID)
    /// A peer's failed dial: the newest waits.
    case failedDial(PeerID)
    /// An instance skipped: the newest reason waits.
    case skipped(String)
    /// A refusal, counted toward the limit and summed up beyond it.
    case notice
    /// A summary of refusals, merged with the buffer's own.
    case summary(StrangerSummary)
    /// Anything else waits as it is.
    case other
}

/// An event ``BrokerEventBuffer`` can hold: it names its role and can be a summary.
protocol BufferedBrokerEvent: Sendable {
    var bufferRole: BrokerEventRole { get }
    static func strangers(_ summary: StrangerSummary) -> Self
}

extension BrokerEvent: BufferedBrokerEvent {
    var bufferRole: BrokerEventRole {
        switch self {
        case .connected(let connection, _): .opened(connection.id)
        case .disconnected(_, let id, _): .closed(id)
        case .dialFailed(let peer, _): .failedDial(peer)
        case .skipped(let name, _): .skipped(name)
        case .rejected: .notice
        case .strangers(let summary): .summary(summary)
        case .invitation(let attempt): if case .refused = attempt.outcome { .notice } else { .other }
        }
    }
}
