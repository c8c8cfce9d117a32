import Logging
import NIOCore
import NIOEmbedded
import PeerTrust
import Testing

@testable import PeerConnection

/// A whole session as a pure state machine: two machines talk through the actions they emit,
/// with time passed in. No channel, no event loop, no threads.
@Suite("session state machine")
struct SessionStateMachineTests {
    typealias Action = SessionStateMachine.Action

    static let clientID = HandshakeTests.clientID
    static let serverID = HandshakeTests.serverID

    static func local(_ id: PeerID?, _ name: String) -> Handshake.Local {
        Handshake.Local(
            peerID: id, displayName: name, protocolVersion: ProtocolVersion(major: 0, minor: 2),
            info: .object(["name": .string("nearby")]))
    }

    static func client(
        pairing: SessionStateMachine.PairingPlan? = nil, remote: PeerID? = serverID, configuration: SessionStateMachine.Configuration = .init()
    ) -> SessionStateMachine {
        var configuration = configuration
        configuration.pairing = pairing
        return SessionStateMachine(
            handshake: Handshake(role: .connecting, local: local(clientID, "Laptop"), remotePeerID: remote), configuration: configuration)
    }

    static func server(
        pairing: SessionStateMachine.PairingPlan? = nil, configuration: SessionStateMachine.Configuration = .init()
    ) -> SessionStateMachine {
        var configuration = configuration
        configuration.pairing = pairing
        return SessionStateMachine(
            handshake: Handshake(
                role: .accepting, local: local(serverID, "Build Box"), remotePeerID: clientID, offersPairing: pairing != nil),
            configuration: configuration)
    }

    /// The texts among `actions` that are written to the peer.
    func written(_ actions: [Action]) -> [String] {
        actions.compactMap { if case .write(let text, _) = $0 { text } else { nil } }
    }

    func messages(_ actions: [Action]) -> [JSONRPCMessage] {
        written(actions).flatMap { JSONRPCFrame(parsing: $0).messages }
    }

    /// Hands what `from` wrote to `to`, one message at a time, and gives back `to`'s actions.
    func deliver(_ actions: [Action], to machine: inout SessionStateMachine, at now: Duration = .zero) -> [Action] {
        written(actions).flatMap { machine.receive($0, at: now) }
    }

    func opening(_ actions: [Action]) -> Opening? {
        for case .opened(let opening) in actions { return opening }
        return nil
    }

    func failure(_ actions: [Action]) -> PeerConnectionError? {
        for case .openingFailed(let error) in actions { return error }
        return nil
    }

    func ended(_ actions: [Action]) -> String? {
        for case .ended(let end) in actions { return end.message }
        return nil
    }

    func endKind(_ actions: [Action]) -> ConnectionEnd.Kind? {
        for case .ended(let end) in actions { return end.kind }
        return nil
    }

    static func closedByPeer(_ words: String) -> ConnectionEnd { ConnectionEnd(.closed, words, closeCode: .normal, byPeer: true) }

    func closeFrame(_ actions: [Action]) -> (CloseCode, String)? {
        for case .close(let code, let reason) in actions { return (code, reason) }
        return nil
    }

    func delivered(_ actions: [Action]) -> [(JSONRPCMessage, ReplyTarget?)] {
        actions.compactMap { if case .deliver(let message, let reply, _) = $0 { (message, reply) } else { nil } }
    }

    /// Both sides through `initialize`, the server admitting everyone.
    func established(
        client: SessionStateMachine = Self.client(), server: SessionStateMachine = Self.server()
    ) -> (SessionStateMachine, SessionStateMachine) {
        var (a, b) = (client, server)
        _ = b.start(at: .zero)
        let invited = deliver(a.start(at: .zero), to: &b)
        #expect(invited.contains { if case .invite = $0 { true } else { false } })
        let answered = b.admission(.admit, at: .zero)
        _ = deliver(answered, to: &a)
        #expect(a.isEstablished && b.isEstablished)
        return (a, b)
    }

    // MARK: Opening

    @Test("initialize: the server is asked, admits, and both sides report the other's hello once")
    func initialize() throws {
        var a = Self.client()
        var b = Self.server()
        #expect(b.start(at: .zero) == [.flush])
        let invited = deliver(a.start(at: .zero), to: &b)
        guard case .invite(let hello)? = invited.first else { Issue.record("no invitation: \(invited)"); return }
        #expect(hello.peerID == Self.clientID && hello.displayName == "Laptop")
        #expect(b.deadline == .seconds(30))  // the invitation's time
        let admitted = b.admission(.admit, at: .milliseconds(5))
        guard case .initialized(let clientHello)? = opening(admitted) else { Issue.record("not opened: \(admitted)"); return }
        #expect(clientHello.peerID == Self.clientID)
        #expect(admitted.last == .flush)
        let answer = deliver(admitted, to: &a)
        guard case .initialized(let serverHello)? = opening(answer) else { Issue.record("client not opened: \(answer)"); return }
        #expect(serverHello.displayName == "Build Box")
        #expect(a.isEstablished && b.isEstablished && a.deadline == nil && b.deadline == nil)
        // Settled once: ending now fails nothing that was already reported.
        let end = a.end(Self.closedByPeer("bye"))
        #expect(failure(end) == nil && ended(end) == "bye")
    }

    @Test("asking someone: the peer is told it waits and for how long; a no declines, closes and ends")
    func askSomeone() throws {
        var a = Self.client()
        var b = Self.server()
        _ = b.start(at: .zero)
        _ = deliver(a.start(at: .zero), to: &b)
        let asking = b.admission(.ask, at: .seconds(1))
        let ask = asking.compactMap { if case .ask(let hello, let deadline) = $0 { (hello, deadline) } else { nil } }.first
        #expect(ask?.0.peerID == Self.clientID)
        #expect(ask?.1 == .seconds(30))
        let told = deliver(asking, to: &a, at: .seconds(1))
        #expect(told.contains(.waitingForAdmission(.seconds(29))))
        let no = b.admissionAnswered(false, at: .seconds(3))
        #expect(failure(no)?.code == .handshake)
        #expect(closeFrame(no)?.0 == .policyViolation)
        #expect(ended(no) != nil && b.isClosed && b.deadline == nil)
        let declined = deliver(no, to: &a, at: .seconds(3))
        #expect(failure(declined)?.message.contains("declined") == true, "\(declined)")
    }

    @Test("no initialize in time: the deadline comes from the handshake, and passing it fails the opening")
    func initializeTimeout() throws {
        var b = Self.server()
        _ = b.start(at: .seconds(10))
        #expect(b.deadline == .seconds(15))
        #expect(b.advance(to: .seconds(14)) == [.flush])
        let late = b.advance(to: .seconds(15))
        #expect(failure(late)?.code == .handshake)
        #expect(failure(late)?.message.hasPrefix("no initialize within") == true)
        #expect(closeFrame(late)?.0 == .policyViolation)
        #expect(ended(late) != nil && endKind(late) == .openingFailed)
        #expect(b.advance(to: .seconds(20)).isEmpty)  // over: time changes nothing
    }

    @Test("before initialize: notifications are dropped and counted, requests refused with -32002")
    func beforeInitialize() throws {
        var b = Self.server()
        _ = b.start(at: .zero)
        let note = b.receive(JSONRPCMessage.notification(method: "tick", params: nil).jsonText, at: .zero)
        #expect(written(note).isEmpty && delivered(note).isEmpty)
        #expect(b.statistics.droppedBeforeInitialize == 1)
        let early = messages(b.receive(JSONRPCMessage.request(id: .integer(3), method: "work", params: nil).jsonText, at: .zero))
        guard case .failure(.integer(3), let error)? = early.first else { Issue.record("\(early)"); return }
        #expect(error.code == JSONRPCError.notInitialized)
    }

    // MARK: Established

    @Test("requests: answers are matched by id, errors become remote errors, the rest goes to the app")
    func requests() throws {
        var (a, b) = established()
        let sent = try a.request(id: .integer(1), method: "work", params: .object([:])).get()
        let arrived = deliver(sent, to: &b)
        guard case (.request(.integer(1), "work", _), let target?)? = delivered(arrived).first else { Issue.record("\(arrived)"); return }
        let answer = b.reply(to: target, .success(.string("done")), inboxFull: false)
        #expect(deliver(answer, to: &a).first == .resolve(.integer(1), .success(.string("done"))))
        // The same answer again is a response nobody waits for: the app gets it, with nothing to answer.
        let again = deliver(answer, to: &a)
        #expect(delivered(again).count == 1 && delivered(again).first?.1 == nil)

        _ = try a.request(id: .integer(2), method: "work", params: nil).get()
        let refused = a.receive(JSONRPCMessage.failure(id: .integer(2), JSONRPCError(-32000, "nope")).jsonText, at: .zero)
        guard case .resolve(.integer(2), .failure(let error))? = refused.first else { Issue.record("\(refused)"); return }
        #expect(error.code == .remote && error.remoteError?.message == "nope")
    }

    @Test("request ids are unique while waiting, and the number waiting is bounded")
    func requestLimits() throws {
        var configuration = SessionStateMachine.Configuration()
        configuration.maximumPendingRequests = 2
        var (a, _) = established(client: Self.client(configuration: configuration))
        _ = try a.request(id: .integer(1), method: "x", params: nil).get()
        #expect(throws: PeerConnectionError.self) { try a.request(id: .integer(1), method: "x", params: nil).get() }
        _ = try a.request(id: .integer(2), method: "x", params: nil).get()
        let busy = #expect(throws: PeerConnectionError.self) { try a.request(id: .integer(3), method: "x", params: nil).get() }
        #expect(busy?.code == .busy)
        // Abandoning one tells the peer, and makes room.
        let abandoned = a.abandon(.integer(1), PeerConnectionError(.timeout, "no answer"))
        #expect(abandoned.first == .resolve(.integer(1), .failure(PeerConnectionError(.timeout, "no answer"))))
        guard case .notification("$/cancelRequest", let params)? = messages(abandoned).first else { Issue.record("\(abandoned)"); return }
        #expect(params?["id"] == .integer(1))
        #expect(a.statistics.requestsAbandoned == 1)
        _ = try a.request(id: .integer(3), method: "x", params: nil).get()
        // The end answers everyone still waiting, and nothing more can be sent.
        let end = a.end(ConnectionEnd(.lost, "the connection closed", byPeer: true))
        #expect(end.filter { if case .resolve(_, .failure(let error)) = $0 { error.code == .closed } else { false } }.count == 2)
        let closed = #expect(throws: PeerConnectionError.self) { try a.request(id: .integer(9), method: "x", params: nil).get() }
        #expect(closed?.message == "the connection closed")
        #expect(a.sendingText()?.code == .closed)
    }

    @Test("a request before initialize is refused, and a second initialize is answered with an error")
    func notYet() throws {
        var a = Self.client()
        #expect(throws: PeerConnectionError.self) { try a.request(id: .integer(1), method: "x", params: nil).get() }
        var (_, b) = established()
        let again = messages(b.receive(JSONRPCMessage.request(id: .integer(7), method: "initialize", params: nil).jsonText, at: .zero))
        guard case .failure(.integer(7), let error)? = again.first else { Issue.record("\(again)"); return }
        #expect(error.message == "already initialized")
    }

    @Test("built-in methods are answered without the app")
    func builtIn() throws {
        var configuration = SessionStateMachine.Configuration()
        configuration.methods = ["ping": { _ in .success(.object([:])) }]
        var (_, b) = established(server: Self.server(configuration: configuration))
        let actions = b.receive(JSONRPCMessage.request(id: .integer(5), method: "ping", params: nil).jsonText, at: .zero)
        #expect(delivered(actions).isEmpty)
        #expect(messages(actions) == [.response(id: .integer(5), result: .object([:]))])
    }

    @Test("a batch: its requests go to the app, and all answers go back as one array once the last is in")
    func batch() throws {
        var (_, b) = established()
        let text = #"[{"jsonrpc":"2.0","id":1,"method":"a"},{"jsonrpc":"2.0","method":"note"},{"jsonrpc":"2.0","id":2,"method":"initialize"},"bad",{"jsonrpc":"2.0","id":3,"method":"b"}]"#
        let arrived = b.receive(text, at: .zero)
        #expect(written(arrived).isEmpty)
        let given = delivered(arrived)
        #expect(given.count == 3)
        let targets = given.compactMap(\.1)
        #expect(targets.map(\.id) == [.integer(1), .integer(3)])
        #expect(b.readComplete() == [.flush])
        #expect(written(b.reply(to: targets[1], .success(.integer(30)), inboxFull: false)).isEmpty)
        let last = b.reply(to: targets[0], .failure(JSONRPCError(-32000, "no")), inboxFull: false)
        let answers = written(last)
        #expect(answers.count == 1)
        guard case .array(let entries)? = try? JSONValue(parsing: answers[0]) else { Issue.record("\(answers)"); return }
        // The invalid entry's error and "already initialized" come first (answered on arrival), then the app's, in the order given.
        #expect(entries.count == 4)
        #expect(entries.compactMap { $0["id"] } == [.null, .integer(2), .integer(3), .integer(1)])
        // A batch of notifications alone is not answered.
        let quiet = b.receive(#"[{"jsonrpc":"2.0","method":"n1"},{"jsonrpc":"2.0","method":"n2"}]"#, at: .zero)
        #expect(written(quiet).isEmpty && delivered(quiet).count == 2)
    }

    @Test("writes during a read are flushed once, when the read is complete")
    func flushOncePerRead() throws {
        var configuration = SessionStateMachine.Configuration()
        configuration.methods = ["ping": { _ in .success(.null) }]
        var (_, b) = established(server: Self.server(configuration: configuration))
        var actions: [Action] = []
        for id in 1...3 { actions += b.receive(JSONRPCMessage.request(id: .integer(id), method: "ping", params: nil).jsonText, at: .zero) }
        #expect(written(actions).count == 3)
        #expect(!actions.contains(.flush))
        #expect(b.readComplete() == [.flush])
        #expect(b.readComplete().isEmpty)
    }

    // MARK: Back-pressure

    @Test("reading: held once while the app is behind, released when there is room; open batches count too")
    func readGate() throws {
        var configuration = SessionStateMachine.Configuration()
        configuration.maximumOpenBatches = 1
        var (_, b) = established(server: Self.server(configuration: configuration))
        #expect(b.readRequested(inboxFull: false, at: .zero) == [.read])
        #expect(b.readRequested(inboxFull: true, at: .seconds(1)).contains(.holdReads))
        #expect(b.readRequested(inboxFull: true, at: .seconds(2)).isEmpty)  // asking again changes nothing
        #expect(b.statistics.heldBack == 1 && b.heldSince == .seconds(1))
        #expect(b.heldBackRecently(within: .seconds(2), at: .seconds(2)))
        #expect(!b.heldBackRecently(within: .seconds(2), at: .seconds(4)))
        #expect(b.roomAgain(inboxFull: true).isEmpty)
        #expect(b.roomAgain(inboxFull: false) == [.releaseReads, .read])
        #expect(b.roomAgain(inboxFull: false).isEmpty)

        // One batch waiting for the app's answer is the limit here: reading stops until it is answered.
        let arrived = b.receive(#"[{"jsonrpc":"2.0","id":1,"method":"a"}]"#, at: .seconds(5))
        let target = try #require(delivered(arrived).first?.1)
        #expect(b.readRequested(inboxFull: false, at: .seconds(5)).contains(.holdReads))
        let answered = b.reply(to: target, .success(.null), inboxFull: false)
        #expect(written(answered).count == 1)
        #expect(answered.contains(.releaseReads) && answered.contains(.read))
    }

    @Test("a peer that does not read our answers is closed past the limit, with the reason; bytes that reach the socket do not count")
    func unsentAnswers() throws {
        var configuration = SessionStateMachine.Configuration()
        configuration.methods = ["ping": { _ in .success(.null) }]
        configuration.maximumUnsentAnswerBytes = 1000
        var (_, b) = established(server: Self.server(configuration: configuration))
        b.written(bytes: b.unsentAnswerBytes)  // the handshake's answer reached the socket
        for id in 1...20 {
            let actions = b.receive(JSONRPCMessage.request(id: .integer(id), method: "ping", params: nil).jsonText, at: .zero)
            for case .write(let text, true) in actions { b.written(bytes: text.utf8.count) }
        }
        #expect(b.statistics.closedOverLimit == 0 && !b.isClosed)
        var closing: [Action] = []
        for id in 21...100 where !b.isClosed {
            closing = b.receive(JSONRPCMessage.request(id: .integer(id), method: "ping", params: nil).jsonText, at: .zero)
        }
        #expect(b.isClosed && b.statistics.closedOverLimit == 1)
        #expect(ended(closing)?.contains("does not read our answers") == true)
        #expect(endKind(closing) == .overLimit)
        #expect(closeFrame(closing)?.0 == .policyViolation)
        // After the end nothing is delivered.
        let late = b.receive(JSONRPCMessage.notification(method: "tick", params: nil).jsonText, at: .zero)
        #expect(delivered(late).isEmpty && written(late).isEmpty)
    }

    // MARK: Pairing

    static func plan(_ role: PairingExchange.Role, nonce: UInt8) -> SessionStateMachine.PairingPlan {
        SessionStateMachine.PairingPlan(role: role, timeout: .seconds(60), nonce: [UInt8](repeating: nonce, count: 32), fallbackName: "")
    }

    func code(_ actions: [Action]) -> String? {
        for case .confirmCode(_, _, let code, _) in actions { return code }
        return nil
    }

    @Test("pairing end to end: the slot is claimed, both show one code, both say yes, the pin is written, then the connection closes")
    func pairing() throws {
        var a = Self.client(pairing: Self.plan(.initiator, nonce: 1))
        var b = Self.server(pairing: Self.plan(.responder, nonce: 2))
        _ = b.start(at: .zero)
        let claim = deliver(a.start(at: .zero), to: &b)
        #expect(claim.contains(.claimPairingSlot))
        let granted = b.pairingSlot(refusal: nil, at: .zero)
        var fromA = deliver(granted, to: &a)  // a reveals its nonce
        let shownB = deliver(fromA, to: &b)
        fromA = deliver(shownB, to: &a)  // b's acknowledgement: a shows its code
        let codeA = try #require(code(fromA))
        #expect(code(shownB) == codeA)
        #expect(b.deadline == .seconds(60))

        let yesA = a.codeConfirmed(true, at: .seconds(2))
        #expect(!yesA.contains { if case .pin = $0 { true } else { false } })
        let pinB = deliver(yesA, to: &b) + b.codeConfirmed(true, at: .seconds(3))
        #expect(pinB.contains(.releasePairingSlot(succeeded: true)))
        #expect(pinB.contains(.pin(Self.clientID, name: "Laptop")))
        let pinA = deliver(pinB, to: &a)
        #expect(pinA.contains(.pin(Self.serverID, name: "Build Box")))

        // A pins and closes; the close reaches B before its own pin is written: still paired.
        let closedA = a.pinned(failure: nil)
        guard case .paired(let result)? = opening(closedA) else { Issue.record("\(closedA)"); return }
        #expect(result.code == codeA && result.peerID == Self.serverID)
        #expect(closeFrame(closedA)?.0 == .normal)
        let endB = b.end(Self.closedByPeer("the peer closed"))
        #expect(failure(endB) == nil && ended(endB) != nil)
        let lateB = b.pinned(failure: nil)
        guard case .paired(let resultB)? = opening(lateB) else { Issue.record("\(lateB)"); return }
        #expect(resultB.peerID == Self.clientID)
        #expect(closeFrame(lateB) == nil)  // the channel is gone: nothing to close
    }

    @Test("pairing refused by the listener's limiter: the peer hears why, the slot was never held, the opening fails")
    func pairingRefused() throws {
        var a = Self.client(pairing: Self.plan(.initiator, nonce: 1))
        var b = Self.server(pairing: Self.plan(.responder, nonce: 2))
        _ = b.start(at: .zero)
        _ = deliver(a.start(at: .zero), to: &b)
        let refused = b.pairingSlot(refusal: "another pairing is in progress", at: .zero)
        #expect(!refused.contains { if case .releasePairingSlot = $0 { true } else { false } })
        #expect(failure(refused)?.code == .pairing)
        guard case .failure(_, let error)? = messages(refused).first else { Issue.record("\(refused)"); return }
        #expect(error.code == JSONRPCError.pairingFailed && error.message == "another pairing is in progress")
        let heard = deliver(refused, to: &a)
        #expect(failure(heard)?.message.contains("another pairing is in progress") == true)
    }

    @Test("a connection lost during pairing gives the slot back as a failure; pairing where it is not offered is refused")
    func pairingLost() throws {
        var a = Self.client(pairing: Self.plan(.initiator, nonce: 1))
        var b = Self.server(pairing: Self.plan(.responder, nonce: 2))
        _ = b.start(at: .zero)
        _ = deliver(a.start(at: .zero), to: &b)
        _ = b.pairingSlot(refusal: nil, at: .zero)
        let lost = b.end(ConnectionEnd(.lost, "the connection closed", byPeer: true))
        #expect(lost.contains(.releasePairingSlot(succeeded: false)))
        #expect(failure(lost)?.code == .closed)

        // Without a certificate that proved who the peer is, there is nothing to pin.
        var anonymous = Self.client(pairing: Self.plan(.initiator, nonce: 1), remote: nil)
        #expect(failure(anonymous.start(at: .zero))?.code == .pairing)
    }
}

/// The shell: a SessionHandler on an EmbeddedChannel performs what its machine decides, with
/// the event loop's clock moved by hand.
@Suite("session handler")
struct SessionHandlerTests {
    @Test("one timer at the machine's deadline: no initialize within 5 s fails the opening and writes a close frame")
    func handshakeTimer() throws {
        let loop = EmbeddedEventLoop()
        let channel = EmbeddedChannel(loop: loop)
        defer { _ = try? channel.finish() }
        let handshake = Handshake(
            role: .accepting, local: SessionStateMachineTests.local(HandshakeTests.serverID, "Build Box"), remotePeerID: HandshakeTests.clientID)
        let session = SessionHandler(handshake: handshake, decide: nil, eventLoop: loop, logger: Logger(label: "test"))
        try channel.pipeline.syncOperations.addHandler(session)
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 1)).wait()
        let failed = Counter()
        session.established.futureResult.whenFailure { _ in failed.add() }
        loop.advanceTime(by: .milliseconds(4999))
        #expect(failed.value == 0)
        loop.advanceTime(by: .milliseconds(1))
        let error = try #require(throws: PeerConnectionError.self) { try session.established.futureResult.wait() }
        #expect(error.code == .handshake)
        var closed = false
        while let frame = try channel.readOutbound(as: OutboundFrame.self) {
            if case .close(let code, _) = frame { closed = code == .policyViolation }
        }
        #expect(closed)
        let end = try session.ended.futureResult.wait()
        #expect(end.message.hasPrefix("no initialize within"))
        #expect(end.kind == .openingFailed && end.closeCode == .policyViolation && !end.byPeer)
    }

    @Test("a request that times out fails with timeout, and the peer is told to stop working on it")
    func requestTimer() throws {
        let harness = try SessionHarness(limit: IncomingLimit())
        let promise = harness.loop.makePromise(of: JSONValue.self)
        harness.session.request(id: .integer(8), method: "slow", params: nil, timeout: .seconds(2), promise: promise)
        harness.loop.advanceTime(by: .seconds(2))
        let error = try #require(throws: PeerConnectionError.self) { try promise.futureResult.wait() }
        #expect(error.code == .timeout && error.message.contains("\"slow\""))
        var texts: [String] = []
        while let frame = try harness.channel.readOutbound(as: OutboundFrame.self) {
            if case .text(let text) = frame { texts.append(text) }
        }
        #expect(texts.count == 2)  // the request, then the cancellation
        #expect(texts.last?.contains("$/cancelRequest") == true)
        #expect(harness.session.statistics.requestsAbandoned == 1)
    }
}
