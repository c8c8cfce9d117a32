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
    }

    private let state: Locked<State>
    private let start = ContinuousClock.now
    private let logger: Logger
    private let summarised: @Sendable (StrangerSummary) -> Void
    private let timer: Locked<RepeatedTask?> = Locked(nil)

    init(settings: AdmissionSettings, logger: Logger, summarised: @escaping @Sendable (StrangerSummary) -> Void) {
        state = Locked(State(control: AdmissionControl(settings: settings)))
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

    /// The set-up became a session (or was only a probe): nothing to report.
    func succeeded(_ id: AdmissionControl.ID) {
        state.withLockedValue { state in
            guard state.channels.removeValue(forKey: id) != nil else { return }
            state.control.ended(id, failed: false)
        }
    }

    /// The set-up failed: true when it is to be reported one by one, false when it is only
    /// counted (or was already over).
    func failed(_ id: AdmissionControl.ID) -> Bool {
        state.withLockedValue { state in
            guard state.channels.removeValue(forKey: id) != nil else { return false }
            return state.control.ended(id, failed: true) == .report
        }
    }

    private func tick() {
        let (late, summary): ([(AdmissionControl.ID, any Channel)], StrangerSummary?) = state.withLockedValue { state in
            let now = self.now
            let late = state.control.late(at: now).compactMap { id in state.channels[id].map { (id, $0) } }
            return (late, state.control.summary(at: now))
        }
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
/// got (bytes, then a whole first TLS record or probe question), then steps aside.
final class AdmissionGate: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer

    private let desk: AdmissionDesk
    private let id: AdmissionControl.ID
    private var header: [UInt8] = []
    private var received = 0

    init(desk: AdmissionDesk, id: AdmissionControl.ID) {
        self.desk = desk
        self.id = id
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let buffer = unwrapInboundIn(data)
        if received == 0, buffer.readableBytes > 0 { desk.progressed(id, to: .started) }
        if header.count < 5 { header += buffer.readableBytesView.prefix(5 - header.count) }
        received += buffer.readableBytes
        if let needed = FirstRecord.length(header), received >= needed {
            desk.progressed(id, to: .hello)
            context.fireChannelRead(data)
            context.pipeline.syncOperations.removeHandler(context: context, promise: nil)
            return
        }
        context.fireChannelRead(data)
    }
}

/// How many bytes make the first thing a connecting peer sends, from its first bytes.
enum FirstRecord {
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
