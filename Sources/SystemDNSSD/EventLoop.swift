#if canImport(dnssd)
import dnssd
#else
import CDNSSD
#endif
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import NearbyBasics
import NetworkPlatform

/// The one thread that owns every `DNSServiceRef` of the process.
///
/// dns_sd hands each operation's results over a file descriptor; `DNSServiceProcessResult`
/// reads them and runs the callbacks. Here one dedicated thread polls all those descriptors
/// (plus a wake-up pipe) and calls `DNSServiceProcessResult` only for descriptors that are
/// readable, so nothing ever blocks Swift's cooperative pool. Every dns_sd call, and
/// `DNSServiceRefDeallocate` in particular, runs on this thread: callbacks run only inside
/// `DNSServiceProcessResult` on the same thread, so once a ref is deallocated no callback for it
/// can follow, and its context object is released only after that.
final class DNSSDEventLoop: @unchecked Sendable {
    static let shared = DNSSDEventLoop()

    /// A live operation: the ref, its descriptor and the object its callbacks reach.
    struct Entry {
        let ref: DNSServiceRef
        let fd: Int32
        let context: any DNSSDCallbackContext
    }

    private let lock = Locked()
    /// Work for the loop thread. Guarded by `lock`.
    private var jobs: [() -> Void] = []
    private var nextID: UInt64 = 1
    /// Live operations. Touched only on the loop thread.
    private var entries: [UInt64: Entry] = [:]
    private let wakeRead: Int32
    private let wakeWrite: Int32

    private init() {
        var fds: [Int32] = [-1, -1]
        if pipe(&fds) != 0 { fds = [-1, -1] }
        wakeRead = fds[0]
        wakeWrite = fds[1]
        if wakeRead >= 0 {
            _ = fcntl(wakeRead, F_SETFL, fcntl(wakeRead, F_GETFL) | O_NONBLOCK)
            _ = fcntl(wakeWrite, F_SETFL, fcntl(wakeWrite, F_GETFL) | O_NONBLOCK)
        }
        // Avahi's library prints a warning for every program that links it unless told not to.
        setenv("AVAHI_COMPAT_NOWARN", "1", 1)
        Self.startLoopThread(running: self)
    }

    /// Starts the loop on a detached thread of its own (the loop never returns; `shared` is
    /// never released). Without that thread nothing of dns_sd can work: a process that cannot
    /// start one more thread stops here, saying so.
    private static func startLoopThread(running loop: DNSSDEventLoop) {
        do {
            try startThread(name: "nearby.dnssd") { loop.loop() }
        } catch {
            preconditionFailure("\(error)")
        }
    }

    func makeID() -> UInt64 {
        lock.withLock {
            defer { nextID += 1 }
            return nextID
        }
    }

    /// Runs `job` on the loop thread.
    func enqueue(_ job: @escaping @Sendable () -> Void) {
        lock.withLock { jobs.append(job) }
        var byte: UInt8 = 1
        _ = write(wakeWrite, &byte, 1)
    }

    /// Runs `job` on the loop thread and returns its result.
    func perform<T: Sendable>(_ job: @escaping @Sendable () -> T) async -> T {
        await withCheckedContinuation { continuation in
            enqueue { continuation.resume(returning: job()) }
        }
    }

    /// Starts watching a ref made on the loop thread. Loop thread only.
    func adopt(_ ref: DNSServiceRef, id: UInt64, context: any DNSSDCallbackContext) {
        entries[id] = Entry(ref: ref, fd: DNSServiceRefSockFD(ref), context: context)
    }

    /// The ref of a live operation. Loop thread only.
    func ref(for id: UInt64) -> DNSServiceRef? { entries[id]?.ref }

    /// Deallocates an operation's ref and ends its events. Safe to call more than once.
    func remove(_ id: UInt64) {
        enqueue { [self] in removeNow(id) }
    }

    /// Loop thread only.
    func removeNow(_ id: UInt64) {
        guard let entry = entries.removeValue(forKey: id) else { return }
        DNSServiceRefDeallocate(entry.ref)
        entry.context.finish()
    }

    /// kDNSServiceErr_Unknown: how avahi's compat library says that avahi-daemon is gone.
    private let daemonGone: Int32 = -65537

    /// Refs of a daemon that went away: never dispatched or deallocated again (see the loop).
    private var abandoned: [DNSServiceRef] = []

    /// Stops watching an operation whose daemon is gone and ends its events, keeping its ref.
    private func abandon(_ id: UInt64) {
        guard let entry = entries.removeValue(forKey: id) else { return }
        abandoned.append(entry.ref)
        entry.context.finish()
    }

    /// Whether the daemon is known to be gone (avahi: its bus name has no owner). Apple's
    /// mDNSResponder has no such failure mode to guard against: never there.
    private static func daemonIsGone() -> Bool {
        #if canImport(dnssd)
            false
        #else
            nearby_dnssd_daemon_present() == 0
        #endif
    }

    fileprivate func loop() {
        var buffer = [UInt8](repeating: 0, count: 64)
        while true {
            let live = Array(entries)
            var fds = [pollfd(fd: wakeRead, events: Int16(POLLIN), revents: 0)]
            fds += live.map { pollfd(fd: $0.value.fd, events: Int16(POLLIN), revents: 0) }
            let count = poll(&fds, nfds_t(fds.count), -1)
            if count < 0 {
                if errno == EINTR { continue }
                usleep(10_000)  // should not happen; do not spin
                continue
            }
            if fds[0].revents != 0 {
                while read(wakeRead, &buffer, buffer.count) > 0 {}
            }
            let pending = lock.withLock {
                defer { jobs = [] }
                return jobs
            }
            for job in pending { job() }
            let readable = live.indices.contains { fds[$0 + 1].revents != 0 }
            if readable, Self.daemonIsGone() {
                // avahi-daemon is gone: its refs are not dispatched again (avahi's compat library
                // can call into freed memory while it dispatches that news), and not
                // deallocated either (freeing them is where that memory is freed). They end here,
                // as avahi would end them; each keeps a few KiB until the process exits.
                let gone = DNSSDError(code: daemonGone, operation: "DNSServiceProcessResult")
                for id in Array(entries.keys) {
                    entries[id]?.context.fail(gone)
                    abandon(id)
                }
                continue
            }
            for (index, (id, entry)) in live.enumerated() where fds[index + 1].revents != 0 {
                // A job above may have removed it already.
                guard entries[id] != nil else { continue }
                let result = DNSServiceProcessResult(entry.ref)
                if result != 0 {
                    entry.context.fail(DNSSDError(code: result, operation: "DNSServiceProcessResult"))
                }
                if entry.context.hasFailed { removeNow(id) }
            }
        }
    }
}

/// What the loop needs from an operation's callback context.
protocol DNSSDCallbackContext: AnyObject, Sendable {
    /// Reports a failure; the operation ends after the current callback.
    func fail(_ error: DNSSDError)
    var hasFailed: Bool { get }
    /// Ends the event stream (the ref has been deallocated).
    func finish()
}

/// The object a ref's callbacks reach through their context pointer: it turns C results into
/// events on an ``EventStream``. Used only on the loop thread, apart from `continuation`, which is
/// thread-safe.
final class CallbackContext<Event: Sendable>: DNSSDCallbackContext, @unchecked Sendable {
    let continuation: EventStream<Event>.Source
    private let failure: @Sendable (DNSSDError) -> Event
    private(set) var hasFailed = false

    init(continuation: EventStream<Event>.Source, failure: @escaping @Sendable (DNSSDError) -> Event) {
        self.continuation = continuation
        self.failure = failure
    }

    func yield(_ event: Event) { _ = continuation.yield(event) }

    func fail(_ error: DNSSDError) {
        guard !hasFailed else { return }
        hasFailed = true
        _ = continuation.yield(failure(error))
    }

    func finish() { continuation.finish() }

    var pointer: UnsafeMutableRawPointer { Unmanaged.passUnretained(self).toOpaque() }

    static func from(_ pointer: UnsafeMutableRawPointer?) -> CallbackContext<Event>? {
        guard let pointer else { return nil }
        return Unmanaged<CallbackContext<Event>>.fromOpaque(pointer).takeUnretainedValue()
    }
}
