import NetworkPlatform
#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif
import NearbyBasics

/// Where this peer's identity lives between runs: `identity.pem` (the private key, then the
/// certificate chain; mode 0600) in a directory of mode 0700, by default
/// `$XDG_STATE_HOME/nearby`, else `~/.local/state/nearby` (`NEARBY_STATE_DIR` overrides).
///
/// Files are written to a temporary name and then linked or renamed into place, so a crash
/// never leaves half an identity, and of two processes creating one at the same time exactly
/// one wins; the other loads the winner's. A file that cannot be read back is an error, never
/// a reason to make a new identity, because that would change the peer ID.
public struct IdentityStore: Sendable {
    public let directory: URL

    public init(directory: URL = IdentityStore.defaultDirectory) {
        self.directory = directory
    }

    /// `NEARBY_STATE_DIR`, else `$XDG_STATE_HOME/nearby`, else `~/.local/state/nearby`.
    public static var defaultDirectory: URL {
        let environment = ProcessInfo.processInfo.environment
        if let path = environment["NEARBY_STATE_DIR"], !path.isEmpty { return URL(fileURLWithPath: path) }
        if let state = environment["XDG_STATE_HOME"], state.hasPrefix("/") {
            return URL(fileURLWithPath: state).appendingPathComponent("nearby")
        }
        return FileManager.default.homeDirectoryForCurrentUser.appendingPathComponent(".local/state/nearby")
    }

    public var identityFile: URL { directory.appendingPathComponent("identity.pem") }
    var nameFile: URL { directory.appendingPathComponent("display-name") }

    /// The stored identity, or nil when none has been made yet.
    /// - Throws: ``PeerTrustError`` (`damaged`) when the file exists but cannot be used.
    public func load() throws(PeerTrustError) -> PeerIdentity? {
        let read: [UInt8]?
        do { read = try Storage.readFile(identityFile) } catch { throw error.inStateDirectory() }
        guard let data = read else { return nil }
        let name = (try? Storage.readFile(nameFile)).flatMap { $0 }.map { String(decoding: $0, as: UTF8.self) }
        let text = String(decoding: data, as: UTF8.self)
        do {
            return try PeerIdentity(certificateChainPEM: text, privateKeyPEM: text, displayName: name)
        } catch {
            throw PeerTrustError(
                .damaged,
                "the identity in \(identityFile.path) is damaged (\(error.message)); restore it from a backup, or move it away "
                    + "and create a new one (that changes this peer's ID)")
        }
    }

    /// An identity from ``loadOrCreate(displayName:)`` and what getting it did, so that a
    /// program can tell its user when a key was written or a name was not used.
    public struct Loaded: Sendable {
        /// The identity: the stored one, or the one this call made and stored.
        public let identity: PeerIdentity
        /// True when there was no identity and this call made one and wrote it, private key
        /// included, to ``IdentityStore/identityFile``. Its peer ID is new: no peer has pinned it
        /// yet, so say so (and show the peer ID) to whoever runs the program.
        public let created: Bool
        /// The display name that was asked for but not used, because the stored identity has
        /// another one (nil when the name was used or none was asked for). Loading never changes a
        /// stored identity: its name is the one it was made with.
        public let unusedName: String?
    }

    /// The stored identity; makes and stores one first when there is none.
    ///
    /// What it did is in the result: ``Loaded/created`` when a key was written,
    /// ``Loaded/unusedName`` when the stored identity kept its own name.
    /// - Parameter displayName: the name for an identity made now (default: the host's name).
    /// - Throws: ``PeerTrustError``: `damaged` when a stored identity cannot be used (it is
    ///   left alone), `storage` when the directory or file cannot be made.
    public func loadOrCreate(displayName: String? = nil) throws(PeerTrustError) -> Loaded {
        let asked = displayName?.trimmingBlanks(newlines: true)
        func loaded(_ identity: PeerIdentity, created: Bool) -> Loaded {
            let unused = asked.flatMap { $0.isEmpty || $0 == identity.displayName ? nil : $0 }
            return Loaded(identity: identity, created: created, unusedName: unused)
        }
        if let identity = try load() { return loaded(identity, created: false) }
        let identity = try PeerIdentity.generate(displayName: displayName)
        do {
            try save(identity, replacing: false)
            return loaded(identity, created: true)
        } catch where error.code == .exists {
            // Another process made one at the same moment: theirs stands.
            guard let winner = try load() else { throw error }
            return loaded(winner, created: false)
        }
    }

    /// Stores an identity (with its private key).
    /// - Parameters:
    ///   - identity: the identity to store.
    ///   - replacing: false refuses to overwrite an existing identity (`exists`).
    public func save(_ identity: PeerIdentity, replacing: Bool) throws(PeerTrustError) {
        do {
            try Storage.makeDirectory(directory)
            let contents = Array((identity.privateKey.pem + identity.pem()).utf8)
            try Storage.writeFile(contents, to: identityFile, mode: 0o600, exclusive: !replacing)
            if identity.displayName != identity.certificate.commonName {
                try Storage.writeFile(Array(identity.displayName.utf8), to: nameFile, mode: 0o600, exclusive: false)
            } else {
                try? FileManager.default.removeItem(at: nameFile)
            }
        } catch {
            throw error.inStateDirectory()
        }
    }
}

/// Small, careful file operations.
package enum Storage {
    /// Replaces the file at `url` with `bytes`, readable by its owner only, as
    /// ``writeFile(_:to:mode:exclusive:)`` writes: whole, flushed, renamed over the old one, so
    /// a crash leaves the old file or the new (the SRP registrar's state file uses it too).
    package static func replace(_ url: URL, with bytes: [UInt8]) throws(PeerTrustError) {
        try writeFile(bytes, to: url, mode: 0o600, exclusive: false)
    }

    /// The file's bytes, or nil when it does not exist.
    static func readFile(_ url: URL) throws(PeerTrustError) -> [UInt8]? {
        let descriptor = open(url.path, O_RDONLY | O_CLOEXEC)
        if descriptor < 0 {
            if errno == ENOENT { return nil }
            throw failure("cannot read \(url.path)", errno, checking: url.path, for: R_OK)
        }
        defer { close(descriptor) }
        switch readToEnd(descriptor, limit: 16 << 20) {
        case .bytes(let bytes): return bytes
        case .failed(let error): throw failure("cannot read \(url.path)", error, checking: url.path, for: R_OK)
        case .tooLarge: throw PeerTrustError(.damaged, "\(url.path) is larger than 16 MiB")
        }
    }

    /// Makes the directory (and its parents) and restricts it to its owner (0700).
    static func makeDirectory(_ url: URL) throws(PeerTrustError) {
        // One level at a time, so that a failure names the level and the system's reason.
        var path = url.path.hasPrefix("/") ? "" : "."
        for component in url.path.split(separator: "/") {
            path += "/" + component
            var status = stat()
            if stat(path, &status) == 0 {
                guard status.st_mode & S_IFMT == S_IFDIR else {
                    throw PeerTrustError(.storage, "cannot create the directory \(url.path): \(path) is a file, not a directory; choose another directory")
                }
                continue
            }
            guard mkdir(path, 0o700) == 0 || errno == EEXIST else {
                let code = errno
                let parent = path.lastIndex(of: "/").map { $0 == path.startIndex ? "/" : String(path[..<$0]) } ?? "."
                if let refusal = accessFailure("cannot create the directory \(url.path)", code, checking: parent, for: W_OK | X_OK) { throw refusal }
                throw PeerTrustError(
                    .storage,
                    "cannot create the directory \(url.path): making \(path) failed (\(String(cString: strerror(code)))); choose a directory you can write to, or check \(parent)")
            }
        }
        guard chmod(url.path, 0o700) == 0 else {
            throw failure("cannot restrict \(url.path) to its owner", errno, checking: url.path, for: nil)
        }
    }

    /// Writes a whole file under a temporary name, flushes it to disk, then moves it into place:
    /// `rename` when replacing, `link` when `exclusive` (which fails with `exists` if the file
    /// is already there). Readers see the old file or the new one, never a part.
    static func writeFile(_ bytes: [UInt8], to url: URL, mode: mode_t, exclusive: Bool) throws(PeerTrustError) {
        let directory = url.deletingLastPathComponent()
        let temporary = directory.appendingPathComponent(".\(url.lastPathComponent).\(getpid()).\(UInt32.random(in: 0...UInt32.max)).tmp")
        let descriptor = open(temporary.path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode)
        guard descriptor >= 0 else {
            throw failure("cannot write in \(directory.path)", errno, checking: directory.path, for: W_OK | X_OK)
        }
        defer { unlink(temporary.path) }
        var written = 0
        while written < bytes.count {
            let count = bytes.withUnsafeBytes { raw -> Int in
                guard let base = raw.baseAddress else { return 0 }
                return write(descriptor, base + written, raw.count - written)
            }
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else {
                let reason = String(cString: strerror(errno))
                close(descriptor)
                throw PeerTrustError(.storage, "cannot write \(url.path): \(reason)")
            }
            written += count
        }
        let synced = fsync(descriptor) == 0
        close(descriptor)
        guard synced else { throw PeerTrustError(.storage, "cannot flush \(url.path) to disk: \(String(cString: strerror(errno)))") }
        if exclusive {
            if link(temporary.path, url.path) != 0 {
                if errno == EEXIST { throw PeerTrustError(.exists, "\(url.path) already exists") }
                throw PeerTrustError(.storage, "cannot create \(url.path): \(String(cString: strerror(errno)))")
            }
        } else if rename(temporary.path, url.path) != 0 {
            throw PeerTrustError(.storage, "cannot replace \(url.path): \(String(cString: strerror(errno)))")
        }
        let directoryDescriptor = open(directory.path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        if directoryDescriptor >= 0 {
            fsync(directoryDescriptor)
            close(directoryDescriptor)
        }
    }

    /// Runs `body` holding an exclusive lock on `directory/.lock` (read-modify-write of stores).
    static func withLock<T>(in directory: URL, _ body: () throws(PeerTrustError) -> T) throws(PeerTrustError) -> T {
        try makeDirectory(directory)
        let path = directory.appendingPathComponent(".lock").path
        let descriptor = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else { throw failure("cannot lock \(path)", errno, checking: path, for: R_OK | W_OK) }
        defer { close(descriptor) }
        while flock(descriptor, LOCK_EX) != 0 {
            guard errno == EINTR else { throw PeerTrustError(.storage, "cannot lock \(path): \(String(cString: strerror(errno)))") }
        }
        defer { flock(descriptor, LOCK_UN) }
        return try body()
    }
}

// MARK: What to check when the file system refuses

extension Storage {
    /// What a person can do when a file of a state directory (the identity, the trust store)
    /// refuses this process, besides owning it: another state directory.
    static let otherStateDirectory = "or give this user a state directory of its own (nearby's --state-dir DIR, or NEARBY_STATE_DIR=DIR)"

    /// `doing` failed with `code`: the system's words, and for a refusal of access what to
    /// check (``accessFailure(_:_:checking:for:)``).
    static func failure(_ doing: String, _ code: Int32, checking path: String, for mode: Int32?) -> PeerTrustError {
        accessFailure(doing, code, checking: path, for: mode) ?? PeerTrustError(.storage, "\(doing): \(String(cString: strerror(code)))")
    }

    /// For a refusal of access (EACCES, EPERM, EROFS), the words that say what to check: which
    /// file or directory refuses (the first directory on the way that cannot be searched, else
    /// `path` itself when `mode` is refused on it), whom it belongs to and its mode, and whom
    /// this process runs as; nil for any other error.
    static func accessFailure(_ doing: String, _ code: Int32, checking path: String, for mode: Int32?) -> PeerTrustError? {
        let reason = String(cString: strerror(code))
        var error: PeerTrustError
        switch code {
        case EROFS:
            error = PeerTrustError(.storage, "\(doing): \(reason): choose a directory on a file system that can be written")
        case EACCES, EPERM:
            let culprit = refusing(path, mode: mode) ?? path
            var status = stat()
            let facts: AccessFacts? =
                stat(culprit, &status) == 0
                ? AccessFacts(
                    path: culprit, isDirectory: status.st_mode & S_IFMT == S_IFDIR, owner: userName(status.st_uid), ownerID: status.st_uid,
                    mode: status.st_mode & 0o7777, user: userName(geteuid()), userID: geteuid())
                : nil
            error = PeerTrustError(.storage, "\(doing): \(reason)" + (facts.map { " " + $0.text } ?? ""))
        default:
            return nil
        }
        error.refusedAccess = true
        return error
    }

    /// The first directory on the way to `path` that this process cannot search, else `path`
    /// itself when `mode` (from `access(2)`) is refused on it, else nil.
    static func refusing(_ path: String, mode: Int32?) -> String? {
        let absolute = path.hasPrefix("/") ? path : FileManager.default.currentDirectoryPath + "/" + path
        let components = absolute.split(separator: "/")
        var prefix = ""
        for component in components.dropLast() {
            prefix += "/" + component
            if access(prefix, X_OK) != 0 { return prefix }
        }
        guard let mode, access(absolute, mode) != 0 else { return nil }
        guard errno == ENOENT else { return absolute }
        // Not there yet: the directory it would be made in.
        let parent = components.count > 1 ? "/" + components.dropLast().joined(separator: "/") : "/"
        return access(parent, W_OK | X_OK) != 0 ? parent : nil
    }

    /// The name of the user with `uid`, or nil.
    static func userName(_ uid: uid_t) -> String? {
        var entry = passwd()
        var found: UnsafeMutablePointer<passwd>?
        var buffer = [CChar](repeating: 0, count: 4096)
        guard getpwuid_r(uid, &entry, &buffer, buffer.count, &found) == 0, found != nil, let name = entry.pw_name else { return nil }
        return String(cString: name)
    }
}

/// Who owns the file or directory that refused access, and whom the process runs as: what a
/// person checks (with ls -ld and id) before changing owners, modes or users.
struct AccessFacts: Hashable, Sendable {
    var path: String
    var isDirectory: Bool
    var owner: String?
    var ownerID: uid_t
    var mode: mode_t
    var user: String?
    var userID: uid_t

    /// `(the directory /x belongs to root (uid 0), mode 0700, and this process runs as nobody
    /// (uid 65534)): run as the user who owns it, or change its owner or mode`.
    var text: String {
        let octal = String(mode, radix: 8)
        let modeText = String(repeating: "0", count: max(0, 4 - octal.count)) + octal
        func who(_ name: String?, _ id: uid_t) -> String { name.map { "\($0) (uid \(id))" } ?? "uid \(id)" }
        let thing = isDirectory ? "the directory" : "the file"
        let remedy =
            ownerID == userID
            ? "its mode lets its owner in no further: chmod u+\(isDirectory ? "rwx" : "rw") \(path)"
            : "run as \(owner ?? "the user who owns it"), or make it this user's (chown) or open its mode to this user (chmod)"
        return "(\(thing) \(path) belongs to \(who(owner, ownerID)), mode \(modeText), and this process runs as \(who(user, userID))): \(remedy)"
    }
}

extension PeerTrustError {
    /// This error, and when the file system refused access to a file of a state directory,
    /// what else will do: another state directory (`Storage.otherStateDirectory`), said once.
    func inStateDirectory() -> PeerTrustError {
        guard refusedAccess else { return self }
        var error = self
        error.message += "; " + Storage.otherStateDirectory
        error.refusedAccess = false
        return error
    }
}
