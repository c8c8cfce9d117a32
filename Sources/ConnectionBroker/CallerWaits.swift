import PeerTrust

/// The callers waiting on a broker, as a pure value: who waits for a connection to which peer
/// and until when, and who waits for news from discovery until when. The shell keeps one
/// continuation per ticket; this says which tickets are answered, and how, as events and the
/// clock come (NIO's state machines hold their continuations the same way). Times are the
/// shell's clock readings.
struct CallerWaits: Sendable {
    typealias Ticket = Int

    /// When each caller waiting for a peer gives up, by peer and ticket.
    private var forPeer: [PeerID: [Ticket: Duration]] = [:]
    /// When each caller waiting for news gives up.
    private var forNews: [Ticket: Duration] = [:]
    private var next: Ticket = 0

    /// Whether anyone waits.
    var isEmpty: Bool { forPeer.isEmpty && forNews.isEmpty }

    /// The earliest time a caller gives up.
    var nextDeadline: Duration? {
        [forPeer.values.flatMap(\.values).min(), forNews.values.min()].compactMap { $0 }.min()
    }

    /// A new ticket, for a caller whose wait someone else answers (a race, a survey).
    mutating func issue() -> Ticket {
        defer { next += 1 }
        return next
    }

    /// A caller begins to wait for a connection to `peer`, giving up at `end`.
    mutating func waitForPeer(_ peer: PeerID, until end: Duration) -> Ticket {
        let ticket = issue()
        forPeer[peer, default: [:]][ticket] = end
        return ticket
    }

    /// A caller begins to wait for news from discovery (something announced), until `end`.
    mutating func waitForNews(until end: Duration) -> Ticket {
        let ticket = issue()
        forNews[ticket] = end
        return ticket
    }

    /// `peer` is connected, or refused us for good: every caller waiting for it is answered.
    mutating func answered(_ peer: PeerID) -> [Ticket] {
        forPeer.removeValue(forKey: peer).map { Array($0.keys).sorted() } ?? []
    }

    /// Something was announced: every caller waiting for news is answered.
    mutating func news() -> [Ticket] {
        defer { forNews = [:] }
        return forNews.keys.sorted()
    }

    /// The peer asks someone whether to let us in until `end`: its callers wait at least that
    /// long (never less than before).
    mutating func extend(_ peer: PeerID, to end: Duration) {
        guard let tickets = forPeer[peer] else { return }
        for (ticket, deadline) in tickets where end > deadline { forPeer[peer]?[ticket] = end }
    }

    /// The callers whose time is up at `time`: those waiting for a peer (they give up) and
    /// those waiting for news (they look again).
    mutating func due(at time: Duration) -> (gaveUp: [(peer: PeerID, ticket: Ticket)], news: [Ticket]) {
        var gaveUp: [(peer: PeerID, ticket: Ticket)] = []
        for (peer, tickets) in forPeer {
            for (ticket, end) in tickets where end <= time {
                gaveUp.append((peer, ticket))
                forPeer[peer]?[ticket] = nil
            }
            if forPeer[peer]?.isEmpty == true { forPeer[peer] = nil }
        }
        let news = forNews.filter { $0.value <= time }.keys.sorted()
        for ticket in news { forNews[ticket] = nil }
        return (gaveUp.sorted { $0.ticket < $1.ticket }, news)
    }

    /// The broker stops: every caller is answered.
    mutating func shutDown() -> (peers: [Ticket], news: [Ticket]) {
        defer {
            forPeer = [:]
            forNews = [:]
        }
        return (forPeer.values.flatMap(\.keys).sorted(), forNews.keys.sorted())
    }
}
