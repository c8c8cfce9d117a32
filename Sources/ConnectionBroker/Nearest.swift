public import PeerTrust

/// A peer on the link as discovery shows it, for listings such as `nearby peers`.
public struct DiscoveredPeer: Hashable, Sendable {
    public var name: String
    /// From TXT `id`; nil when absent or not a peer ID.
    public var peerID: PeerID?
    public var addresses: [PeerAddress]
    public var port: Int
    /// TXT `pv`, as announced.
    public var protocolVersion: String?
    /// Whether the broker would connect to it; when not, `reason` says why.
    public var compatible: Bool
    public var reason: String?
    /// The round-trip time of its best address (nil: not measured, or no answer).
    public var rtt: Duration?
}

/// A candidate for "the nearest peer", with what measuring it found.
public struct MeasuredPeer: Hashable, Sendable {
    public var peerID: PeerID
    public var name: String
    /// The round-trip time of its best address; nil when no address answered.
    public var rtt: Duration?
    /// The address that answered fastest.
    public var address: String?
    /// Set when measuring stopped before this peer answered because the nearest peer was already
    /// certain: it had not answered within this long, so it is at least this far (`rtt` is nil).
    public var rttExceeds: Duration?

    public init(peerID: PeerID, name: String, rtt: Duration?, address: String? = nil, rttExceeds: Duration? = nil) {
        self.peerID = peerID
        self.name = name
        self.rtt = rtt
        self.address = address
        self.rttExceeds = rttExceeds
    }
}

/// Which measured peer is the nearest, as pure functions.
enum Nearest {
    /// RTTs within this fraction of the best one are ties ...
    static let tieFraction = 0.10
    /// ... or within this much, whichever is larger.
    static let tieFloor: Duration = .milliseconds(1)

    /// Gathering goes on after a first answer that came once the window was over ...
    static let gatherAfterFirst: Duration = .milliseconds(100)

    /// When a nearer peer's answer to the first question can no longer arrive, not counting
    /// the link: `window` after browsing began (responders delay shared answers 20–120 ms, RFC
    /// 6762 §6, so a far peer answering early must not hide a near one answering late). A first
    /// answer that comes after the window (a browse that began long ago, or a slow link) keeps
    /// gathering open 100 ms past it, so later answers still have a chance. Never after the
    /// caller's deadline. ``NearestRace`` adds the link's round trip as it measures it.
    static func answersDue(browseStarted: Duration, firstAnswer: Duration, window: Duration, deadline: Duration) -> Duration {
        let windowEnds = browseStarted + window
        return min(firstAnswer < windowEnds ? windowEnds : firstAnswer + gatherAfterFirst, deadline)
    }

    /// What the link adds to ``answersDue(browseStarted:firstAnswer:window:deadline:)`` while
    /// no candidate has been measured yet (nothing tells how far answers travel).
    static let unmeasuredLink: Duration = .milliseconds(50)

    /// The lowest RTT wins; RTTs within 10 % or 1 ms (whichever is larger) of the lowest are ties,
    /// and ties go to the smaller peer ID, so that every peer that measures alike picks alike.
    /// Peers that did not answer are never picked.
    static func pick(_ candidates: [MeasuredPeer]) -> MeasuredPeer? {
        let answered = candidates.filter { $0.rtt != nil }
        guard let best = answered.compactMap(\.rtt).min() else { return nil }
        return answered.filter { ($0.rtt ?? .zero) <= best + margin(best) }.min { $0.peerID < $1.peerID }
    }

    /// RTTs up to this much above `best` tie with it.
    static func margin(_ best: Duration) -> Duration {
        max(best * tieFraction, tieFloor)
    }

    /// Candidates in the order to show them: nearest first, then by RTT, unanswered last.
    static func ranked(_ candidates: [MeasuredPeer]) -> [MeasuredPeer] {
        let chosen = pick(candidates)
        return candidates.sorted { a, b in
            if a.peerID == chosen?.peerID { return true }
            if b.peerID == chosen?.peerID { return false }
            switch (a.rtt ?? a.rttExceeds, b.rtt ?? b.rttExceeds) {
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

/// What a round-trip probe of one candidate's addresses reports while it runs.
enum ProbeProgress: Hashable, Sendable {
    /// A TCP connection to the address began.
    case dialing(PeerAddress)
    /// The first question went out on it.
    case asked(PeerAddress)
    /// The address gave no answer (refused, closed, timed out, abandoned).
    case silent(PeerAddress)
}

/// The nearest-peer decision as a pure state machine, fed with the candidates as they are
/// announced and with their probes' progress, and asked for its verdict at a time of the
/// broker's clock. Measuring overlaps gathering: a candidate is probed as soon as it is announced.
///
/// Gathering ends once an answer from a nearer peer can no longer arrive: answers to the first
/// question are due by ``answersDue`` where the link takes no time; a peer whose answer comes
/// later than that plus the best RTT measured (and the patience) has a path longer than the
/// best RTT, so it is farther than the best candidate and cannot change the choice. On a LAN
/// that is a fraction of a millisecond past ``answersDue``; on a slow link, as much as the link
/// takes. Until a candidate has been measured, ``Nearest/unmeasuredLink`` stands in for it.
///
/// The verdict comes as soon as it cannot change: gathering is over, the best RTT among the
/// finished candidates is known, and every unfinished candidate has let more than that RTT plus
/// the patience (``Nearest/margin(_:)``, at least ``patience``) pass on each of its addresses
/// without answering, after its first question (or, still connecting, after its SYN: the kernel
/// answers a SYN, so a connection slower than that is a path at least that long). Such a
/// candidate's first sample can only come later than any tie, so it is farther. Then
/// ``Nearest/pick(_:)`` decides among the finished candidates, by the same rule as ever.
struct NearestRace {
    /// An unfinished candidate stays in the running for at least this long past the best RTT,
    /// more than the tie margin itself: a first sample can be slowed by the peer setting up its
    /// end of the connection, and later samples of the same peer may still tie.
    static let patience: Duration = .milliseconds(5)

    enum Event: Hashable, Sendable {
        /// A candidate announced while gathering: it is measured at `addresses` addresses.
        case joined(PeerID, name: String, addresses: Int)
        case progress(PeerID, ProbeProgress)
        /// The candidate's measurement is over (nil: no address answered).
        case measured(PeerID, rtt: Duration?, address: String?)
    }

    enum Verdict: Equatable {
        /// Nothing is certain yet: ask again at this time or at the next event (nil: only at an event).
        case wait(until: Duration?)
        /// The nearest (nil: no candidate answered) and every candidate as measured, nearest first.
        case decided(MeasuredPeer?, [MeasuredPeer])
    }

    private struct Candidate {
        let peerID: PeerID
        let name: String
        let addresses: Int
        /// When each address began: its SYN, then its first question.
        var since: [PeerAddress: Duration] = [:]
        var silent: Set<PeerAddress> = []
        var result: MeasuredPeer?
    }

    /// Answers to the first question are due by then where the link takes no time.
    let answersDue: Duration
    /// The caller's deadline: whatever is known then is the verdict.
    let deadline: Duration
    private var candidates: [Candidate] = []

    init(answersDue: Duration, deadline: Duration) {
        self.answersDue = min(answersDue, deadline)
        self.deadline = deadline
    }

    /// The lowest RTT measured so far.
    private var bestRTT: Duration? {
        candidates.compactMap { $0.result?.rtt }.min()
    }

    /// How long past the best RTT an unfinished candidate is waited for.
    private static func bound(_ best: Duration) -> Duration {
        best + max(Nearest.margin(best), patience)
    }

    /// Candidates join until then: ``answersDue`` plus the link's share (the best RTT and the
    /// patience, or ``Nearest/unmeasuredLink`` before any measurement), never after the deadline.
    var gatheringEnds: Duration {
        min(answersDue + (bestRTT.map(Self.bound) ?? Nearest.unmeasuredLink), deadline)
    }

    /// Whether `peer` has joined.
    func contains(_ peer: PeerID) -> Bool {
        candidates.contains { $0.peerID == peer }
    }

    /// Whether a candidate announced at `time` may still join.
    func isGathering(at time: Duration) -> Bool {
        time < gatheringEnds
    }

    mutating func handle(_ event: Event, at time: Duration) {
        switch event {
        case .joined(let peer, let name, let addresses):
            guard isGathering(at: time), !contains(peer) else { return }
            candidates.append(Candidate(peerID: peer, name: name, addresses: addresses))
        case .progress(let peer, let progress):
            guard let index = candidates.firstIndex(where: { $0.peerID == peer }), candidates[index].result == nil else { return }
            switch progress {
            case .dialing(let address): candidates[index].since[address] = candidates[index].since[address] ?? time
            case .asked(let address): candidates[index].since[address] = time
            case .silent(let address): candidates[index].silent.insert(address)
            }
        case .measured(let peer, let rtt, let address):
            guard let index = candidates.firstIndex(where: { $0.peerID == peer }), candidates[index].result == nil else { return }
            candidates[index].result = MeasuredPeer(peerID: peer, name: candidates[index].name, rtt: rtt, address: address)
        }
    }

    func verdict(at now: Duration) -> Verdict {
        let gatheringEnds = gatheringEnds
        guard now >= gatheringEnds else { return .wait(until: gatheringEnds) }
        let unfinished = candidates.filter { $0.result == nil }
        guard now < deadline, !unfinished.isEmpty else { return decide() }
        guard let best = bestRTT else { return .wait(until: deadline) }
        let bound = Self.bound(best)
        var wake: Duration?
        for candidate in unfinished {
            // An address not yet tried could still answer at any speed.
            guard Set(candidate.since.keys).union(candidate.silent).count >= candidate.addresses else { return .wait(until: deadline) }
            for (address, since) in candidate.since where !candidate.silent.contains(address) && now - since <= bound {
                // Strictly more than the bound: an answer at the bound itself would still tie.
                wake = min(wake ?? deadline, since + bound + .microseconds(1))
            }
        }
        if let wake { return .wait(until: wake) }
        return decide(bound: bound)
    }

    /// The verdict from what is known: unfinished candidates are farther than `bound` (nil: unknown).
    private func decide(bound: Duration? = nil) -> Verdict {
        let measured = candidates.map { candidate in
            candidate.result ?? MeasuredPeer(peerID: candidate.peerID, name: candidate.name, rtt: nil, rttExceeds: bound)
        }
        return .decided(Nearest.pick(measured), Nearest.ranked(measured))
    }
}
