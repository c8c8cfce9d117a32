import CNearbySocket
import Logging
import NearbyBasics

/// Gives back the pages a long-running command (`advertise`, `serve`) needed only to start or
/// to set up a connection, once it has been quiet for a while.
///
/// An idle advertiser holds about 25 MiB of code and tables of the executable and its
/// libraries that it touched once, while starting up, and about 3 MiB it works with. After
/// `quiet` without ``activity()``, the kernel is asked to reclaim them
/// (`nearby_release_mapped_pages`, MADV_PAGEOUT): not destructive, they are read again from
/// the files when used (answering a query touches a few of them; a new connection more).
/// The heap's free memory is given back at the same time (malloc_trim), so a burst of
/// connections, or of strangers turned away, leaves no arenas behind. Each burst of activity
/// is followed by one release, never more.
final class QuietRelease: Sendable {
    private struct State {
        var last: ContinuousClock.Instant?
        var waiter: CheckedContinuation<Void, Never>?
    }

    private let state = Locked(State())
    private let quiet: Duration
    private let logger: Logger

    init(quiet: Duration = .seconds(3), logger: Logger) {
        self.quiet = quiet
        self.logger = logger
    }

    /// Something happened (start-up, a connection): the next release waits for quiet again.
    func activity() {
        let waiter = state.withLockedValue { state in
            state.last = .now
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume()
    }

    /// Releases after each quiet period that follows activity, until the task is cancelled.
    func run() async {
        while !Task.isCancelled {
            await withTaskCancellationHandler {
                await withCheckedContinuation { (waiter: CheckedContinuation<Void, Never>) in
                    let ready = state.withLockedValue { state in
                        guard state.last == nil, !Task.isCancelled else { return true }
                        state.waiter = waiter
                        return false
                    }
                    if ready { waiter.resume() }
                }
            } onCancel: {
                state.withLockedValue { state in
                    defer { state.waiter = nil }
                    return state.waiter
                }?.resume()
            }
            while let last = state.withLockedValue({ $0.last }), !Task.isCancelled {
                try? await Task.sleep(until: last + quiet, clock: .continuous)
                let settled = state.withLockedValue { state in
                    guard state.last == last else { return false }
                    state.last = nil
                    return true
                }
                if settled {
                    release()
                    break
                }
            }
        }
    }

    private func release() {
        let result = nearby_release_mapped_pages()
        if result.error != 0 {
            logger.debug("could not give back start-up pages (madvise: errno \(result.error))")
        } else {
            logger.debug(
                "asked the kernel to reclaim \(result.advised >> 20) MiB of mapped pages of \(result.objects) objects (now idle)\(result.trimmed != 0 ? "; free heap memory given back" : "")")
        }
    }
}
