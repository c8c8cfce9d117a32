/// How a listener treats connections that have not proven anything yet (strangers at the door).
///
/// Every peer, pinned or not, first opens TCP and starts TLS; until its key is proven it is a
/// stranger, and strangers cost descriptors, memory and handshakes. OpenSSH refuses newcomers at
/// random once too many are unauthenticated (`MaxStartups`), which keeps the server alive but
/// also keeps a legitimate user out while the attack lasts. Here the newcomer always gets a
/// place: when the places are taken, the connection that has shown the least progress (no
/// bytes, then a partial TLS ClientHello, then a whole one) and has had the longest to show it
/// makes room. A real peer sends its ClientHello with its first packet and is through TLS in a
/// few milliseconds, so idle or half-open strangers, however many, cannot push it out.
public struct AdmissionSettings: Sendable, Equatable {
    /// Connections still setting up (before their key is proven) held at once; one more makes
    /// the least advanced of them close.
    public var maximumSettingUp: Int
    /// Of those, how many may come from one source (an IPv4 address, or an IPv6 /64): one more
    /// from it closes that source's own least advanced connection, never someone else's.
    public var maximumPerSource: Int
    /// A connection must have sent a whole TLS ClientHello (or a round-trip probe) within this.
    /// The whole set-up has ``PeerConnectionConfiguration/setupTimeout``.
    public var helloDeadline: Duration
    /// Strangers turned away are reported one by one up to ``reportedPerInterval`` in each
    /// interval, and not at all while places run short (an attack); the rest are counted and
    /// summed up once at the interval's end.
    public var summaryInterval: Duration
    public var reportedPerInterval: Int
    /// TLS handshakes under way at once for sources that have not presented a trusted key in
    /// the last hour; more wait their turn, first come first served (at most 2 from one source,
    /// each turn at most 3 s). Sources that have (a pinned peer that connected from the same
    /// address, or IPv6 /64, within the hour) never wait.
    public var maximumStrangerHandshakes: Int
    /// After a source's key is refused, its next handshake starts only this much later (twice
    /// as much after each refusal in a row, up to ``maximumRefusalPenalty``): the connection
    /// waits, holding its place, while other strangers go first. Zero: no penalty.
    public var refusalPenalty: Duration
    public var maximumRefusalPenalty: Duration

    /// 256 set-ups at once, 32 per source, 3 s for the ClientHello, a summary every 10 s after
    /// the first 5 reports in it, 8 strangers' handshakes at once, 1 s of penalty after a
    /// refused key, doubling up to 30 s: a pinned peer never notices these; an attack from many
    /// addresses costs at most 256 descriptors and TLS states, and 8 handshakes at a time.
    public init(
        maximumSettingUp: Int = 256, maximumPerSource: Int = 32, helloDeadline: Duration = .seconds(3),
        summaryInterval: Duration = .seconds(10), reportedPerInterval: Int = 5, maximumStrangerHandshakes: Int = 8,
        refusalPenalty: Duration = .seconds(1), maximumRefusalPenalty: Duration = .seconds(30)
    ) {
        self.maximumSettingUp = maximumSettingUp
        self.maximumPerSource = maximumPerSource
        self.helloDeadline = helloDeadline
        self.summaryInterval = summaryInterval
        self.reportedPerInterval = reportedPerInterval
        self.maximumStrangerHandshakes = maximumStrangerHandshakes
        self.refusalPenalty = refusalPenalty
        self.maximumRefusalPenalty = maximumRefusalPenalty
    }

    /// These settings within a process that may open `descriptors` at once: at most half of
    /// them go to connections setting up (the rest to sessions, files and the rest of the
    /// program), so that strangers meet the limit on places, which makes room, and never the
    /// descriptor limit, where nobody is accepted at all.
    public func fitting(descriptors: UInt64?) -> AdmissionSettings {
        guard let descriptors else { return self }
        var fitted = self
        fitted.maximumSettingUp = max(1, min(maximumSettingUp, Int(min(descriptors / 2, UInt64(Int.max)))))
        fitted.maximumPerSource = min(maximumPerSource, fitted.maximumSettingUp)
        return fitted
    }

    /// Why settings cannot be used, in words a user can act on; nil when they can.
    public var problem: String? {
        if maximumSettingUp < 1 { return "the limit on connections setting up must be at least 1 (it is \(maximumSettingUp))" }
        if maximumPerSource < 1 { return "the limit per source must be at least 1 (it is \(maximumPerSource))" }
        if helloDeadline <= .zero { return "the ClientHello deadline must be longer than zero" }
        if summaryInterval <= .zero { return "the summary interval must be longer than zero" }
        if reportedPerInterval < 0 { return "the number of strangers reported one by one cannot be negative" }
        if maximumStrangerHandshakes < 1 { return "the limit on strangers' handshakes at once must be at least 1 (it is \(maximumStrangerHandshakes))" }
        if refusalPenalty < .zero || maximumRefusalPenalty < .zero { return "a penalty after a refused key cannot be negative" }
        if maximumRefusalPenalty < refusalPenalty { return "the longest penalty after refused keys cannot be shorter than the first" }
        return nil
    }
}

/// What the listener tells about strangers over one interval, instead of one event each.
public struct StrangerSummary: Sendable, Equatable {
    /// How long the summary covers.
    public var interval: Duration
    /// Connections closed to make room for a newcomer (the places were all taken).
    public var madeRoom = 0
    /// Connections closed because their source already held its share of places.
    public var overSourceShare = 0
    /// Newcomers refused: every place was held by a peer that had proven its key.
    public var refused = 0
    /// Connections closed for sending no whole ClientHello within the deadline.
    public var noHello = 0
    /// Set-ups that failed after the ClientHello (TLS refused, not trusted, timed out, not a
    /// WebSocket) and were not reported one by one.
    public var failedUnreported = 0
    /// Failed set-ups reported one by one (as ``PeerListener/Event/rejected(_:)``).
    public var reported = 0
    /// Connections whose TLS handshake waited for its turn (see
    /// ``AdmissionSettings/maximumStrangerHandshakes`` and ``AdmissionSettings/refusalPenalty``).
    /// They are not turned away by waiting: how each ended is counted with the others.
    public var waitedTurn = 0
    /// Refused keys that made their source wait before its next handshake.
    public var penalized = 0
    /// The most connections setting up at once during the interval.
    public var peakSettingUp = 0
    /// Sources (addresses, IPv6 /64s) seen among the closed or failed connections.
    public var sources = 0

    /// A summary of nothing yet, covering `interval`.
    public init(interval: Duration) {
        self.interval = interval
    }

    /// This summary and `other` as one: counts added, the peak the larger, the intervals and
    /// sources added (a source seen in both counts twice).
    public func adding(_ other: StrangerSummary) -> StrangerSummary {
        var sum = self
        sum.interval += other.interval
        sum.madeRoom += other.madeRoom
        sum.overSourceShare += other.overSourceShare
        sum.refused += other.refused
        sum.noHello += other.noHello
        sum.failedUnreported += other.failedUnreported
        sum.reported += other.reported
        sum.waitedTurn += other.waitedTurn
        sum.penalized += other.penalized
        sum.peakSettingUp = max(sum.peakSettingUp, other.peakSettingUp)
        sum.sources += other.sources
        return sum
    }

    /// Connections turned away in all.
    public var total: Int { madeRoom + overSourceShare + refused + noHello + failedUnreported + reported }

    /// One line: what happened, and the numbers.
    public var text: String {
        var parts: [String] = []
        if madeRoom > 0 { parts.append("\(madeRoom) closed to make room") }
        if overSourceShare > 0 { parts.append("\(overSourceShare) over their source's share") }
        if refused > 0 { parts.append("\(refused) refused (every place held by a proven peer)") }
        if noHello > 0 { parts.append("\(noHello) sent no ClientHello in time") }
        if failedUnreported + reported > 0 { parts.append("\(failedUnreported + reported) failed set-up (\(reported) reported one by one)") }
        let what = parts.isEmpty ? "nothing" : parts.joined(separator: ", ")
        var waits = ""
        if waitedTurn > 0 || penalized > 0 {
            waits = "; \(waitedTurn) waited their turn for a TLS handshake, \(penalized) refused key\(penalized == 1 ? "" : "s") made \(penalized == 1 ? "its" : "their") source wait"
        }
        return "strangers in the last \(Int((interval / .seconds(1)).rounded())) s: \(total) connections turned away from \(sources) source\(sources == 1 ? "" : "s") (\(what)); at most \(peakSettingUp) setting up at once\(waits)"
    }
}

/// Where a connection comes from, as admission counts it: one IPv4 address, or one IPv6 /64
/// (a host picks its addresses within a prefix, so counting addresses would let one host take
/// every place). IPv4-mapped IPv6 addresses (a dual-stack socket's) count as IPv4.
enum AdmissionSource: Hashable, Sendable {
    case ipv4(UInt32)
    case ipv6(prefix: UInt64)
    case unknown

    /// 127.0.0.0/8, or ::1's /64: this host.
    var isLoopback: Bool {
        switch self {
        case .ipv4(let address): address >> 24 == 127
        case .ipv6(let prefix): prefix == 0
        case .unknown: false
        }
    }

    /// From the 4 or 16 bytes of an address.
    init(addressBytes bytes: [UInt8]) {
        func word(_ range: Range<Int>) -> UInt64 { bytes[range].reduce(0) { $0 << 8 | UInt64($1) } }
        switch bytes.count {
        case 4:
            self = .ipv4(UInt32(truncatingIfNeeded: word(0..<4)))
        case 16 where bytes[0..<10].allSatisfy({ $0 == 0 }) && bytes[10] == 0xFF && bytes[11] == 0xFF:
            self = .ipv4(UInt32(truncatingIfNeeded: word(12..<16)))
        case 16:
            self = .ipv6(prefix: word(0..<8))
        default:
            self = .unknown
        }
    }
}

/// How far a connection has got: the order in which strangers make room (least first).
enum AdmissionStage: Int, Comparable, Sendable, CaseIterable {
    /// Accepted; nothing received.
    case silent
    /// Some bytes, not yet a whole ClientHello (or probe question).
    case started
    /// A whole ClientHello (or a probe): TLS is under way.
    case hello
    /// TLS is done and the peer's key proven: never closed to make room.
    case proven

    static func < (a: Self, b: Self) -> Bool { a.rawValue < b.rawValue }
}

/// The admission decisions of one listener, without I/O: connections arrive, progress and
/// end; time passes. It says which connections to close and keeps the counts for
/// ``StrangerSummary``. Times are durations since any fixed origin (the listener's start).
struct AdmissionControl: Sendable {
    typealias ID = UInt64

    enum Arrival: Equatable {
        /// The newcomer has a place; close these to make it.
        case admitted(closing: [ID])
        /// No place: every one is held by a proven peer. Close the newcomer.
        case refused
    }

    /// What to do with a set-up that failed.
    enum Failure: Equatable {
        /// Tell the app about this one (an event).
        case report
        /// Counted for the summary only.
        case count
    }

    private struct Entry {
        var source: AdmissionSource
        var stage: AdmissionStage
        var since: Duration
    }

    let settings: AdmissionSettings
    /// How long a new connection is passed over when someone must make room, while older ones
    /// can: time for its event loop to read the first bytes that came with it.
    static let youngGrace: Duration = .milliseconds(250)
    private var entries: [ID: Entry] = [:]
    private var bySource: [AdmissionSource: [ID]] = [:]
    /// Per stage below `.proven`, ids in arrival order (ids only grow); an id no longer at that
    /// stage is skipped when met (and dropped then).
    private var queues: [[ID]] = Array(repeating: [], count: AdmissionStage.proven.rawValue)
    private var heads: [Int] = Array(repeating: 0, count: AdmissionStage.proven.rawValue)
    private var nextID: ID = 0
    private var current: StrangerSummary
    private var intervalStart: Duration
    private var turnedAwaySources: Set<AdmissionSource> = []
    /// Closed here (to make room, or late): their end is no failure to count again.
    private var closedHere: Set<ID> = []
    /// The interval before this one turned strangers away for want of room or of a hello: an
    /// attack may be under way, and failures are only counted until a calm interval.
    private var pressedBefore = false

    /// Whose TLS handshake runs now (strangers take turns; refused sources wait).
    private var turns: HandshakeTurns

    /// Whether places ran short, hellos failed to come or handshakes had to wait their turn, in
    /// this interval or the one before.
    private var underPressure: Bool {
        pressedBefore || Self.pressed(current) || turns.waited + turns.penalties > 0
    }

    private static func pressed(_ summary: StrangerSummary) -> Bool {
        summary.madeRoom + summary.overSourceShare + summary.refused + summary.noHello + summary.waitedTurn + summary.penalized > 0
    }

    init(settings: AdmissionSettings = AdmissionSettings(), now: Duration = .zero) {
        self.settings = settings
        intervalStart = now
        current = StrangerSummary(interval: settings.summaryInterval)
        turns = HandshakeTurns(settings: settings)
    }

    /// Connections setting up now.
    var settingUp: Int { entries.count }

    /// Those from `source`.
    func settingUp(from source: AdmissionSource) -> Int { bySource[source]?.count ?? 0 }

    func stage(of id: ID) -> AdmissionStage? { entries[id]?.stage }

    /// Connections closed here whose end has not been told yet (for tests of the bookkeeping).
    var closedHereCount: Int { closedHere.count }

    /// Ids held in the stage queues, current or not (for tests of the bookkeeping).
    var queuedIDs: Int { zip(queues, heads).reduce(0) { $0 + $1.0.count - $1.1 } }

    /// A connection was accepted from `source`; returns its id and what to do.
    mutating func arrived(from source: AdmissionSource, at now: Duration) -> (id: ID, arrival: Arrival) {
        let id = nextID
        nextID += 1
        var closing: [ID] = []
        if let own = bySource[source], own.count >= settings.maximumPerSource {
            // The source's least advanced, oldest place; if all its places are proven, no more.
            guard let victim = leastAdvanced(among: own) else { return refuse(id, source: source) }
            remove(victim)
            closedHere.insert(victim)
            turnedAwaySources.insert(source)
            current.overSourceShare += 1
            closing.append(victim)
        } else if entries.count >= settings.maximumSettingUp {
            guard let victim = popLeastAdvanced(at: now), let entry = entries[victim] else { return refuse(id, source: source) }
            remove(victim)
            closedHere.insert(victim)
            turnedAwaySources.insert(entry.source)
            current.madeRoom += 1
            closing.append(victim)
        }
        entries[id] = Entry(source: source, stage: .silent, since: now)
        bySource[source, default: []].append(id)
        enqueue(id, at: .silent)
        current.peakSettingUp = max(current.peakSettingUp, entries.count)
        return (id, .admitted(closing: closing))
    }

    /// The connection got as far as `stage` (never backwards).
    mutating func progressed(_ id: ID, to stage: AdmissionStage) {
        guard var entry = entries[id], entry.stage < stage else { return }
        entry.stage = stage
        entries[id] = entry
        if stage < .proven { enqueue(id, at: stage) }
    }

    /// The whole ClientHello of `id` has come at `now` (a TLS listener): its stage is
    /// ``AdmissionStage/hello``, and its handshake goes on now or waits for its turn
    /// (``turnsGranted(at:)`` says when). See ``HandshakeTurns``.
    mutating func helloArrived(_ id: ID, at now: Duration) -> HandshakeTurns.Turn {
        guard let entry = entries[id] else { return .now }
        progressed(id, to: .hello)
        return turns.hello(id, from: entry.source, at: now)
    }

    /// The TLS handshake of `id` ended as `outcome` at `now` (its turn is free; its source's
    /// standing follows the outcome). Call before ``ended(_:failed:)`` for a failed set-up.
    mutating func handshakeEnded(_ id: ID, _ outcome: HandshakeTurns.Outcome, at now: Duration) {
        turns.ended(id, outcome, at: now)
    }

    /// Connections whose handshake may go on now, having waited for their turn.
    mutating func turnsGranted(at now: Duration) -> [ID] {
        turns.granted(at: now)
    }

    /// Strangers whose handshake turn has lasted too long by `now` (``HandshakeTurns/turnLimit``):
    /// to close; each leaves the count here as a failed set-up, and its close is no failure to
    /// report again.
    mutating func stalledTurns(at now: Duration) -> [ID] {
        let stalled = turns.overdue(at: now)
        for id in stalled {
            if let source = entries[id]?.source { turnedAwaySources.insert(source) }
            if entries[id] != nil { remove(id) }
            closedHere.insert(id)
            current.failedUnreported += 1
        }
        return stalled
    }

    /// Connections waiting for a handshake turn (for tests).
    var waitingForTurn: Int { turns.waitingCount }

    /// Strangers' handshakes under way (for tests).
    var strangerHandshakes: Int { turns.strangersUnderWay }

    /// Whether `source` is in good standing (it presented a trusted key lately).
    func isProven(_ source: AdmissionSource, at now: Duration) -> Bool { turns.isProven(source, at: now) }

    /// The connection's set-up is over: it became a session, or it closed. `failed`: it ended
    /// without becoming one (a refusal, a timeout, a close). Returns whether to report a
    /// failure one by one; ``Failure/count`` when this interval has reported enough, or while
    /// places run short or hellos fail to come (now or in the interval before): then only the
    /// summary speaks.
    @discardableResult
    mutating func ended(_ id: ID, failed: Bool) -> Failure {
        if closedHere.remove(id) != nil { return .count }
        let source = entries[id]?.source
        if entries[id] != nil { remove(id) }
        guard failed else { return .count }
        if current.reported < settings.reportedPerInterval, !underPressure {
            current.reported += 1
            if let source { turnedAwaySources.insert(source) }
            return .report
        }
        current.failedUnreported += 1
        if let source { turnedAwaySources.insert(source) }
        return .count
    }

    /// Connections that had sent no whole ClientHello by `now`, at the deadline: candidates to
    /// close. Each is confirmed with ``expire(_:at:)`` on its own event loop, after that loop
    /// has read what it was sent (a loop held up for seconds must not cost a peer its place
    /// for bytes that were waiting in its socket).
    func late(at now: Duration) -> [ID] {
        var late: [ID] = []
        for stage in [AdmissionStage.silent, .started] {
            let queue = stage.rawValue
            for id in queues[queue][heads[queue]...] {
                guard let entry = entries[id], entry.stage == stage else { continue }
                guard now - entry.since >= settings.helloDeadline else { break }
                late.append(id)
            }
        }
        return late
    }

    /// Closes `id` for sending no whole ClientHello in time, if it is still so at `now`:
    /// true when it is to be closed (it leaves the count here; its close is no failure to
    /// report), false when it made progress meanwhile or is gone.
    mutating func expire(_ id: ID, at now: Duration) -> Bool {
        guard let entry = entries[id], entry.stage < .hello, now - entry.since >= settings.helloDeadline else { return false }
        turnedAwaySources.insert(entry.source)
        remove(id)
        closedHere.insert(id)
        current.noHello += 1
        return true
    }

    /// Connections that sent no whole ClientHello within the deadline at `now`, closed at once
    /// (``late(at:)`` and ``expire(_:at:)`` together, for a caller that reads no socket).
    mutating func expired(at now: Duration) -> [ID] {
        late(at: now).filter { expire($0, at: now) }
    }

    /// The summary of the interval that ended by `now`, if it did and anything was turned away;
    /// a new interval begins.
    mutating func summary(at now: Duration) -> StrangerSummary? {
        endInterval(at: now).flatMap { Self.worthTelling($0) ? $0 : nil }
    }

    /// Whether a summary tells anything the one-by-one reports did not.
    static func worthTelling(_ summary: StrangerSummary) -> Bool {
        // Only what was not reported one by one needs a summary.
        summary.total > summary.reported || summary.waitedTurn + summary.penalized > 0
    }

    /// The counts of the interval so far (its sources, peak and interval aside).
    var countedSoFar: StrangerSummary {
        var counted = current
        counted.waitedTurn = turns.waited
        counted.penalized = turns.penalties
        return counted
    }

    /// Connections that arrived, ever (admitted or not).
    var arrivals: UInt64 { nextID }

    /// The interval that ended by `now`, if it did, with everything it counted (see
    /// ``summary(at:)`` for whether it is worth telling); a new interval begins.
    mutating func endInterval(at now: Duration) -> StrangerSummary? {
        guard now - intervalStart >= settings.summaryInterval else { return nil }
        var done = current
        done.interval = now - intervalStart
        done.sources = turnedAwaySources.count
        (done.waitedTurn, done.penalized) = turns.takeCounts()
        intervalStart = now
        pressedBefore = Self.pressed(done)
        current = StrangerSummary(interval: settings.summaryInterval)
        current.peakSettingUp = entries.count
        turnedAwaySources.removeAll(keepingCapacity: true)
        return done
    }

    private mutating func refuse(_ id: ID, source: AdmissionSource) -> (id: ID, arrival: Arrival) {
        // Never admitted, so never ended here: nothing to remember about it.
        current.refused += 1
        turnedAwaySources.insert(source)
        return (id, .refused)
    }

    /// The oldest connection at the lowest stage below `.proven`, taken off its queue.
    private mutating func popLeastAdvanced(at now: Duration) -> ID? {
        // A connection accepted moments ago has not been read yet: its hello may be waiting
        // in its socket. The least advanced of those that have had ``youngGrace`` goes first;
        // only when every candidate is that young does the oldest of them go.
        for queue in 0..<queues.count {
            while heads[queue] < queues[queue].count {
                let id = queues[queue][heads[queue]]
                guard let entry = entries[id], entry.stage.rawValue == queue else {
                    heads[queue] += 1
                    continue
                }
                if now - entry.since >= Self.youngGrace {
                    heads[queue] += 1
                    compact(queue)
                    return id
                }
                break
            }
        }
        for queue in 0..<queues.count {
            while heads[queue] < queues[queue].count {
                let id = queues[queue][heads[queue]]
                heads[queue] += 1
                if let entry = entries[id], entry.stage.rawValue == queue {
                    compact(queue)
                    return id
                }
            }
            compact(queue)
        }
        return nil
    }

    private func leastAdvanced(among ids: [ID]) -> ID? {
        var best: (id: ID, stage: AdmissionStage)?
        for id in ids {  // in arrival order: the first at the lowest stage is the oldest
            guard let stage = entries[id]?.stage, stage < .proven else { continue }
            if let known = best, known.stage <= stage { continue }
            best = (id, stage)
        }
        return best?.id
    }

    /// Puts `id` at the back of `stage`'s queue. A queue holding many ids that moved on or
    /// ended (a stage nobody is taken from while places are free) is cleaned, so that its size
    /// stays in proportion to the places.
    private mutating func enqueue(_ id: ID, at stage: AdmissionStage) {
        let queue = stage.rawValue
        queues[queue].append(id)
        if queues[queue].count - heads[queue] > 2 * settings.maximumSettingUp + 64 {
            queues[queue] = queues[queue][heads[queue]...].filter { entries[$0]?.stage == stage }
            heads[queue] = 0
        }
    }

    private mutating func remove(_ id: ID) {
        turns.forget(id)
        guard let entry = entries.removeValue(forKey: id) else { return }
        if var own = bySource[entry.source] {
            own.removeAll { $0 == id }
            bySource[entry.source] = own.isEmpty ? nil : own
        }
    }

    /// Drops a queue's consumed front once it is at least half of it (amortised O(1)).
    private mutating func compact(_ queue: Int) {
        if heads[queue] == queues[queue].count {
            queues[queue].removeAll(keepingCapacity: true)
            heads[queue] = 0
        } else if heads[queue] > 64, heads[queue] * 2 > queues[queue].count {
            queues[queue].removeFirst(heads[queue])
            heads[queue] = 0
        }
    }
}
