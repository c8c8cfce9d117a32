import CoreMetrics
import DNSWire
import DiscoveryProxyCore
import NIOCore
import NearbyBasics
import NearbyMetrics

/// Where a question's reply goes.
enum ReplyPath: Sendable {
    /// Back out of the UDP socket it came in on, to its source.
    case udp(any Channel, NIOCore.SocketAddress)
    /// A TCP connection's writer; nil says "no answer to this one", so that the connection's
    /// count of questions in flight goes down all the same.
    case tcp(AsyncStream<[UInt8]?>.Continuation)
}

/// A reply (nil: none) for a question that waited, with the time the question arrived.
private typealias Delivery = (path: ReplyPath, bytes: [UInt8]?, arrived: Duration)

/// The answering machine and the reply paths of the questions it has not answered yet, behind
/// one lock. A UDP question is answered on the event loop that read it, in the same turn (no
/// hop to the proxy's actor and back, which cost two thirds of the proxy's rate); everything
/// else (the link's reports, time, TCP, DNS Push) takes the same lock from the actor.
///
/// Every call into the machine goes through ``act(_:)``: replies and drops go to their paths
/// at once, and the other actions (link questions to start or stop, pushes, reconfirms) are
/// queued for the actor while the lock is held, so the actor carries them out in the order the
/// machine decided them, whichever thread asked.
final class AnsweringDesk: Sendable {
    private struct State {
        var machine: ProxyStateMachine
        /// The paths of questions waiting for an answer, with the time each arrived.
        var paths: [UInt64: (path: ReplyPath, arrived: Duration)] = [:]
        var nextRequest: UInt64 = 1
        /// The machine's statistics as metrics, published after each call into it.
        var metrics: ProxyMetrics.Answering

        /// Publishes the machine's counts. What the metrics take is read out first: passing the
        /// machine itself beside its sibling `metrics` would copy the whole machine (its
        /// dictionaries retained and released) on every question.
        mutating func publish() {
            let (statistics, asked) = (machine.statistics, machine.linkQuestionCount)
            metrics.record(statistics, linkQuestions: asked)
        }
    }

    private let state: Locked<State>
    private let dropped = Locked(0)
    private let queue: AsyncStream<[ProxyStateMachine.Action]>.Continuation
    /// The proxy's clock: when questions arrive and are answered.
    private let clock: any ShellClock
    private let answerTime: Timer
    private let udpBacklogDropped: Counter

    /// The machine's actions for the actor, in order. Not bounded by a count: new link
    /// questions are bounded by the machine's link budget (50 a second by default), each with
    /// at most one eviction; pushes by the sessions' limits (each session is cut off when its
    /// client leaves 512 KiB unread).
    let actions: AsyncStream<[ProxyStateMachine.Action]>

    init(_ machine: ProxyStateMachine, clock: any ShellClock, metrics: ProxyMetrics.Answering) {
        state = Locked(State(machine: machine, metrics: metrics))
        self.clock = clock
        answerTime = metrics.answerTime
        udpBacklogDropped = metrics.udpBacklogDropped
        // Bounded by the machine's own limits (the link-question budget, the session limits),
        // and every action must reach the actor, in order (see `actions`).
        (actions, queue) = AsyncStream<[ProxyStateMachine.Action]>.makeStream()
    }

    /// No more actions for the actor.
    func finish() { queue.finish() }

    /// UDP replies not sent because their socket had more waiting to go out than its high
    /// watermark (over UDP a client asks again; the backlog never grows without bound).
    var udpRepliesDropped: Int { dropped.withLockedValue { $0 } }

    /// The next time the machine has work.
    var nextDeadline: Duration { state.withLockedValue { $0.machine.nextDeadline } }

    /// Runs `body` on the machine: replies and drops are delivered, the other actions queued
    /// for the actor; `body`'s own result is returned.
    @discardableResult
    func act<Result>(_ body: (inout ProxyStateMachine) -> (Result, [ProxyStateMachine.Action])) -> Result {
        let (result, deliveries) = state.withLockedValue { state -> (Result, [Delivery]) in
            let (result, actions) = body(&state.machine)
            state.publish()
            return (result, route(actions, in: &state))
        }
        deliver(deliveries)
        return result
    }

    /// ``act(_:)`` for a call that returns nothing but actions.
    func act(_ body: (inout ProxyStateMachine) -> [ProxyStateMachine.Action]) {
        act { machine in ((), body(&machine)) }
    }

    /// Reads the machine under the lock.
    func read<Result>(_ body: (ProxyStateMachine) -> Result) -> Result {
        state.withLockedValue { body($0.machine) }
    }

    /// A question arrived over `path`: its own reply, if the machine has one now (its path is
    /// then forgotten; nil and `dropped` when the machine drops it). Everything else it sets off
    /// is routed as by ``act(_:)``.
    func received(
        _ bytes: [UInt8], from source: IPAddress, over transport: ProxyStateMachine.Transport, path: ReplyPath, now: Duration
    ) -> (reply: [UInt8]?, dropped: Bool) {
        let (own, deliveries) = state.withLockedValue { state -> ((reply: [UInt8]?, dropped: Bool), [Delivery]) in
            let id = state.nextRequest
            state.nextRequest += 1
            var reply: [UInt8]?
            var dropped = false
            var others: [ProxyStateMachine.Action] = []
            for action in state.machine.received(bytes, from: source, over: transport, request: .init(id), now: now) {
                switch action {
                case .reply(let request, let bytes) where request.rawValue == id: reply = bytes
                case .drop(let request) where request.rawValue == id: dropped = true
                default: others.append(action)
                }
            }
            if reply == nil, !dropped { state.paths[id] = (path, now) }
            state.publish()
            return ((reply, dropped), route(others, in: &state))
        }
        deliver(deliveries)
        if own.reply != nil { answerTime.record(clock.now - now) }
        return own
    }

    /// Every path still waiting, forgotten (at shutdown).
    func takeAllPaths() -> [ReplyPath] {
        state.withLockedValue { state in
            defer { state.paths = [:] }
            return state.paths.values.map(\.path)
        }
    }

    /// Whether a reply may be queued on `channel`; counts one dropped when not.
    func mayQueue(on channel: any Channel) -> Bool {
        if channel.isWritable { return true }
        dropped.withLockedValue { $0 += 1 }
        udpBacklogDropped.increment()
        return false
    }

    /// Replies and drops with their paths taken (to deliver once the lock is let go); the rest
    /// queued for the actor, under the lock, so that the queue keeps the machine's order.
    private func route(_ actions: [ProxyStateMachine.Action], in state: inout State) -> [Delivery] {
        var deliveries: [Delivery] = []
        var rest: [ProxyStateMachine.Action] = []
        for action in actions {
            switch action {
            case .reply(let id, let bytes):
                if let (path, arrived) = state.paths.removeValue(forKey: id.rawValue) { deliveries.append((path, bytes, arrived)) }
            case .drop(let id):
                if let (path, arrived) = state.paths.removeValue(forKey: id.rawValue) { deliveries.append((path, nil, arrived)) }
            default: rest.append(action)
            }
        }
        if !rest.isEmpty { queue.yield(rest) }
        return deliveries
    }

    private func deliver(_ deliveries: [Delivery]) {
        guard !deliveries.isEmpty else { return }
        let now = clock.now
        for (path, bytes, arrived) in deliveries {
            if bytes != nil { answerTime.record(now - arrived) }
            switch path {
            case .udp(let channel, let address):
                guard let bytes, mayQueue(on: channel) else { continue }
                channel.writeAndFlush(AddressedEnvelope(remoteAddress: address, data: ByteBuffer(bytes: bytes)), promise: nil)
            case .tcp(let continuation):
                continuation.yield(bytes)
            }
        }
    }
}

/// Answers UDP questions where they are read: the desk's reply is written at once and the
/// writes flushed together when the socket has nothing more to read (one system call for a
/// batch); whatever else a question sets off goes to the actor through the desk.
final class UDPAnswering: ChannelInboundHandler, Sendable {
    typealias InboundIn = AddressedEnvelope<ByteBuffer>
    typealias OutboundOut = AddressedEnvelope<ByteBuffer>

    private let desk: AnsweringDesk
    private let clock: any ShellClock

    init(desk: AnsweringDesk, clock: any ShellClock) {
        self.desk = desk
        self.clock = clock
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let envelope = unwrapInboundIn(data)
        guard let source = IPAddress(envelope.remoteAddress) else { return }
        let bytes = Array(envelope.data.readableBytesView)
        let (reply, _) = desk.received(bytes, from: source, over: .udp, path: .udp(context.channel, envelope.remoteAddress), now: clock.now)
        if let reply, desk.mayQueue(on: context.channel) {
            var buffer = context.channel.allocator.buffer(capacity: reply.count)
            buffer.writeBytes(reply)
            context.write(wrapOutboundOut(AddressedEnvelope(remoteAddress: envelope.remoteAddress, data: buffer)), promise: nil)
        }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        context.flush()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        // A UDP socket reports ICMP errors for earlier replies (a client that went away); the
        // socket itself goes on.
    }
}
