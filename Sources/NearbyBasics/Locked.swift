/// A value behind a mutex: NearbyBasics needs a lock and nothing else from outside the
/// standard library, so that every module (the codec included) may depend on it.
package final class Locked<Value>: @unchecked Sendable {
    private var value: Value
    private let lock = ThreadLock()

    package init(_ value: Value) {
        self.value = value
    }

    /// Runs `body` with the value, the mutex held (never across a suspension: `body` is synchronous).
    package func withLockedValue<Result>(_ body: (inout Value) throws -> Result) rethrows -> Result {
        try lock.withLock { try body(&value) }
    }
}
