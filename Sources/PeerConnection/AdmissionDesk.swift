import Logging
import NearbyBasics
import NIOCore

/// The listener's side of ``AdmissionControl``: one per listener, shared by its event loops.
/// It owns the connections still setting up (to close the ones the machine picks), a timer
/// for the ClientHello deadline and the summaries, and the counts behind ``StrangerSummary``.
final class AdmissionDesk: Sendable {
    private struct State {
        var control: AdmissionControl
        /// Every accepted connection whose set-up has not ended, by admission id.
        var channels: [AdmissionControl.ID: any Channel] = [:]
        /// Connections whose handshake waits for its turn: what lets it go on.
        var releases: [AdmissionControl.ID: @Sendable () -> Void] = [:]
        /// The counts as metrics, published at each tick.
        var metrics: ListenerMetrics

        /// The turns that have come by `now`: their releases, taken out (run them unlocked).
        mutating func takeGranted(at now: Duration) -> [@Sendable () -> Void] {
            control.turnsGranted(at: now).compactMap { releases.removeValue(forKey: $0) }
        }
    }

    private let state: Locked<State>
    private let start = ContinuousClock.now
    private let logger: Logger
    private let summarised: @Sendable (StrangerSummary) -> Void
    private let timer: Locked<RepeatedTask?> = Locked(nil)

    init(settings: AdmissionSettings, metrics: ListenerMetrics, logger: Logger, summarised: @escaping @Sendable (StrangerSummary) -> Void) {
        state = Locked(State(control: AdmissionControl(settings: settings), metrics: metrics))
        self.logger = logger
        self.summarised = summarised
    }

    private var now: Duration { ContinuousClock.now - start }

    /// Checks deadlines and summaries four times a second on `eventLoop` until ``stop()``.
    func startTimer(on eventLoop: any EventLoop) {
        let task = eventLoop.scheduleRepeatedTask(initialDelay: .milliseconds(250), delay: .milliseconds(250)) { [self] _ in tick() }
        timer.withLockedValue { $0 = task }
    }

    func stop() {
        timer.withLockedValue { $0?.cancel() }
    }

    /// A connection was accepted: its id, or nil when it must be closed at once. Closes the
    /// connections that make room for it.
    func arrived(_ channel: any Channel) -> AdmissionControl.ID? {
        let source = Self.source(of: channel.remoteAddress)
        let (id, closing): (AdmissionControl.ID, [any Channel]?) = state.withLockedValue { state in
            let (id, arrival) = state.control.arrived(from: source, at: now)
            switch arrival {
            case .refused:
                return (id, nil)
            case .admitted(let victims):
                state.channels[id] = channel
                return (id, victims.compactMap { state.channels[$0] })
            }
        }
        guard let closing else { return nil }
        for victim in closing { victim.close(promise: nil) }
        return id
    }

    func progressed(_ id: AdmissionControl.ID, to stage: AdmissionStage) {
        state.withLockedValue { $0.control.progressed(id, to: stage) }
    }

    /// The whole ClientHello of a TLS connection has come: true when its handshake may go on
    /// now; false when it waits for its turn, and `release` is called (from any thread) when
    /// the turn comes. Never called when the connection ends first.
    func helloArrived(_ id: AdmissionControl.ID, release: @escaping @Sendable () -> Void) -> Bool {
        state.withLockedValue { state in
            guard state.control.helloArrived(id, at: now) == .wait else { return true }
            state.releases[id] = release
            return false
        }
    }

    /// The TLS handshake is done and the set-up with it: the key is proven, `trusted` or not
    /// (an untrusted peer let through to pair or to be asked about).
    func proven(_ id: AdmissionControl.ID, trusted: Bool) {
        let granted = state.withLockedValue { state in
            state.control.progressed(id, to: .proven)
            state.control.handshakeEnded(id, trusted ? .trusted : .other, at: now)
            return state.takeGranted(at: now)
        }
        for release in granted { release() }
    }

    /// The set-up became a session (or was only a probe): nothing to report.
    func succeeded(_ id: AdmissionControl.ID) {
        let granted = state.withLockedValue { state in
            state.releases[id] = nil
            guard state.channels.removeValue(forKey: id) != nil else { return [@Sendable () -> Void]() }
            state.control.ended(id, failed: false)
            return state.takeGranted(at: now)
        }
        for release in granted { release() }
    }

    /// The set-up failed: true when it is to be reported one by one, false when it is only
    /// counted (or was already over). `refusedKey`: the peer presented a key and it was
    /// refused, which makes its source wait before its next handshake.
    func failed(_ id: AdmissionControl.ID, refusedKey: Bool = false) -> Bool {
        let (report, granted) = state.withLockedValue { state in
            state.releases[id] = nil
            if refusedKey { state.control.handshakeEnded(id, .refused, at: now) }
            guard state.channels.removeValue(forKey: id) != nil else { return (false, state.takeGranted(at: now)) }
            let report = state.control.ended(id, failed: true) == .report
            return (report, state.takeGranted(at: now))
        }
        for release in granted { release() }
        return report
    }

    private func tick() {
        let (late, stalled, summary, granted):
            ([(AdmissionControl.ID, any Channel)], [any Channel], StrangerSummary?, [@Sendable () -> Void]) = state.withLockedValue { state in
                let now = self.now
                let late = state.control.late(at: now).compactMap { id in state.channels[id].map { (id, $0) } }
                // Turns held too long are taken back before the next are given.
                let stalled = state.control.stalledTurns(at: now).compactMap { state.channels[$0] }
                let ended = state.control.endInterval(at: now)
                state.metrics.record(state.control, ended: ended)
                let summary = ended.flatMap { AdmissionControl.worthTelling($0) ? $0 : nil }
                return (late, stalled, summary, state.takeGranted(at: now))
            }
        for channel in stalled { channel.close(promise: nil) }
        // Penalties that ended: those connections take their turn.
        for release in granted { release() }
        // Confirmed on the connection's own loop, once it has read what is waiting for it.
        for (id, channel) in late {
            channel.eventLoop.execute { [self] in
                let expired = state.withLockedValue { $0.control.expire(id, at: now) }
                if expired { channel.close(promise: nil) }
            }
        }
        if let summary {
            logger.notice("\(summary.text)")
            summarised(summary)
        }
    }

    static func source(of address: SocketAddress?) -> AdmissionSource {
        switch address {
        case .v4(let v4)?:
            let raw = UInt32(bigEndian: v4.address.sin_addr.s_addr)
            return .ipv4(raw)
        case .v6(let v6)?:
            let bytes = withUnsafeBytes(of: v6.address.sin6_addr) { Array($0) }
            return AdmissionSource(addressBytes: bytes)
        default:
            return .unknown
        }
    }
}

/// First in an accepted connection's pipeline: tells admission how far the connection has
/// got (bytes, then a whole first TLS record or probe question), then steps aside. On a TLS
/// listener a whole ClientHello waits here, unread by TLS, until its handshake's turn comes
/// (``HandshakeTurns``): a stranger's handshake costs nothing while it waits.
final class AdmissionGate: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer

    /// The most bytes held for a connection that waits for its turn: a ClientHello is one
    /// record (at most 16 KiB and its header), and a peer sends nothing more before the
    /// server's answer. Beyond it the connection is closed.
    static let heldLimit = 1 << 15

    private let desk: AdmissionDesk
    private let id: AdmissionControl.ID
    private let takesTurns: Bool
    private var header: [UInt8] = []
    private var received = 0
    /// While waiting for the turn: what came, in order (nil when not waiting).
    private var held: [NIOAny]?
    private var heldBytes = 0

    /// - Parameter takesTurns: a TLS listener's gate: a ClientHello waits for its turn.
    init(desk: AdmissionDesk, id: AdmissionControl.ID, takesTurns: Bool) {
        self.desk = desk
        self.id = id
        self.takesTurns = takesTurns
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let buffer = unwrapInboundIn(data)
        if held != nil {
            heldBytes += buffer.readableBytes
            held?.append(data)
            if heldBytes > Self.heldLimit { context.close(promise: nil) }
            return
        }
        if received == 0, buffer.readableBytes > 0 { desk.progressed(id, to: .started) }
        if header.count < 5 { header += buffer.readableBytesView.prefix(5 - header.count) }
        received += buffer.readableBytes
        if let needed = FirstRecord.length(header), received >= needed {
            guard takesTurns, header.first == FirstRecord.handshake else {
                desk.progressed(id, to: .hello)
                context.fireChannelRead(data)
                context.pipeline.syncOperations.removeHandler(context: context, promise: nil)
                return
            }
            let gate = NIOLoopBound(self, eventLoop: context.eventLoop)
            let loopContext = NIOLoopBound(context, eventLoop: context.eventLoop)
            let eventLoop = context.eventLoop
            held = [data]
            heldBytes = buffer.readableBytes
            let now = desk.helloArrived(id) {
                eventLoop.execute { gate.value.release(context: loopContext.value, later: true) }
            }
            if now { release(context: context, later: false) }
            return
        }
        context.fireChannelRead(data)
    }

    /// The turn has come: what was held goes on to TLS, and the gate steps aside. `later`: not
    /// within a read, so the read is completed here too.
    private func release(context: ChannelHandlerContext, later: Bool) {
        guard let waiting = held, context.channel.isActive else { return }
        held = nil
        for data in waiting { context.fireChannelRead(data) }
        if later { context.fireChannelReadComplete() }
        context.pipeline.syncOperations.removeHandler(context: context, promise: nil)
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        if held == nil { context.fireChannelReadComplete() }
    }
}

/// How many bytes make the first thing a connecting peer sends, from its first bytes.
enum FirstRecord {
    /// The first byte of a TLS handshake record.
    static let handshake: UInt8 = 0x16

    /// A TLS record's length (5-byte header + its length field) when the bytes begin one; a
    /// probe question's length when they begin "N"; 1 for anything else (it is not TLS: the
    /// handshake fails on it at once, or on an insecure listener it is HTTP). Nil while too
    /// few bytes have come to tell.
    static func length(_ first: [UInt8]) -> Int? {
        guard let kind = first.first else { return nil }
        switch kind {
        case 0x16:
            guard first.count >= 5 else { return nil }
            return 5 + (Int(first[3]) << 8 | Int(first[4]))
        case Probe.question[0]:
            return Probe.question.count
        default:
            return 1
        }
    }
}
