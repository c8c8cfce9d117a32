import DNSWire

/// A limit on the questions one source may ask per second over UDP, where a source address can
/// be forged: a token bucket of `burst` questions, refilled at `perSecond`.
public struct RateLimit: Sendable, Hashable {
    public var perSecond: Int
    public var burst: Int

    /// - Precondition: none; values below 1 are taken as 1.
    public init(perSecond: Int, burst: Int) {
        self.perSecond = max(1, perSecond)
        self.burst = max(1, burst)
    }
}

/// One token bucket: `burst` tokens, refilled at `perSecond`.
struct TokenBucket: Sendable {
    let limit: RateLimit
    private(set) var tokens: Double
    private(set) var updated: Duration

    init(_ limit: RateLimit, now: Duration) {
        self.limit = limit
        tokens = Double(limit.burst)
        updated = now
    }

    /// Takes a token if there is one.
    mutating func take(now: Duration) -> Bool {
        let elapsed = max(0, RateLimiter.seconds(now - updated))
        tokens = min(Double(limit.burst), tokens + elapsed * Double(limit.perSecond))
        updated = max(updated, now)
        guard tokens >= 1 else { return false }
        tokens -= 1
        return true
    }
}

/// The buckets of ``RateLimit``, one per source address, kept for a bounded number of sources.
struct RateLimiter: Sendable {
    enum Verdict: Equatable {
        case admit
        /// Over the limit: send nothing.
        case drop
        /// Over the limit: send an empty truncated answer, so a real client retries over TCP.
        case slip
    }

    /// At most this many sources are remembered; beyond it the least recently seen is forgotten
    /// (a forgotten source starts again with a full bucket, which only ever errs towards
    /// answering).
    static let maximumSources = 16_384

    private struct Bucket {
        var tokens: TokenBucket
        var overruns = 0
    }

    let limit: RateLimit
    private var buckets: [IPAddress: Bucket] = [:]

    init(_ limit: RateLimit) { self.limit = limit }

    mutating func admit(_ source: IPAddress, now: Duration) -> Verdict {
        var bucket = buckets[source] ?? Bucket(tokens: TokenBucket(limit, now: now))
        let verdict: Verdict
        if bucket.tokens.take(now: now) {
            verdict = .admit
        } else {
            bucket.overruns += 1
            verdict = bucket.overruns % 2 == 0 ? .slip : .drop
        }
        if buckets[source] == nil, buckets.count >= Self.maximumSources,
            let oldest = buckets.min(by: { $0.value.tokens.updated < $1.value.tokens.updated })?.key
        {
            buckets[oldest] = nil
        }
        buckets[source] = bucket
        return verdict
    }

    /// Forgets sources not seen since `time` (their buckets are full again by now anyway, for
    /// any limit of at least one question per ten seconds).
    mutating func forget(before time: Duration) {
        buckets = buckets.filter { $0.value.tokens.updated >= time }
    }

    var sourceCount: Int { buckets.count }

    static func seconds(_ duration: Duration) -> Double {
        let parts = duration.components
        return Double(parts.seconds) + Double(parts.attoseconds) / 1e18
    }
}
