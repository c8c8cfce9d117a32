import Logging
import NIOCore
import NIOEmbedded
import NIOWebSocket
import Testing

@testable import PeerConnection

/// The WebSocket layer on an EmbeddedChannel: frames in, frames out, time moved by hand.
final class WebSocketHarness {
    let channel: EmbeddedChannel
    let loop: EmbeddedEventLoop
    let ends: EndLog

    init(limit: Int = 64, deadAfter: Duration = .seconds(30), masks: Bool = false) throws {
        loop = EmbeddedEventLoop()
        channel = EmbeddedChannel(loop: loop)
        ends = EndLog()
        let handler = WebSocketMessageHandler(
            masksFrames: masks, maximumMessageSize: limit, deadPeerTimeout: deadAfter, logger: Logger(label: "test"))
        try channel.pipeline.syncOperations.addHandler(handler)
        try channel.pipeline.syncOperations.addHandler(ends)
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 1)).wait()
    }

    func frame(_ opcode: WebSocketOpcode, _ text: String, fin: Bool = true) throws {
        try channel.writeInbound(WebSocketFrame(fin: fin, opcode: opcode, data: ByteBuffer(string: text)))
    }

    /// Frames written so far.
    func written() throws -> [WebSocketFrame] {
        var frames: [WebSocketFrame] = []
        while let frame = try channel.readOutbound(as: WebSocketFrame.self) { frames.append(frame) }
        return frames
    }

    func messages() throws -> [String] {
        var texts: [String] = []
        while let message = try channel.readInbound(as: WebSocketMessage.self) {
            if case .text(let text) = message { texts.append(text) }
        }
        return texts
    }

    /// Closing the channel cancels the handler's timers; an EmbeddedEventLoop would otherwise
    /// keep them (and through them the handler) forever, which LeakSanitizer reports.
    deinit {
        _ = try? channel.finish()
        // Timers still due (a close after its timeout) hold the channel: run them out.
        loop.advanceTime(by: .hours(1))
    }
}

/// Catches the "WebSocket ended" event the handler sends up.
final class EndLog: ChannelInboundHandler, @unchecked Sendable {
    typealias InboundIn = WebSocketMessage
    var ended: [WebSocketEnded] = []
    func channelRead(context: ChannelHandlerContext, data: NIOAny) { context.fireChannelRead(data) }
    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let event = event as? WebSocketEnded { ended.append(event) }
    }
}

func closeCode(_ frame: WebSocketFrame) -> WebSocketErrorCode? {
    var data = frame.unmaskedData
    return data.readWebSocketErrorCode()
}

@Suite("WebSocket messages")
struct WebSocketMessageTests {
    @Test("fragments make one message; a message over the limit closes with 1009 and says so")
    func fragmentsAndLimit() throws {
        let harness = try WebSocketHarness(limit: 16)
        try harness.frame(.text, "hello ", fin: false)
        try harness.frame(.continuation, "world")
        #expect(try harness.messages() == ["hello world"])
        try harness.frame(.text, "0123456789", fin: false)
        try harness.frame(.continuation, "0123456789")
        #expect(try harness.messages().isEmpty)
        let close = try #require(try harness.written().first)
        #expect(close.opcode == .connectionClose && closeCode(close) == .messageTooLarge)
        #expect(harness.ends.ended.first?.end.message.contains("16 bytes") == true)
        #expect(harness.ends.ended.first?.end.kind == .violation && harness.ends.ended.first?.end.closeCode == .messageTooLarge)
    }

    @Test("binary messages go up whole (stream frames); invalid UTF-8 closes with 1007; a stray continuation with 1002")
    func refusals() throws {
        let binary = try WebSocketHarness()
        try binary.channel.writeInbound(WebSocketFrame(fin: false, opcode: .binary, data: ByteBuffer(bytes: [1, 2])))
        try binary.channel.writeInbound(WebSocketFrame(fin: true, opcode: .continuation, data: ByteBuffer(bytes: [3])))
        #expect(try binary.channel.readInbound(as: WebSocketMessage.self) == .binary(ByteBuffer(bytes: [1, 2, 3])))
        #expect(try binary.written().isEmpty)
        let invalid = try WebSocketHarness()
        try invalid.channel.writeInbound(WebSocketFrame(fin: true, opcode: .text, data: ByteBuffer(bytes: [0xC3, 0x28])))
        #expect(try invalid.written().first.flatMap(closeCode) == .dataInconsistentWithMessage)
        let stray = try WebSocketHarness()
        try stray.frame(.continuation, "x")
        #expect(try stray.written().first.flatMap(closeCode) == .protocolError)
    }

    @Test("a ping is answered with a pong carrying the same data; a close is echoed and the channel closed")
    func pingAndClose() throws {
        let harness = try WebSocketHarness()
        try harness.frame(.ping, "abc")
        let pong = try #require(try harness.written().first)
        #expect(pong.opcode == .pong && pong.unmaskedData == ByteBuffer(string: "abc"))
        var payload = ByteBuffer()
        payload.write(webSocketErrorCode: .goingAway)
        payload.writeString("bye")
        try harness.channel.writeInbound(WebSocketFrame(fin: true, opcode: .connectionClose, data: payload))
        let echo = try #require(try harness.written().first)
        #expect(echo.opcode == .connectionClose && closeCode(echo) == .goingAway)
        #expect(harness.ends.ended.first?.end.byPeer == true)
        #expect(harness.ends.ended.first?.end.message.contains("bye") == true)
        #expect(harness.ends.ended.first?.end.kind == .closed && harness.ends.ended.first?.end.closeCode == .goingAway)
        #expect(!harness.channel.isActive)
    }

    @Test("a quiet peer is pinged after a third of the timeout; one that stays silent is dead after it")
    func deadPeer() throws {
        let harness = try WebSocketHarness(deadAfter: .seconds(30))
        harness.loop.advanceTime(by: .seconds(9))
        #expect(try harness.written().isEmpty)
        harness.loop.advanceTime(by: .seconds(1))
        #expect(try harness.written().map(\.opcode) == [.ping])
        // It answers: alive, and the clock starts again.
        try harness.frame(.pong, "")
        harness.loop.advanceTime(by: .seconds(9))
        #expect(try harness.written().isEmpty)
        harness.loop.advanceTime(by: .seconds(1))
        #expect(try harness.written().map(\.opcode) == [.ping])
        // Now it says nothing at all: more pings, then dead 30 s after the last frame.
        harness.loop.advanceTime(by: .seconds(19))
        #expect(harness.channel.isActive)
        harness.loop.advanceTime(by: .seconds(1))
        #expect(!harness.channel.isActive)
        #expect(harness.ends.ended.first?.end.message.contains("dead peer") == true)
        #expect(harness.ends.ended.first?.end.kind == .deadPeer && harness.ends.ended.first?.end.closeCode == nil)
    }

    @Test("a client masks what it sends; a server does not")
    func masking() throws {
        let client = try WebSocketHarness(masks: true)
        try client.channel.writeOutbound(OutboundFrame.text("hi"))
        let sent = try #require(try client.written().first)
        // The frame encoder applies the mask on the wire; the frame holds the plain text and the key.
        #expect(sent.maskKey != nil && sent.data == ByteBuffer(string: "hi"))
        let server = try WebSocketHarness(masks: false)
        try server.channel.writeOutbound(OutboundFrame.text("hi"))
        #expect(try server.written().first?.maskKey == nil)
    }
}

@Suite("liveness")
struct LivenessTests {
    @Test("pings go out every third of the timeout while the peer is silent; it is dead at the timeout")
    func schedule() {
        var liveness = Liveness(deadAfter: .seconds(30), now: .zero)
        #expect(liveness.nextTick == .seconds(10))
        #expect(liveness.tick(at: .seconds(5)) == .wait)
        #expect(liveness.tick(at: .seconds(10)) == .ping)
        #expect(liveness.nextTick == .seconds(20))
        #expect(liveness.tick(at: .seconds(20)) == .ping)
        liveness.heard(at: .seconds(21))
        #expect(liveness.nextTick == .seconds(31))
        #expect(liveness.tick(at: .seconds(31)) == .ping)
        #expect(liveness.tick(at: .seconds(41)) == .ping)
        #expect(liveness.tick(at: .seconds(51)) == .dead(silentFor: .seconds(30)))
    }
}

@Suite("WebSocket framing")
struct WebSocketFramingTests {
    @Test("masking eight bytes at a time gives what swift-nio's byte loop gives, at every length")
    func maskMatchesNIO() throws {
        let key = try #require(WebSocketMaskingKey([0x12, 0x9A, 0xFE, 0x01]))
        for length in [0, 1, 3, 4, 7, 8, 9, 15, 16, 17, 100, 65_541] {
            let bytes = (0..<length).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ 3) }
            var ours = ByteBuffer(bytes: bytes)
            var theirs = ByteBuffer(bytes: bytes)
            ours.applyWebSocketMask(key)
            theirs.webSocketMask(key)
            #expect(ours == theirs, "length \(length)")
            ours.applyWebSocketMask(key)
            #expect(Array(ours.readableBytesView) == bytes)
        }
    }

    @Test("the frame writer's bytes are swift-nio's encoder's, masked or not, short and long, with headroom or without")
    func writerMatchesNIO() throws {
        let key = try #require(WebSocketMaskingKey([1, 2, 3, 4]))
        for length in [0, 5, 125, 126, 65_535, 65_536, 70_000] {
            for mask in [nil, key] {
                for headroom in [0, WebSocketFrameWriter.maximumHeader] {
                    var payload = ByteBufferAllocator().buffer(capacity: headroom + length)
                    payload.moveWriterIndex(forwardBy: headroom)
                    payload.moveReaderIndex(forwardBy: headroom)
                    payload.writeBytes((0..<length).map { UInt8(truncatingIfNeeded: $0) })
                    let frame = WebSocketFrame(fin: true, opcode: .binary, maskKey: mask, data: payload)
                    func encoded(_ handler: any ChannelHandler) throws -> [UInt8] {
                        let channel = EmbeddedChannel(handler: handler)
                        try channel.writeOutbound(frame)
                        var bytes: [UInt8] = []
                        while let buffer = try channel.readOutbound(as: ByteBuffer.self) { bytes += buffer.readableBytesView }
                        _ = try channel.finish()
                        return bytes
                    }
                    #expect(try encoded(WebSocketFrameWriter()) == encoded(WebSocketFrameEncoder()), "length \(length), mask \(mask != nil), headroom \(headroom)")
                }
            }
        }
    }
}

