/// One token bucket as a pure value: `burst` tokens, refilled at `perSecond`, with the time
/// passed in. The one home of the rate limits' arithmetic (the discovery proxy's questions and
/// link budget, the SRP registrar's updates).
package struct TokenBucket: Sendable, Hashable {
    package let perSecond: Double
    package let burst: Double
    package private(set) var tokens: Double
    /// When ``tokens`` was last brought up to date.
    package private(set) var updated: Duration

    /// A full bucket at `now`.
    package init(perSecond: Double, burst: Double, now: Duration) {
        self.perSecond = perSecond
        self.burst = burst
        tokens = burst
        updated = now
    }

    /// Takes a token if there is one (time that goes backwards refills nothing).
    package mutating func take(now: Duration) -> Bool {
        let elapsed = max(0, Self.seconds(now - updated))
        tokens = min(burst, tokens + elapsed * perSecond)
        updated = max(updated, now)
        guard tokens >= 1 else { return false }
        tokens -= 1
        return true
    }

    /// A duration in seconds, as a Double.
    package static func seconds(_ duration: Duration) -> Double {
        let parts = duration.components
        return Double(parts.seconds) + Double(parts.attoseconds) / 1e18
    }
}
