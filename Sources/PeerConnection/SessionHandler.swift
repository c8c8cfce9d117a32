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
    let id: JSONRPCID
    let batch: Int?
    let session: NIOLoopBound<WeakSession>

    func send(_ outcome: Result<JSONValue, JSONRPCError>) {
        let session = self.session
        let (id, batch) = (id, batch)
        session.eventLoop.execute { session.value.handler?.reply(id: id, batch: batch, outcome) }
    }
}

/// A session that callbacks may reach without keeping it alive.
final class WeakSession {
    weak var handler: SessionHandler?
    init(_ handler: SessionHandler) { self.handler = handler }
}

/// How many messages a connection received, sent and refused.
public struct ConnectionStatistics: Hashable, Sendable {
    public var messagesReceived = 0
    public var messagesSent = 0
    /// Text that was not JSON-RPC (answered with -32700 or -32600).
    public var malformed = 0
    /// Notifications that arrived before `initialize` and were dropped.
    public var droppedBeforeInitialize = 0
    /// Requests we gave up waiting for (timeout or cancellation).
    public var requestsAbandoned = 0
    /// Times the connection stopped reading because the app was behind (``IncomingLimit``) or
    /// too many batches waited for its answers.
    public var heldBack = 0
    /// Connections closed because the peer went over a hard limit: it did not read our
    /// answers while 8 MiB of them waited to be sent.
    public var closedOverLimit = 0
}

/// How a connection's opening ended: initialized for the app, or paired (and then closed).
enum Opening: Sendable {
    case initialized(PeerHello)
    case paired(PairingResult)
}

/// Pairing on one connection: the connecting side starts it (`nearby pair`), the accepting
/// side offers it (a listener with a ``PairingOffer``), sharing one limiter per listener.
struct PairingSetup: Sendable {
    enum Side: Sendable {
        case initiate
        case offer(NIOLockedValueBox<PairingLimiter>)
    }
    var side: Side
    var store: TrustStore
    var confirm: @Sendable (PairingRequest) async -> Bool
    var timeout: Duration
}

/// The JSON-RPC layer of a connection, on its event loop: runs the ``Handshake``, matches
/// responses to the requests that are waiting for them, hands everything else to the app, and
/// collects the answers to a batch.
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

    private var handshake: Handshake
    private let decide: Decide?
    let logger: Logger
    /// Fulfilled when the handshake (or a pairing) is done, failed when it is not.
    let established: EventLoopPromise<Opening>
    /// Fulfilled with the reason when the connection is over.
    let ended: EventLoopPromise<String>
    /// What the app has not read yet (bounded: see ``IncomingLimit``).
    let inbox: Inbox
    var incoming: IncomingMessages { IncomingMessages(inbox: inbox) }
    /// Our requests waiting for answers at most.
    private let maximumPendingRequests: Int
    /// Batches whose answers the app still owes at most; with more, reading stops.
    static let maximumOpenBatches = 16
    /// Answers (to the peer's requests and malformed input, and the handshake's and pairing's
    /// messages) written but not yet handed to the socket, in bytes. A peer that sends requests
    /// and never reads the answers would grow this without end; past the limit the connection
    /// is closed and says why. (Reading is not stopped for it: two peers that each stopped
    /// reading until their own writes drain would wait for each other forever.)
    private var unsentAnswerBytes = 0
    private let maximumUnsentAnswerBytes: Int
    /// Since when a read the channel asked for waits for room (nil: reading goes on).
    private(set) var heldSince: Duration?
    /// The size of each message of the frame being read (the frame's text over its entries).
    private var arrivingSize = 1
    /// How replies and timers reach this handler without keeping it alive.
    private var weakSession: NIOLoopBound<WeakSession>?

    private var context: ChannelHandlerContext?
    private var pending: [JSONRPCID: (promise: EventLoopPromise<JSONValue>, timeout: Scheduled<Void>?)] = [:]
    private var batches: [Int: Batch] = [:]
    private var nextBatch = 0
    private var handshakeTimer: Scheduled<Void>?
    /// The app being asked about the peer; cancelled when the connection ends first.
    private var asking: Task<Void, Never>?
    private var endReason: String?
    private(set) var statistics = ConnectionStatistics()
    /// Inside `channelRead`: answers wait for `channelReadComplete`, so that a burst of requests
    /// read at once is answered with one flush (one TLS record, one write) instead of one each.
    private var reading = false
    private var owesFlush = false
    private let pairingSetup: PairingSetup?
    private var pairing: PairingExchange?
    /// This connection holds its listener's one pairing slot.
    private var holdsPairingSlot = false
    /// Both people said yes and the pin is being written: the peer may close meanwhile (it
    /// pinned first), and that must not undo the pairing on this side.
    private var pinning = false
    /// The peer's certificate name and address, for pairing questions and pins.
    private let remoteName: String
    private let remoteAddress: String

    private struct Batch {
        var outstanding: Int
        var answers: [JSONValue]
    }

    /// Answered here, on the event loop (see ``PeerConnectionConfiguration/methods``).
    private let methods: [String: BuiltInMethod]
    /// Connecting side: told when the peer asks someone about us (``PeerConnectionConfiguration/waitingForAdmission``).
    private let waitingForAdmission: (@Sendable (Duration) -> Void)?

    init(
        handshake: Handshake, decide: Decide?, eventLoop: any EventLoop, logger: Logger, pairing: PairingSetup? = nil,
        remoteName: String = "", remoteAddress: String = "", methods: [String: BuiltInMethod] = [:],
        waitingForAdmission: (@Sendable (Duration) -> Void)? = nil, incomingLimit: IncomingLimit = IncomingLimit(),
        maximumPendingRequests: Int = 1024, maximumUnsentAnswerBytes: Int = 8 << 20
    ) {
        self.handshake = handshake
        self.methods = methods
        self.waitingForAdmission = waitingForAdmission
        self.decide = decide
        pairingSetup = pairing
        self.remoteName = remoteName
        self.remoteAddress = remoteAddress
        self.logger = logger
        established = eventLoop.makePromise()
        ended = eventLoop.makePromise()
        inbox = Inbox(limit: incomingLimit)
        self.maximumPendingRequests = max(1, maximumPendingRequests)
        self.maximumUnsentAnswerBytes = max(1, maximumUnsentAnswerBytes)
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        let session = NIOLoopBound(WeakSession(self), eventLoop: context.eventLoop)
        weakSession = session
        inbox.whenRoom { session.eventLoop.execute { session.value.handler?.readAgain() } }
        if context.channel.isActive { start(context: context) }
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.context = nil
    }

    func channelActive(context: ChannelHandlerContext) {
        start(context: context)
        context.fireChannelActive()
    }

    private func start(context: ChannelHandlerContext) {
        if case .initiate? = pairingSetup?.side {
            guard pairing == nil, let exchange = makeExchange(.initiator) else { return }
            pairing = exchange
            applyPairing(withPairing { $0.start(at: uptime(context)) }, context: context)
            return
        }
        apply(handshake.start(at: uptime(context)), context: context)
    }

    // MARK: Inbound

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        reading = true
        defer { reading = false }
        let text = unwrapInboundIn(data)
        let frame = JSONRPCFrame(parsing: text)
        arrivingSize = max(1, text.utf8.count / max(1, frame.entries.count))
        let now = uptime(context)
        if pairing != nil {
            for entry in frame.entries {
                statistics.messagesReceived += 1
                switch entry {
                case .invalid(let owed):
                    statistics.malformed += 1
                    send(owed, context: context)
                case .message(let message):
                    applyPairing(withPairing { $0.receive(message, at: now) }, context: context)
                }
            }
            flush(context)
            return
        }
        guard handshake.isEstablished, frame.isBatch else {
            // One message (or a batch before the handshake is done: each entry on its own).
            for entry in frame.entries {
                statistics.messagesReceived += 1
                switch entry {
                case .invalid(let owed):
                    statistics.malformed += 1
                    logger.debug("answered malformed input: \(owed.jsonText)")
                    send(owed, context: context)
                case .message(let message):
                    if !handshake.isEstablished, case .notification(let method, _) = message, method != Handshake.waitingMethod {
                        statistics.droppedBeforeInitialize += 1
                        logger.info("dropped notification \"\(method)\" that came before initialize")
                    }
                    apply(handshake.receive(message, at: now), context: context)
                }
            }
            flush(context)
            return
        }
        receiveBatch(frame, context: context)
    }

    private func receiveBatch(_ frame: JSONRPCFrame, context: ChannelHandlerContext) {
        let token = nextBatch
        nextBatch &+= 1
        var batch = Batch(outstanding: 0, answers: [])
        var requests: [JSONRPCMessage] = []
        for entry in frame.entries {
            statistics.messagesReceived += 1
            switch entry {
            case .invalid(let owed):
                statistics.malformed += 1
                batch.answers.append(owed.json)
            case .message(let message):
                if case .request = message { batch.outstanding += 1 }
                requests.append(message)
            }
        }
        batches[token] = batch
        for message in requests {
            if case .request(let id, "initialize", _) = message {
                reply(id: id, batch: token, .failure(JSONRPCError(JSONRPCError.invalidRequest, "already initialized")))
                continue
            }
            route(message, batch: token, context: context)
        }
        finishBatchIfAnswered(token, context: context)
    }

    private func finishBatchIfAnswered(_ token: Int, context: ChannelHandlerContext) {
        guard let batch = batches[token], batch.outstanding == 0 else { return }
        batches[token] = nil
        defer { readAgain() }
        // A batch of notifications alone is not answered (JSON-RPC 2.0 §6).
        guard !batch.answers.isEmpty else { return }
        write(JSONValue.array(batch.answers).jsonText, context: context)
        flush(context)
    }

    /// A message after the handshake: a response someone awaits, or something for the app.
    private func route(_ message: JSONRPCMessage, batch: Int?, context: ChannelHandlerContext) {
        switch message {
        case .response(let id, let result):
            if let waiting = pending.removeValue(forKey: id) {
                waiting.timeout?.cancel()
                waiting.promise.succeed(result)
                return
            }
        case .failure(let id?, let error):
            if let waiting = pending.removeValue(forKey: id) {
                waiting.timeout?.cancel()
                waiting.promise.fail(PeerConnectionError(remote: error))
                return
            }
        case .request(let id, let method, let params):
            if let answer = methods[method] {
                reply(id: id, batch: batch, answer(params))
                return
            }
            let route = ReplyRoute(id: id, batch: batch, session: weakSession ?? NIOLoopBound(WeakSession(self), eventLoop: context.eventLoop))
            deliver(IncomingMessage(message: message, reply: route), context: context)
            return
        default:
            break
        }
        deliver(IncomingMessage(message: message, reply: nil), context: context)
    }

    /// Queues a message for the app; a full queue stops reading at the next read (below).
    private func deliver(_ message: IncomingMessage, context: ChannelHandlerContext) {
        if !inbox.push(message, size: arrivingSize) {
            logger.trace("the app is behind: \(inbox.count) messages wait; reading stops until it catches up")
        }
    }

    // MARK: Back-pressure

    /// Reading goes on only while the app keeps up and the batches waiting for the app's
    /// answers are few.
    private func mayRead(_ context: ChannelHandlerContext) -> Bool {
        !inbox.isFull && batches.count < Self.maximumOpenBatches
    }

    func read(context: ChannelHandlerContext) {
        if mayRead(context) {
            context.read()
            return
        }
        guard heldSince == nil else { return }
        heldSince = uptime(context)
        statistics.heldBack += 1
        logger.debug("reading held back", metadata: ["queued": "\(inbox.count)", "batches": "\(batches.count)"])
        context.triggerUserOutboundEvent(ReadGate.held, promise: nil)
    }

    /// Room again (the app read, or a batch was answered): the read the channel asked for goes ahead.
    private func readAgain() {
        guard heldSince != nil, let context, mayRead(context) else { return }
        heldSince = nil
        context.triggerUserOutboundEvent(ReadGate.released, promise: nil)
        context.read()
    }

    /// True while reading is held back because this side (its app) is behind, for less than
    /// `limit`: the peer is then not known to be dead, whatever a probe would say.
    func heldBackRecently(within limit: Duration) -> Bool {
        guard let heldSince, let context else { return false }
        return uptime(context) - heldSince < limit
    }

    /// The app's answer to request `id` (on the event loop).
    func reply(id: JSONRPCID, batch: Int?, _ outcome: Result<JSONValue, JSONRPCError>) {
        guard let context else { return }
        let message: JSONRPCMessage =
            switch outcome {
            case .success(let result): .response(id: id, result: result)
            case .failure(let error): .failure(id: id, error)
            }
        if let batch {
            guard var collected = batches[batch] else { return }
            collected.outstanding -= 1
            collected.answers.append(message.json)
            batches[batch] = collected
            finishBatchIfAnswered(batch, context: context)
        } else {
            send(message, context: context)
            flush(context)
        }
    }

    /// Flushes now, or at the end of the read in progress.
    private func flush(_ context: ChannelHandlerContext) {
        if reading { owesFlush = true } else { context.flush() }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        if owesFlush {
            owesFlush = false
            context.flush()
        }
        context.fireChannelReadComplete()
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let ended = event as? WebSocketEnded {
            finish(ended.reason)
        }
        context.fireUserInboundEventTriggered(event)
    }

    func channelInactive(context: ChannelHandlerContext) {
        finish("the connection closed")
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        logger.debug("connection error: \(error)")
        finish("connection error: \(error)")
        context.close(promise: nil)
    }

    /// The connection is over: everyone waiting hears why, once.
    private func finish(_ reason: String) {
        guard endReason == nil else { return }
        endReason = reason
        if pairing != nil, let context {
            _ = withPairing { $0.connectionEnded(reason) }
            releasePairingSlot(succeeded: false, context: context)
        }
        handshakeTimer?.cancel()
        asking?.cancel()
        asking = nil
        let error = PeerConnectionError(.closed, reason)
        if !pinning { established.fail(error) }
        for (_, waiting) in pending {
            waiting.timeout?.cancel()
            waiting.promise.fail(error)
        }
        pending = [:]
        inbox.finish()
        inbox.whenRoom {}
        ended.succeed(reason)
    }

    // MARK: Handshake actions

    private func apply(_ actions: [Handshake.Action], context: ChannelHandlerContext) {
        for action in actions {
            switch action {
            case .send(let message):
                send(message, context: context)
            case .invite(let hello):
                invite(hello, context: context)
            case .waiting(let wait):
                logger.info("the peer asks someone whether to let us in; waiting up to \(seconds(wait))")
                waitingForAdmission?(wait)
            case .established(let hello):
                logger.debug("initialized", metadata: ["peer": "\(hello.peerID?.short ?? "(insecure)")"])
                established.succeed(.initialized(hello))
            case .pair(let id, let params):
                beginPairing(id: id, params: params, context: context)
            case .deliver(let message):
                route(message, batch: nil, context: context)
            case .close(let reason):
                context.flush()
                let error = PeerConnectionError(.handshake, reason)
                established.fail(error)
                finish(reason)
                context.write(wrapOutboundOut(.close(.policyViolation, reason: reason)), promise: nil)
            }
        }
        flush(context)
        scheduleHandshakeTimer(context: context)
    }

    private func invite(_ hello: PeerHello, context: ChannelHandlerContext) {
        let now = uptime(context)
        switch decide?(hello) ?? .admit {
        case .admit:
            apply(handshake.decide(accept: true, at: now), context: context)
        case .refuse(let reason):
            apply(handshake.decide(accept: false, reason: reason, at: now), context: context)
        case .ask(let ask):
            let reason = "someone there decides whether to let you in"
            apply(handshake.announceWaiting(reason: reason, at: now), context: context)
            let answerBy = ContinuousClock.now + ((handshake.deadline ?? now) - now)
            let session = NIOLoopBound(self, eventLoop: context.eventLoop)
            // Off the event loop (a person may take seconds); the answer comes back on it.
            // Ending the connection cancels it.
            asking = Task {
                let accepted = await ask(hello, answerBy)
                session.eventLoop.execute { session.value.decided(accepted) }
            }
        }
    }

    private func decided(_ accepted: Bool) {
        asking = nil
        guard let context, endReason == nil else { return }
        apply(handshake.decide(accept: accepted, at: uptime(context)), context: context)
    }

    private func scheduleHandshakeTimer(context: ChannelHandlerContext) {
        handshakeTimer?.cancel()
        handshakeTimer = nil
        guard let deadline = pairing?.deadline ?? handshake.deadline, endReason == nil else { return }
        let session = NIOLoopBound(self, eventLoop: context.eventLoop)
        handshakeTimer = context.eventLoop.scheduleTask(deadline: .uptimeNanoseconds(UInt64(clamping: nanoseconds(deadline)))) {
            let handler = session.value
            guard let context = handler.context else { return }
            if handler.pairing != nil {
                handler.applyPairing(handler.withPairing { $0.advance(to: uptime(context)) }, context: context)
            } else {
                handler.apply(handler.handshake.advance(to: uptime(context)), context: context)
            }
        }
    }

    // MARK: Pairing

    private func makeExchange(_ role: PairingExchange.Role) -> PairingExchange? {
        guard let setup = pairingSetup, let localID = handshake.local.peerID, let remoteID = handshake.remotePeerID else { return nil }
        return PairingExchange(
            role: role, localID: localID, remoteID: remoteID, localName: handshake.local.displayName,
            fallbackName: remoteName.isEmpty ? remoteID.short : remoteName, nonce: PairingExchange.randomNonce(), timeout: setup.timeout)
    }

    private func withPairing(_ body: (inout PairingExchange) -> [PairingExchange.Action]) -> [PairingExchange.Action] {
        guard var exchange = pairing else { return [] }
        let actions = body(&exchange)
        pairing = exchange
        return actions
    }

    /// Accepting side: the peer sent `pair/request` instead of `initialize`.
    private func beginPairing(id: JSONRPCID, params: JSONValue?, context: ChannelHandlerContext) {
        guard case .offer(let limiter)? = pairingSetup?.side, var exchange = makeExchange(.responder) else {
            return failPairing("pairing is not offered here", answering: id, context: context)
        }
        let now = uptime(context)
        if let refusal = limiter.withLockedValue({ $0.admit(at: now) }) {
            logger.info("pairing refused: \(refusal)")
            return failPairing(refusal, answering: id, context: context)
        }
        holdsPairingSlot = true
        let actions = exchange.receiveRequest(id: id, params: params, at: now)
        pairing = exchange
        applyPairing(actions, context: context)
    }

    private func failPairing(_ reason: String, answering id: JSONRPCID, context: ChannelHandlerContext) {
        send(.failure(id: id, JSONRPCError(JSONRPCError.pairingFailed, reason)), context: context)
        applyPairing([.failed(reason)], context: context)
    }

    private func releasePairingSlot(succeeded: Bool, context: ChannelHandlerContext) {
        guard holdsPairingSlot, case .offer(let limiter)? = pairingSetup?.side else { return }
        holdsPairingSlot = false
        let now = uptime(context)
        limiter.withLockedValue { $0.finished(succeeded: succeeded, at: now) }
    }

    private func applyPairing(_ actions: [PairingExchange.Action], context: ChannelHandlerContext) {
        for action in actions {
            switch action {
            case .send(let message):
                send(message, context: context)
            case .showCode(let code, let name):
                guard let setup = pairingSetup, let peerID = handshake.remotePeerID else { continue }
                let now = uptime(context)
                let answerBy = ContinuousClock.now + ((pairing?.deadline ?? now + setup.timeout) - now)
                let request = PairingRequest(peerID: peerID, name: name, code: code, address: remoteAddress, answerBy: answerBy)
                let session = NIOLoopBound(self, eventLoop: context.eventLoop)
                let confirm = setup.confirm
                // Off the event loop, like an invitation; ending the connection cancels it, so
                // a person is not left with a question about a peer that went away.
                asking = Task {
                    let accepted = await confirm(request)
                    session.eventLoop.execute { session.value.confirmed(accepted) }
                }
            case .paired(let code, let name):
                guard let setup = pairingSetup, let peerID = handshake.remotePeerID else { continue }
                releasePairingSlot(succeeded: true, context: context)
                logger.info("paired", metadata: ["peer": "\(peerID.short)"])
                let result = PairingResult(peerID: peerID, name: name, code: code)
                let store = setup.store
                pinning = true
                let pinned = NIOThreadPool.singleton.runIfActive(eventLoop: context.eventLoop) { try store.pin(peerID, name: name) }
                let session = NIOLoopBound(self, eventLoop: context.eventLoop)
                pinned.whenComplete { outcome in
                    let handler = session.value
                    switch outcome {
                    case .success:
                        handler.established.succeed(.paired(result))
                        handler.close(code: .normalClosure, reason: "paired")
                    case .failure(let error):
                        handler.established.fail(PeerConnectionError(.pairing, "both sides confirmed, but the pin could not be saved: \(error)"))
                        handler.close(code: .unexpectedServerError, reason: "could not pin")
                    }
                }
            case .failed(let reason):
                releasePairingSlot(succeeded: false, context: context)
                established.fail(PeerConnectionError(.pairing, reason))
                context.flush()
                finish(reason)
                context.write(wrapOutboundOut(.close(.policyViolation, reason: reason)), promise: nil)
            }
        }
        flush(context)
        scheduleHandshakeTimer(context: context)
    }

    /// The person's answer to a pairing code, back on the event loop.
    private func confirmed(_ accepted: Bool) {
        asking = nil
        guard let context, endReason == nil else { return }
        applyPairing(withPairing { $0.confirm(accepted, at: uptime(context)) }, context: context)
    }

    // MARK: Outbound

    private func send(_ message: JSONRPCMessage, context: ChannelHandlerContext) {
        write(message.jsonText, context: context)
    }

    /// Writes an answer (see ``unsentAnswerBytes``): counted until the socket has it.
    private func write(_ text: String, context: ChannelHandlerContext) {
        statistics.messagesSent += 1
        let size = text.utf8.count
        unsentAnswerBytes += size
        let written = context.eventLoop.makePromise(of: Void.self)
        let session = weakSession
        written.futureResult.whenComplete { _ in session?.value.handler?.unsentAnswerBytes -= size }
        context.write(wrapOutboundOut(.text(text)), promise: written)
        guard unsentAnswerBytes > maximumUnsentAnswerBytes, endReason == nil else { return }
        statistics.closedOverLimit += 1
        let reason = "the peer does not read our answers: \(unsentAnswerBytes) bytes wait to be sent (the limit is \(maximumUnsentAnswerBytes))"
        logger.warning("closing the connection: \(reason)")
        context.flush()
        finish(reason)
        context.write(wrapOutboundOut(.close(.policyViolation, reason: "the peer does not read our answers")), promise: nil)
        context.flush()
    }

    /// Sends request `id` and completes `promise` with its answer, or with `.timeout` after `timeout`.
    func request(id: JSONRPCID, method: String, params: JSONValue?, timeout: TimeAmount?, promise: EventLoopPromise<JSONValue>) {
        guard let context, endReason == nil else {
            return promise.fail(PeerConnectionError(.closed, endReason ?? "the connection is not open"))
        }
        guard handshake.isEstablished else {
            return promise.fail(PeerConnectionError(.closed, "the connection is not initialized"))
        }
        guard pending[id] == nil else {
            return promise.fail(PeerConnectionError(.invalidInput, "request id \(id) is already waiting for an answer"))
        }
        guard pending.count < maximumPendingRequests else {
            return promise.fail(PeerConnectionError(
                .busy, "\(pending.count) requests already wait for answers on this connection (the limit, maximumPendingRequests)"))
        }
        var timer: Scheduled<Void>?
        if let timeout {
            let session = NIOLoopBound(self, eventLoop: context.eventLoop)
            timer = context.eventLoop.scheduleTask(in: timeout) {
                session.value.abandon(id, PeerConnectionError(.timeout, "no answer to \"\(method)\" within \(timeout.nanoseconds / 1_000_000) ms"))
            }
        }
        pending[id] = (promise, timer)
        statistics.messagesSent += 1
        context.writeAndFlush(wrapOutboundOut(.text(JSONRPCMessage.request(id: id, method: method, params: params).jsonText)), promise: nil)
    }

    /// Stops waiting for request `id`; the peer is told with a `$/cancelRequest` notification.
    func abandon(_ id: JSONRPCID, _ error: PeerConnectionError) {
        guard let waiting = pending.removeValue(forKey: id) else { return }
        statistics.requestsAbandoned += 1
        waiting.timeout?.cancel()
        waiting.promise.fail(error)
        guard let context, endReason == nil else { return }
        send(.notification(method: "$/cancelRequest", params: .object(["id": id.json])), context: context)
        context.flush()
    }

    /// Writes raw text as one message (already-encoded JSON-RPC from a user or a tool). The
    /// promise completes once it is handed to the socket, so a caller that awaits it waits
    /// while the peer does not read. `failIfBusy`: complete as soon as it is queued, or fail at
    /// once while the channel's write buffer is over its high-water mark (not writable).
    func sendText(_ text: String, failIfBusy: Bool = false, promise: EventLoopPromise<Void>) {
        guard let context, endReason == nil else {
            return promise.fail(PeerConnectionError(.closed, endReason ?? "the connection is not open"))
        }
        if failIfBusy {
            guard context.channel.isWritable else {
                return promise.fail(PeerConnectionError(.busy, "the peer is not reading what we already sent"))
            }
            statistics.messagesSent += 1
            context.writeAndFlush(wrapOutboundOut(.text(text)), promise: nil)
            return promise.succeed()
        }
        statistics.messagesSent += 1
        context.writeAndFlush(wrapOutboundOut(.text(text)), promise: promise)
    }

    func close(code: WebSocketErrorCode, reason: String) {
        guard let context else { return }
        context.writeAndFlush(wrapOutboundOut(.close(code, reason: reason)), promise: nil)
    }
}
