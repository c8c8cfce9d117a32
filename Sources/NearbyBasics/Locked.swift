import Synchronization

/// A value behind a mutex: the project's one lock, for every module (the codec included), with
/// the standard library's `Mutex` inside. A class, so that closures and several owners share one
/// (a `Mutex` cannot be copied). `Locked<Void>` is a plain lock (``withLock(_:)``). The one other
/// primitive is NetworkPlatform's `ThreadCondition`, for threads that wait.
package final class Locked<Value>: @unchecked Sendable {
    private let mutex: Mutex<Value>

    package init(_ value: consuming sending Value) {
        mutex = Mutex(value)
    }

    /// Runs `body` with the value, the mutex held (never across a suspension: `body` is synchronous).
    package func withLockedValue<Result>(_ body: (inout Value) throws -> Result) rethrows -> Result {
        try withoutActuallyEscaping(body) { body in
            let unchecked = UncheckedBody(body)
            return try mutex.withLock { value throws -> UncheckedResult<Result> in UncheckedResult(try unchecked.body(&value)) }.value
        }
    }
}

extension Locked where Value == Void {
    /// A plain lock.
    package convenience init() { self.init(()) }

    /// Runs `body` with the lock held.
    package func withLock<Result>(_ body: () throws -> Result) rethrows -> Result {
        try withLockedValue { _ in try body() }
    }
}

// `Mutex.withLock` takes the value as `inout sending`, which a generic, non-Sendable value cannot
// satisfy although the mutex is exactly what makes sharing it safe: these boxes carry the body
// and its result through, and neither outlives the call (as NIO's NIOLockedValueBox, the class is
// @unchecked Sendable for the same reason).
private struct UncheckedBody<Value, Result>: @unchecked Sendable {
    let body: (inout Value) throws -> Result
    init(_ body: @escaping (inout Value) throws -> Result) { self.body = body }
}

private struct UncheckedResult<Result>: @unchecked Sendable {
    let value: Result
    init(_ value: Result) { self.value = value }
}
