public import NIOCore
public import NIOWebSocket

extension ByteBuffer {
    /// XORs the readable bytes with the masking key (RFC 6455 §5.3), eight bytes at a time.
    /// Masking and unmasking are the same operation. swift-nio's own loop goes a byte at a time
    /// with a modulo per byte, which cost a quarter of a file transfer's CPU on each side.
    mutating func applyWebSocketMask(_ key: WebSocketMaskingKey) {
        let pattern: UInt64 = withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 8) { bytes in
            for index in 0..<8 { bytes[index] = key[index % 4] }
            return UnsafeRawBufferPointer(bytes).loadUnaligned(as: UInt64.self)
        }
        withUnsafeMutableReadableBytes { raw in
            let count = raw.count
            var index = 0
            while index + 8 <= count {
                let word = raw.loadUnaligned(fromByteOffset: index, as: UInt64.self)
                raw.storeBytes(of: word ^ pattern, toByteOffset: index, as: UInt64.self)
                index += 8
            }
            while index < count {
                raw[index] ^= key[index % 4]
                index += 1
            }
        }
    }
}

extension WebSocketFrame {
    /// The payload, unmasked with `applyWebSocketMask(_:)` when the peer masked it.
    var payload: ByteBuffer {
        var data = self.data
        if let key = maskKey { data.applyWebSocketMask(key) }
        return data
    }
}

/// Writes WebSocket frames (RFC 6455 §5.2): the header, then the payload, masked in place with
/// the frame's key. It takes the place of swift-nio's encoder (see `replaceEncoder(in:)`) for
/// its masking speed; the header goes into the payload's headroom when there is room (stream
/// frames leave some), so that a frame is one write and one TLS record.
final class WebSocketFrameWriter: ChannelOutboundHandler, RemovableChannelHandler {
    typealias OutboundIn = WebSocketFrame
    typealias OutboundOut = ByteBuffer

    /// The longest header: 2 bytes, an 8-byte length, a 4-byte key (the room stream frames leave).
    static let maximumHeader = StreamFrame.webSocketHeadroom

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        let frame = unwrapOutboundIn(data)
        var payload = frame.data
        if var extensionData = frame.extensionData {
            // Not used here; kept correct all the same.
            extensionData.writeBuffer(&payload)
            payload = extensionData
        }
        let length = payload.readableBytes
        var first = UInt8(webSocketOpcode: frame.opcode)
        if frame.fin { first |= 0x80 }
        if frame.rsv1 { first |= 0x40 }
        if frame.rsv2 { first |= 0x20 }
        if frame.rsv3 { first |= 0x10 }
        let maskBit: UInt8 = frame.maskKey == nil ? 0 : 0x80
        var header: [UInt8] = [first]
        header.reserveCapacity(Self.maximumHeader)
        if length < 126 {
            header.append(maskBit | UInt8(length))
        } else if length <= Int(UInt16.max) {
            header.append(maskBit | 126)
            header.append(contentsOf: [UInt8(length >> 8), UInt8(length & 0xFF)])
        } else {
            header.append(maskBit | 127)
            for shift in stride(from: 56, through: 0, by: -8) { header.append(UInt8((UInt64(length) >> UInt64(shift)) & 0xFF)) }
        }
        if let key = frame.maskKey {
            header.append(contentsOf: [key[0], key[1], key[2], key[3]])
            payload.applyWebSocketMask(key)
        }
        if payload.readerIndex >= header.count {
            let start = payload.readerIndex - header.count
            payload.setBytes(header, at: start)
            payload.moveReaderIndex(to: start)
            context.write(wrapOutboundOut(payload), promise: promise)
        } else {
            context.write(wrapOutboundOut(context.channel.allocator.buffer(bytes: header)), promise: nil)
            context.write(wrapOutboundOut(payload), promise: promise)
        }
    }

    /// Puts a writer where the upgrade put swift-nio's encoder.
    static func replaceEncoder(in pipeline: ChannelPipeline.SynchronousOperations) throws {
        let encoder = try pipeline.handler(type: WebSocketFrameEncoder.self)
        try pipeline.addHandler(WebSocketFrameWriter(), position: .after(encoder))
        pipeline.removeHandler(encoder, promise: nil)
    }
}

/// swift-nio's encoder leaves the pipeline so that `WebSocketFrameWriter` can take its place;
/// it holds no state between writes, so taking it out at any moment loses nothing.
extension WebSocketFrameEncoder: @retroactive RemovableChannelHandler {}
