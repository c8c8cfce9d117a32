import DNSWire
import DiscoveryProxyCore
import NIOCore
import NearbyBasics

/// Where a question's reply goes.
enum ReplyPath: Sendable {
    /// Back out of the UDP socket it came in on, to its source.
    case udp(any Channel, NIOCore.SocketAddress)
    /// A TCP connection's writer; nil says "no answer to this one", so that the connection's
    /// count of questions in flight goes down all the same.
    case tcp(AsyncStream<[UInt8]?>.Continuation)
}

/// The answering machine and the reply paths of the questions it has not answered yet, behind
/// one lock. A UDP question is answered on the event loop that read it, in the same turn (no
/// hop to the proxy's actor and back, which cost two thirds of the proxy's rate); everything
/// else (the link's reports, time, TCP, DNS Push) takes the same lock from the actor. What a
/// question sets off besides its own reply (a link question to start, one evicted) goes to
/// the actor in order.
final class AnsweringDesk: Sendable {
    private struct State {
        var machine: ProxyStateMachine
        var paths: [UInt64: ReplyPath] = [:]
        var nextRequest: UInt64 = 1
    }

    private let state: Locked<State>
    private let dropped = Locked(0)

    init(_ machine: ProxyStateMachine) {
        state = Locked(State(machine: machine))
    }

    /// UDP replies not sent because their socket had more waiting to go out than its high
    /// watermark (over UDP a client asks again; the backlog never grows without bound).
    var udpRepliesDropped: Int { dropped.withLockedValue { $0 } }

    /// Whether a reply may be queued on `channel`; counts one dropped when not.
    func mayQueue(on channel: any Channel) -> Bool {
        if channel.isWritable { return true }
        dropped.withLockedValue { $0 += 1 }
        return false
    }

    /// A reply to a UDP question that waited for the link, sent from the actor.
    func sendUDP(_ reply: [UInt8], to address: NIOCore.SocketAddress, on channel: any Channel) {
        guard mayQueue(on: channel) else { return }
        channel.writeAndFlush(AddressedEnvelope(remoteAddress: address, data: ByteBuffer(bytes: reply)), promise: nil)
    }

    /// A question arrived over `path`: its own reply, if the machine has one now (its path is
    /// then forgotten; nil with `dropped` when the machine drops it), and the other actions,
    /// for the actor.
    func received(
        _ bytes: [UInt8], from source: IPAddress, over transport: ProxyStateMachine.Transport, path: ReplyPath, now: Duration
    ) -> (reply: [UInt8]?, dropped: Bool, others: [ProxyStateMachine.Action]) {
        state.withLockedValue { state in
            let id = state.nextRequest
            state.nextRequest += 1
            let actions = state.machine.received(bytes, from: source, over: transport, request: .init(id), now: now)
            var reply: [UInt8]?
            var dropped = false
            var others: [ProxyStateMachine.Action] = []
            for action in actions {
                switch action {
                case .reply(let request, let bytes) where request.rawValue == id: reply = bytes
                case .drop(let request) where request.rawValue == id: dropped = true
                default: others.append(action)
                }
            }
            if reply == nil, !dropped { state.paths[id] = path }
            return (reply, dropped, others)
        }
    }

    /// Runs `body` on the machine, with the lock held.
    func withMachine<Result>(_ body: (inout ProxyStateMachine) -> Result) -> Result {
        state.withLockedValue { body(&$0.machine) }
    }

    /// The path of a request the machine has answered or dropped, forgotten.
    func takePath(_ request: ProxyStateMachine.RequestID) -> ReplyPath? {
        state.withLockedValue { $0.paths.removeValue(forKey: request.rawValue) }
    }

    /// Every path still waiting, forgotten (at shutdown).
    func takeAllPaths() -> [ReplyPath] {
        state.withLockedValue { state in
            defer { state.paths = [:] }
            return Array(state.paths.values)
        }
    }
}

/// Answers UDP questions where they are read: the desk's reply is written at once and the
/// writes flushed together when the socket has nothing more to read (one system call for a
/// batch); whatever else a question sets off goes to the actor through `others`.
final class UDPAnswering: ChannelInboundHandler, Sendable {
    typealias InboundIn = AddressedEnvelope<ByteBuffer>
    typealias OutboundOut = AddressedEnvelope<ByteBuffer>

    private let desk: AnsweringDesk
    private let clock: SystemClock
    private let others: AsyncStream<[ProxyStateMachine.Action]>.Continuation

    init(desk: AnsweringDesk, clock: SystemClock, others: AsyncStream<[ProxyStateMachine.Action]>.Continuation) {
        self.desk = desk
        self.clock = clock
        self.others = others
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let envelope = unwrapInboundIn(data)
        guard let source = IPAddress(envelope.remoteAddress) else { return }
        let bytes = Array(envelope.data.readableBytesView)
        let (reply, _, more) = desk.received(bytes, from: source, over: .udp, path: .udp(context.channel, envelope.remoteAddress), now: clock.now)
        if let reply, desk.mayQueue(on: context.channel) {
            var buffer = context.channel.allocator.buffer(capacity: reply.count)
            buffer.writeBytes(reply)
            context.write(wrapOutboundOut(AddressedEnvelope(remoteAddress: envelope.remoteAddress, data: buffer)), promise: nil)
        }
        if !more.isEmpty { others.yield(more) }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        context.flush()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        // A UDP socket reports ICMP errors for earlier replies (a client that went away); the
        // socket itself goes on.
    }
}

extension IPAddress {
    /// The address of a socket address, without going through text.
    init?(_ address: NIOCore.SocketAddress) {
        switch address {
        case .v4(let v4):
            self = .v4(IPv4Address(UInt32(bigEndian: v4.address.sin_addr.s_addr)))
        case .v6(let v6):
            let bytes = withUnsafeBytes(of: v6.address.sin6_addr) { Array($0) }
            guard let address = IPv6Address(bytes: bytes) else { return nil }
            self = .v6(address)
        case .unixDomainSocket: return nil
        }
    }
}
