#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
import NearbyBasics
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// A peer a person said yes to.
public struct Pin: Hashable, Sendable, Codable {
    public var peerID: PeerID
    /// What the person called it, if anything.
    public var name: String?
    public var pinnedAt: Date

    public init(peerID: PeerID, name: String? = nil, pinnedAt: Date = Date()) {
        self.peerID = peerID
        self.name = name
        self.pinnedAt = pinnedAt
    }
}

/// Anchors and pins on disk, in `trust/` of the state directory: `anchors/` holds one PEM file
/// per anchor certificate (named by its peer ID), `pins.json` the pins. Every change is made
/// under a lock and written atomically, so concurrent `nearby trust …` runs lose nothing.
public struct TrustStore: Sendable, Hashable {
    public let directory: URL

    public init(directory: URL = IdentityStore.defaultDirectory.appendingPathComponent("trust")) {
        self.directory = directory
    }

    var anchorDirectory: URL { directory.appendingPathComponent("anchors") }
    var pinFile: URL { directory.appendingPathComponent("pins.json") }

    /// The anchor certificates.
    /// - Throws: ``PeerTrustError`` (`damaged`) naming a file that cannot be read.
    public func anchors() throws(PeerTrustError) -> [Certificate] {
        try Self.readEach(in: anchorDirectory, what: "anchor") { url throws(PeerTrustError) in try Certificate.chain(contentsOf: url) }
    }

    /// What every `.pem` file of a store directory holds, in file-name order; nothing when the
    /// directory does not exist. A file that cannot be read is named, as `what`.
    static func readEach<Item>(
        in directory: URL, what: String, _ read: (URL) throws(PeerTrustError) -> [Item]
    ) throws(PeerTrustError) -> [Item] {
        let names: [String]
        do {
            names = try FileManager.default.contentsOfDirectory(atPath: directory.path).filter { $0.hasSuffix(".pem") }.sorted()
        } catch {
            return []
        }
        var items: [Item] = []
        for name in names {
            let url = directory.appendingPathComponent(name)
            do {
                items += try read(url)
            } catch {
                throw PeerTrustError(.damaged, "the trust store's \(what) \(url.path) is damaged (\(error.message)); remove it")
            }
        }
        return items
    }

    /// Adds anchor certificates; returns those that were new.
    @discardableResult
    public func addAnchors(_ certificates: [Certificate]) throws(PeerTrustError) -> [Certificate] {
        do { return try addingAnchors(certificates) } catch { throw error.inStateDirectory() }
    }

    private func addingAnchors(_ certificates: [Certificate]) throws(PeerTrustError) -> [Certificate] {
        try Storage.withLock(in: directory) { () throws(PeerTrustError) -> [Certificate] in
            try Storage.makeDirectory(anchorDirectory)
            var added: [Certificate] = []
            for certificate in certificates {
                let url = anchorDirectory.appendingPathComponent(Self.fileName(for: certificate))
                if FileManager.default.fileExists(atPath: url.path) { continue }
                try Storage.writeFile(Array(certificate.pem.utf8), to: url, mode: 0o644, exclusive: false)
                added.append(certificate)
            }
            return added
        }
    }

    /// The pins, oldest first. The file is read again only when it changed (another inode, size
    /// or modification time): a server judging every connection against the pins stays cheap,
    /// and pins made meanwhile by another process still count.
    public func pins() throws(PeerTrustError) -> [Pin] {
        var status = stat()
        guard stat(pinFile.path, &status) == 0 else {
            if errno == ENOENT { return [] }
            return try readPins()  // Let the read say what is wrong.
        }
        let version = PinFileVersion(status, size: Int64(status.st_size))
        if let known = pinCache.value(at: pinFile.path, version: version) { return known }
        let pins = try readPins()
        pinCache.remember(pins, at: pinFile.path, version: version)
        return pins
    }

    private func readPins() throws(PeerTrustError) -> [Pin] {
        let read: [UInt8]?
        do { read = try Storage.readFile(pinFile) } catch { throw error.inStateDirectory() }
        guard let bytes = read else { return [] }
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .iso8601
        do {
            return try decoder.decode([Pin].self, from: Data(bytes))
        } catch {
            throw PeerTrustError(.damaged, "the pin list \(pinFile.path) is damaged (\(foundationDescription(of: error))); fix or remove it")
        }
    }

    /// Pins a peer. Pinned again, its time is updated, and its name too when one is given (nil
    /// keeps the name it had).
    public func pin(_ peerID: PeerID, name: String? = nil, at time: Date = Date()) throws(PeerTrustError) {
        do { try pinning(peerID, name: name, at: time) } catch { throw error.inStateDirectory() }
    }

    private func pinning(_ peerID: PeerID, name: String?, at time: Date) throws(PeerTrustError) {
        try Storage.withLock(in: directory) { () throws(PeerTrustError) in
            let all = try self.pins()
            // Pinned again without a name: the name it had stays.
            let kept = name ?? all.first { $0.peerID == peerID }?.name
            var pins = all.filter { $0.peerID != peerID }
            pins.append(Pin(peerID: peerID, name: kept, pinnedAt: time))
            try writePins(pins)
        }
    }

    /// Removes a pin or an anchor with this peer ID; returns what was removed ("pin", "anchor").
    @discardableResult
    public func remove(_ peerID: PeerID) throws(PeerTrustError) -> [String] {
        do { return try removing(peerID) } catch { throw error.inStateDirectory() }
    }

    private func removing(_ peerID: PeerID) throws(PeerTrustError) -> [String] {
        try Storage.withLock(in: directory) { () throws(PeerTrustError) -> [String] in
            var removed: [String] = []
            let pins = try self.pins()
            if pins.contains(where: { $0.peerID == peerID }) {
                try writePins(pins.filter { $0.peerID != peerID })
                removed.append("pin")
            }
            for anchor in try anchors() where anchor.peerID == peerID {
                let url = anchorDirectory.appendingPathComponent(Self.fileName(for: anchor))
                if unlink(url.path) == 0 { removed.append("anchor") }
            }
            return removed
        }
    }

    /// The store's policy: its anchors or its pins (whichever it has).
    public func policy() throws(PeerTrustError) -> TrustPolicy {
        let anchors = try anchors()
        let pins = Set(try pins().map(\.peerID))
        return .anyOf((anchors.isEmpty ? [] : [.anchors(anchors)]) + (pins.isEmpty ? [] : [.pinned(pins)]))
    }

    private func writePins(_ pins: [Pin]) throws(PeerTrustError) {
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .iso8601
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        let data: Data
        do {
            data = try encoder.encode(pins)
        } catch {
            throw PeerTrustError(.storage, "cannot encode the pins: \(foundationDescription(of: error))")
        }
        try Storage.writeFile([UInt8](data), to: pinFile, mode: 0o600, exclusive: false)
    }

    static func fileName(for certificate: Certificate) -> String {
        // The same key can be certified twice (renewed CA): name by key and certificate.
        let digest = OpenSSL.sha256(certificate.der).prefix(4).map { String($0, radix: 16).leftPadded(to: 2) }.joined()
        return "\(certificate.peerID.description.prefix(13))-\(digest).pem"
    }
}

extension TrustPolicy {
    /// The peers pinned in a trust store, read again at each evaluation
    /// (``pinnedInStore(_:)``): a pin made while a listener or broker runs applies at once.
    /// - Throws: ``PeerTrustError`` (`damaged`) when the pins cannot be read now.
    public static func pinned(_ store: TrustStore) throws(PeerTrustError) -> TrustPolicy {
        _ = try store.pins()
        return .pinnedInStore(store)
    }
}

/// Which version of a pin file was read: a rewrite changes at least one of these.
struct PinFileVersion: Hashable {
    var device: UInt64
    var inode: UInt64
    var size: Int64
    var modified: Int64

    /// The version `stat` found, with `size` standing for what changes with the contents (a
    /// file's size, a directory's link count).
    init(_ status: stat, size: Int64) {
        #if canImport(Darwin)
            let modified = status.st_mtimespec
        #else
            let modified = status.st_mtim
        #endif
        device = UInt64(status.st_dev)
        inode = UInt64(status.st_ino)
        self.size = size
        self.modified = Int64(modified.tv_sec) * 1_000_000_000 + Int64(modified.tv_nsec)
    }
}

/// What was read so far from files (pins) or directories (CRLs), per path, with the version
/// each was read from: read again only when the version changed.
final class VersionedCache<Value: Sendable>: @unchecked Sendable {  // `entries` is touched only under `lock`.
    private let lock = Locked()
    private var entries: [String: (version: PinFileVersion, value: Value)] = [:]

    func value(at path: String, version: PinFileVersion) -> Value? {
        lock.withLock { entries[path].flatMap { $0.version == version ? $0.value : nil } }
    }

    func remember(_ value: Value, at path: String, version: PinFileVersion) {
        lock.withLock {
            if entries.count >= 64 { entries.removeAll() }
            entries[path] = (version, value)
        }
    }
}

/// The pin lists read so far (`TrustStore.pins()`).
let pinCache = VersionedCache<[Pin]>()
/// The CRL directories read so far (`TrustStore.revocationLists()`).
let revocationCache = VersionedCache<[RevocationList]>()
