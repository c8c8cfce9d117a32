import NIOCore
import Testing

@testable import PeerConnection

/// Two multiplexers wired by hand: what one sends, the test hands to the other (or holds back).
private struct Pair {
    var client: StreamMultiplexer
    var server: StreamMultiplexer
    private var token: UInt64 = 0

    init(client: StreamSettings = StreamSettings(), server: StreamSettings = StreamSettings()) {
        self.client = StreamMultiplexer(local: client, connecting: true)
        self.server = StreamMultiplexer(local: server, connecting: false)
        _ = self.client.negotiated(peerCapabilities: .object(["streams": server.capability]))
        _ = self.server.negotiated(peerCapabilities: .object(["streams": client.capability]))
    }

    mutating func nextToken() -> StreamMultiplexer.WriteToken {
        token += 1
        return StreamMultiplexer.WriteToken(value: token)
    }
}

private func frames(_ actions: [StreamMultiplexer.Action]) -> [StreamFrame] {
    actions.compactMap { if case .send(let frame) = $0 { frame } else { nil } }
}

/// Every frame of `actions` as the peer receives it (encoded, then parsed), and what that gives.
private func deliver(_ actions: [StreamMultiplexer.Action], to machine: inout StreamMultiplexer) -> [StreamMultiplexer.Action] {
    frames(actions).flatMap { machine.receive($0.encoded()) }
}

private func delivered(_ actions: [StreamMultiplexer.Action]) -> Int {
    actions.reduce(0) { total, action in if case .deliver(_, let bytes) = action { total + bytes.readableBytes } else { total } }
}

private func done(_ actions: [StreamMultiplexer.Action]) -> [StreamMultiplexer.WriteToken] {
    actions.compactMap { if case .writeDone(let token) = $0 { token } else { nil } }
}

private func failures(_ actions: [StreamMultiplexer.Action]) -> [PeerConnectionError] {
    actions.compactMap { if case .writeFailed(_, let error) = $0 { error } else { nil } }
}

private func closing(_ actions: [StreamMultiplexer.Action]) -> (CloseCode, String)? {
    for case .closeConnection(let code, let reason) in actions { return (code, reason) }
    return nil
}

private func bytes(_ count: Int, _ value: UInt8 = 7) -> ByteBuffer { ByteBuffer(repeating: value, count: count) }

@Suite("streams: the multiplexer, frames and credit")
struct StreamMultiplexerTests {
    @Test("every frame type survives encoding; malformed frames are named")
    func frameRoundTrip() throws {
        let all: [StreamFrame] = [
            .data(StreamID(1), bytes(10)), .open(StreamID(3), label: "file"), .window(StreamID(2), increment: 65536), .fin(StreamID(5)),
            .reset(StreamID(7), .refused, reason: "too many"),
        ]
        for frame in all { #expect(try StreamFrame.parse(frame.encoded()).get() == frame) }
        let bad: [[UInt8]] = [[0, 0, 0], [0, 0, 0, 0, 0], [9, 0, 0, 0, 1], [2, 0, 0, 0, 1, 0, 0], [2, 0, 0, 0, 1, 0, 0, 0, 0], [3, 0, 0, 0, 1, 1], [4, 0, 0, 0, 1, 0]]
        for raw in bad {
            #expect(throws: StreamFrameError.self, "\(raw)") { try StreamFrame.parse(ByteBuffer(bytes: raw)).get() }
        }
        // A label that is not UTF-8, and one over 255 bytes.
        #expect(throws: StreamFrameError.self) { try StreamFrame.parse(ByteBuffer(bytes: [1, 0, 0, 0, 1, 0xC3, 0x28])).get() }
        #expect(throws: StreamFrameError.self) { try StreamFrame.parse(ByteBuffer(bytes: [1, 0, 0, 0, 1] + [UInt8](repeating: 65, count: 256))).get() }
        // Over-long labels and reasons are cut on a character boundary when sent.
        let long = StreamFrame.open(StreamID(1), label: String(repeating: "é", count: 200)).encoded()
        #expect(long.readableBytes == 5 + 254)
    }

    @Test("a peer that offered no streams: opening one fails with the reason; a binary message from it closes with 1003")
    func notNegotiated() throws {
        var machine = StreamMultiplexer(local: StreamSettings(), connecting: true)
        _ = machine.negotiated(peerCapabilities: .object([:]))
        let error = try #require(machine.open(label: "x").failure)
        #expect(error.code == .unsupported && error.message.contains("offered no streams"))
        #expect(closing(machine.receive(StreamFrame.open(StreamID(2), label: "").encoded()))?.0 == CloseCode(1003))
        var other = StreamMultiplexer(local: StreamSettings(), connecting: true)
        _ = other.negotiated(peerCapabilities: .object(["streams": .object(["version": .integer(2), "window": .integer(1)])]))
        #expect(other.open(label: "").failure?.message.contains("another version") == true)
    }

    @Test("a write goes out in frames of at most the peer's max_frame, up to its window; the rest waits for WINDOW")
    func creditHoldsTheWriter() throws {
        var pair = Pair(server: StreamSettings(window: 64 << 10, maximumFrame: 16 << 10))
        let (id, opening) = try pair.client.open(label: "file").get()
        #expect(id == StreamID(1))
        let accepted = deliver(opening, to: &pair.server)
        guard case .accepted(let acceptedID, let label)? = accepted.first else { Issue.record("not accepted: \(accepted)"); return }
        #expect(acceptedID == id && label == "file")

        let token = pair.nextToken()
        let sent = pair.client.write(id, bytes(100 << 10), token: token)
        let data = frames(sent).compactMap { if case .data(_, let payload) = $0 { payload.readableBytes } else { nil } }
        #expect(data == [16 << 10, 16 << 10, 16 << 10, 16 << 10])  // the 64 KiB window, in 16 KiB frames
        #expect(done(sent).isEmpty)  // 36 KiB still wait

        let received = deliver(sent, to: &pair.server)
        #expect(delivered(received) == 64 << 10)
        // The reader reads 31 KiB: under half the window, no credit goes back yet.
        #expect(frames(pair.server.consumed(id, bytes: 31 << 10)).isEmpty)
        let grant = pair.server.consumed(id, bytes: 1 << 10)
        #expect(frames(grant) == [.window(id, increment: 32 << 10)])
        let more = deliver(grant, to: &pair.client)
        #expect(delivered(deliver(more, to: &pair.server)) == 32 << 10)
        #expect(done(more).isEmpty)
        let rest = deliver(pair.server.consumed(id, bytes: 64 << 10), to: &pair.client)
        #expect(done(rest) == [token])
        #expect(pair.client.statistics.bytesSent == 100 << 10)
    }

    @Test("a stalled stream holds back only itself: another stream on the same connection keeps going")
    func streamsAreIndependent() throws {
        var pair = Pair(server: StreamSettings(window: 8 << 10))
        let (slow, openSlow) = try pair.client.open(label: "slow").get()
        let (fast, openFast) = try pair.client.open(label: "fast").get()
        _ = deliver(openSlow + openFast, to: &pair.server)
        let stalled = pair.client.write(slow, bytes(20 << 10), token: pair.nextToken())
        #expect(delivered(deliver(stalled, to: &pair.server)) == 8 << 10)  // nobody reads it
        var total = 0
        for _ in 0..<10 {
            let token = pair.nextToken()
            let sent = pair.client.write(fast, bytes(8 << 10), token: token)
            let received = deliver(sent, to: &pair.server)
            total += delivered(received)
            let grant = deliver(pair.server.consumed(fast, bytes: delivered(received)), to: &pair.client)
            #expect(done(sent + grant) == [token])
        }
        #expect(total == 80 << 10)
    }

    @Test("DATA over the window closes the connection (flow control broken); over max_frame too")
    func overTheWindow() throws {
        var pair = Pair(server: StreamSettings(window: 4 << 10, maximumFrame: 2 << 10))
        let (id, opening) = try pair.client.open(label: "").get()
        _ = deliver(opening, to: &pair.server)
        _ = pair.server.receive(StreamFrame.data(id, bytes(2 << 10)).encoded())
        _ = pair.server.receive(StreamFrame.data(id, bytes(2 << 10)).encoded())
        let over = try #require(closing(pair.server.receive(StreamFrame.data(id, bytes(1)).encoded())))
        #expect(over.0 == .policyViolation && over.1.contains("window"))
        var big = Pair(server: StreamSettings(window: 64 << 10, maximumFrame: 2 << 10))
        let (other, open2) = try big.client.open(label: "").get()
        _ = deliver(open2, to: &big.server)
        #expect(closing(big.server.receive(StreamFrame.data(other, bytes(3 << 10)).encoded()))?.1.contains("over the") == true)
    }

    @Test("FIN half-closes: the peer may still write; once both finished the stream is gone; data after FIN is a protocol error")
    func halfClose() throws {
        var pair = Pair()
        let (id, opening) = try pair.client.open(label: "").get()
        _ = deliver(opening, to: &pair.server)
        let finishing = pair.nextToken()
        let fin = pair.client.finish(id, token: finishing)
        #expect(done(fin) == [finishing])
        let heard = deliver(fin, to: &pair.server)
        #expect(heard.contains { if case .finished(id) = $0 { true } else { false } })
        // The server still writes back.
        let answer = pair.server.write(id, bytes(100), token: pair.nextToken())
        #expect(delivered(deliver(answer, to: &pair.client)) == 100)
        #expect(pair.server.isTracking(id) && pair.client.isTracking(id))
        _ = deliver(pair.server.finish(id, token: pair.nextToken()), to: &pair.client)
        #expect(!pair.server.isTracking(id) && !pair.client.isTracking(id))
        // Writing after finishing fails; a peer's data after its FIN breaks the protocol.
        var again = Pair()
        let (second, open2) = try again.client.open(label: "").get()
        _ = deliver(open2, to: &again.server)
        _ = deliver(again.client.finish(second, token: again.nextToken()), to: &again.server)
        #expect(failures(again.client.write(second, bytes(1), token: again.nextToken())).first?.code == .invalidInput)
        #expect(closing(again.server.receive(StreamFrame.data(second, bytes(1)).encoded()))?.1.contains("after its FIN") == true)
    }

    @Test("a reset fails waiting writes on this side and everything on the other, with who and why; late frames are dropped and counted")
    func reset() throws {
        var pair = Pair(server: StreamSettings(window: 4 << 10))
        let (id, opening) = try pair.client.open(label: "").get()
        _ = deliver(opening, to: &pair.server)
        let token = pair.nextToken()
        let partly = pair.client.write(id, bytes(10 << 10), token: token)
        let reset = pair.client.reset(id, code: .cancelled, reason: "Ctrl-C")
        #expect(failures(reset).first?.code == .streamReset)
        // The server gets the data already on its way, then the reset.
        let heard = deliver(partly + reset, to: &pair.server)
        let ended = heard.compactMap { if case .ended(_, let error) = $0 { error } else { nil } }
        #expect(ended.first?.message == "the peer reset stream 1 (cancelled: Ctrl-C)")
        // The server's window grant, sent before it heard the reset, reaches a stream that is over.
        let late = pair.client.receive(StreamFrame.window(id, increment: 100).encoded())
        #expect(closing(late) == nil && pair.client.statistics.framesAfterEnd == 1)
        // A frame for a stream never opened is a protocol error.
        #expect(closing(pair.client.receive(StreamFrame.window(StreamID(99), increment: 1).encoded()))?.0 == .protocolError)
    }

    @Test("a peer opening more streams than max_streams is refused stream by stream, and after 1,000 refusals the connection closes")
    func tooManyStreams() throws {
        var server = StreamMultiplexer(local: StreamSettings(maximumStreams: 2), connecting: false)
        _ = server.negotiated(peerCapabilities: .object(["streams": StreamSettings().capability]))
        #expect(server.receive(StreamFrame.open(StreamID(1), label: "").encoded()).count == 1)
        #expect(server.receive(StreamFrame.open(StreamID(3), label: "").encoded()).count == 1)
        let third = frames(server.receive(StreamFrame.open(StreamID(5), label: "").encoded()))
        #expect(third == [.reset(StreamID(5), .refused, reason: "too many streams at once (at most 2)")])
        // Once one ends, there is room again.
        _ = server.reset(StreamID(1), code: .cancelled, reason: "")
        #expect(frames(server.receive(StreamFrame.open(StreamID(7), label: "").encoded())).isEmpty)
        var id: UInt32 = 9
        var closed: (CloseCode, String)?
        while closed == nil, id < 5000 {
            closed = closing(server.receive(StreamFrame.open(StreamID(id), label: "").encoded()))
            id += 2
        }
        #expect(closed?.0 == .policyViolation && closed?.1.contains("without end") == true)
        #expect(server.statistics.refused == StreamMultiplexer.refusalLimit)
        // Our own side: no more opens than the peer takes.
        var client = StreamMultiplexer(local: StreamSettings(), connecting: true)
        _ = client.negotiated(peerCapabilities: .object(["streams": StreamSettings(maximumStreams: 1).capability]))
        _ = try client.open(label: "").get()
        #expect(client.open(label: "").failure?.code == .busy)
    }

    @Test("stream numbers: the peer's parity only, each once and rising")
    func numbering() {
        var server = StreamMultiplexer(local: StreamSettings(), connecting: false)
        _ = server.negotiated(peerCapabilities: .object(["streams": StreamSettings().capability]))
        #expect(closing(server.receive(StreamFrame.open(StreamID(2), label: "").encoded()))?.1.contains("this side opens with") == true)
        _ = server.receive(StreamFrame.open(StreamID(5), label: "").encoded())
        #expect(closing(server.receive(StreamFrame.open(StreamID(3), label: "").encoded()))?.1.contains("out of order") == true)
    }

    @Test("the connection's end fails every waiting write and ends every stream")
    func connectionEnd() throws {
        var pair = Pair(server: StreamSettings(window: 4 << 10))
        let (id, opening) = try pair.client.open(label: "").get()
        _ = deliver(opening, to: &pair.server)
        let token = pair.nextToken()
        _ = pair.client.write(id, bytes(8 << 10), token: token)
        let end = pair.client.connectionEnded("the peer went away")
        #expect(failures(end).first?.message == "the connection ended: the peer went away")
        #expect(end.contains { if case .ended(id, _) = $0 { true } else { false } })
        #expect(pair.client.open(label: "").failure?.code == .closed)
    }

    @Test("finishing after the peer answered, finished and dropped the stream (its reset overtook our FIN) succeeds; the answer was delivered; writes fail")
    func finishAfterPeerDropped() throws {
        var pair = Pair()
        let (id, opening) = try pair.client.open(label: "").get()
        _ = deliver(opening, to: &pair.server)
        let answer = pair.server.write(id, bytes(10), token: pair.nextToken())
        let fin = pair.server.finish(id, token: pair.nextToken())
        // The server's side lets go of the stream before the client's FIN came: a reset.
        let drop = pair.server.reset(id, code: .cancelled, reason: "the stream was dropped")
        let heard = deliver(answer + fin + drop, to: &pair.client)
        #expect(delivered(heard) == 10)
        #expect(!pair.client.isTracking(id))
        let token = pair.nextToken()
        let finishing = pair.client.finish(id, token: token)
        #expect(done(finishing) == [token])
        #expect(failures(finishing).isEmpty)
        #expect(failures(pair.client.write(id, bytes(1), token: pair.nextToken())).first?.code == .streamReset)
    }
}
