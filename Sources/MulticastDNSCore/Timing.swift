import DNSWire

/// The numbers of RFC 6762 the engine keeps, in one place so they can be read beside the RFC.
public enum MDNSTiming {
    /// §8.1: a random delay of 0–250 ms before the first probe.
    public static let probeInitialDelay: ClosedRange<Duration> = .zero ... .milliseconds(250)
    /// §8.1: three probes, 250 ms apart; 250 ms after the third with no conflict wins the name.
    public static let probeInterval: Duration = .milliseconds(250)
    public static let probeCount = 3
    /// §8.1: after 15 conflicts within 10 s, wait 5 s before each further probe.
    public static let conflictWindow: Duration = .seconds(10)
    public static let conflictLimit = 15
    public static let conflictBackoff: Duration = .seconds(5)
    /// §8.2: the loser of a simultaneous-probe tiebreak waits one second, then probes again.
    public static let tiebreakDelay: Duration = .seconds(1)
    /// §8.3: announcements one second apart, the interval at least doubling.
    public static let announceCount = 2
    public static let announceInterval: Duration = .seconds(1)
    /// §6: shared answers wait 20–120 ms so that several responders do not collide.
    public static let sharedResponseDelay: ClosedRange<Duration> = .milliseconds(20) ... .milliseconds(120)
    /// §7.2: after a query with TC, wait 400–500 ms for the rest of its known answers.
    public static let truncatedQueryDelay: ClosedRange<Duration> = .milliseconds(400) ... .milliseconds(500)
    /// §6: a record is multicast at most once a second (except to defend a probe).
    public static let multicastRecordInterval: Duration = .seconds(1)
    /// §5.2: continuous queries: intervals start at 1 s and double, up to 60 minutes.
    public static let queryInitialInterval: Duration = .seconds(1)
    public static let queryMaximumInterval: Duration = .seconds(3600)
    /// §5.2: the first query of a querier set off by a network event waits 20–120 ms.
    public static let queryStartDelay: ClosedRange<Duration> = .milliseconds(20) ... .milliseconds(120)
    /// §5.2: refresh queries at 80, 85, 90 and 95 % of a record's TTL, plus 0–2 %.
    public static let refreshPercentages: [Int] = [80, 85, 90, 95]
    /// §10.1, §10.2: a goodbye, or a record flushed by a cache-flush answer, goes after 1 s.
    public static let flushDelay: Duration = .seconds(1)
    /// §10.5: two unanswered queries for a cached record within 10 s flush it.
    public static let failureWindow: Duration = .seconds(10)
    public static let failureQueryCount = 2
    /// §10: host-name records (SRV, A, AAAA) live 120 s, the others 75 minutes.
    public static let hostRecordTTL: UInt32 = 120
    public static let otherRecordTTL: UInt32 = 4500
    /// §6.7: legacy unicast answers carry a TTL of at most 10 s.
    public static let legacyUnicastMaximumTTL: UInt32 = 10
}

/// The engine's randomness: the package's SplitMix64 from a seed, so tests replay exactly; in
/// production the seed is random.
public struct EngineRandom: Sendable {
    private var generator: SplitMix64

    public init(seed: UInt64) { generator = SplitMix64(seed: seed) }

    public mutating func next() -> UInt64 { generator.next() }

    /// A uniformly drawn duration in `range`, to the microsecond.
    public mutating func duration(in range: ClosedRange<Duration>) -> Duration {
        let low = range.lowerBound.microseconds
        let span = UInt64(range.upperBound.microseconds - low) + 1
        return .microseconds(low + Int64(next() % span))
    }
}

extension Duration {
    /// Whole microseconds.
    var microseconds: Int64 {
        let parts = components
        return parts.seconds * 1_000_000 + parts.attoseconds / 1_000_000_000_000
    }

    /// `seconds` of a TTL as a duration.
    static func ttl(_ seconds: UInt32) -> Duration { .seconds(Int64(seconds)) }
}
