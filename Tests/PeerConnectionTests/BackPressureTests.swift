import Logging
import NIOCore
import NIOEmbedded
import PeerTrust
import Testing

@testable import PeerConnection

/// Back-pressure from the app to TCP, without sockets: the inbox's limits, the session's read
/// gate on an EmbeddedChannel, and liveness while reading is held.
@Suite("back-pressure")
struct BackPressureTests {
    @Test("the queue is full at either limit and has room again only at half of both")
    func queueLimits() {
        var byCount = InboxQueue<Int>(limit: IncomingLimit(messages: 4, bytes: 1000))
        for value in 0..<3 { byCount.append(value, size: 10) }
        #expect(!byCount.isFull)
        byCount.append(3, size: 10)
        #expect(byCount.isFull && !byCount.hasRoom)
        #expect(byCount.removeFirst() == 0)
        #expect(!byCount.isFull && !byCount.hasRoom)  // 3 left: not full, not yet down to half
        #expect(byCount.removeFirst() == 1)
        #expect(byCount.hasRoom)

        var byBytes = InboxQueue<String>(limit: IncomingLimit(messages: 100, bytes: 1000))
        byBytes.append("big", size: 999)
        #expect(!byBytes.isFull)
        byBytes.append("small", size: 1)
        #expect(byBytes.isFull && byBytes.bytes == 1000)
        #expect(byBytes.removeFirst() == "big")
        #expect(byBytes.hasRoom && byBytes.count == 1)
    }

    @Test("the inbox says full, calls for more once the app took it down to half, and keeps order")
    func inbox() async {
        let inbox = Inbox(limit: IncomingLimit(messages: 4))
        let room = Counter()
        inbox.whenRoom { room.add() }
        var accepted: [Bool] = []
        for index in 0..<6 { accepted.append(inbox.push(notification(index), size: 10)) }
        // The 4th fills it; more may still arrive (the rest of one socket read) and are kept.
        #expect(accepted == [true, true, true, false, false, false])
        var seen: [Int] = []
        for _ in 0..<3 { seen.append(await index(of: inbox.next())) }
        #expect(room.value == 0)  // 3 left: over half of 4
        seen.append(await index(of: inbox.next()))
        #expect(room.value == 1)  // 2 left: half
        inbox.finish()
        // What was queued before the end is still read, then the loop ends.
        for _ in 0..<2 { seen.append(await index(of: inbox.next())) }
        #expect(seen == [0, 1, 2, 3, 4, 5])
        #expect(await inbox.next() == nil)
        // After the end nothing more is queued.
        #expect(inbox.push(notification(9), size: 1))
        #expect(await inbox.next() == nil)
    }

    @Test("a reader waiting on an empty inbox gets the next message; cancelling it ends its loop")
    func waitingReader() async {
        let inbox = Inbox(limit: IncomingLimit())
        let reader = Task { await inbox.next() }
        let cancelled = Task { await inbox.next() }
        cancelled.cancel()
        #expect(await cancelled.value == nil)
        // The live reader may not be waiting yet: the message is queued or handed over, either way it gets it.
        inbox.push(notification(7), size: 1)
        #expect(await index(of: reader.value) == 7)
    }

    @Test("liveness: a held connection is never called dead, heartbeats go out, and the clock restarts on release")
    func livenessWhileHeld() {
        var liveness = Liveness(deadAfter: .seconds(30), now: .zero)
        liveness.hold(at: .seconds(5))
        #expect(liveness.nextTick == .seconds(15))
        #expect(liveness.tick(at: .seconds(15)) == .heartbeat)
        #expect(liveness.tick(at: .seconds(16)) == .wait)
        #expect(liveness.tick(at: .seconds(25)) == .heartbeat)
        #expect(liveness.tick(at: .seconds(300)) == .heartbeat)  // long past 30 s of silence: still not dead
        liveness.release(at: .seconds(301))
        #expect(liveness.tick(at: .seconds(310)) == .wait)
        #expect(liveness.tick(at: .seconds(311)) == .ping)
        #expect(liveness.tick(at: .seconds(331)) == .dead(silentFor: .seconds(30)))
    }

    @Test("a full inbox holds the channel's read until the app catches up; nothing is lost or reordered")
    func sessionHoldsRead() throws {
        let harness = try SessionHarness(limit: IncomingLimit(messages: 4))
        for index in 0..<5 { try harness.channel.writeInbound(notification(index).message.jsonText) }
        #expect(harness.session.inbox.count == 5)
        harness.channel.read()
        #expect(harness.gate.reads == 0)
        #expect(harness.gate.events == [.held])
        #expect(harness.session.statistics.heldBack == 1)
        harness.channel.read()  // asking again changes nothing
        #expect(harness.gate.reads == 0 && harness.session.statistics.heldBack == 1)
        var seen: [Int] = []
        // (An EmbeddedEventLoop belongs to one thread: the app's side is played with poll().)
        for _ in 0..<3 { seen.append(index(of: harness.session.inbox.poll())) }
        harness.loop.run()  // the app's call for more hops to the event loop
        #expect(harness.gate.reads == 1)
        #expect(harness.gate.events == [.held, .released])
        for _ in 0..<2 { seen.append(index(of: harness.session.inbox.poll())) }
        #expect(harness.session.inbox.poll() == nil)
        #expect(seen == [0, 1, 2, 3, 4])
    }

    @Test("a peer that never reads our answers: reading goes on (no mutual wait), and past the limit the connection closes and says why")
    func answersNobodyReads() throws {
        let reading = try SessionHarness(limit: IncomingLimit(), maximumUnsentAnswerBytes: 1000)
        // Answers that reach the socket do not count: 100 pings, each answered and written.
        for id in 1...100 { try reading.channel.writeInbound(ping(id)) }
        #expect(reading.session.statistics.closedOverLimit == 0)

        let stuck = try SessionHarness(limit: IncomingLimit(), maximumUnsentAnswerBytes: 1000)
        stuck.gate.holdWrites = true
        var sent = 0
        while stuck.session.statistics.closedOverLimit == 0, sent < 100 {
            sent += 1
            try stuck.channel.writeInbound(ping(sent))
            stuck.channel.read()
        }
        // Each answer is about 36 bytes: the limit of 1,000 is passed at the 28th or so.
        #expect(sent > 20 && sent < 40, "closed after \(sent) pings")
        #expect(stuck.gate.reads == sent, "reading stopped: \(stuck.gate.reads) reads for \(sent) pings")
        let reason = try stuck.session.ended.futureResult.wait()
        #expect(reason.message.contains("does not read our answers"), "\(reason)")
        #expect(reason.kind == .overLimit && reason.closeCode == .policyViolation && !reason.byPeer)
    }

    @Test("requests waiting for answers are bounded: one more fails at once with busy")
    func pendingRequestsBounded() throws {
        let harness = try SessionHarness(limit: IncomingLimit(), maximumPendingRequests: 2)
        var outcomes: [EventLoopFuture<JSONValue>] = []
        for id in 1...3 {
            let promise = harness.loop.makePromise(of: JSONValue.self)
            harness.session.request(id: .integer(id), method: "slow", params: nil, timeout: nil, promise: promise)
            outcomes.append(promise.futureResult)
        }
        harness.loop.run()
        let busy = try #require(throws: PeerConnectionError.self) { try outcomes[2].wait() }
        #expect(busy.code == .busy)
        #expect(busy.message.contains("2 requests already wait"))
        let settled = Counter()
        for outcome in outcomes.prefix(2) { outcome.whenComplete { _ in settled.add() } }
        #expect(settled.value == 0)  // the first two still wait for their answers
        // Answering one makes room again.
        try harness.channel.writeInbound(JSONRPCMessage.response(id: .integer(1), result: .null).jsonText)
        let promise = harness.loop.makePromise(of: JSONValue.self)
        harness.session.request(id: .integer(4), method: "slow", params: nil, timeout: nil, promise: promise)
        let failed = Counter()
        promise.futureResult.whenFailure { _ in failed.add() }
        harness.loop.run()
        #expect(failed.value == 0)  // sent, waiting for its answer
    }
}

/// An accepting session on an EmbeddedChannel, already past `initialize`, with a handler
/// below it that records the reads and read-gate events that reach it.
final class SessionHarness {
    let loop = EmbeddedEventLoop()
    let channel: EmbeddedChannel
    let session: SessionHandler
    let gate = GateLog()

    init(limit: IncomingLimit, maximumPendingRequests: Int = 1024, maximumUnsentAnswerBytes: Int = 8 << 20) throws {
        channel = EmbeddedChannel(loop: loop)
        let local = Handshake.Local(
            peerID: HandshakeTests.serverID, displayName: "Build Box", protocolVersion: ProtocolVersion(major: 0, minor: 2),
            info: .object(["name": .string("nearby")]))
        let handshake = Handshake(role: .accepting, local: local, remotePeerID: HandshakeTests.clientID)
        session = SessionHandler(
            handshake: handshake, decide: nil, eventLoop: loop, logger: Logger(label: "test"),
            methods: ["ping": { _ in .success(.object([:])) }], incomingLimit: limit,
            maximumPendingRequests: maximumPendingRequests, maximumUnsentAnswerBytes: maximumUnsentAnswerBytes)
        try channel.pipeline.syncOperations.addHandler(gate)
        try channel.pipeline.syncOperations.addHandler(session)
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 1)).wait()
        // The peer's initialize, as a Nearby client sends it; the answer is dropped.
        var client = Handshake(
            role: .connecting,
            local: Handshake.Local(
                peerID: HandshakeTests.clientID, displayName: "Laptop", protocolVersion: ProtocolVersion(major: 0, minor: 2),
                info: .object(["name": .string("nearby")])),
            remotePeerID: HandshakeTests.serverID)
        for case .send(let message) in client.start(at: .zero) { try channel.writeInbound(message.jsonText) }
        while try channel.readOutbound(as: OutboundFrame.self) != nil {}
        let opened = try session.established.futureResult.wait()
        guard case .initialized = opened else { throw PeerConnectionError(.handshake, "not initialized") }
    }

    /// Closing the channel ends the session: its promises complete (NIO checks that none leaks).
    deinit {
        _ = try? channel.finish()
        // Timers still due (a close after its timeout) hold the channel: run them out.
        loop.advanceTime(by: .hours(1))
    }
}

/// Sits below the session: counts the reads that get through, records read-gate events, and
/// (with `holdWrites`) keeps writes from completing, as a socket whose peer reads nothing.
final class GateLog: ChannelOutboundHandler, @unchecked Sendable {
    typealias OutboundIn = OutboundFrame
    var reads = 0
    var events: [ReadGate] = []
    var holdWrites = false
    private var held: [EventLoopPromise<Void>] = []

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        guard holdWrites else { return context.write(data, promise: promise) }
        if let promise { held.append(promise) }
    }

    /// Fails what was held, so that no promise is left unfulfilled.
    func handlerRemoved(context: ChannelHandlerContext) {
        for promise in held { promise.fail(ChannelError.ioOnClosedChannel) }
        held = []
    }

    func read(context: ChannelHandlerContext) {
        reads += 1
        context.read()
    }

    func triggerUserOutboundEvent(context: ChannelHandlerContext, event: Any, promise: EventLoopPromise<Void>?) {
        if let gate = event as? ReadGate { events.append(gate) }
        promise?.succeed()
    }
}

final class Counter: @unchecked Sendable {
    private(set) var value = 0
    func add() { value += 1 }
}

private func ping(_ id: Int) -> String {
    JSONRPCMessage.request(id: .integer(id), method: "ping", params: nil).jsonText
}

private func notification(_ index: Int) -> IncomingMessage {
    IncomingMessage(message: .notification(method: "tick", params: .object(["i": .integer(index)])), reply: nil)
}

private func index(of message: IncomingMessage?) -> Int {
    guard case .notification(_, let params?)? = message?.message, case .integer(let value)? = params["i"] else { return -1 }
    return value
}
