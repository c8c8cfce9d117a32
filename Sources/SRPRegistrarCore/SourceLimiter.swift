import DNSWire
import NearbyBasics

/// How many updates one source may send: a token bucket of ``burst`` updates, refilled at
/// ``perSecond``. A registrar verifies a signature for every update it reads, so the bucket is
/// taken before anything else is done with the update.
public struct UpdateRate: Sendable, Hashable {
    public var perSecond: Double
    public var burst: Double

    /// Values below a tenth of an update per second, or a burst below 1, are raised to those.
    public init(perSecond: Double, burst: Double) {
        self.perSecond = max(0.1, perSecond)
        self.burst = max(1, burst)
    }
}

/// The buckets of ``UpdateRate``, one per source address, at most `capacity` of them: when a new
/// source arrives and the table is full, the source seen longest ago is forgotten (it gets a
/// full bucket if it comes back: forgetting only ever errs towards admitting).
struct SourceLimiter: Sendable {
    let rate: UpdateRate
    let capacity: Int
    private var buckets: [IPAddress: TokenBucket] = [:]

    init(rate: UpdateRate, capacity: Int) {
        self.rate = rate
        self.capacity = max(1, capacity)
    }

    /// Takes a token for `source` if it has one.
    mutating func admit(_ source: IPAddress, now: Duration) -> Bool {
        var bucket = buckets[source] ?? TokenBucket(perSecond: rate.perSecond, burst: rate.burst, now: now)
        let admitted = bucket.take(now: now)
        if buckets[source] == nil && buckets.count >= capacity, let oldest = buckets.min(by: { $0.value.updated < $1.value.updated })?.key {
            buckets[oldest] = nil
        }
        buckets[source] = bucket
        return admitted
    }

    var trackedSources: Int { buckets.count }
}
