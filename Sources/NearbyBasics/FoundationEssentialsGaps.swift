#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

// What the programs used from full Foundation and FoundationEssentials does not have, done
// with the standard library and the C library: linking full Foundation (ICU with it) costs a
// program several MiB of memory and milliseconds of start-up. Each gives what Foundation gave.

extension StringProtocol {
    /// The text without leading and trailing blanks: what Foundation's
    /// `trimmingCharacters(in: .whitespaces)` (or `.whitespacesAndNewlines` when `newlines`)
    /// gives, scalar by scalar, with the same set (U+200B included).
    package func trimmingBlanks(newlines: Bool = false) -> String {
        let scalars = unicodeScalars
        func blank(_ scalar: Unicode.Scalar) -> Bool {
            switch scalar.value {
            case 0x09, 0x20, 0xA0, 0x1680, 0x2000...0x200B, 0x202F, 0x205F, 0x3000: true
            case 0x0A...0x0D, 0x85, 0x2028, 0x2029: newlines
            default: false
            }
        }
        guard let first = scalars.firstIndex(where: { !blank($0) }) else { return "" }
        let last = scalars.lastIndex(where: { !blank($0) })!
        var kept = String.UnicodeScalarView()
        kept.append(contentsOf: scalars[first...last])
        return String(kept)
    }
}

/// What Foundation's `localizedDescription` said for `error` (on Linux, in English): "The
/// operation could not be completed." and the reason known for its Cocoa code (the JSON
/// coders' errors), else its domain and code. (FoundationEssentials' `CocoaError` does not
/// tell its domain and code this way: pass them to ``foundationDescription(domain:code:)``.)
package func foundationDescription(of error: any Error) -> String {
    foundationDescription(domain: error._domain, code: error._code)
}

/// What Foundation's `localizedDescription` said for an error of `domain` and `code` with no
/// description of its own.
package func foundationDescription(domain: String, code: Int) -> String {
    if domain == "NSCocoaErrorDomain", let reason = cocoaReasons[code] {
        return "The operation could not be completed. \(reason)"
    }
    return "The operation could not be completed. (\(domain) error \(code).)"
}

/// swift-corelibs-foundation's reasons for the Cocoa error codes.
private let cocoaReasons: [Int: String] = [
    4: "The file doesn’t exist.",
    255: "The file couldn’t be locked.",
    257: "You don’t have permission.",
    258: "The file name is invalid.",
    259: "The file isn’t in the correct format.",
    260: "The file doesn’t exist.",
    261: "The specified text encoding isn’t applicable.",
    262: "The specified URL type isn’t supported.",
    263: "The item is too large.",
    264: "The text encoding of the contents couldn’t be determined.",
    513: "You don’t have permission.",
    514: "The file name is invalid.",
    516: "A file with the same name already exists.",
    517: "The specified text encoding isn’t applicable.",
    518: "The specified URL type isn’t supported.",
    640: "There isn’t enough space.",
    642: "The volume is read only.",
    1024: "The value is invalid.",
    2048: "The value is invalid.",
    3072: "The operation was cancelled.",
    3328: "The requested operation is not supported.",
    3840: "The data is not in the correct format.",
    3841: "The data is in a format that this application doesn’t understand.",
    3842: "An error occurred in the source of the data.",
    3851: "An error occurred in the destination for the data.",
    3852: "An error occurred in the content of the data.",
    4353: "The file is not available on iCloud yet.",
    4354: "There isn’t enough space in your account.",
    4355: "The iCloud servers might be unreachable or your settings might be incorrect.",
    4864: "The data isn’t in the correct format.",
    4865: "The data is missing.",
    4866: "The data isn’t in the correct format.",
]

/// A mutex (what `NSLock` was here).
package final class ThreadLock: @unchecked Sendable {
    fileprivate let mutex: UnsafeMutablePointer<pthread_mutex_t>

    package init() {
        mutex = .allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        pthread_mutex_init(mutex, nil)
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    package func lock() { pthread_mutex_lock(mutex) }
    package func unlock() { pthread_mutex_unlock(mutex) }

    package func withLock<Result>(_ body: () throws -> Result) rethrows -> Result {
        lock()
        defer { unlock() }
        return try body()
    }
}

/// A mutex with a condition variable (what `NSCondition` was here).
package final class ThreadCondition: @unchecked Sendable {
    private let mutex = ThreadLock()
    private let condition: UnsafeMutablePointer<pthread_cond_t>

    package init() {
        condition = .allocate(capacity: 1)
        condition.initialize(to: pthread_cond_t())
        pthread_cond_init(condition, nil)
    }

    deinit {
        pthread_cond_destroy(condition)
        condition.deallocate()
    }

    package func lock() { mutex.lock() }
    package func unlock() { mutex.unlock() }
    /// Waits for a signal, the mutex released meanwhile (held again on return).
    package func wait() { pthread_cond_wait(condition, mutex.mutex) }
    /// Waits for a signal for at most `seconds`; false when the time ran out.
    package func wait(seconds: Double) -> Bool {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        let nanoseconds = Int(now.tv_nsec) + Int((seconds - seconds.rounded(.down)) * 1e9)
        var deadline = timespec()
        deadline.tv_sec = now.tv_sec + time_t(seconds.rounded(.down)) + time_t(nanoseconds / 1_000_000_000)
        deadline.tv_nsec = .init(nanoseconds % 1_000_000_000)
        return pthread_cond_timedwait(condition, mutex.mutex, &deadline) == 0
    }
    package func signal() { pthread_cond_signal(condition) }
    package func broadcast() { pthread_cond_broadcast(condition) }
}

/// Runs `body` on a new detached thread named `name` (at most 15 bytes on Linux): what
/// `Thread { … }` with `name` and `start()` did.
package func startThread(name: String, _ body: @escaping @Sendable () -> Void) {
    let box = Unmanaged.passRetained(ThreadStart(name: name, body: body)).toOpaque()
    var attributes = pthread_attr_t()
    pthread_attr_init(&attributes)
    pthread_attr_setdetachstate(&attributes, Int32(PTHREAD_CREATE_DETACHED))
    defer { pthread_attr_destroy(&attributes) }
    #if canImport(Darwin)
        var thread: pthread_t?
        let result = pthread_create(&thread, &attributes, { ThreadStart.run($0) }, box)
    #else
        var thread = pthread_t()
        let result = pthread_create(&thread, &attributes, { ThreadStart.run($0!) }, box)
    #endif
    precondition(result == 0, "cannot start the thread \(name): error \(result)")
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

/// What Foundation's `duration.formatted(.units(allowed: [.milliseconds]))` wrote (en_US):
/// whole milliseconds, half to even, thousands grouped with commas, e.g. "175 ms", "1,234 ms".
package func millisecondsText(_ duration: Duration) -> String {
    let (seconds, attoseconds) = duration.components
    let perMillisecond: Int64 = 1_000_000_000_000_000
    // Both components carry the duration's sign; count in milliseconds and what is left.
    var milliseconds = seconds.multipliedReportingOverflow(by: 1000).partialValue + attoseconds / perMillisecond
    let rest = attoseconds % perMillisecond
    let half = perMillisecond / 2
    if rest.magnitude > half.magnitude || (rest.magnitude == half.magnitude && milliseconds % 2 != 0) {
        milliseconds += rest < 0 ? -1 : 1
    }
    let digits = String(milliseconds.magnitude)
    var grouped = ""
    for (index, digit) in digits.enumerated() {
        if index > 0 && (digits.count - index) % 3 == 0 { grouped.append(",") }
        grouped.append(digit)
    }
    return (milliseconds < 0 ? "-" : "") + grouped + " ms"
}

extension String {
    /// What Foundation's `padding(toLength: length, withPad: " ", startingAt: 0)` gave: the text
    /// cut or filled with spaces to `length` UTF-16 units (a character cut in half becomes U+FFFD).
    package func padded(toUTF16Length length: Int) -> String {
        let units = utf16
        if length > units.count { return self + String(repeating: " ", count: length - units.count) }
        return length == units.count ? self : String(decoding: units.prefix(length), as: UTF16.self)
    }
}

/// `value` with `digits` digits after the point, as C's `%.Nf` (and Foundation's
/// `String(format: "%.1f", value)`) writes it: correctly rounded, "inf", "nan".
package func fixedPoint(_ value: Double, digits: Int) -> String {
    let format = "%.\(digits)f"
    var buffer = [CChar](repeating: 0, count: 64)
    let needed = withVaList([value]) { vsnprintf(&buffer, buffer.count, format, $0) }
    if needed >= buffer.count {
        buffer = [CChar](repeating: 0, count: Int(needed) + 1)
        _ = withVaList([value]) { vsnprintf(&buffer, buffer.count, format, $0) }
    }
    return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
}
