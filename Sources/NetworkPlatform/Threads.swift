#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// A mutex with a condition variable (what `NSCondition` was), for threads of our own that wait
/// in the kernel or for each other: stdout's writer, stdin's reader. Everything else locks with
/// NearbyBasics' `Locked`.
package final class ThreadCondition: @unchecked Sendable {
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>
    private let condition: UnsafeMutablePointer<pthread_cond_t>

    package init() {
        mutex = .allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        pthread_mutex_init(mutex, nil)
        condition = .allocate(capacity: 1)
        condition.initialize(to: pthread_cond_t())
        pthread_cond_init(condition, nil)
    }

    deinit {
        pthread_cond_destroy(condition)
        condition.deallocate()
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    package func lock() { pthread_mutex_lock(mutex) }
    package func unlock() { pthread_mutex_unlock(mutex) }
    /// Waits for a signal, the mutex released meanwhile (held again on return).
    package func wait() { pthread_cond_wait(condition, mutex) }
    /// Waits for a signal for at most `seconds`; false when the time ran out.
    package func wait(seconds: Double) -> Bool {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        let nanoseconds = Int(now.tv_nsec) + Int((seconds - seconds.rounded(.down)) * 1e9)
        var deadline = timespec()
        deadline.tv_sec = now.tv_sec + time_t(seconds.rounded(.down)) + time_t(nanoseconds / 1_000_000_000)
        deadline.tv_nsec = .init(nanoseconds % 1_000_000_000)
        return pthread_cond_timedwait(condition, mutex, &deadline) == 0
    }
    package func signal() { pthread_cond_signal(condition) }
    package func broadcast() { pthread_cond_broadcast(condition) }
}

/// Why a thread did not start: `pthread_create`'s error (EAGAIN: the process or the system is
/// out of threads).
package struct ThreadStartError: Error, Sendable, CustomStringConvertible {
    package let name: String
    package let code: Int32
    package var description: String { "cannot start the thread \(name): \(String(cString: strerror(code))) (error \(code))" }
}

/// Runs `body` on a new detached thread named `name` (at most 15 bytes on Linux), for a loop
/// that blocks in the kernel (poll, read, write) so that it never holds a thread of Swift's
/// cooperative pool or of an event loop. The project's one thread starter.
package func startThread(name: String, _ body: @escaping @Sendable () -> Void) throws(ThreadStartError) {
    let box = Unmanaged.passRetained(ThreadStart(name: name, body: body))
    var attributes = pthread_attr_t()
    pthread_attr_init(&attributes)
    pthread_attr_setdetachstate(&attributes, Int32(PTHREAD_CREATE_DETACHED))
    defer { pthread_attr_destroy(&attributes) }
    #if canImport(Darwin)
        var thread: pthread_t?
        let result = pthread_create(&thread, &attributes, { ThreadStart.run($0) }, box.toOpaque())
    #else
        var thread = pthread_t()
        let result = pthread_create(&thread, &attributes, { ThreadStart.run($0!) }, box.toOpaque())
    #endif
    guard result == 0 else {
        box.release()
        throw ThreadStartError(name: name, code: result)
    }
}

private final class ThreadStart: @unchecked Sendable {
    let name: String
    let body: @Sendable () -> Void

    init(name: String, body: @escaping @Sendable () -> Void) {
        self.name = name
        self.body = body
    }

    static func run(_ argument: UnsafeMutableRawPointer) -> UnsafeMutableRawPointer? {
        let start = Unmanaged<ThreadStart>.fromOpaque(argument).takeRetainedValue()
        #if canImport(Darwin)
            _ = pthread_setname_np(start.name)
        #else
            // pthread_setname_np is a GNU extension the Glibc module leaves out; this is what it does.
            let comm = open("/proc/thread-self/comm", O_WRONLY | O_CLOEXEC)
            if comm >= 0 {
                _ = start.name.withCString { write(comm, $0, strlen($0)) }
                close(comm)
            }
        #endif
        start.body()
        return nil
    }
}
