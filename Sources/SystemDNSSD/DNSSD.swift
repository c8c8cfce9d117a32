#if canImport(dnssd)
import dnssd
#else
import CDNSSD
#endif
public import NearbyBasics

/// A running dns_sd operation: its events, and `cancel()` (also done when it is released),
/// which deallocates the `DNSServiceRef`. After a `failed` event the operation is over.
public final class DNSSDOperation<Event: Sendable>: Sendable {
    /// What the daemon reports, in order. The daemon's callbacks cannot wait, so a reader that
    /// falls behind gets the newest event of each thing (an instance of a browse, a record of a
    /// query, an interface of a resolve), never a dropped removal; a registration's events are
    /// rare by construction and kept up to 16 waiting. Memory is bounded by the things the
    /// daemon reports, which it bounds itself (avahi's cache holds at most 4096 entries).
    public let events: EventStream<Event>
    let id: UInt64

    init(id: UInt64, events: EventStream<Event>) {
        self.id = id
        self.events = events
    }

    /// Stops the operation; for a registration, the daemon withdraws it with goodbyes.
    public func cancel() { DNSSDEventLoop.shared.remove(id) }

    /// Stops the operation and returns once the ref is deallocated (for a registration: once
    /// the daemon has been told to withdraw it).
    public func cancelAndWait() async {
        let id = id
        await DNSSDEventLoop.shared.perform { DNSSDEventLoop.shared.removeNow(id) }
    }

    deinit { DNSSDEventLoop.shared.remove(id) }
}

/// What a registration reports.
public enum DNSSDRegisterEvent: Sendable, Hashable {
    /// The service is published under `name` (the daemon renames on a conflict, and reports
    /// the new name the same way).
    case registered(name: String, type: String, domain: String)
    case failed(DNSSDError)
}

/// A service instance seen by a browse.
public struct DNSSDInstance: Sendable, Hashable {
    /// The instance name, unescaped, e.g. `Build Box`.
    public var name: String
    /// e.g. `_openagents._tcp.`
    public var type: String
    /// e.g. `local.`
    public var domain: String
    public var interfaceIndex: UInt32
}

/// What a browse or a record query reports: an item came or went, or the operation failed.
public enum DNSSDChange<Item: Sendable & Hashable>: Sendable, Hashable {
    /// `moreComing`: more events are queued right behind this one.
    case added(Item, moreComing: Bool)
    case removed(Item, moreComing: Bool)
    case failed(DNSSDError)
}

extension DNSSDChange {
    /// The change that a dns_sd callback's flags (kDNSServiceFlagsAdd, MoreComing) report for `item`.
    fileprivate init(_ item: Item, flags: UInt32) {
        let more = flags & DNSSD.flagsMoreComing != 0
        self = flags & DNSSD.flagsAdd != 0 ? .added(item, moreComing: more) : .removed(item, moreComing: more)
    }
}

/// What a change is about, for a reader that falls behind: its item (added or removed: the
/// newer replaces the older), or the operation's failure.
public enum DNSSDChangeKey<Identity: Hashable & Sendable>: Hashable, Sendable {
    case item(Identity)
    case failure
}

extension DNSSDChange {
    /// The newest change of each item waits, keyed by `identity`: an add and a removal the
    /// reader has not read cancel out (it never saw the item), a removal and an add make an add.
    static func buffer<Identity: Hashable & Sendable>(
        _ identity: @escaping @Sendable (Item) -> Identity
    ) -> LatestPerKeyBuffer<DNSSDChange, DNSSDChangeKey<Identity>> {
        LatestPerKeyBuffer(
            key: { change in
                switch change {
                case .added(let item, _), .removed(let item, _): .item(identity(item))
                case .failed: .failure
                }
            },
            merge: { waiting, newer in
                if case .added = waiting, case .removed = newer { return nil }
                return newer
            })
    }
}

/// What a browse reports.
public typealias DNSSDBrowseEvent = DNSSDChange<DNSSDInstance>

/// Where a service runs, as a resolve reports it.
public struct DNSSDResolution: Sendable, Hashable {
    /// The escaped full name, e.g. `Build\032Box._openagents._tcp.local.`
    public var fullName: String
    /// The target host, e.g. `buildbox.local.`
    public var host: String
    public var port: UInt16
    /// The TXT record's RDATA.
    public var txt: [UInt8]
    public var interfaceIndex: UInt32
}

public enum DNSSDResolveEvent: Sendable, Hashable {
    case resolved(DNSSDResolution)
    case failed(DNSSDError)

    /// The newest resolution on each interface waits (nil: the failure).
    static var buffer: LatestPerKeyBuffer<DNSSDResolveEvent, UInt32?> {
        LatestPerKeyBuffer(key: { event in
            if case .resolved(let resolution) = event { return resolution.interfaceIndex }
            return nil
        })
    }
}

/// One resource record as a record query reports it (RDATA in uncompressed wire form).
public struct DNSSDRecord: Sendable, Hashable {
    public var name: String
    public var type: UInt16
    public var rdata: [UInt8]
    public var ttl: UInt32
    public var interfaceIndex: UInt32
}

extension DNSSDRecord {
    /// The record apart from its TTL: a record seen again with a new TTL is the same record.
    struct Identity: Hashable, Sendable {
        var name: String
        var type: UInt16
        var rdata: [UInt8]
        var interfaceIndex: UInt32
    }

    var identity: Identity { Identity(name: name.lowercased(), type: type, rdata: rdata, interfaceIndex: interfaceIndex) }
}

/// What a record query reports.
public typealias DNSSDQueryEvent = DNSSDChange<DNSSDRecord>

/// The system's DNS-SD service through the dns_sd C API: Avahi's compatibility library on
/// Linux (talking to avahi-daemon over D-Bus), mDNSResponder on Apple platforms (not tested
/// here). No C type leaves this module; all calls run on one dedicated thread.
public enum DNSSD {
    /// Record types, for ``queryRecord(name:type:interfaceIndex:)``.
    public static let typeA: UInt16 = 1
    public static let typePTR: UInt16 = 12
    public static let typeTXT: UInt16 = 16
    public static let typeAAAA: UInt16 = 28

    fileprivate static let flagsMoreComing: UInt32 = 0x1
    fileprivate static let flagsAdd: UInt32 = 0x2

    /// Opens the dns_sd library (on Linux, Avahi's `libdns_sd.so.1`) if it is not open yet.
    /// Nothing links it, so that programs run without it; this is the first thing every
    /// operation does.
    /// - Throws: a ``DNSSDError`` with ``DNSSDError/libraryMissing`` set, saying what to install.
    public static func loadLibrary() throws(DNSSDError) {
        if let failure = libraryFailure { throw failure }
    }

    /// Why the library did not load, found once (nil: it is loaded).
    private static let libraryFailure: DNSSDError? = {
        #if canImport(dnssd)
        return nil
        #else
        var reason = [CChar](repeating: 0, count: 512)
        let status = reason.withUnsafeMutableBufferPointer { nearby_dnssd_load($0.baseAddress, $0.count) }
        guard status != 0 else { return nil }
        let detail = String(decoding: reason.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        return DNSSDError(code: DNSSDError.libraryNotLoaded, operation: "dlopen", detail: detail)
        #endif
    }()

    /// Checks that the daemon answers, without sending anything onto the network: a record
    /// query for an invalid name connects to the daemon, which refuses the name (`BadParam`).
    /// Throws the connection's failure when no daemon is there, or the library's when dns_sd
    /// itself is missing.
    public static func checkDaemon() async throws(DNSSDError) {
        #if !canImport(dnssd)
        // No system bus, no avahi-daemon to reach: said without loading avahi's library (and
        // D-Bus's and systemd's with it, about 8 ms of a command's start).
        if nearby_dnssd_bus_absent() == 1 {
            throw DNSSDError(code: DNSSDError.unknown, operation: "DNSServiceQueryRecord", detail: "no D-Bus system bus")
        }
        #endif
        try loadLibrary()
        let result: Int32 = await DNSSDEventLoop.shared.perform {
            var ref: DNSServiceRef?
            let error = DNSServiceQueryRecord(&ref, 0, 0, "..", typeA, 1, { _, _, _, _, _, _, _, _, _, _, _ in }, nil)
            if let ref { DNSServiceRefDeallocate(ref) }
            return error
        }
        if result == 0 || result == DNSSDError.badParam { return }
        throw DNSSDError(code: result, operation: "DNSServiceQueryRecord")
    }

    /// Publishes a service.
    /// - Parameters:
    ///   - name: instance name (nil: the daemon's host name).
    ///   - type: `_app._tcp`, with subtypes appended after commas: `_app._tcp,_sub1,_sub2`.
    ///   - txt: the TXT record's RDATA (length-prefixed entries; empty means one empty entry).
    ///   - interfaceIndex: 0 for all interfaces.
    public static func register(
        name: String?, type: String, domain: String? = nil, port: UInt16, txt: [UInt8], interfaceIndex: UInt32 = 0
    ) async throws(DNSSDError) -> DNSSDOperation<DNSSDRegisterEvent> {
        let record = txt.isEmpty ? [0] : txt
        guard record.count <= Int(UInt16.max) else { throw DNSSDError(code: DNSSDError.badParam, operation: "DNSServiceRegister") }
        return try await start(operation: "DNSServiceRegister", failure: DNSSDRegisterEvent.failed, buffer: NewestBuffer(limit: 16)) { ref, context in
            record.withUnsafeBytes { bytes in
                DNSServiceRegister(
                    &ref, 0, interfaceIndex, name, type, domain, nil, port.bigEndian, UInt16(bytes.count), bytes.baseAddress,
                    { _, _, error, name, type, domain, pointer in
                        guard let context = CallbackContext<DNSSDRegisterEvent>.from(pointer) else { return }
                        guard error == 0 else {
                            return context.fail(DNSSDError(code: error, operation: "DNSServiceRegister"))
                        }
                        context.yield(.registered(name: string(name), type: string(type), domain: string(domain)))
                    }, context)
            }
        }
    }

    /// Replaces the TXT record of a registration (`DNSServiceUpdateRecord`).
    public static func updateTXT(_ registration: DNSSDOperation<DNSSDRegisterEvent>, txt: [UInt8]) async throws(DNSSDError) {
        let record = txt.isEmpty ? [0] : txt
        guard record.count <= Int(UInt16.max) else { throw DNSSDError(code: DNSSDError.badParam, operation: "DNSServiceUpdateRecord") }
        let id = registration.id
        let result: Int32 = await DNSSDEventLoop.shared.perform {
            guard let ref = DNSSDEventLoop.shared.ref(for: id) else { return -65541 }  // BadReference
            return record.withUnsafeBytes { bytes in
                DNSServiceUpdateRecord(ref, nil, 0, UInt16(bytes.count), bytes.baseAddress, 0)
            }
        }
        if result != 0 { throw DNSSDError(code: result, operation: "DNSServiceUpdateRecord") }
    }

    /// Browses for instances of a type (`_app._tcp`, or `_app._tcp,_sub` for a subtype).
    public static func browse(
        type: String, domain: String = "local.", interfaceIndex: UInt32 = 0
    ) async throws(DNSSDError) -> DNSSDOperation<DNSSDBrowseEvent> {
        try await start(operation: "DNSServiceBrowse", failure: DNSSDBrowseEvent.failed, buffer: DNSSDBrowseEvent.buffer(\.self)) { ref, context in
            DNSServiceBrowse(&ref, 0, interfaceIndex, type, domain, { _, flags, interface, error, name, type, domain, pointer in
                guard let context = CallbackContext<DNSSDBrowseEvent>.from(pointer) else { return }
                guard error == 0 else { return context.fail(DNSSDError(code: error, operation: "DNSServiceBrowse")) }
                let instance = DNSSDInstance(name: string(name), type: string(type), domain: string(domain), interfaceIndex: interface)
                context.yield(DNSSDChange(instance, flags: flags))
            }, context)
        }
    }

    /// Resolves an instance to its host, port, TXT and interface. Keeps reporting changes
    /// until cancelled.
    public static func resolve(
        name: String, type: String, domain: String = "local.", interfaceIndex: UInt32 = 0
    ) async throws(DNSSDError) -> DNSSDOperation<DNSSDResolveEvent> {
        try await start(operation: "DNSServiceResolve", failure: DNSSDResolveEvent.failed, buffer: DNSSDResolveEvent.buffer) { ref, context in
            DNSServiceResolve(&ref, 0, interfaceIndex, name, type, domain, { _, _, interface, error, fullName, host, port, length, txt, pointer in
                guard let context = CallbackContext<DNSSDResolveEvent>.from(pointer) else { return }
                guard error == 0 else { return context.fail(DNSSDError(code: error, operation: "DNSServiceResolve")) }
                let bytes = txt.map { Array(UnsafeBufferPointer(start: $0, count: Int(length))) } ?? []
                context.yield(.resolved(DNSSDResolution(
                    fullName: string(fullName), host: string(host), port: UInt16(bigEndian: port), txt: bytes, interfaceIndex: interface)))
            }, context)
        }
    }

    /// Watches the records of one name and type (class IN), e.g. a host's A records.
    /// - Parameter name: the full name with dns-sd escapes, e.g. `Build\032Box._app._tcp.local.`
    public static func queryRecord(
        name: String, type: UInt16, interfaceIndex: UInt32 = 0
    ) async throws(DNSSDError) -> DNSSDOperation<DNSSDQueryEvent> {
        try await start(operation: "DNSServiceQueryRecord", failure: DNSSDQueryEvent.failed, buffer: DNSSDQueryEvent.buffer(\.identity)) { ref, context in
            DNSServiceQueryRecord(&ref, 0, interfaceIndex, name, type, 1, { _, flags, interface, error, name, type, _, length, rdata, ttl, pointer in
                guard let context = CallbackContext<DNSSDQueryEvent>.from(pointer) else { return }
                guard error == 0 else { return context.fail(DNSSDError(code: error, operation: "DNSServiceQueryRecord")) }
                let bytes = rdata.map { Array(UnsafeRawBufferPointer(start: $0, count: Int(length))) } ?? []
                let record = DNSSDRecord(name: string(name), type: type, rdata: bytes, ttl: ttl, interfaceIndex: interface)
                context.yield(DNSSDChange(record, flags: flags))
            }, context)
        }
    }

    /// Makes a ref on the loop thread with `call` and hands it to the loop to watch; its
    /// events wait for the reader as `buffer` keeps them.
    private static func start<Event: Sendable>(
        operation: String, failure: @escaping @Sendable (DNSSDError) -> Event, buffer: some EventBuffer<Event>,
        _ call: @escaping @Sendable (inout DNSServiceRef?, UnsafeMutableRawPointer) -> Int32
    ) async throws(DNSSDError) -> DNSSDOperation<Event> {
        try loadLibrary()
        let loop = DNSSDEventLoop.shared
        let id = loop.makeID()
        let (events, continuation) = EventStream<Event>.makeStream(buffer: buffer)
        let context = CallbackContext(continuation: continuation, failure: failure)
        let result: Int32 = await loop.perform {
            var ref: DNSServiceRef?
            let error = call(&ref, context.pointer)
            guard error == 0, let ref else {
                if let ref { DNSServiceRefDeallocate(ref) }
                return error == 0 ? DNSSDError.unknown : error
            }
            loop.adopt(ref, id: id, context: context)
            return 0
        }
        guard result == 0 else {
            continuation.finish()
            throw DNSSDError(code: result, operation: operation)
        }
        continuation.onTermination { loop.remove(id) }
        return DNSSDOperation(id: id, events: events)
    }
}

/// A C string from dns_sd as Swift text ("" for NULL; invalid UTF-8 is repaired).
private func string(_ pointer: UnsafePointer<CChar>?) -> String {
    pointer.map { String(cString: $0) } ?? ""
}
