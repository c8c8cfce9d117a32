import CNearbySocket
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import NIOCore
import NIOPosix

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// A file open for the exchange. Every system call runs on NIO's thread pool, never on the
/// cooperative pool or an event loop (a disk may take its time).
final class LocalFile: Sendable {
    let descriptor: Int32
    let path: String

    private init(descriptor: Int32, path: String) {
        self.descriptor = descriptor
        self.path = path
    }

    deinit { _ = Glibc.close(descriptor) }

    struct Status: Sendable {
        var size: Int64
        var modified: Double
        var isRegular: Bool
        var isDirectory: Bool
        var isSymbolicLink: Bool
    }

    /// Runs blocking file work on the thread pool.
    static func blocking<T: Sendable>(_ body: @escaping @Sendable () throws(FileTransferError) -> T) async throws(FileTransferError) -> T {
        let outcome: Result<T, FileTransferError>
        do {
            outcome = try await NIOThreadPool.singleton.runIfActive { () -> Result<T, FileTransferError> in
                Result { () throws(FileTransferError) -> T in try body() }
            }
        } catch {
            throw FileTransferError(.file, "the file thread pool is not running: \(error)")
        }
        return try outcome.get()
    }

    /// The error of the last system call, saying what was done to which file.
    static func failure(_ doing: String, _ path: String, _ code: Int32 = errno) -> FileTransferError {
        let reason =
            switch code {
            case ENOSPC: "the disk is full"
            case EDQUOT: "the disk quota is used up"
            case ENOENT: "no such file or folder"
            case EACCES, EPERM: "permission denied"
            case EISDIR: "it is a folder"
            case ELOOP: "it is a symbolic link"
            default: String(cString: strerror(code))
            }
        return FileTransferError(.file, "cannot \(doing) \(path): \(reason)")
    }

    /// What `path` is (without following a final symbolic link); nil when nothing is there.
    static func status(_ path: String) throws(FileTransferError) -> Status? {
        var info = stat()
        guard lstat(path, &info) == 0 else {
            if errno == ENOENT || errno == ENOTDIR { return nil }
            throw failure("look at", path)
        }
        let kind = info.st_mode & S_IFMT
        let modified = Double(info.st_mtim.tv_sec) + Double(info.st_mtim.tv_nsec) / 1e9
        return Status(
            size: Int64(info.st_size), modified: modified, isRegular: kind == S_IFREG, isDirectory: kind == S_IFDIR, isSymbolicLink: kind == S_IFLNK)
    }

    /// What `path` is, following symbolic links (a path the user gave); nil when nothing is there.
    static func statusFollowing(_ path: String) throws(FileTransferError) -> Status? {
        var info = stat()
        guard stat(path, &info) == 0 else {
            if errno == ENOENT || errno == ENOTDIR { return nil }
            throw failure("look at", path)
        }
        let kind = info.st_mode & S_IFMT
        let modified = Double(info.st_mtim.tv_sec) + Double(info.st_mtim.tv_nsec) / 1e9
        return Status(size: Int64(info.st_size), modified: modified, isRegular: kind == S_IFREG, isDirectory: kind == S_IFDIR, isSymbolicLink: false)
    }

    /// The names in a folder (not `.` and `..`), sorted.
    static func entries(of folder: String) throws(FileTransferError) -> [String] {
        guard let directory = opendir(folder) else { throw failure("list", folder) }
        defer { closedir(directory) }
        var names: [String] = []
        while let entry = readdir(directory) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
            }
            if name != "." && name != ".." { names.append(name) }
        }
        return names.sorted()
    }

    /// Opens an existing regular file for reading (a symbolic link is followed: the user named it).
    static func openForReading(_ path: String) throws(FileTransferError) -> (LocalFile, Status) {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { throw failure("open", path) }
        let file = LocalFile(descriptor: descriptor, path: path)
        var info = stat()
        guard fstat(descriptor, &info) == 0 else { throw failure("look at", path) }
        guard info.st_mode & S_IFMT == S_IFREG else { throw FileTransferError(.file, "cannot send \(path): it is not a regular file") }
        let modified = Double(info.st_mtim.tv_sec) + Double(info.st_mtim.tv_nsec) / 1e9
        return (file, Status(size: Int64(info.st_size), modified: modified, isRegular: true, isDirectory: false, isSymbolicLink: false))
    }

    /// Opens (or creates, owner-only until it is complete) a partial file for writing, never
    /// through a symbolic link.
    static func openForWriting(_ path: String) throws(FileTransferError) -> LocalFile {
        let descriptor = open(path, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard descriptor >= 0 else { throw failure("write", path) }
        return LocalFile(descriptor: descriptor, path: path)
    }

    /// Reads up to `count` bytes at `offset`; fewer only at the end of the file. With `reusing`,
    /// into that buffer's memory when nothing else holds it: a fresh 256 KiB buffer per read
    /// is a fresh mapping whose pages fault in and get zeroed, which cost more than the read.
    func read(at offset: Int64, count: Int, reusing spare: ByteBuffer? = nil) throws(FileTransferError) -> ByteBuffer {
        var buffer = spare ?? ByteBufferAllocator().buffer(capacity: count)
        buffer.clear()
        buffer.reserveCapacity(count)
        while buffer.readableBytes < count {
            let want = count - buffer.readableBytes
            let at = off_t(offset) + off_t(buffer.readableBytes)
            var failure: Int32 = 0
            let got = buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: want) { raw -> Int in
                let n = pread(descriptor, raw.baseAddress, want, at)
                if n < 0 { failure = errno }
                return max(n, 0)
            }
            if failure == EINTR { continue }
            if failure != 0 { throw Self.failure("read", path, failure) }
            if got == 0 { break }  // the end of the file
        }
        return buffer
    }

    /// Starts writing the given range to the disk without waiting for it (Linux's
    /// sync_file_range): the final fsync then has little left to do, and dirty pages do not
    /// pile up in memory while a large file arrives.
    func startWriteBack(from offset: Int64, count: Int64) {
        _ = nearby_start_write_back(descriptor, offset, count)
    }

    /// Hashes the file's first `count` bytes into `hasher` (a chunk at a time, on the thread
    /// pool); returns how many there were (fewer when the file is shorter).
    func hashPrefix(_ count: Int64, into hasher: SharedHasher, chunk: Int) async throws(FileTransferError) -> Int64 {
        var position: Int64 = 0
        while position < count {
            let size = Int(min(Int64(chunk), count - position))
            let at = position
            let read = try await Self.blocking { () throws(FileTransferError) in
                let bytes = try self.read(at: at, count: size)
                hasher.update(bytes)
                return bytes.readableBytes
            }
            guard read > 0 else { break }
            position += Int64(read)
        }
        return position
    }

    /// Writes all of `buffer` at `offset`.
    func write(_ buffer: ByteBuffer, at offset: Int64) throws(FileTransferError) {
        var written = 0
        let count = buffer.readableBytes
        while written < count {
            let n = buffer.withUnsafeReadableBytes { raw in
                pwrite(descriptor, raw.baseAddress.map { $0 + written }, count - written, off_t(offset) + off_t(written))
            }
            if n < 0 {
                if errno == EINTR { continue }
                throw Self.failure("write", path)
            }
            written += n
        }
    }

    func truncate(to size: Int64) throws(FileTransferError) {
        guard ftruncate(descriptor, off_t(size)) == 0 else { throw Self.failure("truncate", path) }
    }

    /// Writes what the kernel holds to the disk, so a rename after it never shows a file whose
    /// bytes are lost in a crash.
    func sync() throws(FileTransferError) {
        guard fsync(descriptor) == 0 else { throw Self.failure("write", path) }
    }

    /// A finished partial file becomes readable like any other (it was the owner's only while
    /// incomplete), and its bytes are on the disk before it is renamed.
    func finishForPublishing() throws(FileTransferError) {
        _ = fchmod(descriptor, 0o666 & ~Self.umask)
        try sync()
    }

    /// Sets the modification time (and the access time to now).
    func setModified(_ seconds: Double) {
        guard seconds.isFinite, abs(seconds) < 1e11 else { return }
        let whole = seconds.rounded(.down)
        // UTIME_NOW: ((1 << 30) - 1) on Linux, which Glibc's module does not export.
        var times = [timespec(tv_sec: 0, tv_nsec: (1 << 30) - 1), timespec(tv_sec: Int(whole), tv_nsec: Int((seconds - whole) * 1e9))]
        _ = futimens(descriptor, &times)
    }

    /// The process's file-creation mask, read once from /proc (setting it to read it would
    /// race with other threads creating files); 022 when /proc does not say.
    static let umask: mode_t = {
        guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8),
            let line = status.split(separator: "\n").first(where: { $0.hasPrefix("Umask:") }),
            let value = mode_t(line.dropFirst(6).trimmingBlanks(), radix: 8)
        else { return 0o022 }
        return value
    }()

    /// Bytes free for this user in the folder's file system; nil when it cannot be told.
    static func freeSpace(in folder: String) -> Int64? {
        var info = statvfs()
        guard statvfs(folder, &info) == 0 else { return nil }
        let (bytes, overflow) = Int64(clamping: info.f_bavail).multipliedReportingOverflow(by: Int64(clamping: info.f_frsize))
        return overflow ? Int64.max : bytes
    }
}
