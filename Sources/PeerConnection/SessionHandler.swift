import NearbyBasics
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import NIOWebSocket
import PeerTrust

/// A message from the peer for the app. Requests carry a way to answer them.
public struct IncomingMessage: Sendable {
    /// The message as received.
    public let message: JSONRPCMessage
    let reply: ReplyRoute?

    /// The method of a request or notification.
    public var method: String? {
        switch message {
        case .request(_, let method, _), .notification(let method, _): method
        default: nil
        }
    }

    /// The params of a request or notification.
    public var params: JSONValue? {
        switch message {
        case .request(_, _, let params), .notification(_, let params): params
        default: nil
        }
    }

    /// Answers a request with `result` (ignored for anything but a request, and after the
    /// first answer). Inside a batch, the answers go out together once every request in it is answered.
    public func respond(with result: JSONValue) {
        reply?.send(.success(result))
    }

    /// Answers a request with `result` encoded as JSON.
    public func respond(with result: some Encodable) throws {
        respond(with: try JSONValue(encoding: result))
    }

    /// Answers a request with an error.
    public func respond(withError error: JSONRPCError) {
        reply?.send(.failure(error))
    }
}

/// Where an answer to one incoming request goes. It holds the session weakly: a message the
/// app keeps (or one still queued when the connection ends) must not keep the connection's
/// handlers alive, and an answer after the end goes nowhere.
struct ReplyRoute: Sendable {
    let target: ReplyTarget
    let session: NIOLoopBound<WeakSession>

    func send(_ outcome: Result<JSONValue, JSONRPCError>) {
        let session = self.session
        let target = self.target
        session.eventLoop.execute { session.value.handler?.reply(to: target, outcome) }
    }
}

/// A session that callbacks may reach without keeping it alive.
final class WeakSession {
    weak var handler: SessionHandler?
    init(_ handler: SessionHandler) { self.handler = handler }
}

/// Pairing on one connection: the connecting side starts it (`nearby pair`), the accepting
/// side offers it (a listener with a ``PairingOffer``), sharing one limiter per listener.
struct PairingSetup: Sendable {
    enum Side: Sendable {
        case initiate
        case offer(Locked<PairingLimiter>)
    }
    var side: Side
    var store: TrustStore
    var confirm: @Sendable (PairingRequest) async -> Bool
    var timeout: Duration
}

/// The JSON-RPC layer of a connection, on its event loop: the shell of a
/// `SessionStateMachine`. It feeds the machine what happens (text from the peer, the
/// channel's reads, the app's answers and requests, decisions, time) and performs what the
/// machine decides; it decides nothing itself. It owns what a pure machine cannot: the
/// promises of waiting requests and their timers, the app's inbox, and the questions put to
/// people off the event loop.
final class SessionHandler: ChannelDuplexHandler {
    typealias InboundIn = String
    typealias OutboundIn = Never
    typealias OutboundOut = OutboundFrame

    /// What to do with a peer that sent `initialize` (accepting side); a nil `Decide` admits everyone.
    enum Admission: Sendable {
        case admit
        /// Declined at once, telling the peer why.
        case refuse(String)
        /// Someone decides, by the deadline given (the peer is told it waits for that).
        case ask(@Sendable (PeerHello, ContinuousClock.Instant) async -> Bool)
    }
    typealias Decide = @Sendable (PeerHello) -> Admission

    private var machine: SessionStateMachine
    private let decide: Decide?
    let logger: Logger
    /// Fulfilled when the handshake (or a pairing) is done, failed when it is not.
    let established: EventLoopPromise<Opening>
    /// Fulfilled with the reason when the connection is over.
    let ended: EventLoopPromise<ConnectionEnd>
    /// What the app has not read yet (bounded: see ``IncomingLimit``).
    let inbox: Inbox
    var incoming: IncomingMessages { IncomingMessages(inbox: inbox) }
    var statistics: ConnectionStatistics { machine.statistics }
    /// How replies and timers reach this handler without keeping it alive.
    private var weakSession: NIOLoopBound<WeakSession>?

    private var context: ChannelHandlerContext?
    /// The promises of our requests that wait for answers, with their timeouts.
    private var waiting: [JSONRPCID: (promise: EventLoopPromise<JSONValue>, timeout: Scheduled<Void>?)] = [:]
    /// The machine's deadline, and the timer set for it.
    private var timer: (deadline: Duration, task: Scheduled<Void>)?
    /// Someone being asked about the peer (admission, a pairing code); cancelled when the connection ends first.
    private var asking: Task<Void, Never>?
    /// The app's question, between `SessionStateMachine.Action.invite(_:)` and `SessionStateMachine.Action.ask(_:deadline:)`.
    private var question: (@Sendable (PeerHello, ContinuousClock.Instant) async -> Bool)?
    private let pairingSetup: PairingSetup?
    /// The listener's invitations, when it takes them.
    private let desk: InvitationDesk?
    /// The name in the peer's certificate, for pins and reports.
    private let remoteName: String
    /// The peer's address, for pairing questions.
    private let remoteAddress: String
    /// Connecting side: told when the peer asks someone about us (``PeerConnectionConfiguration/waitingForAdmission``).
    private let waitingForAdmission: (@Sendable (Duration) -> Void)?

    init(
        handshake: Handshake, decide: Decide?, eventLoop: any EventLoop, logger: Logger, pairing: PairingSetup? = nil,
        remoteName: String = "", remoteAddress: String = "", methods: [String: BuiltInMethod] = [:],
        waitingForAdmission: (@Sendable (Duration) -> Void)? = nil, incomingLimit: IncomingLimit = IncomingLimit(),
        maximumPendingRequests: Int = 1024, maximumUnsentAnswerBytes: Int = 8 << 20, invitation: InvitationSetup? = nil,
        peerTrusted: Bool = false
    ) {
        let invitationPlan = invitation.map { setup -> SessionStateMachine.InvitationPlan in
            switch setup.side {
            case .use(let link): SessionStateMachine.InvitationPlan(role: .invitee(secret: link.secret, handle: link.handle))
            case .offer: SessionStateMachine.InvitationPlan(role: .inviter(peerTrusted: peerTrusted, challenge: InvitationExchange.randomChallenge()))
            }
        }
        let plan = pairing.map { setup -> SessionStateMachine.PairingPlan in
            let role: PairingExchange.Role =
                switch setup.side {
                case .initiate: .initiator
                case .offer: .responder
                }
            return SessionStateMachine.PairingPlan(role: role, timeout: setup.timeout, nonce: PairingExchange.randomNonce(), fallbackName: remoteName)
        }
        machine = SessionStateMachine(
            handshake: handshake,
            configuration: SessionStateMachine.Configuration(
                methods: methods, pairing: plan, invitation: invitationPlan, maximumPendingRequests: max(1, maximumPendingRequests),
                maximumUnsentAnswerBytes: max(1, maximumUnsentAnswerBytes)))
        self.waitingForAdmission = waitingForAdmission
        self.decide = decide
        pairingSetup = pairing
        if case .offer(let desk)? = invitation?.side { self.desk = desk } else { desk = nil }
        self.remoteName = remoteName
        self.remoteAddress = remoteAddress
        self.logger = logger
        established = eventLoop.makePromise()
        ended = eventLoop.makePromise()
        inbox = Inbox(limit: incomingLimit)
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        let session = NIOLoopBound(WeakSession(self), eventLoop: context.eventLoop)
        weakSession = session
        inbox.whenRoom { session.eventLoop.execute { session.value.handler?.roomAgain() } }
        if context.channel.isActive { perform(machine.start(at: uptime(context)), context: context) }
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.context = nil
    }

    func channelActive(context: ChannelHandlerContext) {
        perform(machine.start(at: uptime(context)), context: context)
        context.fireChannelActive()
    }

    // MARK: Events in

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var actions = takeBuffer()
        machine.receive(unwrapInboundIn(data), at: uptime(context), into: &actions)
        perform(actions, context: context)
        giveBack(actions)
    }

    /// One buffer of actions for the paths every message takes (a read, an answer, a request),
    /// reused instead of allocated per message. A nested event while it is out gets a new one.
    private var spareActions: [SessionStateMachine.Action] = []

    private func takeBuffer() -> [SessionStateMachine.Action] {
        var buffer: [SessionStateMachine.Action] = []
        swap(&buffer, &spareActions)
        return buffer
    }

    private func giveBack(_ buffer: consuming [SessionStateMachine.Action]) {
        var buffer = buffer
        // A large batch's buffer is let go, so that one batch does not keep its size for the
        // connection's life.
        buffer.removeAll(keepingCapacity: buffer.capacity <= Self.spareCapacity)
        spareActions = buffer
    }

    /// Actions a kept buffer holds at most (a read of one message needs about three).
    private static let spareCapacity = 64

    func channelReadComplete(context: ChannelHandlerContext) {
        let actions = machine.readComplete()
        if !actions.isEmpty { perform(actions, context: context) }
        context.fireChannelReadComplete()
    }

    func read(context: ChannelHandlerContext) {
        let actions = machine.readRequested(inboxFull: inbox.isFull, at: uptime(context))
        // The usual answer, without the loop and the timer check.
        if actions.count == 1, case .read = actions[0] { return context.read() }
        perform(actions, context: context)
    }

    /// The app read its queue down.
    private func roomAgain() {
        guard let context else { return }
        perform(machine.roomAgain(inboxFull: inbox.isFull), context: context)
    }

    /// True while reading is held back because this side (its app) is behind, for less than
    /// `limit`: the peer is then not known to be dead, whatever a probe would say.
    func heldBackRecently(within limit: Duration) -> Bool {
        guard let context else { return false }
        return machine.heldBackRecently(within: limit, at: uptime(context))
    }

    /// The app's answer to a request (on the event loop).
    func reply(to target: ReplyTarget, _ outcome: Result<JSONValue, JSONRPCError>) {
        guard let context else { return }
        var actions = takeBuffer()
        machine.reply(to: target, outcome, inboxFull: inbox.isFull, into: &actions)
        perform(actions, context: context)
        giveBack(actions)
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let ended = event as? WebSocketEnded {
            perform(machine.end(ended.end), context: context)
        }
        context.fireUserInboundEventTriggered(event)
    }

    func channelInactive(context: ChannelHandlerContext) {
        perform(machine.end(ConnectionEnd(.lost, "the connection closed", byPeer: true)), context: context)
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        logger.debug("connection error: \(error)")
        perform(machine.end(ConnectionEnd(.failed, "connection error: \(error)", byPeer: false)), context: context)
        context.close(promise: nil)
    }

    /// Sends request `id` and completes `promise` with its answer, or with `.timeout` after `timeout`.
    func request(id: JSONRPCID, method: String, params: JSONValue?, timeout: TimeAmount?, promise: EventLoopPromise<JSONValue>) {
        guard let context else {
            return promise.fail(PeerConnectionError(.closed, "the connection is not open"))
        }
        var actions = takeBuffer()
        defer { giveBack(actions) }
        if let refusal = machine.request(id: id, method: method, params: params, into: &actions) {
            promise.fail(refusal)
        } else {
            var timer: Scheduled<Void>?
            if let timeout {
                let session = NIOLoopBound(self, eventLoop: context.eventLoop)
                timer = context.eventLoop.scheduleTask(in: timeout) {
                    session.value.abandon(id, PeerConnectionError(.timeout, "no answer to \"\(method)\" within \(timeout.nanoseconds / 1_000_000) ms"))
                }
            }
            waiting[id] = (promise, timer)
            perform(actions, context: context)
        }
    }

    /// Stops waiting for request `id`; the peer is told with a `$/cancelRequest` notification.
    func abandon(_ id: JSONRPCID, _ error: PeerConnectionError) {
        guard let context else {
            waiting.removeValue(forKey: id)?.promise.fail(error)
            return
        }
        perform(machine.abandon(id, error), context: context)
    }

    /// Writes raw text as one message (already-encoded JSON-RPC from a user or a tool). The
    /// promise completes once it is handed to the socket, so a caller that awaits it waits
    /// while the peer does not read. `failIfBusy`: complete as soon as it is queued, or fail at
    /// once while the channel's write buffer is over its high-water mark (not writable).
    func sendText(_ text: String, failIfBusy: Bool = false, promise: EventLoopPromise<Void>) {
        guard let context else {
            return promise.fail(PeerConnectionError(.closed, "the connection is not open"))
        }
        if failIfBusy, !context.channel.isWritable {
            return promise.fail(PeerConnectionError(.busy, "the peer is not reading what we already sent"))
        }
        if let refusal = machine.sendingText() { return promise.fail(refusal) }
        if failIfBusy {
            context.writeAndFlush(wrapOutboundOut(.text(text)), promise: nil)
            return promise.succeed()
        }
        context.writeAndFlush(wrapOutboundOut(.text(text)), promise: promise)
    }

    func close(code: WebSocketErrorCode, reason: String) {
        guard let context else { return }
        context.writeAndFlush(wrapOutboundOut(.close(code, reason: reason)), promise: nil)
    }

    // MARK: Actions out

    private func perform(_ actions: [SessionStateMachine.Action], context: ChannelHandlerContext) {
        for action in actions {
            switch action {
            case .write(let text, let tracked):
                var written: EventLoopPromise<Void>?
                if tracked, let session = weakSession {
                    let size = text.utf8.count
                    let promise = context.eventLoop.makePromise(of: Void.self)
                    promise.futureResult.whenComplete { _ in session.value.handler?.machine.written(bytes: size) }
                    written = promise
                }
                context.write(wrapOutboundOut(.text(text)), promise: written)
            case .flush:
                context.flush()
            case .close(let code, let reason):
                context.write(wrapOutboundOut(.close(WebSocketErrorCode(codeNumber: Int(code.value)), reason: reason)), promise: nil)
            case .read:
                context.read()
            case .holdReads:
                context.triggerUserOutboundEvent(ReadGate.held, promise: nil)
            case .releaseReads:
                context.triggerUserOutboundEvent(ReadGate.released, promise: nil)
            case .deliver(let message, let target, let size):
                let route = target.map { ReplyRoute(target: $0, session: weakSession ?? NIOLoopBound(WeakSession(self), eventLoop: context.eventLoop)) }
                if !inbox.push(IncomingMessage(message: message, reply: route), size: size) {
                    logger.trace("the app is behind: \(inbox.count) messages wait; reading stops until it catches up")
                }
            case .resolve(let id, let outcome):
                guard let request = waiting.removeValue(forKey: id) else { continue }
                request.timeout?.cancel()
                request.promise.completeWith(outcome.mapError { $0 as any Error })
            case .invite(let hello):
                let verdict: SessionStateMachine.Admission
                switch decide?(hello) ?? .admit {
                case .admit: verdict = .admit
                case .refuse(let reason): verdict = .refuse(reason)
                case .ask(let ask):
                    question = ask
                    verdict = .ask
                }
                perform(machine.admission(verdict, at: uptime(context)), context: context)
            case .ask(let hello, let deadline):
                guard let ask = question else { continue }
                question = nil
                let answerBy = ContinuousClock.now + (deadline - uptime(context))
                let session = NIOLoopBound(self, eventLoop: context.eventLoop)
                // A task of its own, off the event loop (a person may take seconds; a channel
                // handler has no task group): the answer comes back on the loop, and ending the
                // connection cancels it.
                asking = Task {
                    let accepted = await ask(hello, answerBy)
                    session.eventLoop.execute { session.value.answered { $0.admissionAnswered(accepted, at: $1) } }
                }
            case .waitingForAdmission(let wait):
                waitingForAdmission?(wait)
            case .claimPairingSlot:
                let now = uptime(context)
                var refusal: String? = "pairing is not offered here"
                if case .offer(let limiter)? = pairingSetup?.side { refusal = limiter.withLockedValue { $0.admit(at: now) } }
                perform(machine.pairingSlot(refusal: refusal, at: now), context: context)
            case .releasePairingSlot(let succeeded):
                guard case .offer(let limiter)? = pairingSetup?.side else { continue }
                let now = uptime(context)
                limiter.withLockedValue { $0.finished(succeeded: succeeded, at: now) }
            case .confirmCode(let peer, let name, let code, let deadline):
                guard let confirm = pairingSetup?.confirm else { continue }
                let answerBy = ContinuousClock.now + (deadline - uptime(context))
                let request = PairingRequest(peerID: peer, name: name, code: code, address: remoteAddress, answerBy: answerBy)
                let session = NIOLoopBound(self, eventLoop: context.eventLoop)
                // Off the event loop, like an invitation; ending the connection cancels it, so
                // a person is not left with a question about a peer that went away.
                asking = Task {
                    let accepted = await confirm(request)
                    session.eventLoop.execute { session.value.answered { $0.codeConfirmed(accepted, at: $1) } }
                }
            case .pin(let peer, let name):
                guard let store = pairingSetup?.store else {
                    perform(machine.pinned(failure: "there is no trust store to pin to"), context: context)
                    continue
                }
                let pinned = NIOThreadPool.singleton.runIfActive(eventLoop: context.eventLoop) { try store.pin(peer, name: name) }
                let session = NIOLoopBound(self, eventLoop: context.eventLoop)
                pinned.whenComplete { outcome in
                    let handler = session.value
                    let failure: String? =
                        switch outcome {
                        case .success: nil
                        case .failure(let error): "\(error)"
                        }
                    // The channel may be gone by now (the peer pinned first and closed): the
                    // pairing still counts here.
                    handler.performDetached(handler.machine.pinned(failure: failure))
                }
            case .lookUpInvitation(let handle, let peer):
                let refusal =
                    if let desk { desk.lookUp(handle, peer: peer, name: remoteName, address: remoteAddress) } else {
                        InvitationRefusal(.notOffered, "this peer takes no invitations")
                    }
                perform(machine.invitationLookedUp(refusal, at: uptime(context)), context: context)
            case .redeemInvitation(let handle, let proof, let challenge, let peer):
                guard let desk else {
                    perform(machine.invitationRedeemed(InvitationRefusal(.notOffered, "this peer takes no invitations"), at: uptime(context)), context: context)
                    continue
                }
                switch desk.redeem(handle, proof: proof, challenge: challenge, peer: peer, name: remoteName, address: remoteAddress) {
                case .failure(let refusal):
                    perform(machine.invitationRedeemed(refusal, at: uptime(context)), context: context)
                case .success(let redeemed):
                    // The invitee is pinned before it hears yes: when `accept` returns, both pins exist.
                    let (store, name, address) = (desk.store, remoteName, remoteAddress)
                    let pinned = NIOThreadPool.singleton.runIfActive(eventLoop: context.eventLoop) { try store.pin(peer, name: name) }
                    let session = NIOLoopBound(self, eventLoop: context.eventLoop)
                    pinned.whenComplete { outcome in
                        let handler = session.value
                        var refusal: InvitationRefusal?
                        switch outcome {
                        case .success:
                            desk.accepted(redeemed, peer: peer, name: name, address: address)
                        case .failure(let error):
                            let failure = InvitationRefusal(.failed, "the inviter could not pin us: \(error)")
                            desk.pinFailed(redeemed.link, peer: peer, name: name, address: address, failure)
                            refusal = failure
                        }
                        guard let context = handler.context else { return }
                        handler.perform(handler.machine.invitationRedeemed(refusal, at: uptime(context)), context: context)
                    }
                }
            case .invitationNotNeeded(let handle, let peer):
                desk?.notNeeded(handle, peer: peer, name: remoteName, address: remoteAddress)
            case .opened(let opening):
                established.succeed(opening)
            case .openingFailed(let error):
                established.fail(error)
            case .cancelQuestion:
                asking?.cancel()
                asking = nil
                question = nil
            case .ended(let reason):
                inbox.finish()
                inbox.whenRoom {}
                ended.succeed(reason)
            case .log(let level, let message):
                logger.log(level: Logger.Level(level), "\(message)")
            }
        }
        scheduleTimer(context: context)
    }

    /// An answer from someone who was asked, back on the event loop.
    private func answered(_ event: (inout SessionStateMachine, Duration) -> [SessionStateMachine.Action]) {
        asking = nil
        guard let context else { return }
        perform(event(&machine, uptime(context)), context: context)
    }

    /// Actions after the handler left the pipeline: only the promises can still be kept.
    private func performDetached(_ actions: [SessionStateMachine.Action]) {
        if let context { return perform(actions, context: context) }
        for action in actions {
            switch action {
            case .opened(let opening): established.succeed(opening)
            case .openingFailed(let error): established.fail(error)
            default: break
            }
        }
    }

    /// Keeps one timer at the machine's deadline.
    private func scheduleTimer(context: ChannelHandlerContext) {
        let deadline = machine.deadline
        guard deadline != timer?.deadline else { return }
        timer?.task.cancel()
        timer = nil
        guard let deadline else { return }
        let session = NIOLoopBound(self, eventLoop: context.eventLoop)
        let task = context.eventLoop.scheduleTask(deadline: .uptimeNanoseconds(UInt64(clamping: nanoseconds(deadline)))) {
            let handler = session.value
            handler.timer = nil
            guard let context = handler.context else { return }
            handler.perform(handler.machine.advance(to: uptime(context)), context: context)
        }
        timer = (deadline, task)
    }
}

extension Logger.Level {
    /// The level at which the shell writes a line the protocol core's machines asked for.
    init(_ level: LogLevel) {
        switch level {
        case .trace: self = .trace
        case .debug: self = .debug
        case .info: self = .info
        case .notice: self = .notice
        case .warning: self = .warning
        case .error: self = .error
        }
    }
}
