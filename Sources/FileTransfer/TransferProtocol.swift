public import NearbyBasics
import NIOCore
import PeerConnection

/// Why a file did not go across, in words a person can act on.
public struct FileTransferError: Error, Hashable, Sendable, CustomStringConvertible {
    /// What kind of problem this is. New codes may be added; switch with a `default`.
    public typealias Code = OpenKind<FileTransferError>
    public var code: Code
    public var message: String

    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { message }
}

extension OpenKind where Owner == FileTransferError {
    /// The receiver said no (its reason is in the message): a refused name, no space, not accepted.
    public static var declined: Self { Self("declined") }
    /// What arrived is not what was sent: the size or the SHA-256 differs. Nothing is kept under the final name.
    public static var verification: Self { Self("verification") }
    /// Reading or writing a local file failed (not found, no permission, the disk is full).
    public static var file: Self { Self("file") }
    /// The other side stopped: it cancelled, failed, or the connection ended.
    public static var interrupted: Self { Self("interrupted") }
    /// The peer broke the file exchange's rules (a message that does not parse, an impossible size).
    public static var protocolError: Self { Self("protocolError") }
    /// This side cancelled (Ctrl-C, or the task was cancelled).
    public static var cancelled: Self { Self("cancelled") }
    /// The peer takes no files (it offers no streams).
    public static var unsupported: Self { Self("unsupported") }
}

/// The file exchange on one stream (Documentation/Protocols.md, "Files: the exchange"): every message is a 4-byte
/// big-endian length and that many bytes of JSON; between `start` and the trailer the stream
/// carries the file's bytes raw.
///
///     sender   → {"name": "build.tar", "folders": ["out"], "size": 1048576, "modified": 1764000000.5, "resume": true}
///     receiver → {"accept": true, "offset": 524288, "prefix_sha256": "…"}   or {"accept": false, "reason": "…"}
///     sender   → {"start": 524288}                     (the offset when its own first bytes hash the same, else 0)
///     sender   → the bytes from `start` to `size`, then {"sha256": "<the whole file's>"}, then FIN
///     receiver → {"saved": "out/build.tar"}   or   {"failed": "…", "kind": "verification"}, then FIN
enum TransferProtocol {
    static let label = "nearby.file/1"
    /// The largest control message either side takes.
    static let maximumMessage = 64 << 10
    /// The largest size a file may declare: what JSON numbers carry exactly.
    static let maximumSize: Int64 = 1 << 53

    struct Offer: Hashable, Sendable {
        var name: String
        var folders: [String] = []
        var size: Int64
        var modified: Double?
        var resume: Bool

        var json: JSONValue {
            var members: [String: JSONValue] = [
                "name": .string(name), "size": .integer(Int(size)), "resume": .bool(resume),
            ]
            if !folders.isEmpty { members["folders"] = .array(folders.map { .string($0) }) }
            if let modified { members["modified"] = .number(modified) }
            return .object(members)
        }

        static func parse(_ value: JSONValue) -> Result<Offer, FileTransferError> {
            guard case .string(let name)? = value["name"] else { return .failure(malformed("an offer without a name")) }
            guard let size = integer(value["size"]), size >= 0, size <= maximumSize else {
                return .failure(malformed("an offer whose size is not a whole number from 0 to 2^53"))
            }
            var folders: [String] = []
            switch value["folders"] {
            case nil: break
            case .array(let items)?:
                for item in items {
                    guard case .string(let folder) = item else { return .failure(malformed("an offer whose folders are not all strings")) }
                    folders.append(folder)
                }
            default: return .failure(malformed("an offer whose folders are not a list"))
            }
            var modified: Double?
            switch value["modified"] {
            case .number(let seconds)?: modified = seconds
            case .integer(let seconds)?: modified = Double(seconds)
            default: break
            }
            // A time the file system can hold (before the year 5000); anything else is dropped.
            if let seconds = modified, !(seconds.isFinite && abs(seconds) < 1e11) { modified = nil }
            let resume = value["resume"] == .bool(true)
            return .success(Offer(name: name, folders: folders, size: size, modified: modified, resume: resume))
        }
    }

    enum Answer: Hashable, Sendable {
        case accept(offset: Int64, prefixSHA256: String?)
        case decline(String)

        var json: JSONValue {
            switch self {
            case .accept(let offset, let prefix):
                var members: [String: JSONValue] = ["accept": .bool(true), "offset": .integer(Int(offset))]
                if let prefix { members["prefix_sha256"] = .string(prefix) }
                return .object(members)
            case .decline(let reason):
                return .object(["accept": .bool(false), "reason": .string(reason)])
            }
        }

        static func parse(_ value: JSONValue) -> Result<Answer, FileTransferError> {
            switch value["accept"] {
            case .bool(true)?:
                guard let offset = integer(value["offset"]), offset >= 0 else { return .failure(malformed("an acceptance without an offset")) }
                return .success(.accept(offset: offset, prefixSHA256: value["prefix_sha256"]?.stringValue))
            case .bool(false)?:
                return .success(.decline(value["reason"]?.stringValue ?? "no reason given"))
            default:
                return .failure(malformed("an answer that neither accepts nor declines"))
            }
        }
    }

    static func start(_ offset: Int64) -> JSONValue { .object(["start": .integer(Int(offset))]) }
    static func trailer(sha256: String) -> JSONValue { .object(["sha256": .string(sha256)]) }
    static func saved(_ path: String) -> JSONValue { .object(["saved": .string(path)]) }
    /// The receiver kept nothing under the final name; `kind` is a ``FileTransferError/Code`` (`verification`, `file`, …).
    static func failed(_ reason: String, kind: FileTransferError.Code) -> JSONValue {
        .object(["failed": .string(reason), "kind": .string(kind.description)])
    }

    static func integer(_ value: JSONValue?) -> Int64? {
        switch value {
        case .integer(let number)?: Int64(number)
        case .number(let number)? where number == number.rounded() && abs(number) <= Double(maximumSize): Int64(number)
        default: nil
        }
    }

    static func malformed(_ what: String) -> FileTransferError {
        FileTransferError(.protocolError, "the peer sent \(what)")
    }

    /// A control message as it goes on the stream.
    static func frame(_ message: JSONValue) -> ByteBuffer {
        let text = message.jsonText
        var buffer = ByteBuffer()
        buffer.reserveCapacity(4 + text.utf8.count)
        buffer.writeInteger(UInt32(text.utf8.count))
        buffer.writeString(text)
        return buffer
    }
}

/// Reads a stream as the exchange needs it: whole control messages, then raw bytes up to a count.
struct StreamReader {
    private var iterator: PeerStream.AsyncIterator
    private var buffered = ByteBuffer()

    init(_ stream: PeerStream) { iterator = stream.makeAsyncIterator() }

    /// More bytes into the buffer; false at the stream's end.
    private mutating func fill() async throws(PeerConnectionError) -> Bool {
        guard var chunk = try await iterator.next() else { return false }
        if buffered.readableBytes == 0 {
            buffered = chunk
        } else {
            buffered.writeBuffer(&chunk)
        }
        return true
    }

    /// The next control message; nil when the stream ended cleanly before one began.
    mutating func message() async throws(FileTransferError) -> JSONValue? {
        do {
            while buffered.readableBytes < 4 {
                guard try await fill() else {
                    if buffered.readableBytes == 0 { return nil }
                    throw TransferProtocol.malformed("a message cut short (the stream ended inside its length)")
                }
            }
            guard let length = buffered.getInteger(at: buffered.readerIndex, as: UInt32.self) else { return nil }
            guard Int(length) <= TransferProtocol.maximumMessage else {
                throw TransferProtocol.malformed("a control message of \(length) bytes (at most \(TransferProtocol.maximumMessage))")
            }
            while buffered.readableBytes < 4 + Int(length) {
                guard try await fill() else { throw TransferProtocol.malformed("a message cut short (\(buffered.readableBytes - 4) of \(length) bytes)") }
            }
            buffered.moveReaderIndex(forwardBy: 4)
            guard let text = buffered.readString(length: Int(length)) else { throw TransferProtocol.malformed("an unreadable message") }
            do { return try JSONValue(parsing: text) } catch { throw TransferProtocol.malformed("a message that is not JSON (\(error.message))") }
        } catch let error as FileTransferError {
            throw error
        } catch let error as PeerConnectionError {
            throw interruption(error)
        } catch {
            throw FileTransferError(.interrupted, "\(error)")
        }
    }

    /// Up to `limit` raw bytes; nil at the stream's end.
    mutating func bytes(upTo limit: Int) async throws(FileTransferError) -> ByteBuffer? {
        if buffered.readableBytes == 0 {
            do {
                guard let chunk = try await iterator.next() else { return nil }
                buffered = chunk
            } catch {
                throw interruption(error)
            }
        }
        let count = min(limit, buffered.readableBytes)
        return buffered.readSlice(length: count)
    }
}

/// A stream's failure as the file exchange reports it.
func interruption(_ error: PeerConnectionError) -> FileTransferError {
    if error.code == .cancelled { return FileTransferError(.cancelled, "cancelled") }
    return FileTransferError(.interrupted, error.message)
}
