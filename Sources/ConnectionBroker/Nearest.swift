public import PeerTrust

/// A candidate for "the nearest peer", with what measuring it found.
public struct MeasuredPeer: Hashable, Sendable {
    public var peerID: PeerID
    public var name: String
    /// The round-trip time of its best address; nil when no address answered.
    public var rtt: Duration?
    /// The address that answered fastest.
    public var address: String?

    public init(peerID: PeerID, name: String, rtt: Duration?, address: String? = nil) {
        self.peerID = peerID
        self.name = name
        self.rtt = rtt
        self.address = address
    }
}

/// Which measured peer is the nearest, as pure functions.
enum Nearest {
    /// RTTs within this fraction of the best one are ties ...
    static let tieFraction = 0.10
    /// ... or within this much, whichever is larger.
    static let tieFloor: Duration = .milliseconds(1)

    /// Gathering goes on after the first answer ...
    static let gatherAfterFirst: Duration = .milliseconds(100)

    /// When to stop gathering candidates and measure them: `window` after browsing began
    /// (responders delay shared answers 20–120 ms after the query, RFC 6762 §6, so a far peer
    /// answering early must not hide a near one answering late), and at least 100 ms after the
    /// first answer (a browse that began long ago still gives late answers a chance), never
    /// after the caller's deadline.
    static func gatheringEnds(browseStarted: Duration, firstAnswer: Duration, window: Duration, deadline: Duration) -> Duration {
        min(max(browseStarted + window, firstAnswer + gatherAfterFirst), deadline)
    }

    /// The lowest RTT wins; RTTs within 10 % or 1 ms (whichever is larger) of the lowest are ties,
    /// and ties go to the smaller peer ID, so that every peer that measures alike picks alike.
    /// Peers that did not answer are never picked.
    static func pick(_ candidates: [MeasuredPeer]) -> MeasuredPeer? {
        let answered = candidates.filter { $0.rtt != nil }
        guard let best = answered.compactMap(\.rtt).min() else { return nil }
        let margin = max(best * tieFraction, tieFloor)
        return answered.filter { ($0.rtt ?? .zero) <= best + margin }.min { $0.peerID < $1.peerID }
    }

    /// Candidates in the order to show them: nearest first, then by RTT, unanswered last.
    static func ranked(_ candidates: [MeasuredPeer]) -> [MeasuredPeer] {
        let chosen = pick(candidates)
        return candidates.sorted { a, b in
            if a.peerID == chosen?.peerID { return true }
            if b.peerID == chosen?.peerID { return false }
            switch (a.rtt, b.rtt) {
            case (let x?, let y?): return x == y ? a.peerID < b.peerID : x < y
            case (.some, nil): return true
            case (nil, .some): return false
            case (nil, nil): return a.peerID < b.peerID
            }
        }
    }
}

/// The order and timing of dials to one peer's addresses, happy-eyeballs style (RFC 8305):
/// families alternate, IPv6 first, each attempt `stagger` after the one before; the first to
/// succeed wins and the others are abandoned.
enum DialPlan {
    static let stagger: Duration = .milliseconds(30)
    /// Dials (and measurements) in flight at once, across all peers.
    static let concurrencyLimit = 8

    static func schedule(_ addresses: [PeerAddress]) -> [(address: PeerAddress, after: Duration)] {
        var seen: Set<PeerAddress> = []
        let unique = addresses.filter { seen.insert($0).inserted }
        let v6 = unique.filter(\.isIPv6)
        let v4 = unique.filter { !$0.isIPv6 }
        var ordered: [PeerAddress] = []
        for index in 0..<max(v6.count, v4.count) {
            if index < v6.count { ordered.append(v6[index]) }
            if index < v4.count { ordered.append(v4[index]) }
        }
        return ordered.enumerated().map { ($0.element, stagger * $0.offset) }
    }
}
