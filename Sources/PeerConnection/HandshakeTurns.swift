/// Whose TLS handshake runs now, without I/O: connections whose whole ClientHello has come ask
/// for a turn, handshakes end, time passes.
///
/// A completed TLS 1.3 handshake costs the server a key exchange and a signature before it sees
/// the peer's certificate, then a signature check and a verdict on that certificate: about a
/// millisecond of CPU that a stranger with a fresh key can make it spend as often as it likes.
/// Places (``AdmissionControl``) bound how many strangers are held, not how much CPU their
/// handshakes take; that is bounded here, by standing:
///
/// - A source (an IPv4 address or an IPv6 /64) that presented a trusted key within
///   ``provenStanding`` has its turn at once, always: a pinned peer never waits behind strangers.
/// - Other sources share ``AdmissionSettings/maximumStrangerHandshakes`` handshakes at once;
///   the rest wait, first come first served.
/// - While keys are refused faster than people make mistakes (``pressureRefusals`` within
///   ``pressureWindow`` at this listener), a source whose key was just refused waits
///   ``AdmissionSettings/refusalPenalty`` before its next handshake starts (twice as long after
///   each refusal in a row, up to ``AdmissionSettings/maximumRefusalPenalty``), behind every
///   other stranger that comes meanwhile; then it takes its turn like them. OpenSSH's
///   `PerSourcePenalties` in spirit, except that the connection is delayed, not refused, and
///   only during an attack: a person retrying after a refusal, or a test, never waits.
///   Loopback sources are never penalized: a process on this host has cheaper ways to take
///   its CPU, and every local client shares that one source.
///
/// A stranger's turn lasts at most ``turnLimit``, and one source holds at most
/// ``turnsPerSource`` turns at once: a handshake takes a few round trips, so a connection that
/// holds its turn longer (a ClientHello, then silence) is stalling to keep others out; it is
/// closed, and its turn goes to the next. Without this, eight stalled connections from one
/// address, renewed every set-up timeout, would keep every stranger out (a pairing, an
/// invitation, a pinned peer from a new address).
///
/// Many addresses defeat penalties per source; the shared limit is what holds then. What the
/// machine remembers is bounded (``rememberedSources``): a flood of addresses makes it forget
/// refusals, never the sources in good standing.
struct HandshakeTurns: Sendable {
    typealias ID = AdmissionControl.ID

    /// How a handshake ended, as far as the source's standing goes.
    enum Outcome: Equatable, Sendable {
        /// The peer presented a key the trust policy trusts.
        case trusted
        /// The peer presented a key, and it was refused.
        case refused
        /// Anything else (a timeout, a close, an untrusted peer let through to pair): no change.
        case other
    }

    private enum Standing {
        /// Presented a trusted key; good until then.
        case proven(until: Duration)
        /// Its key was refused `strikes` times in a row; its next handshake may start at
        /// `waitUntil`; forgotten after `forgetAt`.
        case penalized(strikes: Int, waitUntil: Duration, forgetAt: Duration)
    }

    private struct Waiter {
        var id: ID
        var source: AdmissionSource
    }

    /// How long a trusted key keeps its source in good standing.
    static let provenStanding: Duration = .seconds(3600)
    /// Refused keys within ``pressureWindow`` (at one listener, from any sources) from which on
    /// refused sources are penalized: an attack, not a person.
    static let pressureRefusals = 20
    static let pressureWindow: Duration = .seconds(10)
    /// Sources whose standing is remembered at most (good and bad together).
    static let rememberedSources = 4096
    /// How long a stranger's turn may last before its connection is closed.
    static let turnLimit: Duration = .seconds(3)
    /// Stranger turns one source may hold at once; more wait.
    static let turnsPerSource = 2

    let settings: AdmissionSettings
    private var standings: [AdmissionSource: Standing] = [:]
    /// Handshakes under way that count against the shared limit, with when each turn began.
    private var running: [ID: Duration] = [:]
    /// Handshakes under way (every one, counted or not), with their source.
    private var sources: [ID: AdmissionSource] = [:]
    /// Waiting for a turn, in order of arrival.
    private var waiting: [Waiter] = []
    /// When the last ``pressureRefusals`` keys were refused, oldest first.
    private var refusals: [Duration] = []

    /// Connections that waited for a turn, and refusals that made a source wait, since the last
    /// ``takeCounts()``.
    private(set) var waited = 0
    private(set) var penalties = 0
    /// Turns taken back for lasting too long (``overdue(at:)``).
    private(set) var stalled = 0

    init(settings: AdmissionSettings) {
        self.settings = settings
    }

    enum Turn: Equatable, Sendable {
        /// Its handshake may go on now.
        case now
        /// It waits; ``granted(at:)`` says when it may go on.
        case wait
    }

    /// The whole ClientHello of `id`, from `source`, has come at `now`.
    mutating func hello(_ id: ID, from source: AdmissionSource, at now: Duration) -> Turn {
        guard sources[id] == nil, !waiting.contains(where: { $0.id == id }) else { return .now }
        if isProven(source, at: now) {
            sources[id] = source
            return .now
        }
        if running.count < settings.maximumStrangerHandshakes, !waiting.contains(where: { mayGo($0.source, at: now) }),
            mayGo(source, at: now)
        {
            sources[id] = source
            running[id] = now
            return .now
        }
        waiting.append(Waiter(id: id, source: source))
        waited += 1
        return .wait
    }

    /// The connection `id` is gone (or its set-up over) before it told how its handshake ended:
    /// its turn or its place in the queue is free. Unknown ids change nothing.
    mutating func forget(_ id: ID) {
        if let index = waiting.firstIndex(where: { $0.id == id }) {
            waiting.remove(at: index)
            return
        }
        if sources.removeValue(forKey: id) != nil { running[id] = nil }
    }

    /// The handshake of `id` is over and ended as `outcome` at `now`: its turn is free, and its
    /// source's standing follows the outcome. Unknown ids (never asked, or told twice) change
    /// nothing.
    mutating func ended(_ id: ID, _ outcome: Outcome, at now: Duration) {
        if waiting.contains(where: { $0.id == id }) {
            forget(id)  // it never had its turn: nothing it presented was judged
            return
        }
        guard let source = sources.removeValue(forKey: id) else { return }
        running[id] = nil
        switch outcome {
        case .trusted:
            remember(source, .proven(until: now + Self.provenStanding), at: now)
        case .refused:
            refusals.append(now)
            if refusals.count > Self.pressureRefusals { refusals.removeFirst(refusals.count - Self.pressureRefusals) }
            // A source in good standing keeps it: a refused stranger behind the same address
            // (a NAT) does not make its pinned neighbour wait.
            if isProven(source, at: now) || source.isLoopback || !isPressed(at: now) { return }
            var strikes = 1
            if case .penalized(let before, _, let forgetAt)? = standings[source], now < forgetAt { strikes = before + 1 }
            let penalty = Self.penalty(strikes: strikes, settings: settings)
            remember(source, .penalized(strikes: strikes, waitUntil: now + penalty, forgetAt: now + penalty + settings.maximumRefusalPenalty), at: now)
            penalties += 1
        case .other:
            break
        }
    }

    /// The connections whose turn has come by `now`, in order, each now under way: while the
    /// shared limit allows, the first waiting whose source is not (or no longer) penalized; a
    /// source in good standing (it proved a key meanwhile) at once.
    mutating func granted(at now: Duration) -> [ID] {
        var turns: [ID] = []
        var index = 0
        while index < waiting.count {
            let waiter = waiting[index]
            if isProven(waiter.source, at: now) {
                waiting.remove(at: index)
                sources[waiter.id] = waiter.source
                turns.append(waiter.id)
            } else {
                index += 1
            }
        }
        while running.count < settings.maximumStrangerHandshakes {
            guard let index = waiting.firstIndex(where: { mayGo($0.source, at: now) }) else { break }
            let waiter = waiting.remove(at: index)
            sources[waiter.id] = waiter.source
            running[waiter.id] = now
            turns.append(waiter.id)
        }
        return turns
    }

    /// Strangers' turns that have lasted ``turnLimit`` by `now`: taken back (the caller closes
    /// those connections), so that the next may go.
    mutating func overdue(at now: Duration) -> [ID] {
        let late = running.filter { now - $0.value >= Self.turnLimit }.map(\.key).sorted()
        for id in late {
            running[id] = nil
            sources[id] = nil
            stalled += 1
        }
        return late
    }

    /// Whether a stranger from `source` may take a turn at `now`: not penalized, and holding
    /// fewer than ``turnsPerSource``.
    private func mayGo(_ source: AdmissionSource, at now: Duration) -> Bool {
        guard !isPenalized(source, at: now) else { return false }
        return running.keys.lazy.filter { self.sources[$0] == source }.prefix(Self.turnsPerSource).count < Self.turnsPerSource
    }

    /// Handshakes under way that count against the shared limit.
    var strangersUnderWay: Int { running.count }

    /// Connections waiting for a turn.
    var waitingCount: Int { waiting.count }

    /// Sources whose standing is remembered (for tests of the bound).
    var rememberedCount: Int { standings.count }

    /// Whether `source` is in good standing at `now`.
    func isProven(_ source: AdmissionSource, at now: Duration) -> Bool {
        if case .proven(let until)? = standings[source], now < until { return true }
        return false
    }

    /// Whether keys are being refused as in an attack at `now`: ``pressureRefusals`` of them
    /// within the last ``pressureWindow``.
    func isPressed(at now: Duration) -> Bool {
        guard refusals.count >= Self.pressureRefusals, let oldest = refusals.first else { return false }
        return now - oldest < Self.pressureWindow
    }

    /// Whether `source` must still wait at `now` for its last refusal.
    func isPenalized(_ source: AdmissionSource, at now: Duration) -> Bool {
        if case .penalized(_, let waitUntil, _)? = standings[source], now < waitUntil { return true }
        return false
    }

    /// The counts since the last call (for the summary), set back to zero.
    mutating func takeCounts() -> (waited: Int, penalties: Int) {
        defer {
            waited = 0
            penalties = 0
        }
        return (waited, penalties)
    }

    /// The wait after `strikes` refusals in a row: the penalty, doubled for each one after the
    /// first, at most the maximum.
    static func penalty(strikes: Int, settings: AdmissionSettings) -> Duration {
        var penalty = settings.refusalPenalty
        for _ in 1..<max(1, min(strikes, 32)) {
            penalty = penalty * 2
            if penalty >= settings.maximumRefusalPenalty { break }
        }
        return min(penalty, settings.maximumRefusalPenalty)
    }

    private mutating func remember(_ source: AdmissionSource, _ standing: Standing, at now: Duration) {
        if standings[source] == nil, standings.count >= Self.rememberedSources {
            // Full: what is over goes first; then refusals, never good standing (only a
            // trusted key earns that, so strangers cannot fill the memory with it).
            standings = standings.filter { _, known in
                switch known {
                case .proven(let until): now < until
                case .penalized(_, _, let forgetAt): now < forgetAt
                }
            }
            if standings.count >= Self.rememberedSources {
                standings = standings.filter { _, known in if case .proven = known { true } else { false } }
            }
            if standings.count >= Self.rememberedSources, case .penalized = standing { return }
        }
        standings[source] = standing
    }
}
