import Foundation

/// Runs blocking work (a child process waited for, a blocking socket) on a thread of its own.
/// A test that blocks inside `async` code holds one of the cooperative pool's threads, which on
/// 2 cores are two: two such waits at once stalled every other test's timers (a 1 s sleep that
/// did not wake within 20 s, in CI).
func onOwnThread<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        Thread { continuation.resume(with: Result { try work() }) }.start()
    }
}
