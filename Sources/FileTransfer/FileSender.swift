import NIOCore
import NearbyBasics
public import PeerConnection
import PeerTrust

/// Sends files to a peer, one stream each (Documentation/Protocols.md, "Files: the exchange").
public enum FileSender {
    /// One file to send: where it is here, and the name (and folders) it is offered under.
    public struct Item: Hashable, Sendable {
        public var path: String
        public var name: String
        public var folders: [String]

        public init(path: String, name: String, folders: [String] = []) {
            self.path = path
            self.name = name
            self.folders = folders
        }

        /// The name with its folders, as people read it.
        public var shownName: String { (folders + [name]).joined(separator: "/") }
    }

    /// The files to send for the paths a user gave: each file under its own name; a folder
    /// (with `recursive`) as every regular file under it, under the folder's name. Hidden
    /// entries (a leading dot) and what is neither a file nor a folder are skipped and listed.
    /// - Throws: ``FileTransferError`` `file`: a path that does not exist, a folder without
    ///   `recursive`, a name the receiver would refuse.
    public static func items(for paths: [String], recursive: Bool) async throws(FileTransferError) -> (items: [Item], skipped: [(path: String, reason: String)]) {
        try await LocalFile.blocking { () throws(FileTransferError) in
            var items: [Item] = []
            var skipped: [(path: String, reason: String)] = []
            for path in paths {
                guard let status = try LocalFile.statusFollowing(path) else {
                    throw FileTransferError(.file, "cannot send \(path): no such file or folder")
                }
                let name = lastComponent(path)
                if status.isDirectory {
                    guard recursive else { throw FileTransferError(.file, "\(path) is a folder: send it with --recursive") }
                    if let problem = FileNames.problem(with: name) {
                        throw FileTransferError(.file, "cannot send the folder \(path) under its name: \(problem)")
                    }
                    try walk(path, folders: [name], into: &items, skipped: &skipped)
                } else if status.isRegular {
                    if let problem = FileNames.problem(with: name) { throw FileTransferError(.file, "cannot send \(path) under its name: \(problem)") }
                    items.append(Item(path: path, name: name))
                } else {
                    throw FileTransferError(.file, "cannot send \(path): it is neither a regular file nor a folder")
                }
            }
            return (items, skipped)
        }
    }

    private static func walk(_ folder: String, folders: [String], into items: inout [Item], skipped: inout [(path: String, reason: String)]) throws(FileTransferError) {
        guard folders.count <= FileNames.maximumDepth else {
            skipped.append((folder, "deeper than \(FileNames.maximumDepth) folders"))
            return
        }
        for entry in try LocalFile.entries(of: folder) {
            let path = folder + "/" + entry
            if let problem = FileNames.problem(with: entry) {
                skipped.append((path, problem))
                continue
            }
            guard let status = try LocalFile.status(path) else { continue }
            if status.isDirectory {
                try walk(path, folders: folders + [entry], into: &items, skipped: &skipped)
            } else if status.isRegular {
                items.append(Item(path: path, name: entry, folders: folders))
            } else {
                skipped.append((path, status.isSymbolicLink ? "a symbolic link" : "not a regular file"))
            }
        }
    }

    private static func lastComponent(_ path: String) -> String {
        let trimmed = path.hasSuffix("/") && path.count > 1 ? String(path.dropLast()) : path
        return trimmed.split(separator: "/", omittingEmptySubsequences: false).last.map(String.init) ?? trimmed
    }

    /// Sends `items` over `connection`, one after another. With `resume`, a file the receiver
    /// already has the start of (a `.part` whose bytes hash the same as ours) continues from
    /// there. Progress comes every `interval` while bytes flow. With `rateLimit` (bytes per
    /// second) the bytes are paced to at most that on average, for a link shared with others.
    ///
    /// A file the receiver declines is reported as `failed` and the next one is sent; an
    /// interruption (the peer cancelled, the connection ended) or a cancellation here ends the
    /// whole transfer with that error.
    public static func send(
        _ items: [Item], over connection: PeerConnection, resume: Bool = false, interval: Duration = .milliseconds(250), rateLimit: Int? = nil
    ) -> TransferUpdates {
        TransferUpdates { report throws(FileTransferError) in
            var declined: FileTransferError?
            for item in items {
                do throws(FileTransferError) {
                    let result = try await sendOne(item, over: connection, resume: resume, interval: interval, rateLimit: rateLimit, report: report)
                    report(.finished(result))
                } catch {
                    report(.failed(name: item.shownName, error))
                    guard error.code == .declined || error.code == .verification || error.code == .file else { throw error }
                    declined = declined ?? error
                }
            }
            if let declined, items.count == 1 { throw declined }
        }
    }

    /// Bytes read from the file at once (four frames of the default 64 KiB).
    static let chunk = 256 << 10

    /// The shell of one file's ``SendExchange``: it opens the file and the stream, and does
    /// what the machine says (messages, the resume check, the bytes, the half-close).
    private static func sendOne(
        _ item: Item, over connection: PeerConnection, resume: Bool, interval: Duration, rateLimit: Int?, report: @Sendable (TransferUpdate) -> Void
    ) async throws(FileTransferError) -> TransferResult {
        let (file, status) = try await LocalFile.blocking { () throws(FileTransferError) in try LocalFile.openForReading(item.path) }
        let size = status.size
        let stream: PeerStream
        do {
            stream = try await connection.openStream(label: TransferProtocol.label)
        } catch {
            if error.code == .unsupported { throw FileTransferError(.unsupported, "the peer takes no files: \(error.message)") }
            throw FileTransferError(.interrupted, error.message)
        }
        var reader = StreamReader(stream)
        var exchange = SendExchange(
            offer: TransferProtocol.Offer(name: item.name, folders: item.folders, size: size, modified: status.modified, resume: resume))
        var streamReset = false
        do throws(FileTransferError) {
            let hasher = try makeHasher()
            var digest = ""
            var elapsed = 0.0
            var steps = exchange.begin()
            while !steps.isEmpty {
                switch steps.removeFirst() {
                case .send(let message):
                    try await send(stream, TransferProtocol.frame(message))
                case .readMessage:
                    steps = try await exchange.received(reader.message()) + steps
                case .checkPrefix(let count, let expected):
                    let position = try await file.hashPrefix(count, into: hasher, chunk: chunk)
                    let matches = position == count && hexString(hasher.copyDigest()) == expected
                    if !matches { hasher.reset() }
                    steps = exchange.prefixChecked(matches: matches) + steps
                case .sendBytes(let start):
                    elapsed = try await sendBytes(
                        of: file, path: item.path, name: item.shownName, size: size, from: start, into: stream, hasher: hasher, interval: interval,
                        rateLimit: rateLimit, report: report)
                    digest = hexString(hasher.finish())
                    steps = exchange.bytesSent(sha256: digest) + steps
                case .finishStream:
                    do { try await stream.finish() } catch { throw interruption(error) }
                case .saved(let savedAs, let start):
                    return TransferResult(name: item.shownName, savedAs: savedAs, size: size, transferred: size - start, sha256: digest, seconds: elapsed)
                case .failed(let error, let reset):
                    if let reset {
                        stream.reset(reset.reason, code: reset.code)
                        streamReset = true
                    }
                    throw error
                }
            }
            throw FileTransferError(.interrupted, "the exchange of \(item.shownName) ended without an outcome")
        } catch {
            if Task.isCancelled || error.code == .cancelled {
                stream.reset("the sender cancelled")
                throw FileTransferError(.cancelled, "cancelled while sending \(item.shownName)")
            }
            if error.code == .protocolError && !streamReset { stream.reset(error.message, code: .protocolError) }
            throw error
        }
    }

    /// Sends the file's bytes from `start` to `size`, reading (and hashing, on the thread pool)
    /// the next chunk while this one goes out, paced to `rateLimit` bytes per second when given.
    /// Returns the seconds it took.
    private static func sendBytes(
        of file: LocalFile, path: String, name: String, size: Int64, from start: Int64, into stream: PeerStream, hasher: SharedHasher,
        interval: Duration, rateLimit: Int?, report: @Sendable (TransferUpdate) -> Void
    ) async throws(FileTransferError) -> Double {
        let clock = ContinuousClock()
        let began = clock.now
        var meter = ProgressMeter(name: name, size: size, resumedAt: start, interval: interval, at: .zero)
        report(.started(meter.progress(done: start, at: .zero)))
        var position = start
        let read: @Sendable (Int64, ByteBuffer?) async throws(FileTransferError) -> ByteBuffer = { at, spare throws(FileTransferError) in
            let count = Int(min(Int64(chunk), size - at))
            return try await LocalFile.blocking { () throws(FileTransferError) in
                let bytes = try file.read(at: at, count: count, reusing: spare)
                hasher.update(bytes)
                return bytes
            }
        }
        var next: Task<ByteBuffer, any Error>? = start < size ? Task { try await read(start, nil) } : nil
        defer { next?.cancel() }
        // Two buffers take turns: one is read into while the other goes out.
        var spare: ByteBuffer?
        while let pending = next {
            let bytes: ByteBuffer
            do { bytes = try await pending.value } catch let error as FileTransferError { throw error } catch {
                throw FileTransferError(.cancelled, "cancelled")
            }
            guard bytes.readableBytes > 0 else {
                stream.reset("the file changed while it was sent", code: .failed)
                throw FileTransferError(.file, "\(path) got shorter while it was sent (\(position) of \(size) bytes)")
            }
            let after = position + Int64(bytes.readableBytes)
            let reuse = spare
            spare = nil
            next = after < size ? Task { try await read(after, reuse) } : nil
            try await send(stream, bytes)
            spare = bytes
            position = after
            if let progress = meter.update(done: position, at: clock.now - began) { report(.progress(progress)) }
            if let rateLimit, rateLimit > 0 {
                // Ahead of the pace: wait until the bytes sent so far are due.
                let due = began + .seconds(Double(position - start) / Double(rateLimit))
                if due > clock.now {
                    do { try await clock.sleep(until: due) } catch { throw FileTransferError(.cancelled, "cancelled") }
                }
            }
        }
        return seconds(clock.now - began)
    }

    private static func send(_ stream: PeerStream, _ bytes: ByteBuffer) async throws(FileTransferError) {
        do { try await stream.write(bytes) } catch { throw interruption(error) }
    }
}

/// A SHA-256 hasher that the transfer's steps share, one at a time (on the thread pool or the
/// transfer's task, never both at once).
final class SharedHasher: @unchecked Sendable {
    private var hasher: SHA256Hasher
    private let lock = Locked()

    init?() {
        guard let hasher = SHA256Hasher() else { return nil }
        self.hasher = hasher
    }

    func update(_ bytes: ByteBuffer) {
        lock.withLock { bytes.withUnsafeReadableBytes { hasher.update($0) } }
    }

    /// The digest so far, leaving the hasher as it is (by hashing a copy).
    func copyDigest() -> [UInt8] {
        lock.withLock { hasher.copy()?.finish() ?? [] }
    }

    func reset() {
        lock.withLock { if let fresh = SHA256Hasher() { hasher = fresh } }
    }

    func finish() -> [UInt8] {
        lock.withLock { hasher.finish() }
    }
}

func makeHasher() throws(FileTransferError) -> SharedHasher {
    guard let hasher = SharedHasher() else { throw FileTransferError(.file, "OpenSSL cannot make a SHA-256 context (out of memory?)") }
    return hasher
}
