package import NIOCore

/// A stream's number on its connection. The connecting side numbers the streams it opens 1,
/// 3, 5, …; the accepting side 2, 4, 6, …, so both may open streams at once without a clash.
public struct StreamID: Hashable, Sendable, Comparable, CustomStringConvertible {
    public let value: UInt32
    public init(_ value: UInt32) { self.value = value }
    public var description: String { "\(value)" }
    public static func < (a: StreamID, b: StreamID) -> Bool { a.value < b.value }
}

/// Why a stream was reset, as carried on the wire (a 16-bit code; the reason travels beside it
/// in words).
public struct StreamResetCode: Hashable, Sendable, CustomStringConvertible {
    public let value: UInt16
    public init(_ value: UInt16) { self.value = value }

    /// The application on that side gave up on the stream (a cancelled transfer, Ctrl-C).
    public static let cancelled = StreamResetCode(1)
    /// The stream was not taken: too many open at once, or the side takes no streams of this kind.
    public static let refused = StreamResetCode(2)
    /// The sender broke the stream's rules (data after its end, over its window).
    public static let protocolError = StreamResetCode(3)
    /// The side could not go on (a local failure such as a full disk).
    public static let failed = StreamResetCode(4)

    public var description: String {
        switch self {
        case .cancelled: "cancelled"
        case .refused: "refused"
        case .protocolError: "protocol error"
        case .failed: "failed"
        default: "code \(value)"
        }
    }
}

/// One stream frame: the payload of one binary WebSocket message (Documentation/Protocols.md, "Streams: the wire
/// format"). Text messages stay JSON-RPC.
///
///     type (1 byte) | stream ID (4 bytes, big-endian) | what the type carries
///     0 DATA    bytes of the stream (up to the receiver's max_frame)
///     1 OPEN    a label, UTF-8, up to 255 bytes (what the stream is for)
///     2 WINDOW  4 bytes: how many more bytes the sender may send on the stream
///     3 FIN     nothing: the sender sends no more on this stream (half-close)
///     4 RESET   2 bytes of code, then a reason in UTF-8 (up to 123 bytes): the stream is over both ways
package enum StreamFrame: Hashable, Sendable {
    case data(StreamID, ByteBuffer)
    case open(StreamID, label: String)
    case window(StreamID, increment: UInt32)
    case fin(StreamID)
    case reset(StreamID, StreamResetCode, reason: String)

    package static let headerSize = 5
    package static let maximumLabel = 255
    package static let maximumReason = 123

    package var stream: StreamID {
        switch self {
        case .data(let id, _), .open(let id, _), .window(let id, _), .fin(let id), .reset(let id, _, _): id
        }
    }

    /// Reads one frame; nil with the reason when the bytes are not one.
    package static func parse(_ message: ByteBuffer) -> Result<StreamFrame, StreamFrameError> {
        var buffer = message
        guard let type = buffer.readInteger(as: UInt8.self), let raw = buffer.readInteger(as: UInt32.self) else {
            return .failure(StreamFrameError("a stream frame of \(message.readableBytes) bytes, shorter than its 5-byte header"))
        }
        let id = StreamID(raw)
        guard raw != 0 else { return .failure(StreamFrameError("a stream frame for stream 0, which does not exist")) }
        switch type {
        case 0:
            return .success(.data(id, buffer))
        case 1:
            guard buffer.readableBytes <= maximumLabel,
                let label = (try? buffer.getUTF8ValidatedString(at: buffer.readerIndex, length: buffer.readableBytes)).flatMap({ $0 })
            else { return .failure(StreamFrameError("stream \(id): an OPEN whose label is not UTF-8 of at most \(maximumLabel) bytes")) }
            return .success(.open(id, label: label))
        case 2:
            guard buffer.readableBytes == 4, let increment = buffer.readInteger(as: UInt32.self), increment > 0 else {
                return .failure(StreamFrameError("stream \(id): a WINDOW frame that is not one non-zero 4-byte increment"))
            }
            return .success(.window(id, increment: increment))
        case 3:
            guard buffer.readableBytes == 0 else { return .failure(StreamFrameError("stream \(id): a FIN frame with \(buffer.readableBytes) bytes after its header")) }
            return .success(.fin(id))
        case 4:
            guard let code = buffer.readInteger(as: UInt16.self), buffer.readableBytes <= maximumReason else {
                return .failure(StreamFrameError("stream \(id): a RESET frame without its 2-byte code, or with a reason over \(maximumReason) bytes"))
            }
            let reason = String(decoding: buffer.readableBytesView, as: UTF8.self)
            return .success(.reset(id, StreamResetCode(code), reason: reason))
        default:
            return .failure(StreamFrameError("stream \(id): a frame of unknown type \(type)"))
        }
    }

    /// The most a WebSocket frame's header takes (RFC 6455 §5.2: 2 bytes, 8 of length, 4 of
    /// mask): the room a data frame leaves in front of its bytes.
    package static let webSocketHeadroom = 14

    /// The frame's bytes, ready to go as one binary message.
    package func encoded(allocator: ByteBufferAllocator = ByteBufferAllocator()) -> ByteBuffer {
        switch self {
        case .data(let id, let payload):
            // Room in front for the WebSocket header, written there by the shell's frame
            // writer: the frame then leaves as one buffer.
            let headroom = Self.webSocketHeadroom
            var buffer = allocator.buffer(capacity: headroom + Self.headerSize + payload.readableBytes)
            buffer.moveWriterIndex(forwardBy: headroom)
            buffer.moveReaderIndex(forwardBy: headroom)
            buffer.writeInteger(UInt8(0))
            buffer.writeInteger(id.value)
            var payload = payload
            buffer.writeBuffer(&payload)
            return buffer
        case .open(let id, let label):
            let bytes = Self.truncated(label, to: Self.maximumLabel)
            var buffer = allocator.buffer(capacity: Self.headerSize + bytes.count)
            buffer.writeInteger(UInt8(1))
            buffer.writeInteger(id.value)
            buffer.writeBytes(bytes)
            return buffer
        case .window(let id, let increment):
            var buffer = allocator.buffer(capacity: Self.headerSize + 4)
            buffer.writeInteger(UInt8(2))
            buffer.writeInteger(id.value)
            buffer.writeInteger(increment)
            return buffer
        case .fin(let id):
            var buffer = allocator.buffer(capacity: Self.headerSize)
            buffer.writeInteger(UInt8(3))
            buffer.writeInteger(id.value)
            return buffer
        case .reset(let id, let code, let reason):
            let bytes = Self.truncated(reason, to: Self.maximumReason)
            var buffer = allocator.buffer(capacity: Self.headerSize + 2 + bytes.count)
            buffer.writeInteger(UInt8(4))
            buffer.writeInteger(id.value)
            buffer.writeInteger(code.value)
            buffer.writeBytes(bytes)
            return buffer
        }
    }

    /// At most `limit` bytes of `text`, cut at a character boundary.
    package static func truncated(_ text: String, to limit: Int) -> [UInt8] {
        var bytes: [UInt8] = []
        for character in text {
            let utf8 = Array(String(character).utf8)
            guard bytes.count + utf8.count <= limit else { break }
            bytes += utf8
        }
        return bytes
    }
}

/// Bytes that are not a stream frame.
package struct StreamFrameError: Error, Hashable, Sendable, CustomStringConvertible {
    package var description: String
    package init(_ description: String) { self.description = description }
}
