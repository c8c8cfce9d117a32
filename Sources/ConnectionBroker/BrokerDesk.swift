import NearbyBasics
import PeerConnection
import PeerProtocol
import PeerTrust

/// Everything the broker's shell keeps besides ``BrokerStateMachine``, as a pure value: what
/// discovery announced, the callers waiting on the broker (for a peer, for news, for the nearest
/// peer, for a survey of everyone) and the nearest-peer races they wait on, and the dials and
/// measurements it runs, at most ``DialPlan/concurrencyLimit`` at once and the others queued in
/// order. Each input returns a ``Work``: which callers are answered and how, which jobs start,
/// which races' probes end. The shell only performs it, and waits for one thing: its inputs, or
/// ``nextDeadline`` on its clock. Times are the shell's clock readings.
struct BrokerDesk: Sendable {
    typealias Ticket = CallerWaits.Ticket

    /// A dial or a measurement the shell runs while it holds one of the slots.
    enum Job: Sendable, Equatable {
        /// Open the peer's one connection (the machine decided to dial).
        case dial(PeerID, addresses: [PeerAddress], port: Int)
        /// Measure a candidate's round trip for the race or survey `ticket` waits on.
        case measure(PeerID, PeerAnnouncement, for: Ticket)

        var peer: PeerID {
            switch self {
            case .dial(let peer, _, _), .measure(let peer, _, _): peer
            }
        }
    }

    /// How a caller is answered.
    enum Reply: Sendable, Equatable {
        /// The peer's connection, by the machine's connection ID.
        case connected(UInt64)
        case failed(BrokerError)
        /// Something was announced, or the wait for news is over: look again.
        case news
        /// The nearest (nil: nobody answered) and every candidate as measured, nearest first.
        case nearest(MeasuredPeer?, [MeasuredPeer])
        /// Every peer surveyed, as measured.
        case surveyed([MeasuredPeer])
    }

    /// What the shell does after an input.
    struct Work: Sendable, Equatable {
        struct Answer: Sendable, Equatable {
            var ticket: Ticket
            var reply: Reply
        }
        var replies: [Answer] = []
        var start: [Job] = []
        /// Races decided: their probes still under way end now.
        var endProbes: [Ticket] = []

        mutating func reply(_ ticket: Ticket, _ reply: Reply) {
            replies.append(Answer(ticket: ticket, reply: reply))
        }

        mutating func append(_ other: Work) {
            replies += other.replies
            start += other.start
            endProbes += other.endProbes
        }
    }

    private struct Survey {
        /// The candidates not measured yet, with their names.
        var pending: [PeerID: String]
        var measured: [MeasuredPeer] = []
    }

    /// Who is announced, by instance name, with its addresses on each interface it was seen on.
    private(set) var announced = AnnouncedInstances()
    /// Why the last dial to each peer failed, for a caller who waits on it.
    private(set) var lastFailure: [PeerID: PeerConnectionError] = [:]
    private(set) var statistics = BrokerStatistics()
    /// When browsing began (answers are due from then: RFC 6762 §6).
    var browseStarted: Duration?
    private(set) var stopped = false
    private var waits = CallerWaits()
    private var races: [Ticket: NearestRace] = [:]
    private var surveys: [Ticket: Survey] = [:]
    private var queued: [Job] = []
    private var running = 0
    private let slots: Int
    /// Who we are and what we speak, for which announcements are candidates.
    private let localID: PeerID
    private let protocolVersion: ProtocolVersion

    init(localID: PeerID, protocolVersion: ProtocolVersion, slots: Int = DialPlan.concurrencyLimit) {
        self.localID = localID
        self.protocolVersion = protocolVersion
        self.slots = slots
    }

    /// The earliest time after `time` something is due: a caller gives up, a news wait ends, a
    /// race wants to look again.
    func nextDeadline(at time: Duration) -> Duration? {
        guard !stopped else { return nil }
        let racesWake = races.values.compactMap { race -> Duration? in
            guard case .wait(let until) = race.verdict(at: time) else { return time }
            return until
        }
        return ([waits.nextDeadline] + racesWake).compactMap { $0 }.min()
    }

    /// Dials and measurements waiting for a slot.
    var queuedJobs: Int { queued.count }

    // MARK: Discovery

    /// An instance was found or updated: the announcement the machine acts on. Callers waiting
    /// for news are answered (races join it in ``advance(at:compatible:)``).
    mutating func seen(_ announcement: PeerAnnouncement, on place: String, at addresses: [PeerAddress]) -> (PeerAnnouncement, Work) {
        let merged = announced.seen(announcement, on: place, at: addresses)
        var work = Work()
        for ticket in waits.news() { work.reply(ticket, .news) }
        return (merged, work)
    }

    /// An instance left `place`: what the machine is told, if anything.
    mutating func lost(_ name: String, in domain: String, on place: String) -> BrokerStateMachine.Event? {
        announced.lost(name, in: domain, on: place)
    }

    /// Whether the broker connects to what `announcement` announces: the peer it names, or why not.
    func compatibility(of announcement: PeerAnnouncement) -> Result<PeerID, BrokerStateMachine.Incompatibility> {
        BrokerStateMachine.compatibility(of: announcement, localID: localID, protocolVersion: protocolVersion)
    }

    /// The announcements the broker would connect to, with their peers, in name order.
    var compatible: [(PeerID, PeerAnnouncement)] {
        announced.announcements.compactMap { announcement in
            guard let peer = try? compatibility(of: announcement).get() else { return nil }
            return (peer, announcement)
        }.sorted { $0.1.name < $1.1.name }
    }

    /// The peer announced as `name`: its ID, an error when the name cannot say whom to expect,
    /// or nil while nobody announces it.
    func peer(named name: String) -> Result<PeerID, BrokerError>? {
        let announcements = announced.named(name)
        guard !announcements.isEmpty else { return nil }
        let peers = Set(announcements.compactMap { $0.peerID.flatMap(PeerID.init) })
        if peers.count > 1 {
            let domains = announcements.map { String($0.domain.dropLast()) }.joined(separator: ", ")
            return .failure(BrokerError(.notFound, "\"\(name)\" is announced by \(peers.count) different peers (in \(domains)): connect by peer ID"))
        }
        guard let peer = peers.first else {
            return .failure(BrokerError(.notFound, "\"\(name)\" is announced without a valid TXT id, so whom to expect is unknown"))
        }
        return .success(peer)
    }

    /// What was found but not taken, and why, for an error a person reads: `; skipped 1:
    /// "Printer" (its TXT has no valid id …)`. Our own announcement is not counted.
    var skippedText: String {
        var reasons: [String] = []
        for announcement in announced.announcements {
            guard case .failure(let why) = compatibility(of: announcement) else { continue }
            if case .ownAnnouncement = why { continue }
            reasons.append("\"\(announcement.name)\" (\(why))")
        }
        guard !reasons.isEmpty else { return "" }
        let shown = reasons.sorted().prefix(5).joined(separator: ", ")
        return "; skipped \(reasons.count): \(shown)\(reasons.count > 5 ? ", ..." : "")"
    }

    /// Everyone announced, in name order, compatible or not (and why not), with the round trips
    /// `measured`.
    func listing(measured: [MeasuredPeer]) -> [DiscoveredPeer] {
        announced.announcements.sorted { $0.name < $1.name }.map { announcement in
            let peer = announcement.peerID.flatMap { PeerID($0) }
            let why: String? =
                switch compatibility(of: announcement) {
                case .success: nil
                case .failure(let incompatibility): incompatibility.description
                }
            return DiscoveredPeer(
                name: announcement.name, peerID: peer, addresses: announcement.addresses, port: announcement.port,
                protocolVersion: announcement.protocolVersion, compatible: why == nil, reason: why,
                rtt: measured.first { $0.peerID == peer }?.rtt)
        }
    }

    /// Whether any announcement carries `peer`'s ID.
    func isAnnounced(_ peer: PeerID) -> Bool {
        announced.announcements.contains { $0.peerID.flatMap { PeerID($0) } == peer }
    }

    // MARK: Callers

    /// A caller waits for a connection to `peer` until `end`.
    mutating func waitForPeer(_ peer: PeerID, until end: Duration) -> Ticket {
        waits.waitForPeer(peer, until: end)
    }

    /// A caller waits for news from discovery until `end`.
    mutating func waitForNews(until end: Duration) -> Ticket {
        waits.waitForNews(until: end)
    }

    /// The peer being dialed asks someone whether to let us in until `end`: its callers wait
    /// at least that long.
    mutating func extend(_ peer: PeerID, to end: Duration) {
        waits.extend(peer, to: end)
    }

    /// A caller waits for the nearest peer, as `race` decides it.
    mutating func waitForNearest(_ race: NearestRace) -> Ticket {
        let ticket = waits.issue()
        races[ticket] = race
        return ticket
    }

    /// A caller waits until every compatible candidate announced now has been measured.
    mutating func survey() -> (Ticket, Work) {
        let candidates = compatible
        let ticket = waits.issue()
        var work = Work()
        guard !candidates.isEmpty, !stopped else {
            work.reply(ticket, .surveyed([]))
            return (ticket, work)
        }
        surveys[ticket] = Survey(pending: Dictionary(candidates.map { ($0.0, $0.1.name) }, uniquingKeysWith: { a, _ in a }))
        for (peer, announcement) in candidates { work.append(enqueue(.measure(peer, announcement, for: ticket))) }
        return (ticket, work)
    }

    /// `peer` is connected as `id`: every caller waiting for it gets that connection.
    mutating func connected(_ peer: PeerID, _ id: UInt64) -> Work {
        Work(replies: waits.answered(peer).map { Work.Answer(ticket: $0, reply: .connected(id)) })
    }

    /// `peer` refused us for good: its callers are told why.
    mutating func refused(_ peer: PeerID, _ reason: String) -> Work {
        let error = BrokerError(.refused, reason, connectionError: lastFailure[peer])
        return Work(replies: waits.answered(peer).map { Work.Answer(ticket: $0, reply: .failed(error)) })
    }

    // MARK: Jobs

    /// The machine decided to dial `peer`.
    mutating func dial(_ peer: PeerID, addresses: [PeerAddress], port: Int) -> Work {
        statistics.dials += 1
        return enqueue(.dial(peer, addresses: addresses, port: port))
    }

    private mutating func enqueue(_ job: Job) -> Work {
        guard !stopped else { return Work() }
        queued.append(job)
        return startQueued()
    }

    private mutating func startQueued() -> Work {
        var work = Work()
        while running < slots, !queued.isEmpty {
            running += 1
            work.start.append(queued.removeFirst())
        }
        return work
    }

    /// A dial ended: it opened a connection, or failed with `error`. Its slot goes to the next job.
    mutating func dialEnded(_ peer: PeerID, failure error: PeerConnectionError?) -> Work {
        running = max(0, running - 1)
        if let error {
            statistics.dialsFailed += 1
            lastFailure[peer] = error
        } else {
            statistics.dialsSucceeded += 1
        }
        return startQueued()
    }

    /// A probe of the race `ticket` made progress (it began dialing an address, asked, or heard
    /// nothing back).
    mutating func probe(_ ticket: Ticket, _ peer: PeerID, _ progress: ProbeProgress, at time: Duration) {
        races[ticket]?.handle(.progress(peer, progress), at: time)
    }

    /// A measurement ended (nil: no address answered; also when its race was decided and its
    /// probes ended early); its slot goes to the next job.
    mutating func measured(_ ticket: Ticket, _ peer: PeerID, rtt: Duration?, address: String?, at time: Duration) -> Work {
        running = max(0, running - 1)
        races[ticket]?.handle(.measured(peer, rtt: rtt, address: address), at: time)
        var work = startQueued()
        if var survey = surveys[ticket], let name = survey.pending.removeValue(forKey: peer) {
            survey.measured.append(MeasuredPeer(peerID: peer, name: name, rtt: rtt, address: address))
            if survey.pending.isEmpty {
                surveys[ticket] = nil
                work.reply(ticket, .surveyed(survey.measured))
            } else {
                surveys[ticket] = survey
            }
        }
        return work
    }

    // MARK: Time

    /// Whatever is due at `time`: callers who give up (told why, from what is announced and
    /// the last failure), news waits that end, and each race: the compatible candidates not
    /// yet in it join while it gathers (their measurements queue), and a race whose verdict is
    /// certain answers its caller, its queued measurements dropped and its probes ended.
    mutating func advance(at time: Duration) -> Work {
        let compatible = self.compatible
        var work = Work()
        guard !stopped else { return work }
        let due = waits.due(at: time)
        for (peer, ticket) in due.gaveUp {
            let why = lastFailure[peer].map { ": the last attempt: \($0.description)" } ?? ""
            let error =
                isAnnounced(peer)
                ? BrokerError(.unreachable, "no connection to \(peer.short) within the time allowed\(why)", connectionError: lastFailure[peer])
                : BrokerError(.notFound, "no peer with ID \(peer.short) was found within the time allowed")
            work.reply(ticket, .failed(error))
        }
        for ticket in due.news { work.reply(ticket, .news) }
        for ticket in races.keys.sorted() {
            guard var race = races[ticket] else { continue }
            if race.isGathering(at: time) {
                for (peer, announcement) in compatible where !race.contains(peer) {
                    race.handle(.joined(peer, name: announcement.name, addresses: DialPlan.schedule(announcement.addresses).count), at: time)
                    work.append(enqueue(.measure(peer, announcement, for: ticket)))
                }
            }
            if case .decided(let nearest, let candidates) = race.verdict(at: time) {
                races[ticket] = nil
                queued.removeAll { if case .measure(_, _, ticket) = $0 { true } else { false } }
                work.reply(ticket, .nearest(nearest, candidates))
                work.endProbes.append(ticket)
            } else {
                races[ticket] = race
            }
        }
        return work
    }

    // MARK: Counting

    mutating func count(_ change: (inout BrokerStatistics) -> Void) {
        change(&statistics)
    }

    // MARK: Stop

    /// The broker stops: every caller is answered (nobody twice), nothing queued starts.
    mutating func shutDown() -> Work {
        guard !stopped else { return Work() }
        stopped = true
        queued = []
        var work = Work()
        let error = BrokerError(.unreachable, "the broker was shut down")
        let everyone = waits.shutDown()
        for ticket in everyone.peers { work.reply(ticket, .failed(error)) }
        for ticket in everyone.news { work.reply(ticket, .news) }
        for ticket in races.keys.sorted() {
            work.reply(ticket, .failed(error))
            work.endProbes.append(ticket)
        }
        for ticket in surveys.keys.sorted() { work.reply(ticket, .failed(error)) }
        races = [:]
        surveys = [:]
        return work
    }
}
