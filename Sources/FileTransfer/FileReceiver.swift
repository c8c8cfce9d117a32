import CNearbySocket
import NIOConcurrencyHelpers
import NIOCore
import NearbyBasics
public import PeerConnection
public import PeerTrust

#if canImport(Glibc)
    import Glibc
#endif

/// Receives files into one folder, from any number of peers at once (README, "Files").
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
    private let active = NIOLockedValueBox<Set<String>>([])

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

    private func receiveOne(
        _ stream: PeerStream, sender: PeerID?, interval: Duration, report: @Sendable (TransferUpdate) -> Void
    ) async throws(FileTransferError) -> TransferResult {
        var reader = StreamReader(stream)
        let offer: TransferProtocol.Offer
        do throws(FileTransferError) {
            guard let message = try await reader.message() else { throw TransferProtocol.malformed("no offer before the stream ended") }
            offer = try TransferProtocol.Offer.parse(message).get()
        } catch {
            stream.reset(error.message, code: error.code == .protocolError ? .protocolError : .failed)
            throw error
        }
        let shown = FileNames.shown((offer.folders + [offer.name]).joined(separator: "/"))
        func decline(_ reason: String) async throws(FileTransferError) -> Never {
            try? await write(stream, TransferProtocol.Answer.decline(reason).json)
            try? await stream.finish()
            throw FileTransferError(.declined, "declined \(shown): \(reason)")
        }
        if let problem = FileNames.problem(withPath: offer.folders + [offer.name]) { try await decline("refused name: \(problem)") }
        if let maximumSize, offer.size > maximumSize { try await decline("\(offer.size) bytes is over the \(maximumSize) this side takes") }
        let target: Target
        do { target = try await claim(offer, sender: sender) } catch { try await decline(error.message) }
        defer { release(target.part) }

        // Resuming: the .part's first bytes, hashed, for the sender to compare with its own.
        let hasher = try makeHasher()
        var prefix: String?
        if target.offset > 0 {
            let (file, _) = try await LocalFile.blocking { () throws(FileTransferError) in try LocalFile.openForReading(target.part) }
            _ = try await file.hashPrefix(target.offset, into: hasher, chunk: FileSender.chunk)
            prefix = hexString(hasher.copyDigest())
        }
        let needed = offer.size - target.offset
        if let free = LocalFile.freeSpace(in: target.folder), needed > free {
            try await decline("not enough space: \(needed) bytes needed, \(free) free")
        }
        try await write(stream, TransferProtocol.Answer.accept(offset: target.offset, prefixSHA256: prefix).json)

        let start: Int64
        do throws(FileTransferError) {
            guard let message = try await reader.message(), let value = TransferProtocol.integer(message["start"]),
                value == 0 || value == target.offset
            else { throw TransferProtocol.malformed("a start that is neither 0 nor the offset offered") }
            start = value
        } catch {
            stream.reset(error.message, code: .protocolError)
            throw error
        }
        if start == 0 { hasher.reset() }
        let file = try await LocalFile.blocking { () throws(FileTransferError) in
            let file = try LocalFile.openForWriting(target.part)
            try file.truncate(to: start)
            return file
        }
        let clock = ContinuousClock()
        let began = clock.now
        var meter = ProgressMeter(name: shown, size: offer.size, resumedAt: start, interval: interval, at: .zero)
        report(.started(meter.progress(done: start, at: .zero)))
        var position = start
        var flushedTo = start
        do throws(FileTransferError) {
            while position < offer.size {
                guard let bytes = try await reader.bytes(upTo: Int(min(Int64(Int.max), offer.size - position))) else {
                    throw FileTransferError(
                        .interrupted, "the sender stopped after \(position) of \(offer.size) bytes of \(shown); \(target.part) is kept for --resume")
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
                throw FileTransferError(.interrupted, "\(error.message) (after \(position) of \(offer.size) bytes of \(shown); \(target.part) is kept for --resume)")
            }
            throw error
        }
        let digest = hexString(hasher.finish())
        let theirs: String
        do throws(FileTransferError) {
            guard let trailer = try await reader.message(), let sha = trailer["sha256"]?.stringValue else {
                throw TransferProtocol.malformed("no SHA-256 after the bytes")
            }
            theirs = sha.lowercased()
        } catch {
            stream.reset(error.message, code: .protocolError)
            throw error
        }
        guard theirs == digest else {
            // Not the sender's file: nothing of it is kept.
            _ = unlink(target.part)
            let reason = "its SHA-256 differs from the sender's (\(digest.prefix(16))… here, \(theirs.prefix(16))… sent); nothing was kept"
            try? await write(stream, TransferProtocol.failed(reason, kind: .verification))
            try? await stream.finish()
            throw FileTransferError(.verification, "\(shown): \(reason)")
        }
        let saved: [String]
        do throws(FileTransferError) {
            saved = try await LocalFile.blocking { () throws(FileTransferError) in
                try file.finishForPublishing()
                if let modified = offer.modified, modified.isFinite { file.setModified(modified) }
                return try Self.publish(target)
            }
        } catch {
            try? await write(stream, TransferProtocol.failed(error.message, kind: .file))
            try? await stream.finish()
            throw error
        }
        // The file is saved under its name: that holds whatever happens to the stream now. (The
        // sender may close the connection as soon as it reads "saved", before our FIN goes.)
        try? await write(stream, TransferProtocol.saved(saved.joined(separator: "/")))
        try? await stream.finish()
        return TransferResult(
            name: shown, savedAs: saved.joined(separator: "/"), size: offer.size, transferred: offer.size - start, sha256: digest,
            seconds: seconds(clock.now - began))
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
