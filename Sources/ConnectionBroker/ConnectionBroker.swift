public import NearbyBasics
public import DNSWire
public import Logging
public import NearbyDiscovery
public import PeerConnection
public import PeerTrust

/// What a broker is: who it is and whom it trusts (the connection configuration), what it
/// advertises and looks for, and whether it connects by itself.
public struct BrokerConfiguration: Sendable {
    /// Identity, trust, protocol version, info and timeouts of every connection.
    public var connection: PeerConnectionConfiguration
    /// The service type advertised and browsed, e.g. `_openagents._tcp`.
    public var serviceType: ServiceType
    /// The domains to advertise and browse in: `local.` (the link, over mDNS; the default) and
    /// DNS domains (over unicast DNS, with the discovery's wide-area settings). Candidates from
    /// every domain go through the same probe, tiebreak and trust.
    public var domains: [DomainName] = [ServiceType.localDomain]
    /// The instance name advertised (default: the identity's display name).
    public var name: String?
    /// The app's own TXT entries; `id` (peer ID) and `pv` (protocol version) are added.
    public var info = DiscoveryInfo()
    /// Listen (on `port`, 0: any) and advertise. Off for a client that only connects.
    public var advertises = true
    public var port = 0
    /// Which peers that connect to us get in.
    public var accept: PeerListener.AcceptPolicy = .trusted
    /// Take invitations (``ConnectionBroker/invite(ttl:uses:addresses:)``): an invitee is
    /// pinned in the offer's store, and the broker treats it as any pinned peer from then on
    /// (with a trust policy that reads that store, such as `.pinned(store)`).
    public var invitations: PeerListener.InvitationOffer?
    /// Connect to every compatible peer discovered, by the tiebreak (the smaller peer ID
    /// invites; the other dials after 3 s if nothing came).
    public var autoInvite = false
    /// How long one round-trip probe may take when measuring distance.
    public var probeTimeout: Duration = .seconds(2)
    /// How long after browsing began ``ConnectionBroker/connectNearest(timeout:)`` expects the
    /// last answer from a responder next to it: responders delay shared answers 20–120 ms (RFC
    /// 6762 §6), and resolving settles for 10 ms. Gathering goes on for the link's round trip
    /// past it, as measured (the best RTT plus the tie margin, at least 5 ms; 50 ms before any
    /// peer is measured): a peer whose answer comes later than that is farther than the best one.
    /// Widen it for responders that answer late (a Wi-Fi peer in power save can take hundreds of
    /// milliseconds to hear the question).
    public var answerWindow: Duration = .milliseconds(130)
    /// When a browse for the same type on the same discovery began before the broker's own
    /// (whose answers the discovery keeps and hands to the broker's browse at once): the answer
    /// window counts from then. The command-line tool starts browsing while it reads its
    /// identity and trust store.
    package var browsingSince: ContinuousClock.Instant?
    /// Where the broker says what it decides; silent by default.
    public var logger = Logger(label: "nearby.broker", factory: { _ in SwiftLogNoOpLogHandler() })

    public init(connection: PeerConnectionConfiguration, serviceType: ServiceType) {
        self.connection = connection
        self.serviceType = serviceType
    }
}

/// What happens to a broker's connections. A closed enum, like every event of the package: a
/// `switch` needs no `default`, and a case added later is a breaking change, released as one.
public enum BrokerEvent: Sendable {
    /// A connection is now the peer's one connection; `initiator` is the peer ID that dialed.
    case connected(PeerConnection, initiator: PeerID)
    /// The peer's connection ended (a replacement, if any, follows as `connected`): the
    /// connection is the one whose `PeerConnection.id` this is, and `reason` says why: how it
    /// ended (`PeerConnection.closed()`), or the kinds `duplicate` and `replaced` when the
    /// broker closed it for another connection to the same peer.
    case disconnected(PeerID, ConnectionID, reason: ConnectionEnd)
    /// An announced peer is not dialed: no valid TXT `id`, an incompatible `pv`.
    case skipped(name: String, reason: String)
    /// A peer that connected to us was refused (trust, handshake), with the reasons.
    case rejected(PeerListener.Rejection)
    /// Connections turned away before they proved anything, summed up (see `PeerListener.Event.strangers`).
    case strangers(StrangerSummary)
    /// A dial failed (the broker retries while the peer is announced, with backoff).
    case dialFailed(PeerID, reason: String)
    /// Someone tried to use one of the broker's invitations (accepted, not needed, or refused).
    case invitation(InvitationAttempt)
}

/// What a broker did so far: every connection it opened, accepted or threw away is counted.
public struct BrokerStatistics: Hashable, Sendable {
    /// Dials started, and how they ended.
    public var dials = 0
    public var dialsSucceeded = 0
    public var dialsFailed = 0
    /// Connections peers opened to us that were authenticated and initialized.
    public var accepted = 0
    /// Second connections to a peer closed as duplicates (crossing dials, a late happy-eyeballs winner).
    public var duplicatesClosed = 0
    /// Connections replaced because their peer reconnected and they did not answer a ping.
    public var replaced = 0
    /// Announced instances skipped (no valid id, an incompatible pv).
    public var skipped = 0
}

/// Why a broker could not do what was asked, in words a person can act on.
public struct BrokerError: Error, Hashable, Sendable, CustomStringConvertible {
    /// What went wrong, as an open set of codes (like every other error of the package): a
    /// `switch` needs a `default:`, and codes added later break nobody.
    public typealias Code = OpenKind<BrokerError>
    public var code: Code
    public var message: String
    /// With `refused` or `unreachable`: the connection's own error, when there is one.
    public var connectionError: PeerConnectionError?

    public init(_ code: Code, _ message: String, connectionError: PeerConnectionError? = nil) {
        self.code = code
        self.message = message
        self.connectionError = connectionError
    }

    public var description: String { message }
}

/// Discovered endpoints in, one mutually authenticated connection per peer out.
///
/// A broker advertises this peer (TXT `id` and `pv` added to the app's entries), browses for
/// the same service type, and connects: on request (``connect(peerID:timeout:)``,
/// ``connect(name:timeout:)``, ``connect(host:port:timeout:)``, ``connectNearest(timeout:)``)
/// or by itself (`autoInvite`). Whoever found whom first, each peer ends with exactly one
/// connection to each other peer: the smaller peer ID invites, crossing connections collapse to
/// the one the smaller ID initiated, a peer that reconnects while its old connection looks alive
/// gets the old one probed and replaced if dead, and dropped connections are redialed with a
/// bounded backoff. The decisions are `BrokerStateMachine`'s; this type performs them.
public final class ConnectionBroker: Sendable {
    /// Connections made and lost, peers skipped, refusals. Bounded for an application that
    /// reads slowly or not at all: `connected` always waits, unless the connection ended before
    /// it was read (then neither is reported); `dialFailed` waits once per peer and `skipped`
    /// once per name (the newest reason); refusals wait one by one up to ``noticesWaiting`` and
    /// are then summed up in one `strangers` event.
    public let events: EventStream<BrokerEvent>
    /// Refusals that wait one by one on ``events`` before they are summed up.
    public static let noticesWaiting = 16
    /// The name this peer is advertised under (after any rename), nil when it does not advertise.
    public let advertisedName: String?
    /// The port listened on, nil when it does not listen.
    public let port: Int?
    public var peerID: PeerID? { loop.configuration.connection.identity?.peerID }

    let loop: BrokerLoop
    /// The task ``start(_:discovery:)`` runs ``run()`` in, for a broker nobody else runs.
    private let runner = Locked<Task<Void, Never>?>(nil)
    /// Whether ``run()`` was called (a broker runs once).
    private let claimed = Locked(false)

    deinit {
        runner.withLockedValue { $0?.cancel() }
    }

    private init(loop: BrokerLoop, events: EventStream<BrokerEvent>, advertisedName: String?, port: Int?) {
        self.loop = loop
        self.events = events
        self.advertisedName = advertisedName
        self.port = port
    }

    /// Prepares a broker on `discovery` and runs it in a task of its own, for scripts and
    /// programs without a task group of their own; ``shutdown()`` stops it and waits. Programs
    /// with a task group (or a `ServiceGroup`) use ``prepare(_:discovery:)`` and run ``run()``
    /// in it instead.
    public static func start(_ configuration: BrokerConfiguration, discovery: NearbyDiscovery) async throws(BrokerError) -> ConnectionBroker {
        let broker = try await prepare(configuration, discovery: discovery)
        broker.claimed.withLockedValue { $0 = true }
        let loop = broker.loop
        broker.runner.withLockedValue { $0 = Task { await loop.run() } }
        return broker
    }

    /// The broker's work, in the caller's task: accepting, dialing, probing, measuring, the
    /// timekeeper. It runs until its task is cancelled, its `ServiceGroup` shuts down gracefully,
    /// or ``shutdown()`` is called; then it withdraws the advertisement, stops dialing and closes
    /// every connection (1001, going away), and returns. A broker runs once.
    /// - Throws: ``BrokerError`` (`startFailed`) when the broker runs already (``start(_:discovery:)``
    ///   runs it).
    public func run() async throws(BrokerError) {
        let first = claimed.withLockedValue { claimed -> Bool in
            defer { claimed = true }
            return !claimed
        }
        guard first else { throw BrokerError(.startFailed, "this broker runs already: run() runs a prepared broker once; start() runs it by itself") }
        await loop.run()
    }

    /// Prepares a broker on `discovery`: listens and advertises (unless `advertises` is off), so
    /// that ``port`` and ``advertisedName`` are known. Browsing, accepting, dialing and measuring
    /// begin when ``run()`` runs.
    public static func prepare(_ configuration: BrokerConfiguration, discovery: NearbyDiscovery) async throws(BrokerError) -> ConnectionBroker {
        guard let identity = configuration.connection.identity, !configuration.connection.insecure else {
            throw BrokerError(.startFailed, "a broker needs an identity and TLS: peers are told apart by their peer IDs")
        }
        let (events, continuation) = EventStream.makeStream(buffer: BrokerEventBuffer<BrokerEvent>())
        let loop = BrokerLoop(configuration: configuration, localID: identity.peerID, continuation: continuation, discovery: discovery)
        var advertisedName: String?
        var port: Int?
        if configuration.advertises {
            let listener: PeerListener
            do {
                listener = try await PeerListener.listen(
                    port: configuration.port, configuration: configuration.connection, accept: configuration.accept,
                    invitations: configuration.invitations)
            } catch {
                throw BrokerError(.startFailed, "cannot listen on port \(configuration.port): \(error.message)", connectionError: error)
            }
            port = listener.port
            var info = configuration.info
            do {
                try info.set("id", to: identity.peerID.description)
                try info.set("pv", to: configuration.connection.protocolVersion.description)
                let name = configuration.name ?? identity.displayName
                var advertisements: [Advertisement] = []
                do {
                    for domain in configuration.domains {
                        let type = configuration.serviceType.inDomain(domain)
                        advertisements.append(try await discovery.advertise(name, type: type, port: UInt16(listener.port), info: info))
                    }
                } catch {
                    for advertisement in advertisements { await advertisement.cancel() }
                    throw error
                }
                advertisedName = advertisements.first?.name
                await loop.started(listener: listener, advertisements: advertisements)
            } catch {
                await listener.close()
                throw BrokerError(.startFailed, "cannot advertise: \(error)")
            }
        }
        return ConnectionBroker(loop: loop, events: events, advertisedName: advertisedName, port: port)
    }

    /// Makes an invitation to this broker's listener (see `PeerListener.invite(ttl:uses:addresses:)`).
    /// - Throws: ``BrokerError`` (`startFailed`) when the broker does not listen or takes no invitations.
    public func invite(ttl: Duration = .seconds(600), uses: Int = 1, addresses: [InvitationLink.Address]? = nil) async throws(BrokerError) -> InvitationLink {
        guard let listener = await loop.listener else { throw BrokerError(.startFailed, "this broker does not listen (advertises is off), so it cannot be invited to") }
        do {
            return try listener.invite(ttl: ttl, uses: uses, addresses: addresses)
        } catch {
            throw BrokerError(.startFailed, error.message, connectionError: error)
        }
    }

    /// The connection to `peerID`: the existing one, or a new one once the peer is discovered
    /// and connected (whoever dials, by the tiebreak).
    public func connect(peerID: PeerID, timeout: Duration = .seconds(10)) async throws(BrokerError) -> PeerConnection {
        try await loop.connect(peerID: peerID, timeout: timeout)
    }

    /// The connection to the peer advertised as `name`.
    public func connect(name: String, timeout: Duration = .seconds(10)) async throws(BrokerError) -> PeerConnection {
        let peer = try await loop.peerID(named: name, timeout: timeout)
        return try await loop.connect(peerID: peer, timeout: timeout)
    }

    /// A manual connection (when multicast is unavailable), through the same trust, handshake
    /// and de-duplication: a peer already connected keeps its one connection.
    public func connect(host: String, port: Int, timeout: Duration = .seconds(10)) async throws(BrokerError) -> PeerConnection {
        try await loop.connect(host: host, port: port, timeout: timeout)
    }

    /// The nearest compatible peer: every candidate discovered while an answer from a nearer
    /// peer could still arrive (until ``BrokerConfiguration/answerWindow`` after browsing began
    /// plus the best RTT and the tie margin; 100 ms after the first answer when that came after
    /// the window, as in a browse that began long ago) is measured with a round-trip probe as
    /// soon as it is announced (8 at most at once, each peer's addresses happy-eyeballs style);
    /// the lowest RTT wins, RTTs within 10 % or 1 ms are ties that go to the smaller peer ID.
    /// The choice is made as soon as it cannot change: once gathering is over and the best RTT
    /// is known, a candidate that has not answered within that RTT plus the tie margin (at
    /// least 5 ms) is farther, and is not waited for (its ``MeasuredPeer/rttExceeds`` says how
    /// long it was given). Returns the connection and the candidates as measured, nearest first.
    public func connectNearest(timeout: Duration = .seconds(10)) async throws(BrokerError) -> (PeerConnection, [MeasuredPeer]) {
        let (chosen, candidates) = try await loop.measureCandidates(timeout: timeout)
        guard let nearest = chosen else {
            throw BrokerError(.unreachable, "\(candidates.count) peer(s) found, none answered a round-trip probe within \(loop.configuration.probeTimeout)")
        }
        let connection = try await loop.connect(peerID: nearest.peerID, timeout: timeout)
        return (connection, candidates)
    }

    /// The peers discovered within `timeout`, compatible or not (and why not); compatible ones
    /// measured with a round-trip probe.
    public func peers(timeout: Duration) async -> [DiscoveredPeer] {
        await loop.measureAll(after: timeout)
    }

    /// What the broker has done so far.
    public func statistics() async -> BrokerStatistics {
        await loop.statistics
    }

    /// Stops: withdraws the advertisement (goodbye), stops browsing and dialing, and closes
    /// every connection (1001, going away); returns once that is done. One path: the running
    /// ``run()`` is asked to end and does it on its way out; a broker that never ran does it here.
    public func shutdown() async {
        loop.stop()
        if claimed.withLockedValue({ $0 }) {
            await loop.finished()
        } else {
            await loop.shutdown()
        }
    }
}

extension OpenKind where Owner == BrokerError {
    /// Nothing suitable was found (in time).
    public static var notFound: Self { Self("notFound") }
    /// Found, but no connection could be made (in time).
    public static var unreachable: Self { Self("unreachable") }
    /// The broker could not start (listening or advertising failed).
    public static var startFailed: Self { Self("startFailed") }
    /// The connection was refused (see ``BrokerError/connectionError``).
    public static var refused: Self { Self("refused") }
}

extension OpenKind where Owner == ConnectionEnd {
    /// The broker closed it: a second connection to a peer it already had one with (crossing
    /// dials), keeping the one the smaller peer ID initiated.
    public static var duplicate: Self { Self("duplicate") }
    /// The broker closed it: the peer connected again and this old connection did not answer
    /// a ping in time, so the new one took its place.
    public static var replaced: Self { Self("replaced") }
}
