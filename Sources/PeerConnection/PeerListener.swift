#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import NetworkPlatform
#if canImport(Glibc)
    import Glibc
#endif
import CoreMetrics
import NearbyMetrics
import Logging
import NIOCore
import NIOPosix
import NIOSSL
public import NearbyBasics
public import PeerTrust

/// Accepts connections from peers: TLS judged by the configuration's trust policy, then
/// `initialize`, then an ``AcceptPolicy`` decision. Each connection that gets through
/// arrives on ``events`` as `.connected`; each one refused, with the reason, as `.rejected`.
public final class PeerListener: Sendable {
    /// Which authenticated peers get in.
    public enum AcceptPolicy: Sendable {
        /// Peers the trust policy trusts; others are refused in the TLS handshake.
        case trusted
        /// Any peer that proves its key in TLS, trusted or not (see ``PeerConnection/verdict``).
        case all
        /// The app decides for each peer it has not admitted before (an ``Invitation``);
        /// undecided by ``Invitation/answerBy`` (the configuration's `invitationTimeout`), it is
        /// declined. The peer is told that someone decides, and by when, so it waits that long.
        /// Peers the trust policy trusts (pinned, paired) get in without a question, and so does
        /// a peer the app admitted earlier while this listener runs (the same peer ID). The task
        /// that runs the closure is cancelled when the peer goes away first.
        case ask(@Sendable (Invitation) async -> Bool)
    }

    /// A peer that has proven its key and sent `initialize`, waiting to be let in.
    public struct Invitation: Sendable {
        public let peer: PeerHello
        /// What the trust policy says about it (nil on an insecure listener).
        public let verdict: TrustVerdict?
        public let address: String
        public let port: Int
        /// The decision is due by then; after it the peer is declined and an answer counts for nothing.
        public let answerBy: ContinuousClock.Instant
        /// The name to show: the one it gave in `initialize`, else its certificate's.
        public var displayName: String {
            if let name = peer.displayName, !name.isEmpty { return name }
            if case .trusted(let trusted)? = verdict { return trusted.displayName }
            return peer.peerID?.short ?? "unknown peer"
        }
        public var isTrusted: Bool { verdict?.isTrusted ?? false }
    }

    /// A connection that did not get through, and why.
    public struct Rejection: Sendable {
        public let address: String
        public let port: Int
        /// The key the peer proved, when TLS got that far.
        public let peerID: PeerID?
        public let error: PeerConnectionError
    }

    /// Pairing for peers that are not trusted yet (see ``PeerConnection/pair(host:port:expecting:configuration:store:timeout:confirm:)``).
    /// With it, untrusted peers get through the TLS handshake, but may only pair (or, under
    /// `.ask`, be invited); under `.trusted` their `initialize` is refused.
    public struct PairingOffer: Sendable {
        /// Where paired peers are pinned.
        public var store: TrustStore
        /// Asks the person whether the other device shows the same code; true pins (once the
        /// other side said yes too).
        public var confirm: @Sendable (PairingRequest) async -> Bool
        /// A pairing must be done within this, people included.
        public var timeout: Duration = .seconds(60)
        /// Failed pairings (declined, wrong reveal, timed out) allowed within ``failureWindow``;
        /// beyond that, pairing is refused until the oldest failure is older than the window.
        public var maximumFailures = 5
        public var failureWindow: Duration = .seconds(600)

        public init(store: TrustStore, confirm: @escaping @Sendable (PairingRequest) async -> Bool) {
            self.store = store
            self.confirm = confirm
        }
    }

    /// Invitations for peers that do not trust us yet (``invite(ttl:uses:addresses:)``): with
    /// it, untrusted peers get through the TLS handshake, but may only use an invitation (or
    /// pair, or be asked about, as the other settings allow) before `initialize`.
    public struct InvitationOffer: Sendable {
        /// Where invitees are pinned (under the name in their certificate).
        public var store: TrustStore
        /// Wrong proofs after which an invitation is void, even for the right secret.
        public var maximumWrongProofs = 3

        public init(store: TrustStore) {
            self.store = store
        }
    }

    /// What the listener reports. A closed enum, like every event of the package: a `switch`
    /// needs no `default`, and a case added later is a breaking change, released as one.
    public enum Event: Sendable {
        case connected(PeerConnection)
        case rejected(Rejection)
        /// A peer paired with us: both people confirmed the code, and it is pinned.
        case paired(PairingResult)
        /// Someone tried to use one of our invitations: accepted (and pinned), not needed (it
        /// was trusted already), or refused, with the reason.
        case invitation(InvitationAttempt)
        /// Connections turned away before they proved anything, summed up over an interval:
        /// beyond the first few in it (``AdmissionSettings/reportedPerInterval``), failed
        /// set-ups are not reported one by one, so that strangers cannot flood this stream.
        case strangers(StrangerSummary)
    }

    /// The port listened on (the one the system chose when 0 was asked for).
    public let port: Int
    /// What happens at the listener, in order. Bounded for an application that reads slowly
    /// or not at all: `connected`, `paired` and accepted invitations always wait (each carries
    /// what the application must act on); refusals (`rejected`, `strangers`, refused
    /// invitations) wait one by one up to ``noticesWaiting``, and beyond that are folded into one
    /// waiting `strangers` summary, counted in ``StrangerSummary/failedUnreported``.
    public let events: EventStream<Event>
    /// Refusals that wait one by one on ``events`` before they are summed up.
    public static let noticesWaiting = 16
    private let channel: any Channel
    private let continuation: EventStream<Event>.Source
    private let live = Locked<[ObjectIdentifier: PeerConnection]>([:])
    private let desk: InvitationDesk?
    private let peerID: PeerID?
    private let settingUp: Locked<Set<ObjectIdentifier>>

    private init(
        channel: any Channel, events: EventStream<Event>, continuation: EventStream<Event>.Source, desk: InvitationDesk?, peerID: PeerID?,
        settingUp: Locked<Set<ObjectIdentifier>>
    ) {
        self.channel = channel
        self.settingUp = settingUp
        self.events = events
        self.continuation = continuation
        self.desk = desk
        self.peerID = peerID
        port = channel.localAddress?.port ?? 0
    }

    /// Starts listening on `host` (default: every address, IPv6 and IPv4 on one socket, or IPv4
    /// alone on a host whose IPv6 is switched off) and `port` (0: any free one). Connections
    /// still setting up are held within the configuration's ``PeerConnectionConfiguration/admission``.
    public static func listen(
        host: String = "::", port: Int, configuration: PeerConnectionConfiguration, accept: AcceptPolicy = .trusted,
        pairing: PairingOffer? = nil, invitations: InvitationOffer? = nil
    ) async throws(PeerConnectionError) -> PeerListener {
        guard (0...65535).contains(port) else { throw PeerConnectionError(.invalidInput, "port \(port) is out of range; use 0-65535") }
        let tls = try TLS.context(for: configuration, server: true)
        if invitations != nil, tls == nil {
            throw PeerConnectionError(.invalidInput, "invitations need TLS and an identity: the invitee checks the inviter's key, and the inviter the invitee's")
        }
        let (events, continuation) = EventStream.makeStream(buffer: Event.policy)
        let desk = invitations.map { offer in
            InvitationDesk(store: offer.store, maximumWrongProofs: offer.maximumWrongProofs) { continuation.yield(.invitation($0)) }
        }
        let untrustedMayEnter = pairing != nil || invitations != nil
        let decide: @Sendable (PeerProof?, SocketAddress?) -> SessionHandler.Decide?
        switch accept {
        case .trusted where untrustedMayEnter:
            // Untrusted peers got through TLS to pair or use an invitation; initializing is for
            // trusted ones only (an invitation admits its invitee before this is asked).
            let hint = pairing != nil ? "pair with it first (nearby pair --host H --port P)" : "ask it for an invitation (nearby invite)"
            decide = { proof, _ in
                proof?.verdict?.isTrusted == true
                    ? nil : { @Sendable _ in .refuse("this peer admits only peers it trusts; \(hint)") }
            }
        case .trusted, .all:
            decide = { _, _ in nil }
        case .ask(let ask):
            // Peers admitted by the app while this listener runs: not asked again.
            let admitted = Locked<Set<PeerID>>([])
            decide = { proof, address in
                let verdict = proof?.verdict
                return { hello in
                    if verdict?.isTrusted == true { return .admit }
                    if let peerID = hello.peerID, admitted.withLockedValue({ $0.contains(peerID) }) { return .admit }
                    return .ask { hello, answerBy in
                        let invitation = Invitation(
                            peer: hello, verdict: verdict, address: displayAddress(address), port: address?.port ?? 0, answerBy: answerBy)
                        let accepted = await ask(invitation)
                        if accepted, !Task.isCancelled, let peerID = hello.peerID { admitted.withLockedValue { _ = $0.insert(peerID) } }
                        return accepted
                    }
                }
            }
        }
        let requireTrust: Bool = if case .trusted = accept, !untrustedMayEnter { true } else { false }
        var side = Setup.Side(
            role: .accepting, configuration: configuration, tls: tls, expected: nil, requireTrust: requireTrust, decide: decide, host: "")
        if let pairing {
            let limiter = PairingLimiter(maximumFailures: pairing.maximumFailures, window: pairing.failureWindow)
            side.pairing = PairingSetup(
                side: .offer(Locked(limiter)), store: pairing.store, confirm: pairing.confirm, timeout: pairing.timeout)
        }
        if let desk { side.invitation = InvitationSetup(side: .offer(desk)) }
        let setupSide = side
        let liveBox = Locked<PeerListener?>(nil)
        // Connections accepted whose setup (TLS, invitation, pairing, initialize) is not over yet.
        let settingUp = Locked<Set<ObjectIdentifier>>([])
        // Strangers: how many may be setting up at once, and who makes room (see AdmissionSettings).
        let admitting = configuration.admission.fitting(descriptors: NetworkPlatform.descriptorLimit())
        if admitting.maximumSettingUp < configuration.admission.maximumSettingUp {
            configuration.logger.notice(
                "only \(admitting.maximumSettingUp) connections may be setting up at once, not \(configuration.admission.maximumSettingUp): the process may open \(NetworkPlatform.descriptorLimit() ?? 0) descriptors (ulimit -n)")
        }
        // Metrics from the factory in force now: swift-metrics' global one, or the caller's
        // task-local one (MetricsSystem.factory says which).
        let metrics = ListenerMetrics(factory: MetricsSystem.factory)
        let (sessions, setupTime) = (metrics.sessions, metrics.setupTime)
        let admission = AdmissionDesk(settings: admitting, metrics: metrics, logger: configuration.logger) { continuation.yield(.strangers($0)) }
        let initializer: @Sendable (any Channel) -> EventLoopFuture<Void> = { channel in
            channel.eventLoop.makeCompletedFuture {
                guard let admitted = admission.arrived(channel) else { throw AdmissionRefused() }
                let start = ContinuousClock.now
                let key = ObjectIdentifier(channel)
                settingUp.withLockedValue { _ = $0.insert(key) }
                let setupOver: @Sendable () -> Void = { settingUp.withLockedValue { _ = $0.remove(key) } }
                channel.closeFuture.whenComplete { _ in
                    setupOver()
                    _ = admission.failed(admitted)  // closed before its set-up said how it ended
                }
                try channel.pipeline.syncOperations.addHandler(AdmissionGate(desk: admission, id: admitted, takesTurns: setupSide.tls != nil))
                let opened = try Setup.configure(channel, side: setupSide)
                let address = channel.remoteAddress
                opened.whenComplete { outcome in
                    if case .failure = outcome { setupOver() }
                    switch outcome {
                    case .failure(let error) where error is ProbeAnswered:
                        admission.succeeded(admitted)  // a round-trip probe, answered: nobody to report
                    case .failure(let error):
                        let proof = try? channel.pipeline.syncOperations.handler(type: SetupWatcher.self).proof
                        if (error as? PeerConnectionError)?.code == .closed, proof?.presented.isEmpty ?? true {
                            // The dialer hung up before showing a certificate: a peer dialing
                            // several of our addresses at once keeps the first to connect and
                            // closes the others. Nobody was turned away; nothing to report.
                            admission.succeeded(admitted)
                            configuration.logger.debug("\(displayAddress(address)) closed the connection before the handshake was over")
                            break
                        }
                        // A key presented and refused makes its source wait before its next
                        // handshake (HandshakeTurns). Strangers beyond a few per interval are
                        // only counted (a summary tells).
                        let refusedKey = proof?.refusal != nil && !(proof?.presented.isEmpty ?? true)
                        guard admission.failed(admitted, refusedKey: refusedKey) else { break }
                        continuation.yield(.rejected(Rejection(
                            address: displayAddress(address), port: address?.port ?? 0, peerID: proof?.peerID,
                            error: error as? PeerConnectionError ?? PeerConnectionError(.closed, "\(error)"))))
                    case .success(let open):
                        admission.proven(admitted, trusted: open.proof?.verdict?.isTrusted == true)
                        open.session.established.futureResult.whenComplete { outcome in
                            defer { setupOver() }  // after a connection is tracked: never idle in between
                            switch outcome {
                            case .failure(let error):
                                var refusal = error as? PeerConnectionError ?? PeerConnectionError(.handshake, "\(error)")
                                // An invitation refused by the book: reported as an ``Event/invitation(_:)`` already.
                                if refusal.code == .invitation {
                                    admission.succeeded(admitted)
                                    return
                                }
                                guard admission.failed(admitted) else { return }
                                if refusal.code == .handshake, untrustedMayEnter, case .trusted = accept,
                                    case .rejected(let reasons)? = open.proof?.verdict
                                {
                                    refusal = PeerConnectionError(
                                        .untrusted, "the peer is not trusted; it may pair first", reasons: reasons, peerID: open.proof?.peerID)
                                }
                                continuation.yield(.rejected(Rejection(
                                    address: displayAddress(address), port: address?.port ?? 0, peerID: open.proof?.peerID, error: refusal)))
                            case .success(.paired(let result)):
                                admission.succeeded(admitted)
                                continuation.yield(.paired(result))
                            case .success(.initialized(let hello)):
                                admission.succeeded(admitted)
                                let setupDuration = ContinuousClock.now - start
                                sessions.increment()
                                setupTime.record(setupDuration)
                                let connection = PeerConnection(
                                    role: .accepting, peer: hello, proof: open.proof, channel: channel, session: open.session, streams: open.streams,
                                    requestTimeout: configuration.requestTimeout, setupDuration: setupDuration)
                                liveBox.withLockedValue { $0 }?.track(connection)
                                continuation.yield(.connected(connection))
                            }
                        }
                    }
                }
            }
        }
        do {
            let channel = try await bind(host: host, port: port, initializer: initializer, logger: configuration.logger)
            admission.startTimer(on: channel.eventLoop)
            channel.closeFuture.whenComplete { _ in admission.stop() }
            let listener = PeerListener(
                channel: channel, events: events, continuation: continuation, desk: desk, peerID: configuration.identity?.peerID,
                settingUp: settingUp)
            liveBox.withLockedValue { $0 = listener }
            return listener
        } catch {
            configuration.logger.debug("listening on \(host) port \(port) failed: \(error)")
            throw SocketErrors.listenFailure(error, host: host, port: port)
        }
    }

    /// Binds the listening socket. The default host `::` is one dual-stack socket (IPv6 and, as
    /// mapped addresses, IPv4) where this machine has IPv6, and `0.0.0.0` where it has not: IPv6
    /// switched off by sysctl (no IPv6 address left), or a kernel without the family
    /// (`ipv6.disable=1`, where the socket cannot be made). Literal
    /// addresses are never put through name resolution: glibc's getaddrinfo refuses `::` on a
    /// host whose IPv6 is switched off by sysctl (EAI_ADDRFAMILY), although the socket works.
    static func bind(
        host: String, port: Int, initializer: @escaping @Sendable (any Channel) -> EventLoopFuture<Void>, logger: Logger
    ) async throws -> any Channel {
        func bootstrap(dualStack: Bool) -> ServerBootstrap {
            var bootstrap = ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
                .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
                .serverChannelOption(.backlog, value: 1024)
                .childChannelOption(.tcpOption(.tcp_nodelay), value: 1)
                .childChannelInitializer(initializer)
            #if os(Linux)
                // Deferred accept: the kernel hands over a connection once its first bytes have
                // come (a peer's ClientHello follows its handshake at once), so connections that
                // send nothing reach us only after the kernel's wait, and rarely take a place.
                bootstrap = bootstrap.serverChannelOption(
                    ChannelOptions.Types.SocketOption(level: .tcp, name: NIOBSDSocket.Option(rawValue: TCP_DEFER_ACCEPT)),
                    value: SocketOptionValue(ListenTiming.deferAcceptSeconds))
            #endif
            // Dual stack whatever net.ipv6.bindv6only says.
            if dualStack { bootstrap = bootstrap.serverChannelOption(ChannelOptions.Types.SocketOption(level: .ipv6, name: .ipv6_v6only), value: 0) }
            return bootstrap
        }
        guard let literal = try? SocketAddress(ipAddress: host, port: port) else {
            return try await bootstrap(dualStack: false).bind(host: host, port: port).get()
        }
        guard host == "::" else { return try await bootstrap(dualStack: false).bind(to: literal).get() }
        // IPv6 switched off (disable_ipv6: not even ::1 is left): IPv4 alone, and said so.
        guard NetworkPlatform.interfaceAddresses().contains(where: \.isIPv6) else {
            let channel = try await bootstrap(dualStack: false).bind(to: SocketAddress(ipAddress: "0.0.0.0", port: port)).get()
            logger.debug("IPv6 is switched off on this host (no IPv6 address, not even ::1): listening on port \(channel.localAddress?.port ?? port), IPv4 only")
            return channel
        }
        do {
            let channel = try await bootstrap(dualStack: true).bind(to: literal).get()
            logger.debug("listening on port \(channel.localAddress?.port ?? port), IPv6 and IPv4 (one dual-stack socket)")
            return channel
        } catch where SocketErrors.meansNoIPv6(SocketErrors.errno(of: error)) {
            logger.debug("no IPv6 on this host (\(error)): listening on IPv4 only")
            let channel = try await bootstrap(dualStack: false).bind(to: SocketAddress(ipAddress: "0.0.0.0", port: port)).get()
            logger.debug("listening on port \(channel.localAddress?.port ?? port), IPv4 only")
            return channel
        }
    }

    private func track(_ connection: PeerConnection) {
        let key = ObjectIdentifier(connection)
        live.withLockedValue { $0[key] = connection }
        connection.channel.closeFuture.whenComplete { [live] _ in live.withLockedValue { _ = $0.removeValue(forKey: key) } }
    }

    /// Makes an invitation to this listener: a link (or QR code) that lets one peer (or
    /// `uses` peers) that holds it connect and be pinned, each side pinning the other. It lives
    /// in this listener's memory only: closing the listener revokes it.
    /// - Parameters:
    ///   - ttl: how long it may be used (default 10 minutes).
    ///   - uses: how many invitees it admits (default 1).
    ///   - addresses: where invitees should try; default ``localAddresses(port:hostLabel:)`` with this listener's port.
    /// - Throws: `PeerConnectionError` (`invalidInput`): the listener takes no invitations
    ///   (no ``InvitationOffer``), a ttl or uses that is not positive, no address.
    public func invite(ttl: Duration = .seconds(600), uses: Int = 1, addresses: [InvitationLink.Address]? = nil) throws(PeerConnectionError) -> InvitationLink {
        guard let desk, let peerID else {
            throw PeerConnectionError(.invalidInput, "this listener takes no invitations: listen with an InvitationOffer")
        }
        guard ttl > .zero else { throw PeerConnectionError(.invalidInput, "an invitation's time to live must be positive") }
        guard uses >= 1 else { throw PeerConnectionError(.invalidInput, "an invitation must allow at least one use, not \(uses)") }
        let link = try InvitationLink.make(peerID: peerID, addresses: addresses ?? Self.localAddresses(port: port), ttl: ttl)
        desk.add(link, uses: uses)
        return link
    }

    /// Revokes an invitation at once; returns whether this listener held it.
    @discardableResult
    public func revoke(_ invitation: InvitationLink) -> Bool {
        desk?.revoke(invitation) ?? false
    }

    /// Whether every invitation made so far is over (used up, void or expired).
    public var invitationsAreOver: Bool { desk?.allOver ?? true }

    /// The addresses an invitation to this machine carries by default: every IPv4 and IPv6
    /// address of every running interface that another host can reach, up to four of each,
    /// then this machine's `.local` name (`hostLabel`, default the machine's host name;
    /// answered by a responder on the link, if any). Reachable means a LAN or a tunnel (a VPN
    /// is how the other side may reach us), not loopback, not link-local (it needs the
    /// invitee's interface name), and not a container bridge or a hypervisor's link, which
    /// no other machine reaches (`NEARBY_VIRTUAL_LINKS=docker0,…` or `all` counts them in).
    /// Only loopback addresses when there is nothing else.
    public static func localAddresses(port: Int, hostLabel: String? = nil) -> [InvitationLink.Address] {
        var v4: [InvitationLink.Address] = [], v6: [InvitationLink.Address] = [], loopback: [InvitationLink.Address] = []
        for entry in NetworkPlatform.interfaceAddresses() where entry.isRunning {
            let bytes = entry.address
            let text = entry.isIPv6 ? IPv6Text.format(bytes) : bytes.map(String.init).joined(separator: ".")
            guard let address = try? InvitationLink.Address(host: text, port: port) else { continue }
            if entry.kind == .loopback {
                loopback.append(address)
                continue
            }
            guard entry.reachableFromElsewhere else { continue }
            if entry.isIPv6 {
                if v6.count < 4, !v6.contains(address) { v6.append(address) }
            } else {
                if v4.count < 4, !v4.contains(address) { v4.append(address) }
            }
        }
        var found = v4 + v6
        if found.isEmpty { found = Array(loopback.prefix(1)) }
        if let label = hostLabel ?? NetworkPlatform.hostLabel(), let local = try? InvitationLink.Address(host: label + ".local", port: port) {
            found.append(local)
        }
        return found
    }

    /// The connections that are open now.
    public var connections: [PeerConnection] { live.withLockedValue { Array($0.values) } }

    /// Whether nothing is connected and nothing is on its way in: no open connection, and none
    /// still in its setup (TLS, an invitation, pairing, `initialize`; bounded by the
    /// configuration's `setupTimeout`). An invitee that has just used the last invitation is
    /// still setting up, so a listener that stops once its invitations are over and it is idle
    /// does not drop that invitee between its proof and its first request.
    public var isIdle: Bool {
        live.withLockedValue { $0.isEmpty } && settingUp.withLockedValue { $0.isEmpty }
    }

    /// Stops accepting, closes every open connection with 1001 ("going away") and waits for them.
    public func close() async {
        try? await channel.close()
        await withTaskGroup(of: Void.self) { group in
            for connection in connections {
                group.addTask { await connection.close(code: 1001, reason: "the server is shutting down") }
            }
        }
        continuation.finish()
    }
}

/// How long the kernel holds a connection that has sent nothing before handing it over anyway.
enum ListenTiming {
    static let deferAcceptSeconds = 1
}

/// A connection refused a place among those setting up: every place is held by a peer that
/// has proven its key (see ``AdmissionSettings``). The connection is closed at once.
struct AdmissionRefused: Error {}

/// IPv6 addresses in their short text form (`fd6e:6272:1::1`).
enum IPv6Text {
    static func format(_ bytes: [UInt8]) -> String {
        guard bytes.count == 16 else { return "" }
        var address = in6_addr()
        withUnsafeMutableBytes(of: &address) { $0.copyBytes(from: bytes) }
        var buffer = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN))
        guard inet_ntop(AF_INET6, &address, &buffer, socklen_t(buffer.count)) != nil else { return "" }
        return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}

extension PeerListener.Event {
    /// Whether the event only tells of someone turned away (what may be summed up).
    var isNotice: Bool {
        switch self {
        case .rejected, .strangers: true
        case .invitation(let attempt): if case .refused = attempt.outcome { true } else { false }
        case .connected, .paired: false
        }
    }

    /// The listener's policy for events its application has not read (see ``PeerListener/events``).
    static var policy: SummarizingBuffer<PeerListener.Event> {
        SummarizingBuffer(limit: PeerListener.noticesWaiting, isNotice: { $0.isNotice }) { summary, notice in
            var sum: StrangerSummary
            if case .strangers(let so)? = summary { sum = so } else { sum = StrangerSummary(interval: .zero) }
            if case .strangers(let more) = notice { sum = sum.adding(more) } else { sum.failedUnreported += 1 }
            return .strangers(sum)
        }
    }
}
