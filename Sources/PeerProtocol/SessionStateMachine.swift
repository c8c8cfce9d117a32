package import NearbyCrypto

/// How a connection's opening ended: initialized for the app, or paired (and then closed).
package enum Opening: Hashable, Sendable {
    case initialized(PeerHello)
    case paired(PairingResult)
}

/// Where the app's answer to one incoming request goes: its id, and the batch it belongs to.
package struct ReplyTarget: Hashable, Sendable {
    package var id: JSONRPCID
    package var batch: Int?
}

/// One connection's JSON-RPC session, from the first byte after the WebSocket upgrade to the
/// end, as a pure state machine: frames, the app's answers and requests, the people's
/// decisions and time in; writes, reads, deliveries and reports out. It wraps the two
/// exchanges that may open a connection (``Handshake`` and ``PairingExchange``), matches
/// answers to the requests that wait for them, gathers batches, and decides when reading
/// stops because the app is behind and when a peer that never reads our answers is closed.
///
/// ``SessionHandler`` is its shell on the event loop: it performs the actions, owns the
/// promises and timers, and reports back what happened (a decision, a pin written, bytes
/// handed to the socket). The machine itself touches no channel, clock, thread or file, so
/// every rule here is tested without any of them.
package struct SessionStateMachine: Sendable {
    /// Where the session is. Each case carries exactly what that part of a session needs.
    package enum Phase: Sendable {
        /// `initialize` is under way (either side), or has not started.
        case handshaking(Handshake)
        /// Accepting side: the peer asked to pair; the listener's one pairing slot is being
        /// claimed (``SessionStateMachine/pairingSlot(refusal:at:)`` answers).
        case claimingPairingSlot(id: JSONRPCID, params: JSONValue?)
        /// Pairing instead of initializing; `holdsSlot`: this connection holds its listener's
        /// pairing slot and must give it back.
        case pairing(PairingExchange, holdsSlot: Bool)
        /// Both people said yes and the pin is being written.
        case pinning(PairingResult)
        /// An invitation is being used before `initialize` (either side); the handshake waits
        /// beside it and runs once the invitee is in.
        case inviting(InvitationExchange, Handshake)
        /// Initialized: the connection is the app's.
        case established
        /// Over. `pinning`: a pin was still being written; the peer may close first (it pinned
        /// first), and that does not undo the pairing on this side.
        case closed(ConnectionEnd, pinning: PairingResult?)
    }

    package struct Configuration: Sendable {
        /// Answered here, without the app (see `PeerConnectionConfiguration.methods`).
        package var methods: [String: BuiltInMethod] = [:]
        /// This connection pairs: it starts a pairing (`initiator`) or offers one (`responder`).
        package var pairing: PairingPlan?
        /// This connection uses an invitation (`invitee`) or takes them (`inviter`).
        package var invitation: InvitationPlan?

        /// Our requests waiting for answers at most; one more fails with `busy`.
        package var maximumPendingRequests = 1024
        /// Batches whose answers the app still owes at most; with more, reading stops.
        package var maximumOpenBatches = 16
        /// Answers written but not yet handed to the socket, in bytes, at most; past it the
        /// peer is closed (it sends requests and does not read the answers).
        package var maximumUnsentAnswerBytes = 8 << 20

        package init(
            methods: [String: BuiltInMethod] = [:], pairing: PairingPlan? = nil, invitation: InvitationPlan? = nil,
            maximumPendingRequests: Int = 1024, maximumOpenBatches: Int = 16, maximumUnsentAnswerBytes: Int = 8 << 20
        ) {
            self.methods = methods
            self.pairing = pairing
            self.invitation = invitation
            self.maximumPendingRequests = maximumPendingRequests
            self.maximumOpenBatches = maximumOpenBatches
            self.maximumUnsentAnswerBytes = maximumUnsentAnswerBytes
        }
    }

    /// What pairing needs beyond the handshake's identities.
    package struct PairingPlan: Sendable {
        package var role: PairingExchange.Role
        package var timeout: Duration
        /// Our secret nonce (the shell draws it at random; tests fix it).
        package var nonce: [UInt8]
        /// The name to show and pin when the peer gives none (its certificate's).
        package var fallbackName: String

        package init(role: PairingExchange.Role, timeout: Duration, nonce: [UInt8], fallbackName: String) {
            self.role = role
            self.timeout = timeout
            self.nonce = nonce
            self.fallbackName = fallbackName
        }
    }

    /// What using an invitation needs beyond the handshake's identities.
    package struct InvitationPlan: Sendable {
        package enum Role: Sendable {
            /// The link's secret and handle.
            case invitee(secret: [UInt8], handle: String)
            /// `peerTrusted`: the peer's certificate is trusted here already. `challenge`: fresh random bytes (the shell draws them; tests fix them).
            case inviter(peerTrusted: Bool, challenge: [UInt8])
        }
        package var role: Role
        package var timeout: Duration = .seconds(10)

        package init(role: Role, timeout: Duration = .seconds(10)) {
            self.role = role
            self.timeout = timeout
        }
    }

    /// The app's verdict on a peer that asked to come in (the shell asks the app's policy).
    package enum Admission: Hashable, Sendable {
        case admit
        case refuse(String)
        /// Someone decides, by the invitation's deadline: ``Action/ask(_:deadline:)``, then
        /// ``SessionStateMachine/admissionAnswered(_:at:)``.
        case ask
    }

    package enum Action: Hashable, Sendable {
        /// Write this text as one message. `tracked`: an answer, counted as unsent until the
        /// shell reports it handed to the socket (``SessionStateMachine/written(bytes:)``).
        case write(String, tracked: Bool)
        case flush
        /// Write a WebSocket close frame.
        case close(CloseCode, reason: String)
        /// Let the channel read (a read it asked for goes ahead).
        case read
        /// Reading stops until there is room again; tell the layers below (heartbeats go on).
        case holdReads
        /// Reading goes on again (followed by ``read``).
        case releaseReads
        /// A message for the app; `reply` when it is a request the app answers. `size` is its
        /// share of the frame's bytes, for the inbox's byte limit.
        case deliver(JSONRPCMessage, reply: ReplyTarget?, size: Int)
        /// The answer to a request of ours (or why there will be none).
        case resolve(JSONRPCID, Result<JSONValue, PeerConnectionError>)
        /// Accepting side: ask the app's policy about this peer; answer with ``SessionStateMachine/admission(_:at:)``.
        case invite(PeerHello)
        /// Ask someone (off the event loop) whether to let this peer in, by `deadline` (uptime).
        case ask(PeerHello, deadline: Duration)
        /// Connecting side: the peer asks someone about us, which may take this long.
        case waitingForAdmission(Duration)
        /// Claim the listener's pairing slot; answer with ``SessionStateMachine/pairingSlot(refusal:at:)``.
        case claimPairingSlot
        case releasePairingSlot(succeeded: Bool)
        /// Ask the person whether the other device shows `code`, by `deadline` (uptime).
        case confirmCode(peer: PeerID, name: String, code: String, deadline: Duration)
        /// Inviter: may the invitation named `handle` be used? Answer with ``SessionStateMachine/invitationLookedUp(_:at:)``.
        case lookUpInvitation(handle: String, peer: PeerID)
        /// Inviter: check `proof` against the invitation's secret, take a use and pin the peer
        /// (off the event loop); answer with ``SessionStateMachine/invitationRedeemed(_:at:)``.
        case redeemInvitation(handle: String, proof: [UInt8], challenge: [UInt8], peer: PeerID)
        /// Inviter: the peer, trusted here already, came with the invitation named `handle`
        /// and was let in without using it (for the listener's report).
        case invitationNotNeeded(handle: String, peer: PeerID)
        /// Pin the peer under this name (off the event loop); answer with ``SessionStateMachine/pinned(failure:)``.
        case pin(PeerID, name: String)
        /// The opening is over: the connection is initialized, or paired.
        case opened(Opening)
        case openingFailed(PeerConnectionError)
        /// Stop asking anyone anything about this connection (it ended).
        case cancelQuestion
        /// The session is over, for this reason: nothing more is delivered.
        case ended(ConnectionEnd)
        case log(LogLevel, String)
    }

    package private(set) var phase: Phase
    package let configuration: Configuration
    package private(set) var statistics = ConnectionStatistics()
    /// Our requests that wait for answers (established only).
    private var pending: Set<JSONRPCID> = []
    /// Incoming batches whose answers are being gathered, by token (established only).
    private var batches: [Int: Batch] = [:]
    private var nextBatch = 0
    /// See ``Configuration/maximumUnsentAnswerBytes``.
    package private(set) var unsentAnswerBytes = 0
    /// Since when a read the channel asked for waits for room (nil: reading goes on).
    package private(set) var heldSince: Duration?
    /// Inside ``receive(_:at:)``: flushing waits for ``readComplete()``, so that a burst of
    /// requests read at once is answered with one flush (one TLS record, one write).
    private var reading = false
    private var owesFlush = false
    /// ``Action/opened(_:)`` or ``Action/openingFailed(_:)`` was given: the opening is settled.
    private var openingSettled = false
    private let localID: PeerID?
    private let remoteID: PeerID?
    private let localName: String

    private struct Batch {
        package var outstanding: Int
        package var answers: [JSONValue]
    }

    package init(handshake: Handshake, configuration: Configuration = Configuration()) {
        phase = .handshaking(handshake)
        self.configuration = configuration
        localID = handshake.local.peerID
        remoteID = handshake.remotePeerID
        localName = handshake.local.displayName
    }

    package var isEstablished: Bool {
        if case .established = phase { return true }
        return false
    }

    package var isClosed: Bool {
        if case .closed = phase { return true }
        return false
    }

    /// When ``advance(to:)`` is due next (the handshake's or the pairing's deadline).
    package var deadline: Duration? {
        switch phase {
        case .handshaking(let handshake): handshake.deadline
        case .pairing(let exchange, _): exchange.deadline
        case .inviting(let exchange, _): exchange.deadline
        default: nil
        }
    }

    // MARK: Opening

    /// The channel is open (TLS and WebSocket done) at `now`.
    package mutating func start(at now: Duration) -> [Action] {
        var out: [Action] = []
        guard case .handshaking(var handshake) = phase else { return out }
        if case .invitee(let secret, let handle)? = configuration.invitation?.role {
            guard let localID, let remoteID else {
                failOpening(.invitation, "an invitation needs TLS: both keys must be proven", into: &out)
                return endEvent(out)
            }
            var exchange = InvitationExchange(
                role: .invitee(secret: secret), localID: localID, remoteID: remoteID, handle: handle,
                timeout: configuration.invitation?.timeout ?? .seconds(10))
            let actions = exchange.start(at: now)
            phase = .inviting(exchange, handshake)
            perform(actions, at: now, into: &out)
        } else if let plan = configuration.pairing, plan.role == .initiator {
            guard var exchange = makeExchange(.initiator) else {
                failOpening(.pairing, "pairing needs a peer whose certificate proved who it is", into: &out)
                return endEvent(out)
            }
            let actions = exchange.start(at: now)
            phase = .pairing(exchange, holdsSlot: false)
            perform(actions, at: now, into: &out)
        } else {
            let actions = handshake.start(at: now)
            phase = .handshaking(handshake)
            perform(actions, at: now, into: &out)
        }
        return endEvent(out)
    }

    /// The app's policy about the peer in ``Action/invite(_:)``.
    package mutating func admission(_ verdict: Admission, at now: Duration) -> [Action] {
        var out: [Action] = []
        switch verdict {
        case .admit:
            perform(withHandshake { $0.decide(accept: true, at: now) }, at: now, into: &out)
        case .refuse(let reason):
            perform(withHandshake { $0.decide(accept: false, reason: reason, at: now) }, at: now, into: &out)
        case .ask:
            guard case .handshaking(let handshake) = phase, let hello = handshake.invitee else { return out }
            perform(handshake.announceWaiting(reason: "someone there decides whether to let you in", at: now), at: now, into: &out)
            out.append(.ask(hello, deadline: handshake.deadline ?? now))
        }
        return endEvent(out)
    }

    /// The answer to ``Action/ask(_:deadline:)``.
    package mutating func admissionAnswered(_ accepted: Bool, at now: Duration) -> [Action] {
        var out: [Action] = []
        perform(withHandshake { $0.decide(accept: accepted, at: now) }, at: now, into: &out)
        return endEvent(out)
    }

    /// The answer to ``Action/claimPairingSlot``: nil when the slot is ours, else why not.
    package mutating func pairingSlot(refusal: String?, at now: Duration) -> [Action] {
        var out: [Action] = []
        guard case .claimingPairingSlot(let id, let params) = phase else { return out }
        if let refusal {
            out.append(.log(.info, "pairing refused: \(refusal)"))
            failPairing(refusal, answering: id, at: now, into: &out)
        } else if var exchange = makeExchange(.responder) {
            let actions = exchange.receiveRequest(id: id, params: params, at: now)
            phase = .pairing(exchange, holdsSlot: true)
            perform(actions, at: now, into: &out)
        }
        return endEvent(out)
    }

    /// The answer to ``Action/lookUpInvitation(handle:)``: nil when the invitation may be used, else why not.
    package mutating func invitationLookedUp(_ refusal: InvitationRefusal?, at now: Duration) -> [Action] {
        var out: [Action] = []
        perform(withInvitation { $0.lookedUp(refusal, at: now) }, at: now, into: &out)
        return endEvent(out)
    }

    /// The answer to ``Action/redeemInvitation(handle:proof:challenge:)``: nil when the proof
    /// held, a use was taken and the peer is pinned; else why not.
    package mutating func invitationRedeemed(_ refusal: InvitationRefusal?, at now: Duration) -> [Action] {
        var out: [Action] = []
        perform(withInvitation { $0.redeemed(refusal, at: now) }, at: now, into: &out)
        return endEvent(out)
    }

    /// The person's answer to ``Action/confirmCode(peer:name:code:deadline:)``.
    package mutating func codeConfirmed(_ accepted: Bool, at now: Duration) -> [Action] {
        var out: [Action] = []
        perform(withExchange { $0.confirm(accepted, at: now) }, at: now, into: &out)
        return endEvent(out)
    }

    /// The answer to ``Action/pin(_:name:)``: nil when the pin was saved, else why not.
    package mutating func pinned(failure: String?) -> [Action] {
        var out: [Action] = []
        let result: PairingResult
        var open = false
        switch phase {
        case .pinning(let pairing):
            result = pairing
            open = true
        case .closed(let end, let pairing?):
            result = pairing
            phase = .closed(end, pinning: nil)
        default:
            return out
        }
        if let failure {
            settleOpening(.failure(PeerConnectionError(.pairing, "both sides confirmed, but the pin could not be saved: \(failure)")), into: &out)
            if open { out.append(.close(.serverError, reason: "could not pin")) }
        } else {
            settleOpening(.success(.paired(result)), into: &out)
            if open { out.append(.close(.normal, reason: "paired")) }
        }
        if open { out.append(.flush) }
        return out
    }

    /// Time passes: an opening that takes too long fails.
    package mutating func advance(to now: Duration) -> [Action] {
        var out: [Action] = []
        switch phase {
        case .handshaking:
            perform(withHandshake { $0.advance(to: now) }, at: now, into: &out)
        case .pairing:
            perform(withExchange { $0.advance(to: now) }, at: now, into: &out)
        case .inviting:
            perform(withInvitation { $0.advance(to: now) }, at: now, into: &out)
        default:
            return out
        }
        return endEvent(out)
    }

    // MARK: Inbound

    /// One text message from the peer (a JSON-RPC message or batch), at `now`.
    package mutating func receive(_ text: String, at now: Duration) -> [Action] {
        var out: [Action] = []
        receive(text, at: now, into: &out)
        return out
    }

    /// ``receive(_:at:)``, appending to `out` (the shell reuses one buffer: this is the path
    /// every message takes).
    package mutating func receive(_ text: String, at now: Duration, into out: inout [Action]) {
        reading = true
        defer { reading = false }
        let frame = JSONRPCFrame(parsing: text)
        // Each message's share of the frame, for the inbox's byte limit.
        let size = max(1, text.utf8.count / max(1, frame.entries.count))
        if case .established = phase, frame.isBatch {
            receiveBatch(frame, size: size, into: &out)
        } else {
            // One message, or a batch before the handshake is done: each entry on its own.
            for entry in frame.entries { receive(entry, size: size, at: now, into: &out) }
        }
        endEvent(&out)
    }

    private mutating func receive(_ entry: JSONRPCFrame.Entry, size: Int, at now: Duration, into out: inout [Action]) {
        statistics.messagesReceived += 1
        if case .closed = phase {
            out.append(.log(.debug, "ignored a message that came after the session ended"))
            return
        }
        let message: JSONRPCMessage
        switch entry {
        case .invalid(let owed):
            statistics.malformed += 1
            out.append(.log(.debug, "answered malformed input: \(owed.jsonText)"))
            writeAnswer(owed.jsonText, into: &out)
            return
        case .message(let read):
            message = read
        }
        switch phase {
        case .handshaking:
            if case .notification(let method, _) = message, method != Handshake.waitingMethod {
                statistics.droppedBeforeInitialize += 1
                out.append(.log(.info, "dropped notification \"\(method)\" that came before initialize"))
            }
            perform(withHandshake { $0.receive(message, at: now) }, at: now, into: &out)
        case .pairing:
            perform(withExchange { $0.receive(message, at: now) }, at: now, into: &out)
        case .inviting:
            if case .notification(let method, _) = message {
                statistics.droppedBeforeInitialize += 1
                out.append(.log(.info, "dropped notification \"\(method)\" that came while an invitation was being used"))
            }
            perform(withInvitation { $0.receive(message, at: now) }, at: now, into: &out)
        case .established:
            if case .request(let id, "initialize", _) = message {
                answer(message: .failure(id: id, JSONRPCError(JSONRPCError.invalidRequest, "already initialized")), to: ReplyTarget(id: id), into: &out)
            } else {
                route(message, batch: nil, size: size, into: &out)
            }
        case .claimingPairingSlot, .pinning, .closed:
            // The pairing is decided; the peer has nothing more to say on this connection.
            out.append(.log(.debug, "ignored a message while the pairing is being settled"))
        }
    }

    private mutating func receiveBatch(_ frame: JSONRPCFrame, size: Int, into out: inout [Action]) {
        let token = nextBatch
        nextBatch &+= 1
        var batch = Batch(outstanding: 0, answers: [])
        var messages: [JSONRPCMessage] = []
        for entry in frame.entries {
            statistics.messagesReceived += 1
            switch entry {
            case .invalid(let owed):
                statistics.malformed += 1
                batch.answers.append(owed.json)
            case .message(let message):
                if case .request = message { batch.outstanding += 1 }
                messages.append(message)
            }
        }
        batches[token] = batch
        for message in messages {
            if case .request(let id, "initialize", _) = message {
                answer(message: .failure(id: id, JSONRPCError(JSONRPCError.invalidRequest, "already initialized")), to: ReplyTarget(id: id, batch: token), into: &out)
            } else {
                route(message, batch: token, size: size, into: &out)
            }
        }
        finishBatchIfAnswered(token, into: &out)
    }

    /// A message after the handshake: an answer one of our requests awaits, a built-in method,
    /// or something for the app.
    private mutating func route(_ message: JSONRPCMessage, batch: Int?, size: Int, into out: inout [Action]) {
        switch message {
        case .response(let id, let result):
            if pending.remove(id) != nil { return out.append(.resolve(id, .success(result))) }
        case .failure(let id?, let error):
            if pending.remove(id) != nil { return out.append(.resolve(id, .failure(PeerConnectionError(remote: error)))) }
        case .request(let id, let method, let params):
            let target = ReplyTarget(id: id, batch: batch)
            if let builtIn = configuration.methods[method] {
                return answer(builtIn(params), to: target, into: &out)
            }
            return out.append(.deliver(message, reply: target, size: size))
        default:
            break
        }
        out.append(.deliver(message, reply: nil, size: size))
    }

    /// The app's answer to a request it was given; `inboxFull`: whether the app is still behind.
    package mutating func reply(to target: ReplyTarget, _ outcome: Result<JSONValue, JSONRPCError>, inboxFull: Bool) -> [Action] {
        var out: [Action] = []
        reply(to: target, outcome, inboxFull: inboxFull, into: &out)
        return out
    }

    /// ``reply(to:_:inboxFull:)``, appending to `out`.
    package mutating func reply(to target: ReplyTarget, _ outcome: Result<JSONValue, JSONRPCError>, inboxFull: Bool, into out: inout [Action]) {
        guard case .established = phase else { return }
        answer(outcome, to: target, into: &out)
        if target.batch != nil { releaseReadsIfRoom(inboxFull: inboxFull, into: &out) }
        endEvent(&out)
    }

    private mutating func answer(_ outcome: Result<JSONValue, JSONRPCError>, to target: ReplyTarget, into out: inout [Action]) {
        let message: JSONRPCMessage =
            switch outcome {
            case .success(let result): .response(id: target.id, result: result)
            case .failure(let error): .failure(id: target.id, error)
            }
        answer(message: message, to: target, into: &out)
    }

    private mutating func answer(message: JSONRPCMessage, to target: ReplyTarget, into out: inout [Action]) {
        guard let token = target.batch else { return writeAnswer(message.jsonText, into: &out) }
        guard var batch = batches[token] else { return }
        batch.outstanding -= 1
        batch.answers.append(message.json)
        batches[token] = batch
        finishBatchIfAnswered(token, into: &out)
    }

    private mutating func finishBatchIfAnswered(_ token: Int, into out: inout [Action]) {
        guard let batch = batches[token], batch.outstanding <= 0 else { return }
        batches[token] = nil
        // A batch of notifications alone is not answered (JSON-RPC 2.0 §6).
        guard !batch.answers.isEmpty else { return }
        writeAnswer(JSONValue.array(batch.answers).jsonText, into: &out)
    }

    // MARK: Back-pressure

    /// Reading goes on only while the app keeps up and the batches waiting for its answers are few.
    private func mayRead(inboxFull: Bool) -> Bool {
        !inboxFull && batches.count < configuration.maximumOpenBatches
    }

    /// The channel asks to read at `now`; `inboxFull`: the app has not read what it was given.
    package mutating func readRequested(inboxFull: Bool, at now: @autoclosure () -> Duration) -> [Action] {
        if mayRead(inboxFull: inboxFull) { return Self.justRead }
        guard heldSince == nil else { return [] }
        heldSince = now()
        statistics.heldBack += 1
        return [.log(.debug, "reading held back: the app is behind (\(batches.count) batches wait for answers)"), .holdReads]
    }

    /// The app read its queue down (``Inbox/whenRoom(_:)``).
    package mutating func roomAgain(inboxFull: Bool) -> [Action] {
        var out: [Action] = []
        releaseReadsIfRoom(inboxFull: inboxFull, into: &out)
        return out
    }

    private mutating func releaseReadsIfRoom(inboxFull: Bool, into out: inout [Action]) {
        guard heldSince != nil, !isClosed, mayRead(inboxFull: inboxFull) else { return }
        heldSince = nil
        out.append(.releaseReads)
        out.append(.read)
    }

    /// True while reading is held back because the app is behind, for less than `limit` at
    /// `now`: the peer is then not known to be dead, whatever a probe would say.
    package func heldBackRecently(within limit: Duration, at now: Duration) -> Bool {
        guard let heldSince else { return false }
        return now - heldSince < limit
    }

    /// The channel's read is over: what was written during it goes out together.
    package mutating func readComplete() -> [Action] {
        guard owesFlush else { return [] }
        owesFlush = false
        return Self.justFlush
    }

    /// The answers of the two events every read has, made once (an array literal would be
    /// allocated at every call).
    private static let justRead: [Action] = [.read]
    private static let justFlush: [Action] = [.flush]

    /// `bytes` of answers reached the socket.
    package mutating func written(bytes: Int) {
        unsentAnswerBytes -= bytes
    }

    // MARK: Outbound

    /// The app sends request `id`; the actions write it, or the error says why it cannot go.
    package mutating func request(id: JSONRPCID, method: String, params: JSONValue?) -> Result<[Action], PeerConnectionError> {
        var out: [Action] = []
        if let refusal = request(id: id, method: method, params: params, into: &out) { return .failure(refusal) }
        return .success(out)
    }

    /// ``request(id:method:params:)``, appending to `out`; nil when it goes, else why not.
    package mutating func request(id: JSONRPCID, method: String, params: JSONValue?, into out: inout [Action]) -> PeerConnectionError? {
        switch phase {
        case .established:
            break
        case .closed(let end, _):
            return PeerConnectionError(.closed, end.message)
        default:
            return PeerConnectionError(.closed, "the connection is not initialized")
        }
        guard !pending.contains(id) else {
            return PeerConnectionError(.invalidInput, "request id \(id) is already waiting for an answer")
        }
        guard pending.count < configuration.maximumPendingRequests else {
            return PeerConnectionError(
                .busy, "\(pending.count) requests already wait for answers on this connection (the limit, maximumPendingRequests)")
        }
        pending.insert(id)
        statistics.messagesSent += 1
        out.append(.write(JSONRPCMessage.request(id: id, method: method, params: params).jsonText, tracked: false))
        endEvent(&out)
        return nil
    }

    /// Stop waiting for request `id` (a timeout, or the caller gave up): the caller gets
    /// `error`, and the peer a `$/cancelRequest` notification.
    package mutating func abandon(_ id: JSONRPCID, _ error: PeerConnectionError) -> [Action] {
        guard pending.remove(id) != nil else { return [] }
        statistics.requestsAbandoned += 1
        var out: [Action] = [.resolve(id, .failure(error))]
        guard !isClosed else { return out }
        writeAnswer(JSONRPCMessage.notification(method: "$/cancelRequest", params: .object(["id": id.json])).jsonText, into: &out)
        return endEvent(out)
    }

    /// The app writes a message of its own: nil when it may go (it is counted), else why not.
    package mutating func sendingText() -> PeerConnectionError? {
        if case .closed(let end, _) = phase { return PeerConnectionError(.closed, end.message) }
        statistics.messagesSent += 1
        return nil
    }

    /// The connection is over (closed by either side, lost, or failed), for this reason.
    package mutating func end(_ end: ConnectionEnd) -> [Action] {
        var out: [Action] = []
        finish(end, into: &out)
        return out
    }

    // MARK: Performing the exchanges' actions

    private mutating func perform(_ actions: [Handshake.Action], at now: Duration, into out: inout [Action]) {
        for action in actions {
            switch action {
            case .send(let message):
                writeAnswer(message.jsonText, into: &out)
            case .invite(let hello):
                out.append(.invite(hello))
            case .waiting(let wait):
                out.append(.log(.info, "the peer asks someone whether to let us in; waiting up to \(secondsText(wait))"))
                out.append(.waitingForAdmission(wait))
            case .established(let hello):
                phase = .established
                out.append(.log(.debug, "initialized with \(hello.peerID?.short ?? "an insecure peer")"))
                settleOpening(.success(.initialized(hello)), into: &out)
            case .pair(let id, let params):
                guard configuration.pairing?.role == .responder, makeExchange(.responder) != nil else {
                    failPairing("pairing is not offered here", answering: id, at: now, into: &out)
                    continue
                }
                phase = .claimingPairingSlot(id: id, params: params)
                out.append(.claimPairingSlot)
            case .invitation(let id, let params):
                guard case .handshaking(let handshake) = phase, case .inviter(let trusted, let challenge)? = configuration.invitation?.role,
                    let localID, let remoteID
                else {
                    writeAnswer(JSONRPCMessage.failure(id: id, InvitationExchange.error(InvitationRefusal(.notOffered, "this peer takes no invitations"))).jsonText, into: &out)
                    failOpening(.invitation, "the peer asked to use an invitation, and none are offered here", into: &out)
                    continue
                }
                var exchange = InvitationExchange(
                    role: .inviter(peerTrusted: trusted, challenge: challenge), localID: localID, remoteID: remoteID,
                    timeout: configuration.invitation?.timeout ?? .seconds(10))
                let actions = exchange.receiveOpen(id: id, params: params, at: now)
                phase = .inviting(exchange, handshake)
                perform(actions, at: now, into: &out)
            case .deliver(let message):
                route(message, batch: nil, size: 1, into: &out)
            case .close(let reason):
                failOpening(.handshake, reason, into: &out)
            }
        }
    }

    private mutating func perform(_ actions: [PairingExchange.Action], at now: Duration, into out: inout [Action]) {
        for action in actions {
            switch action {
            case .send(let message):
                writeAnswer(message.jsonText, into: &out)
            case .showCode(let code, let name):
                guard let remoteID, let plan = configuration.pairing else { continue }
                out.append(.confirmCode(peer: remoteID, name: name, code: code, deadline: deadline ?? now + plan.timeout))
            case .paired(let code, let name):
                guard let remoteID else { continue }
                releasePairingSlot(succeeded: true, into: &out)
                out.append(.log(.info, "paired with \(remoteID.short)"))
                phase = .pinning(PairingResult(peerID: remoteID, name: name, code: code))
                out.append(.pin(remoteID, name: name))
            case .failed(let reason):
                releasePairingSlot(succeeded: false, into: &out)
                failOpening(.pairing, reason, into: &out)
            }
        }
    }

    private mutating func perform(_ actions: [InvitationExchange.Action], at now: Duration, into out: inout [Action]) {
        for action in actions {
            switch action {
            case .send(let message):
                writeAnswer(message.jsonText, into: &out)
            case .lookUp(let handle):
                guard let remoteID else { continue }
                out.append(.lookUpInvitation(handle: handle, peer: remoteID))
            case .redeem(let handle, let proof, let challenge):
                guard let remoteID else { continue }
                out.append(.redeemInvitation(handle: handle, proof: proof, challenge: challenge, peer: remoteID))
            case .admitted(let used, let handle):
                guard case .inviting(_, var handshake) = phase else { continue }
                if !used, let handle, let remoteID, handshake.role == .accepting { out.append(.invitationNotNeeded(handle: handle, peer: remoteID)) }
                out.append(.log(.info, used ? "invitation used: initialize comes next" : "the inviter trusts us already: initialize comes next"))
                switch handshake.role {
                case .connecting:
                    let next = handshake.start(at: now)
                    phase = .handshaking(handshake)
                    perform(next, at: now, into: &out)
                case .accepting:
                    handshake.resumeAfterInvitation(at: now)
                    phase = .handshaking(handshake)
                }
            case .failed(let reason, let refusal):
                // The inviter's book refusals are the listener's invitation reports; anything
                // else that goes wrong on its side (a malformed message, time) is a failed handshake.
                var accepting = false
                if case .inviting(_, let handshake) = phase { accepting = handshake.role == .accepting }
                let remote = accepting ? nil : refusal.map { InvitationExchange.error(InvitationRefusal($0, reason)) }
                failOpening(accepting && refusal == nil ? .handshake : .invitation, reason, remote: remote, into: &out)
            }
        }
    }

    // MARK: Helpers

    private mutating func withInvitation(_ body: (inout InvitationExchange) -> [InvitationExchange.Action]) -> [InvitationExchange.Action] {
        guard case .inviting(var exchange, let handshake) = phase else { return [] }
        let actions = body(&exchange)
        // The exchange's actions may move the phase on; until they are performed, it stays here.
        phase = .inviting(exchange, handshake)
        return actions
    }

    private mutating func withHandshake(_ body: (inout Handshake) -> [Handshake.Action]) -> [Handshake.Action] {
        guard case .handshaking(var handshake) = phase else { return [] }
        let actions = body(&handshake)
        phase = .handshaking(handshake)
        return actions
    }

    private mutating func withExchange(_ body: (inout PairingExchange) -> [PairingExchange.Action]) -> [PairingExchange.Action] {
        guard case .pairing(var exchange, let holdsSlot) = phase else { return [] }
        let actions = body(&exchange)
        phase = .pairing(exchange, holdsSlot: holdsSlot)
        return actions
    }

    private func makeExchange(_ role: PairingExchange.Role) -> PairingExchange? {
        guard let plan = configuration.pairing, plan.role == role, let localID, let remoteID else { return nil }
        return PairingExchange(
            role: role, localID: localID, remoteID: remoteID, localName: localName,
            fallbackName: plan.fallbackName.isEmpty ? remoteID.short : plan.fallbackName, nonce: plan.nonce, timeout: plan.timeout)
    }

    private mutating func failPairing(_ reason: String, answering id: JSONRPCID, at now: Duration, into out: inout [Action]) {
        writeAnswer(JSONRPCMessage.failure(id: id, JSONRPCError(JSONRPCError.pairingFailed, reason)).jsonText, into: &out)
        perform([PairingExchange.Action.failed(reason)], at: now, into: &out)
    }

    private mutating func releasePairingSlot(succeeded: Bool, into out: inout [Action]) {
        guard case .pairing(let exchange, holdsSlot: true) = phase else { return }
        phase = .pairing(exchange, holdsSlot: false)
        out.append(.releasePairingSlot(succeeded: succeeded))
    }

    /// The opening failed: what was written goes out, the session ends, and the peer is told why.
    private mutating func failOpening(_ code: PeerConnectionError.Code, _ reason: String, remote: JSONRPCError? = nil, into out: inout [Action]) {
        var error = PeerConnectionError(code, reason)
        error.remoteError = remote
        settleOpening(.failure(error), into: &out)
        out.append(.flush)
        finish(ConnectionEnd(.openingFailed, reason, closeCode: .policyViolation, byPeer: false), into: &out)
        out.append(.close(.policyViolation, reason: reason))
    }

    private mutating func settleOpening(_ outcome: Result<Opening, PeerConnectionError>, into out: inout [Action]) {
        guard !openingSettled else { return }
        openingSettled = true
        switch outcome {
        case .success(let opening): out.append(.opened(opening))
        case .failure(let error): out.append(.openingFailed(error))
        }
    }

    /// Writes an answer, counted as unsent until the socket has it; past the limit, the peer
    /// (which sends and does not read) is closed. Reading is not stopped for it: two peers that
    /// each stopped reading until their own writes drain would wait for each other forever.
    private mutating func writeAnswer(_ text: String, into out: inout [Action]) {
        statistics.messagesSent += 1
        unsentAnswerBytes += text.utf8.count
        out.append(.write(text, tracked: true))
        guard unsentAnswerBytes > configuration.maximumUnsentAnswerBytes, !isClosed else { return }
        statistics.closedOverLimit += 1
        let limit = configuration.maximumUnsentAnswerBytes
        let reason = "the peer does not read our answers: \(unsentAnswerBytes) bytes wait to be sent (the limit is \(limit))"
        out.append(.log(.warning, "closing the connection: \(reason)"))
        out.append(.flush)
        finish(ConnectionEnd(.overLimit, reason, closeCode: .policyViolation, byPeer: false), into: &out)
        out.append(.close(.policyViolation, reason: "the peer does not read our answers"))
        out.append(.flush)
    }

    /// The session is over: everyone waiting hears why, once.
    private mutating func finish(_ end: ConnectionEnd, into out: inout [Action]) {
        var pinning: PairingResult?
        switch phase {
        case .closed:
            return
        case .pinning(let result):
            pinning = result
        case .pairing(_, holdsSlot: true):
            releasePairingSlot(succeeded: false, into: &out)
        default:
            break
        }
        phase = .closed(end, pinning: pinning)
        out.append(.cancelQuestion)
        let error = PeerConnectionError(.closed, end.message)
        if pinning == nil { settleOpening(.failure(error), into: &out) }
        for id in pending.sorted(by: { $0.description < $1.description }) { out.append(.resolve(id, .failure(error))) }
        pending = []
        batches = [:]
        out.append(.ended(end))
    }

    /// Every event that may have written ends with a flush, unless a read is in progress: then
    /// ``readComplete()`` flushes once for the whole read.
    private mutating func endEvent(_ actions: consuming [Action]) -> [Action] {
        var actions = actions
        endEvent(&actions)
        return actions
    }

    private mutating func endEvent(_ actions: inout [Action]) {
        if reading { owesFlush = true } else { actions.append(.flush) }
    }
}

/// How many messages a connection received, sent and refused.
public struct ConnectionStatistics: Hashable, Sendable {

    package init() {
    }
    public var messagesReceived = 0
    public var messagesSent = 0
    /// Text that was not JSON-RPC (answered with -32700 or -32600).
    public var malformed = 0
    /// Notifications that arrived before `initialize` and were dropped.
    public var droppedBeforeInitialize = 0
    /// Requests we gave up waiting for (timeout or cancellation).
    public var requestsAbandoned = 0
    /// Times the connection stopped reading because the app was behind (`IncomingLimit`) or
    /// too many batches waited for its answers.
    public var heldBack = 0
    /// Connections closed because the peer went over a hard limit: it did not read our
    /// answers while 8 MiB of them waited to be sent.
    public var closedOverLimit = 0
}
