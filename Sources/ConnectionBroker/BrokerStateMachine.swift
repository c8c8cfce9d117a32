import DNSWire
import PeerConnection
import PeerTrust

/// A peer as discovery announces it: the instance, its TXT `id` and `pv` as written, and where
/// to dial it.
public struct PeerAnnouncement: Hashable, Sendable {
    /// The service instance name (what people see).
    public var name: String
    /// The domain it was found in (`local.` on the link, or a DNS zone): two instances with one
    /// name in two domains are two announcements.
    public var domain: String
    /// TXT `id`, as announced (nil when absent).
    public var peerID: String?
    /// TXT `pv`, as announced (nil when absent).
    public var protocolVersion: String?
    /// Addresses to dial (`fe80::1%eth0` keeps its link).
    public var addresses: [PeerAddress]
    public var port: Int

    public init(name: String, domain: String = "local.", peerID: String?, protocolVersion: String?, addresses: [PeerAddress], port: Int) {
        self.name = name
        self.domain = domain
        self.peerID = peerID
        self.protocolVersion = protocolVersion
        self.addresses = addresses
        self.port = port
    }
}

/// The broker's decisions as a pure state machine: discovery, connection and clock events in;
/// dials, closes, probes and reports out. It holds no connection: the shell around it does, and
/// names each by a number it chooses. Every rule in DESIGN.md's table "The broker's rules" is
/// decided here, so each is unit-tested without a network, threads or sleeping.
struct BrokerStateMachine: Sendable {
    /// A connection's ``PeerConnection/id`` (its number in this process).
    typealias ConnectionID = UInt64

    struct Configuration: Sendable {
        var localID: PeerID
        var protocolVersion: ProtocolVersion
        /// Connect to every compatible peer discovered (else only to those asked for).
        var autoInvite: Bool
        /// The larger peer ID waits this long for the smaller's invitation before dialing itself.
        var fallbackDelay: Duration = .seconds(3)
        /// An old connection gets this long to answer a ping when the peer connects again.
        var probeTimeout: Duration = .seconds(2)
        /// Redials after a drop back off from `backoffStart`, doubling to `backoffCap`, with up
        /// to `jitter` (a fraction) added at random.
        var backoffStart: Duration = .seconds(1)
        var backoffCap: Duration = .seconds(60)
        var jitter = 0.2
        /// At most `redialLimit` redials in `redialWindow` per peer, then `coolDown` without any.
        /// Every dial is a redial but the first after a fresh announcement (a peer found, or
        /// found again after a goodbye): retries after failures count as much as redials after
        /// drops, so a crash-looping peer cannot cause a storm either way.
        var redialLimit = 3
        var redialWindow: Duration = .seconds(120)
        var coolDown: Duration = .seconds(300)
    }

    enum Event: Sendable, Hashable {
        /// Discovery found or updated an instance.
        case announced(PeerAnnouncement)
        /// Discovery lost an instance (goodbye or expiry): no more dialing it.
        case withdrawn(name: String, domain: String = "local.")
        /// The app asks for a connection to this peer (tiebreak or not).
        case requested(PeerID)
        /// A dial we started ended: connected (authenticated and initialized) or failed, with
        /// the connection's error code (see ``BrokerStateMachine/isRefusal(_:)``).
        case dialSucceeded(PeerID, ConnectionID)
        case dialFailed(PeerID, reason: String, code: PeerConnectionError.Code = .unreachable)
        /// A peer connected to us (authenticated and initialized).
        case accepted(PeerID, ConnectionID)
        /// A connection ended (not one we closed ourselves as a duplicate).
        case closed(ConnectionID, reason: ConnectionEnd)
        /// The answer to ``Action/probe(_:)``.
        case probed(ConnectionID, alive: Bool)
        /// An interface or address came or went.
        case networkChanged
    }

    enum Action: Sendable, Hashable {
        /// Dial this peer (addresses happy-eyeballs style), expecting this peer ID.
        case dial(PeerID, addresses: [PeerAddress], port: Int)
        /// Close this connection, saying why.
        case close(ConnectionID, reason: CloseReason)
        /// Ping this connection; answer with ``Event/probed(_:alive:)`` (false after the probe timeout).
        case probe(ConnectionID)
        case report(Report)
    }

    enum Report: Sendable, Hashable {
        /// This connection is now the peer's one connection; `initiator` is the peer ID that dialed.
        case connected(PeerID, ConnectionID, initiator: PeerID)
        /// The peer's connection ended (a replacement, if any, is reported as connected next).
        case disconnected(PeerID, ConnectionID, reason: ConnectionEnd)
        /// An announced instance is not dialed, and why (no valid `id`, an incompatible `pv`,
        /// our own announcement).
        case skipped(name: String, reason: String)
        /// A dial failed; the next attempt is due at the time given, or none (nil).
        case dialFailed(PeerID, reason: String, retryAt: Duration?)
        /// That failure was a refusal: retrying will not change the answer, so whoever waits
        /// for this peer is told now (the broker still redials on its backoff: trust can change).
        case refused(PeerID, reason: String)
    }

    /// Failures that are the peer's answer, whatever the address and however often asked: our
    /// trust policy rejected it, TLS failed, it is no WebSocket server, the handshake failed.
    /// Other failures (no route, no answer in time) may pass.
    static func isRefusal(_ code: PeerConnectionError.Code) -> Bool {
        [.untrusted, .tls, .upgrade, .handshake].contains(code)
    }

    /// Why an announced instance is not connected to.
    enum Incompatibility: Error, Sendable, Hashable, CustomStringConvertible {
        /// TXT `id` is missing or not a peer ID: whom to expect is unknown.
        case noPeerID
        /// The announcement is this peer's own.
        case ownAnnouncement
        /// TXT `pv` is missing or not a protocol version.
        case noProtocolVersion
        /// Its protocol version is not compatible with ours.
        case incompatibleVersion(ProtocolVersion, ours: ProtocolVersion)

        /// The reason in words, as skipped reports and listings give it.
        var description: String {
            switch self {
            case .noPeerID: "its TXT has no valid id (a peer ID is required to know whom to expect)"
            case .ownAnnouncement: "it is this peer's own announcement"
            case .noProtocolVersion: "its TXT has no valid pv (protocol version)"
            case .incompatibleVersion(let theirs, let ours): "its protocol version \(theirs) is not compatible with ours, \(ours)"
            }
        }
    }

    /// Why the machine closes a connection: the shell counts each kind, and says the reason to
    /// the peer in the WebSocket close.
    enum CloseReason: Sendable, Hashable, CustomStringConvertible {
        /// The one of two live connections to a peer that both sides drop (crossing dials, or a
        /// second connection while the first still answers).
        case duplicate
        /// The peer connected again and this, its old connection, did not answer a ping within
        /// `probeTimeout`: the new connection replaces it.
        case replaced(probeTimeout: Duration)

        /// The reason as the close frame carries it.
        var description: String {
            switch self {
            case .duplicate: "duplicate"
            case .replaced(let timeout): "replaced: it did not answer a ping within \(timeout)"
            }
        }

        /// The end the app is told of (``BrokerEvent/disconnected(_:_:reason:)``).
        var end: ConnectionEnd {
            switch self {
            case .duplicate: ConnectionEnd(.duplicate, description, closeCode: .normal, byPeer: false)
            case .replaced: ConnectionEnd(.replaced, description, closeCode: .normal, byPeer: false)
            }
        }
    }

    /// One connection and who dialed it.
    struct Link: Sendable, Hashable {
        var id: ConnectionID
        var initiator: PeerID
    }

    /// Where one peer's connection stands. Each case holds what that state needs and no more,
    /// so a state that means nothing (a dial planned while connected, two dials at once, a
    /// probe with nothing to probe) cannot be written down.
    enum PeerState: Sendable, Hashable {
        /// No connection and nothing planned: not announced (or gone), not ours to dial, or
        /// waiting for discovery to say more.
        case idle
        /// No connection; we dial at `until`, and why we wait until then.
        case waiting(until: Duration, Wait)
        /// No connection; our dial is under way.
        case dialing
        /// The peer's one connection. `dialing`: a dial of ours is still under way; if it
        /// connects it is a second connection, and if this one ends first it is the redial.
        case connected(Link, dialing: Bool)
        /// A second connection (`contender`) arrived while `live` looked alive: `live` is being
        /// probed, and is kept or replaced when the answer comes.
        case probing(live: Link, contender: Link, dialing: Bool)

        /// The peer's one connection.
        var live: Link? {
            switch self {
            case .idle, .waiting, .dialing: nil
            case .connected(let live, _), .probing(let live, _, _): live
            }
        }

        /// No connection and no dial under way: a dial may start.
        var mayDial: Bool {
            switch self {
            case .idle, .waiting: true
            case .dialing, .connected, .probing: false
            }
        }

        /// A dial of ours is under way.
        var isDialing: Bool {
            switch self {
            case .idle, .waiting: false
            case .dialing: true
            case .connected(_, let dialing), .probing(_, _, let dialing): dialing
            }
        }

        /// When the planned dial is due.
        var due: Duration? {
            if case .waiting(let until, _) = self { return until }
            return nil
        }

        /// The connection `id` is this peer's (live or contender).
        func holds(_ id: ConnectionID) -> Bool {
            switch self {
            case .idle, .waiting, .dialing: false
            case .connected(let live, _): live.id == id
            case .probing(let live, let contender, _): live.id == id || contender.id == id
            }
        }

        /// The same state, with no dial of ours under way any more.
        var dialEnded: PeerState {
            switch self {
            case .idle, .waiting: self
            case .dialing: .idle
            case .connected(let live, _): .connected(live, dialing: false)
            case .probing(let live, let contender, _): .probing(live: live, contender: contender, dialing: false)
            }
        }
    }

    /// Why a dial waits.
    enum Wait: Sendable, Hashable {
        /// The larger peer ID gives the smaller `fallbackDelay` to invite it first.
        case fallback
        /// After a failed dial or a dropped connection: doubling, with jitter.
        case backoff
        /// The storm limit: too many redials in the window, none until the cool-down ends.
        case coolDown
    }

    /// The storm limit's memory of one peer.
    struct Redials: Sendable, Hashable {
        /// When redials were made; those older than the window are forgotten at the next dial.
        var times: [Duration] = []
        /// The next dial is the first after a fresh announcement (found, or found again after a
        /// goodbye): not a redial.
        var nextIsFresh = false
        /// No redial before this time.
        var coolDownUntil: Duration?

        func coolingDown(at now: Duration) -> Bool {
            coolDownUntil.map { now < $0 } ?? false
        }

        /// Whether a dial may start now, and counts it: nil when it may, else the time before
        /// which it may not. The first dial after a fresh announcement always may; a redial may
        /// unless a cool-down runs, or `limit` redials were made within `window`, which starts one.
        mutating func admit(at now: Duration, limit: Int, window: Duration, coolDown: Duration) -> Duration? {
            if nextIsFresh {
                nextIsFresh = false
                return nil
            }
            times.removeAll { now - $0 >= window }
            if let until = coolDownUntil, now < until { return until }
            guard times.count < limit else {
                times = []
                coolDownUntil = now + coolDown
                return coolDownUntil
            }
            times.append(now)
            return nil
        }
    }

    /// What the machine keeps of one peer: its state, and what outlives any one state.
    struct Peer: Sendable {
        var state = PeerState.idle
        /// The latest announcement; nil until discovery shows the peer, and after a goodbye.
        var announcement: PeerAnnouncement?
        /// The app asked for this peer: dial it regardless of the tiebreak.
        var requested = false
        /// The last backoff (before jitter); nil: the next one is the first.
        var backoff: Duration?
        var redials = Redials()
    }

    let configuration: Configuration
    private(set) var peers: [PeerID: Peer] = [:]
    /// Instance names skipped, with the reason reported (reported again only when it changes).
    private var skipped: [String: String] = [:]
    private var random: SplitMix64

    init(configuration: Configuration, seed: UInt64) {
        self.configuration = configuration
        random = SplitMix64(seed: seed)
    }

    var localID: PeerID { configuration.localID }

    /// True when we are the side that invites `peer` (the smaller peer ID, bytewise).
    func invites(_ peer: PeerID) -> Bool { localID < peer }

    /// The peer's one connection, if any.
    func connection(to peer: PeerID) -> ConnectionID? { peers[peer]?.state.live?.id }

    /// The earliest time something is due (a dial).
    var nextDeadline: Duration? {
        peers.values.compactMap(\.state.due).min()
    }

    /// Whether this broker connects to what `announcement` announces: the peer it names, or why not.
    func compatibility(of announcement: PeerAnnouncement) -> Result<PeerID, Incompatibility> {
        Self.compatibility(of: announcement, localID: localID, protocolVersion: configuration.protocolVersion)
    }

    /// The one compatibility verdict, for dialing and for listings alike: an announcement names
    /// a peer to connect to when its TXT has a valid peer ID that is not ours and a valid
    /// protocol version compatible with ours.
    static func compatibility(
        of announcement: PeerAnnouncement, localID: PeerID, protocolVersion ours: ProtocolVersion
    ) -> Result<PeerID, Incompatibility> {
        guard let text = announcement.peerID, let peer = PeerID(text) else { return .failure(.noPeerID) }
        guard peer != localID else { return .failure(.ownAnnouncement) }
        guard let text = announcement.protocolVersion, let version = ProtocolVersion(text) else { return .failure(.noProtocolVersion) }
        guard version.isCompatible(with: ours) else { return .failure(.incompatibleVersion(version, ours: ours)) }
        return .success(peer)
    }

    // MARK: Events

    mutating func handle(_ event: Event, at now: Duration) -> [Action] {
        switch event {
        case .announced(let announcement):
            return announced(announcement, at: now)
        case .withdrawn(let name, let domain):
            // No more dialing it; a dial under way and a connection are left to end by themselves.
            for (peer, state) in peers where state.announcement?.name == name && state.announcement?.domain == domain {
                peers[peer]?.announcement = nil
                peers[peer]?.backoff = nil
                if state.state.due != nil { peers[peer]?.state = .idle }
            }
            return []
        case .requested(let peer):
            peers[peer, default: Peer()].requested = true
            return dial(peer, at: now)
        case .dialSucceeded(let peer, let id):
            return arrived(peer, Link(id: id, initiator: localID), endsOurDial: true)
        case .accepted(let peer, let id):
            return arrived(peer, Link(id: id, initiator: peer), endsOurDial: false)
        case .dialFailed(let peer, let reason, let code):
            let failed = dialFailed(peer, reason: reason, at: now)
            return Self.isRefusal(code) ? failed + [.report(.refused(peer, reason: reason))] : failed
        case .closed(let id, let reason):
            return closed(id, reason: reason, at: now)
        case .probed(let id, let alive):
            return probed(id, alive: alive)
        case .networkChanged:
            // Redial at once every announced peer without a connection that is ours to dial
            // (without auto-invite, only those the app asked for).
            var actions: [Action] = []
            for (peer, state) in peers where state.state.mayDial && state.announcement != nil && (configuration.autoInvite || state.requested) {
                guard !state.redials.coolingDown(at: now) else { continue }
                if invites(peer) || state.requested {
                    actions += dial(peer, at: now)
                } else {
                    peers[peer]?.state = .waiting(until: now + configuration.fallbackDelay, .fallback)
                }
            }
            return actions
        }
    }

    /// Time passes: dials that are due start.
    mutating func advance(to now: Duration) -> [Action] {
        var actions: [Action] = []
        for (peer, state) in peers.sorted(by: { $0.key < $1.key }) {
            guard let due = state.state.due, due <= now else { continue }
            actions += dial(peer, at: now)
        }
        return actions
    }

    // MARK: Rules

    private mutating func announced(_ announcement: PeerAnnouncement, at now: Duration) -> [Action] {
        let peer: PeerID
        switch compatibility(of: announcement) {
        case .success(let found): peer = found
        case .failure(let why): return skip(announcement.name, why.description)
        }
        skipped[announcement.name] = nil
        var state = peers[peer] ?? Peer()
        let returning = state.announcement != announcement
        if state.announcement == nil, state.state.live == nil { state.redials.nextIsFresh = true }
        state.announcement = announcement
        peers[peer] = state
        guard configuration.autoInvite || state.requested, state.state.mayDial else { return [] }
        if let end = state.redials.coolDownUntil, now < end {
            // Found (again) during a cool-down: dialed when it ends, unless something is planned.
            if state.state.due == nil { peers[peer]?.state = .waiting(until: end, .coolDown) }
            return []
        }
        if invites(peer) || state.requested {
            // Found (again, after a drop): dial at once. The backoff is for a peer discovery
            // still shows unchanged.
            if !returning, let due = state.state.due, due > now { return [] }
            return dial(peer, at: now)
        }
        // The larger ID waits for the smaller's invitation, then dials itself.
        if state.state.due == nil || returning { peers[peer]?.state = .waiting(until: now + configuration.fallbackDelay, .fallback) }
        return []
    }

    private mutating func skip(_ name: String, _ reason: String) -> [Action] {
        guard skipped[name] != reason else { return [] }
        skipped[name] = reason
        return [.report(.skipped(name: name, reason: reason))]
    }

    /// Dials `peer` now if nothing is under way and the storm limit allows; else plans the dial
    /// for the cool-down's end.
    private mutating func dial(_ peer: PeerID, at now: Duration) -> [Action] {
        guard var state = peers[peer], state.state.mayDial else { return [] }
        guard let announcement = state.announcement else {
            // Nowhere to dial until discovery shows it again.
            peers[peer]?.state = .idle
            return []
        }
        let admitted = state.redials.admit(
            at: now, limit: configuration.redialLimit, window: configuration.redialWindow, coolDown: configuration.coolDown)
        if let until = admitted {
            state.state = .waiting(until: until, .coolDown)
            peers[peer] = state
            return []
        }
        state.state = .dialing
        peers[peer] = state
        return [.dial(peer, addresses: announcement.addresses, port: announcement.port)]
    }

    /// A connection to `peer` is up: dialed by us (which ends our dial) or accepted.
    private mutating func arrived(_ peer: PeerID, _ link: Link, endsOurDial: Bool) -> [Action] {
        var state = peers[peer] ?? Peer()
        state.backoff = nil
        let dialing = !endsOurDial && state.state.isDialing
        let actions: [Action]
        switch state.state {
        case .idle, .waiting, .dialing:
            state.state = .connected(link, dialing: dialing)
            actions = [.report(.connected(peer, link.id, initiator: link.initiator))]
        case .connected(let live, _):
            // A second connection: is the first still alive? (the "already connected" trap)
            state.state = .probing(live: live, contender: link, dialing: dialing)
            actions = [.probe(live.id)]
        case .probing(let live, let contender, _):
            // A third connection while one is being probed: keep the better of the two new ones.
            let (keep, drop) = preferred(contender, link, peer: peer)
            state.state = .probing(live: live, contender: keep, dialing: dialing)
            actions = [.close(drop.id, reason: .duplicate)]
        }
        peers[peer] = state
        return actions
    }

    /// Of two live connections to `peer`, the one both sides keep: the one the smaller peer ID
    /// initiated; when both were initiated by the same side, the older one (`first`).
    private func preferred(_ first: Link, _ second: Link, peer: PeerID) -> (keep: Link, drop: Link) {
        let smaller = min(localID, peer)
        if first.initiator != second.initiator, second.initiator == smaller { return (second, first) }
        return (first, second)
    }

    private mutating func probed(_ id: ConnectionID, alive: Bool) -> [Action] {
        for (peer, state) in peers {
            guard case .probing(let live, let contender, let dialing) = state.state, live.id == id else { continue }
            if !alive {
                // The old connection is dead: the new one replaces it at once.
                peers[peer]?.state = .connected(contender, dialing: dialing)
                let reason = CloseReason.replaced(probeTimeout: configuration.probeTimeout)
                return [
                    .close(live.id, reason: reason), .report(.disconnected(peer, live.id, reason: reason.end)),
                    .report(.connected(peer, contender.id, initiator: contender.initiator)),
                ]
            }
            let (keep, drop) = preferred(live, contender, peer: peer)
            peers[peer]?.state = .connected(keep, dialing: dialing)
            guard keep == contender else { return [.close(drop.id, reason: .duplicate)] }
            return [
                .close(drop.id, reason: .duplicate), .report(.disconnected(peer, drop.id, reason: CloseReason.duplicate.end)),
                .report(.connected(peer, keep.id, initiator: keep.initiator)),
            ]
        }
        return []
    }

    private mutating func dialFailed(_ peer: PeerID, reason: String, at now: Duration) -> [Action] {
        guard var state = peers[peer] else { return [] }
        state.state = state.state.dialEnded
        if state.state.mayDial {
            // Retried on the backoff while the peer is announced; without an announcement there
            // is nowhere to dial, until discovery shows it again.
            if state.announcement != nil {
                let delay = nextBackoff(&state)
                state.state = .waiting(until: now + delay, .backoff)
            } else {
                state.state = .idle
            }
        }
        peers[peer] = state
        return [.report(.dialFailed(peer, reason: reason, retryAt: state.state.due))]
    }

    private mutating func closed(_ id: ConnectionID, reason: ConnectionEnd, at now: Duration) -> [Action] {
        guard let (peer, found) = peers.first(where: { $0.value.state.holds(id) }) else { return [] }
        var state = found
        var actions: [Action] = [.report(.disconnected(peer, id, reason: reason))]
        switch state.state {
        case .idle, .waiting, .dialing:
            return []
        case .probing(let live, let contender, let dialing) where contender.id == id:
            // The newcomer went before its probe was answered: nothing changes for the app.
            state.state = .connected(live, dialing: dialing)
            actions = []
        case .probing(_, let contender, let dialing):
            // The live connection ended. A contender waiting on its probe takes over at once.
            state.state = .connected(contender, dialing: dialing)
            actions.append(.report(.connected(peer, contender.id, initiator: contender.initiator)))
        case .connected(_, dialing: true):
            // Our dial under way is the redial.
            state.state = .dialing
        case .connected(_, dialing: false):
            // Redial while the peer is still announced (the storm limit applies when it is made).
            if state.announcement != nil, configuration.autoInvite || state.requested {
                let delay = nextBackoff(&state) + (invites(peer) || state.requested ? .zero : configuration.fallbackDelay)
                state.state = .waiting(until: now + delay, .backoff)
            } else {
                state.state = .idle
            }
        }
        peers[peer] = state
        return actions
    }

    /// The delay before the next attempt: 1 s, 2 s, 4 s … 60 s, each with up to 20 % added at random.
    private mutating func nextBackoff(_ state: inout Peer) -> Duration {
        let base = state.backoff.map { min($0 * 2, configuration.backoffCap) } ?? configuration.backoffStart
        state.backoff = base
        let fraction = Double(random.next() >> 11) / Double(1 << 53) * configuration.jitter
        return base + base * fraction
    }
}
