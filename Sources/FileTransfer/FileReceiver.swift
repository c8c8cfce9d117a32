import CNearbySocket
import NIOCore
import NearbyBasics
public import PeerConnection
public import PeerTrust

#if canImport(Glibc)
    import Glibc
#endif

/// Receives files into one folder, from any number of peers at once (Documentation/Protocols.md, "Files: the exchange").
///
/// A file is written to `NAME.SENDER.part` beside its final name (SENDER: the first 16
/// characters of the sender's peer ID, see ``partialName(for:sender:)``) and appears under `NAME`
/// only once its size and SHA-256 match the sender's (never half a file under the final name).
/// A transfer cut short keeps its partial file; the same sender's next `--resume` continues it
/// after checking that its first bytes are the same. Another sender never sees, resumes or
/// replaces it, and a user's own files named `NAME.part` are never touched. A name taken already gets a number: `NAME (2)`.
/// Names that could write outside the folder are declined (see ``FileNames``).
public final class FileReceiver: Sendable {
    /// The folder files go into.
    public let directory: String
    /// The largest file accepted (nil: as large as the free space).
    public let maximumSize: Int64?
    /// Bytes written between two calls that start their write-back.
    static let writeBackStep: Int64 = 8 << 20
    /// `.part` files being written now, so that two transfers never share one.
    private let active = Locked<Set<String>>([])

    /// - Parameters:
    ///   - directory: where files go; it must exist.
    ///   - maximumSize: the largest file accepted, in bytes (nil: limited by free space only).
    public init(directory: String, maximumSize: Int64? = nil) {
        self.directory = directory.count > 1 && directory.hasSuffix("/") ? String(directory.dropLast()) : directory
        self.maximumSize = maximumSize
    }

    /// The partial file for `name` from `sender`: `NAME.SENDER.part`, SENDER being the first 16
    /// characters of its peer ID without dashes (80 bits: no key can be ground to match another
    /// sender's), or `anonymous` without one.
    public static func partialName(for name: String, sender: PeerID?) -> String {
        let tag = sender.map { String($0.description.filter { $0 != "-" }.prefix(16)) } ?? "anonymous"
        return "\(name).\(tag).part"
    }

    /// Whether `stream` carries a file (the label senders give it).
    public static func carriesFile(_ stream: PeerStream) -> Bool { stream.label == TransferProtocol.label }

    /// Receives the file `stream` carries: the offer, the answer, the bytes, the check.
    /// - Parameters:
    ///   - stream: a stream that ``carriesFile(_:)``.
    ///   - sender: the peer ID the connection proved; it names the partial file, so that only
    ///     this sender can resume it.
    ///   - interval: how often progress is reported while bytes flow.
    public func receive(_ stream: PeerStream, from sender: PeerID?, interval: Duration = .milliseconds(250)) -> TransferUpdates {
        TransferUpdates { report throws(FileTransferError) in
            let result = try await self.receiveOne(stream, sender: sender, interval: interval, report: report)
            report(.finished(result))
        }
    }

    private struct Target {
        var folder: String
        /// The sender's folders under ours.
        var folders: [String]
        /// The offered name, and the number that made it free ("build (2).tar").
        var name: String
        var number: Int
        var part: String
        /// Bytes of the `.part` to resume from.
        var offset: Int64
    }

    /// The shell of one file's ``ReceiveExchange``: it does the file work the machine asks for
    /// (claim, hash, free space, write, publish) and the messages it says.
    private func receiveOne(
        _ stream: PeerStream, sender: PeerID?, interval: Duration, report: @Sendable (TransferUpdate) -> Void
    ) async throws(FileTransferError) -> TransferResult {
        var reader = StreamReader(stream)
        var exchange = ReceiveExchange(maximumSize: maximumSize)
        let hasher = try makeHasher()
        var target: Target?
        defer { if let target { release(target.part) } }
        var file: LocalFile?
        var digest = ""
        var elapsed = 0.0
        var steps = exchange.begin()
        while !steps.isEmpty {
            switch steps.removeFirst() {
            case .readMessage:
                steps = try await exchange.received(reader.message()) + steps
            case .claim(let offer):
                do throws(FileTransferError) {
                    let claimed = try await claim(offer, sender: sender)
                    target = claimed
                    steps = exchange.claimed(.success(claimed.offset)) + steps
                } catch {
                    steps = exchange.claimed(.failure(error)) + steps
                }
            case .hashPrefix(let count):
                guard let part = target?.part else { throw FileTransferError(.file, "internal error: no .part to hash") }
                let (partial, _) = try await LocalFile.blocking { () throws(FileTransferError) in try LocalFile.openForReading(part) }
                _ = try await partial.hashPrefix(count, into: hasher, chunk: FileSender.chunk)
                steps = exchange.prefixHashed(hexString(hasher.copyDigest())) + steps
            case .checkSpace:
                steps = exchange.spaceChecked(free: target.flatMap { LocalFile.freeSpace(in: $0.folder) }) + steps
            case .send(let message):
                try await write(stream, message)
            case .receiveBytes(let start):
                guard let target, let offer = exchange.offer else { throw FileTransferError(.file, "internal error: bytes before an offer") }
                if start == 0 { hasher.reset() }
                let opened = try await LocalFile.blocking { () throws(FileTransferError) in
                    let file = try LocalFile.openForWriting(target.part)
                    try file.truncate(to: start)
                    return file
                }
                file = opened
                elapsed = try await receiveBytes(
                    into: opened, target: target, size: offer.size, from: start, shown: exchange.shownName, reader: &reader, stream: stream,
                    hasher: hasher, interval: interval, report: report)
                digest = hexString(hasher.finish())
                steps = exchange.bytesReceived(sha256: digest) + steps
            case .discardPart:
                if let part = target?.part { _ = unlink(part) }
            case .publish:
                guard let target, let file, let offer = exchange.offer else { throw FileTransferError(.file, "internal error: nothing to publish") }
                do throws(FileTransferError) {
                    let saved = try await LocalFile.blocking { () throws(FileTransferError) in
                        try file.finishForPublishing()
                        if let modified = offer.modified, modified.isFinite { file.setModified(modified) }
                        return try Self.publish(target)
                    }
                    steps = exchange.published(.success(saved)) + steps
                } catch {
                    steps = exchange.published(.failure(error)) + steps
                }
            case .tellAndFinish(let message):
                // The outcome here holds whatever happens to the stream now. (The sender may
                // close the connection as soon as it reads "saved", before our FIN goes.)
                try? await write(stream, message)
                try? await stream.finish()
            case .saved(let savedAs, let start):
                let size = exchange.offer?.size ?? 0
                return TransferResult(name: exchange.shownName, savedAs: savedAs, size: size, transferred: size - start, sha256: digest, seconds: elapsed)
            case .failed(let error, let reset):
                if let reset { stream.reset(reset.reason, code: reset.code) }
                throw error
            }
        }
        throw FileTransferError(.interrupted, "the exchange of \(exchange.shownName) ended without an outcome")
    }

    /// Takes the offered bytes from `start` to `size` into the `.part`, hashing them and starting
    /// the write-back every ``writeBackStep`` bytes. Returns the seconds it took.
    private func receiveBytes(
        into file: LocalFile, target: Target, size: Int64, from start: Int64, shown: String, reader: inout StreamReader, stream: PeerStream,
        hasher: SharedHasher, interval: Duration, report: @Sendable (TransferUpdate) -> Void
    ) async throws(FileTransferError) -> Double {
        let clock = ContinuousClock()
        let began = clock.now
        var meter = ProgressMeter(name: shown, size: size, resumedAt: start, interval: interval, at: .zero)
        report(.started(meter.progress(done: start, at: .zero)))
        var position = start
        var flushedTo = start
        do throws(FileTransferError) {
            while position < size {
                guard let bytes = try await reader.bytes(upTo: Int(min(Int64(Int.max), size - position))) else {
                    throw FileTransferError(
                        .interrupted, "the sender stopped after \(position) of \(size) bytes of \(shown); \(target.part) is kept for --resume")
                }
                let at = position
                let flushed = flushedTo
                let writeBack = at + Int64(bytes.readableBytes) - flushed >= Self.writeBackStep
                try await LocalFile.blocking { () throws(FileTransferError) in
                    hasher.update(bytes)
                    try file.write(bytes, at: at)
                    if writeBack { file.startWriteBack(from: flushed, count: at + Int64(bytes.readableBytes) - flushed) }
                }
                position += Int64(bytes.readableBytes)
                if writeBack { flushedTo = position }
                if let progress = meter.update(done: position, at: clock.now - began) { report(.progress(progress)) }
            }
        } catch {
            if error.code == .file {
                // Our disk: the sender hears why, and the .part stays for a resume once there is room.
                stream.reset(error.message, code: .failed)
                throw FileTransferError(.file, "\(error.message); \(target.part) is kept for --resume")
            }
            if error.code == .interrupted, !error.message.contains("kept for --resume") {
                throw FileTransferError(.interrupted, "\(error.message) (after \(position) of \(size) bytes of \(shown); \(target.part) is kept for --resume)")
            }
            throw error
        }
        return seconds(clock.now - began)
    }

    /// Makes the folders, picks the names and reserves the `.part`.
    private func claim(_ offer: TransferProtocol.Offer, sender: PeerID?) async throws(FileTransferError) -> Target {
        let directory = self.directory
        let active = self.active
        return try await LocalFile.blocking { () throws(FileTransferError) in
            guard let root = try LocalFile.statusFollowing(directory), root.isDirectory else {
                throw FileTransferError(.file, "the receiving folder \(directory) does not exist")
            }
            var folder = directory
            for name in offer.folders {
                folder += "/" + name
                if let status = try LocalFile.status(folder) {
                    guard status.isDirectory else {
                        throw FileTransferError(.file, "\(name) is in the way: \(status.isSymbolicLink ? "a symbolic link" : "a file") where a folder goes")
                    }
                } else if mkdir(folder, 0o755) != 0, errno != EEXIST {
                    throw LocalFile.failure("make the folder", folder)
                }
            }
            let chosen = active.withLockedValue { active -> Result<Target, FileTransferError> in
              Result { () throws(FileTransferError) -> Target in
                // Resume into the .part of this name when there is one (and nobody writes it now).
                if offer.resume {
                    let part = folder + "/" + Self.partialName(for: offer.name, sender: sender)
                    if !active.contains(part), let status = try LocalFile.status(part), status.isRegular {
                        active.insert(part)
                        return Target(
                            folder: folder, folders: offer.folders, name: offer.name, number: 1, part: part, offset: min(status.size, offer.size))
                    }
                }
                for number in 1...1000 {
                    let name = FileNames.numbered(offer.name, number)
                    let final = folder + "/" + name
                    let part = folder + "/" + Self.partialName(for: name, sender: sender)
                    guard !active.contains(part), try LocalFile.status(final) == nil else { continue }
                    if let status = try LocalFile.status(part), !status.isRegular { continue }
                    active.insert(part)
                    return Target(folder: folder, folders: offer.folders, name: offer.name, number: number, part: part, offset: 0)
                }
                throw FileTransferError(.file, "\(offer.name) and 999 numbered names after it are taken")
              }
            }
            return try chosen.get()
        }
    }

    private func release(_ part: String) {
        _ = active.withLockedValue { $0.remove(part) }
    }

    /// Moves the finished `.part` to its final name, or the first free numbered one: `link`
    /// fails rather than replace a file that appeared meanwhile.
    private static func publish(_ target: Target) throws(FileTransferError) -> [String] {
        for number in target.number..<(target.number + 1000) {
            let name = FileNames.numbered(target.name, number)
            let final = target.folder + "/" + name
            if link(target.part, final) == 0 {
                _ = unlink(target.part)
                return target.folders + [name]
            }
            var code = errno
            if code == EPERM || code == ENOTSUP || code == EOPNOTSUPP || code == EMLINK {
                // No hard links here (vfat, exFAT, many SMB mounts): a rename that refuses to
                // replace, else a plain one after checking the name is free.
                if nearby_rename_noreplace(target.part, final) == 0 { return target.folders + [name] }
                code = errno
                if code == EINVAL || code == ENOSYS {
                    guard try LocalFile.status(final) == nil else { continue }
                    if rename(target.part, final) == 0 { return target.folders + [name] }
                    code = errno
                }
            }
            if code != EEXIST { throw LocalFile.failure("save", final, code) }
        }
        throw FileTransferError(.file, "\(target.name) and 999 numbered names after it are taken")
    }
}

/// Writes one control message.
func write(_ stream: PeerStream, _ message: JSONValue) async throws(FileTransferError) {
    do { try await stream.write(TransferProtocol.frame(message)) } catch { throw interruption(error) }
}
