/// Time for the long-lived shells (the mDNS engine, the discovery driver, the broker): a
/// duration since the clock's own origin, and a way to sleep until one. The shells take it as
/// a parameter, so that tests drive their timing with a ``ManualClock`` instead of waiting.
package protocol ShellClock: Sendable {
    /// Time since this clock's origin.
    var now: Duration { get }
    /// Returns once ``now`` has reached `deadline`; throws `CancellationError` when the task
    /// is cancelled first.
    func sleep(until deadline: Duration) async throws
}

extension ShellClock {
    package func sleep(for duration: Duration) async throws {
        try await sleep(until: now + duration)
    }
}

/// The monotonic clock (`ContinuousClock`), counted from when this value was made.
package struct SystemClock: ShellClock {
    private let origin: ContinuousClock.Instant

    package init() {
        origin = .now
    }

    package var now: Duration { ContinuousClock.now - origin }

    /// An instant of `ContinuousClock` in this clock's time.
    package func time(of instant: ContinuousClock.Instant) -> Duration { instant - origin }

    package func sleep(until deadline: Duration) async throws {
        try await ContinuousClock().sleep(until: origin + deadline, tolerance: nil)
    }
}

/// A clock that moves only when told (tests): sleepers wake when ``advance(by:)`` takes the
/// time past their deadline, in deadline order.
package final class ManualClock: ShellClock {
    private struct State {
        var now: Duration = .zero
        var sleepers: [UInt64: (deadline: Duration, continuation: CheckedContinuation<Void, any Error>)] = [:]
        var nextSleeper: UInt64 = 0
    }

    private let state = Locked(State())

    package init() {}

    package var now: Duration { state.withLockedValue { $0.now } }

    /// How many tasks sleep on this clock now.
    package var sleeping: Int { state.withLockedValue { $0.sleepers.count } }

    package func sleep(until deadline: Duration) async throws {
        let id = state.withLockedValue { state in
            defer { state.nextSleeper += 1 }
            return state.nextSleeper
        }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let verdict: Result<Void, any Error>? = state.withLockedValue { state in
                    // Cancelled before we got here: the handler below found nothing to wake.
                    if Task.isCancelled { return .failure(CancellationError()) }
                    if state.now >= deadline { return .success(()) }
                    state.sleepers[id] = (deadline, continuation)
                    return nil
                }
                if let verdict { continuation.resume(with: verdict) }
            }
        } onCancel: {
            let sleeper = state.withLockedValue { $0.sleepers.removeValue(forKey: id) }
            sleeper?.continuation.resume(throwing: CancellationError())
        }
    }

    /// Moves the time forward and wakes every sleeper whose deadline has come.
    package func advance(by duration: Duration) {
        let due = state.withLockedValue { state in
            state.now += duration
            let due = state.sleepers.filter { $0.value.deadline <= state.now }.sorted { $0.value.deadline < $1.value.deadline }
            for (id, _) in due { state.sleepers[id] = nil }
            return due.map(\.value.continuation)
        }
        for continuation in due { continuation.resume() }
    }

    /// Returns once at least `count` tasks sleep on this clock (yielding meanwhile), so that a
    /// test moves the time only after the code under test has started waiting for it.
    package func waitForSleepers(_ count: Int = 1) async {
        while sleeping < count { await Task.yield() }
    }
}

/// A deadline that moves, and one task that waits for it: a shell's timekeeping child runs
/// ``run(clock:fire:)`` inside the shell's task group, and the shell ``set(_:)``s the deadline
/// whenever its state machine has a new one. Setting it wakes the waiting task at once, so a
/// deadline moved earlier is kept, without a new task per deadline.
package final class Alarm: Sendable {
    private struct State {
        var deadline: Duration?
        /// Counts changes, so that the waiting task knows whether it missed one.
        var generation: UInt64 = 0
        var waiter: CheckedContinuation<Void, Never>?
    }

    private let state = Locked(State())

    package init() {}

    /// The deadline the alarm waits for (nil: none).
    package var deadline: Duration? { state.withLockedValue { $0.deadline } }

    /// Sets the deadline (nil: none), waking the waiting task when it changes.
    package func set(_ deadline: Duration?) {
        let waiter = state.withLockedValue { state -> CheckedContinuation<Void, Never>? in
            guard state.deadline != deadline else { return nil }
            state.deadline = deadline
            state.generation &+= 1
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume()
    }

    /// Until the task is cancelled: whenever the deadline comes, clears it and calls `fire`
    /// (which usually sets the next one).
    package func run(clock: some ShellClock, fire: @Sendable () async -> Void) async {
        while !Task.isCancelled {
            let (deadline, generation) = state.withLockedValue { ($0.deadline, $0.generation) }
            guard let deadline else {
                await changed(since: generation)
                continue
            }
            if clock.now >= deadline {
                state.withLockedValue { state in
                    if state.generation == generation { state.deadline = nil }
                }
                await fire()
                continue
            }
            // Whichever comes first: the deadline, or a new one.
            await withTaskGroup(of: Void.self) { group in
                group.addTask { try? await clock.sleep(until: deadline) }
                group.addTask { await self.changed(since: generation) }
                await group.next()
                group.cancelAll()
            }
        }
    }

    /// Returns when the deadline changes after `generation`, or when the task is cancelled.
    private func changed(since generation: UInt64) async {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let now = state.withLockedValue { state -> Bool in
                    if state.generation != generation || Task.isCancelled { return true }
                    state.waiter = continuation
                    return false
                }
                if now { continuation.resume() }
            }
        } onCancel: {
            let waiter = state.withLockedValue { state -> CheckedContinuation<Void, Never>? in
                defer { state.waiter = nil }
                return state.waiter
            }
            waiter?.resume()
        }
    }
}

/// Children a shell starts while it runs (a forwarder per watch, a dial per peer), run in the
/// shell's own task group instead of as unstructured tasks: ``run()`` is a child of the shell's
/// `run()`, and every job ``spawn(_:)`` hands it becomes a child of that. Cancelling the shell
/// cancels them all, and the shell's `run()` returns only once they have ended.
package final class ChildTasks: Sendable {
    /// Jobs on their way into the group. Not bounded by a count: a job is a child the shell
    /// decided to start (its own bound is the shell's: dial slots, connection limits), and
    /// ``run()`` takes each into the group as soon as it is queued.
    private let jobs: AsyncStream<@Sendable () async -> Void>
    private let queue: AsyncStream<@Sendable () async -> Void>.Continuation

    package init() {
        // Not bounded by a count: see `jobs` (run() takes each job at once).
        (jobs, queue) = AsyncStream.makeStream()
    }

    /// Starts `job` as a child (queued until ``run()`` takes it). False when the shell has
    /// ended: the job does not run.
    @discardableResult
    package func spawn(_ job: @escaping @Sendable () async -> Void) -> Bool {
        if case .terminated = queue.yield(job) { return false }
        return true
    }

    /// Runs the jobs handed to ``spawn(_:)`` until the task is cancelled or ``finish()`` is
    /// called; then cancels those still running and waits for them. Call it once.
    package func run() async {
        await withDiscardingTaskGroup { group in
            for await job in jobs { group.addTask { await job() } }
            queue.finish()
            group.cancelAll()
        }
    }

    /// No more jobs: ``run()`` ends once it has cancelled those still running.
    package func finish() {
        queue.finish()
    }
}

/// Jobs a shell ends together before they end by themselves (the probes of a nearest-peer race
/// once its verdict is in): each runs with ``run(_:)`` inside one of the shell's children, and
/// ``cancel()`` cancels every job in the scope, those running and those yet to start.
package final class CancelScope: Sendable {
    private struct State {
        var cancelled = false
        var waiters: [UInt64: CheckedContinuation<Void, Never>] = [:]
        var next: UInt64 = 0
    }

    private let state = Locked(State())

    package init() {}

    package var isCancelled: Bool { state.withLockedValue { $0.cancelled } }

    /// Cancels every job in the scope; a job that starts later does not run.
    package func cancel() {
        let waiters = state.withLockedValue { state -> [CheckedContinuation<Void, Never>] in
            state.cancelled = true
            defer { state.waiters = [:] }
            return Array(state.waiters.values)
        }
        for waiter in waiters { waiter.resume() }
    }

    /// Runs `job` until it ends (its result), or until the scope (or the calling task) is
    /// cancelled: then `job`'s task is cancelled and awaited, and the result is nil.
    package func run<Result: Sendable>(_ job: @escaping @Sendable () async -> Result) async -> Result? {
        guard !isCancelled else { return nil }
        return await withTaskGroup(of: Result?.self) { group in
            group.addTask { await job() }
            group.addTask {
                await self.wait()
                return nil
            }
            let first = await group.next() ?? nil
            group.cancelAll()
            return first
        }
    }

    /// Returns once the scope is cancelled, or the calling task is (a latch: ``cancel()``
    /// opens it for every waiter, now and later).
    package func wait() async {
        let id = state.withLockedValue { state in
            defer { state.next += 1 }
            return state.next
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let now = state.withLockedValue { state -> Bool in
                    if state.cancelled || Task.isCancelled { return true }
                    state.waiters[id] = continuation
                    return false
                }
                if now { continuation.resume() }
            }
        } onCancel: {
            let waiter = state.withLockedValue { $0.waiters.removeValue(forKey: id) }
            waiter?.resume()
        }
    }
}
