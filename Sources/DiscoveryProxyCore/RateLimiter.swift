import DNSWire
import NearbyBasics

/// A limit on the questions one source (an IPv4 /24, an IPv6 /56) may ask per second over UDP,
/// where a source address can be forged: a token bucket of `burst` questions, refilled at
/// `perSecond`.
public struct RateLimit: Sendable, Hashable {
    public var perSecond: Int
    public var burst: Int

    /// - Precondition: none; values below 1 are taken as 1.
    public init(perSecond: Int, burst: Int) {
        self.perSecond = max(1, perSecond)
        self.burst = max(1, burst)
    }
}

extension TokenBucket {
    /// A full bucket of `limit` at `now`.
    init(_ limit: RateLimit, now: Duration) {
        self.init(perSecond: Double(limit.perSecond), burst: Double(limit.burst), now: now)
    }
}

/// The buckets of ``RateLimit``, one per source prefix: an IPv4 /24 or an IPv6 /56, as
/// response-rate limiting in DNS servers does, so that one network cannot pass the limit by
/// using many of its addresses.
///
/// An address that has asked over TCP has proven that it is what it says (a forged source
/// cannot complete TCP's handshake), so for ``provenLifetime`` after that its UDP questions
/// have a bucket of their own, ``provenFactor`` times the limit, instead of its network's. This
/// is how the limit tells a site's resolver from a flood: the resolver, slipped a truncated
/// answer over its limit, asks again over TCP, as resolvers do, and from then on is answered
/// over UDP at up to twenty times the rate; a flood with forged addresses never gets there. A
/// flood that forges a proven address reflects at most that bucket's answers onto it.
struct RateLimiter: Sendable {
    enum Verdict: Equatable {
        case admit
        /// Over the limit: send nothing.
        case drop
        /// Over the limit: send an empty truncated answer, so a real client retries over TCP.
        case slip
    }

    /// Prefixes are kept in two generations of at most this many each: when the current one
    /// fills, it becomes the previous one and the older is forgotten, in one step (a forgotten
    /// prefix starts again with a full bucket, which only ever errs towards answering).
    static let generationSize = 8_192

    private struct Bucket {
        var tokens: TokenBucket
        var overruns = 0
    }

    /// How long an address that asked over TCP keeps its own, larger bucket.
    static let provenLifetime: Duration = .seconds(600)
    /// A proven address's bucket, in multiples of the limit (rate and burst).
    static let provenFactor = 20

    private struct Proof {
        var until: Duration
        var bucket: Bucket
    }

    let limit: RateLimit
    private var current: [Prefix: Bucket] = [:]
    private var previous: [Prefix: Bucket] = [:]
    /// Addresses proven over TCP, with when their proof runs out; two generations, as prefixes.
    private var proven: [IPAddress: Proof] = [:]
    private var provenBefore: [IPAddress: Proof] = [:]

    init(_ limit: RateLimit) { self.limit = limit }

    /// The part of an address that shares a bucket.
    struct Prefix: Hashable {
        var high: UInt64
        var isV6: Bool

        init(_ address: IPAddress) {
            switch address {
            case .v4(let v4):
                high = UInt64(v4.value >> 8)
                isV6 = false
            case .v6(let v6, _):
                let bytes = v6.bytes
                high = bytes.prefix(7).reduce(0) { $0 << 8 | UInt64($1) }
                isV6 = true
            }
        }
    }

    /// `source` asked over TCP: its UDP questions have a bucket of their own, ``provenFactor``
    /// times the limit, for ``provenLifetime``.
    mutating func prove(_ source: IPAddress, now: Duration) {
        var proof = proven.removeValue(forKey: source) ?? provenBefore.removeValue(forKey: source)
            ?? Proof(until: now, bucket: Bucket(tokens: TokenBucket(provenLimit, now: now)))
        proof.until = now + Self.provenLifetime
        if proven.count >= Self.generationSize {
            provenBefore = proven
            proven = [:]
        }
        proven[source] = proof
    }

    /// Whether `source` has proven itself over TCP and the proof still holds.
    func isProven(_ source: IPAddress, now: Duration) -> Bool {
        guard let proof = proven[source] ?? provenBefore[source] else { return false }
        return proof.until > now
    }

    private var provenLimit: RateLimit {
        RateLimit(perSecond: limit.perSecond.multipliedReportingOverflow(by: Self.provenFactor).partialValue,
                  burst: limit.burst.multipliedReportingOverflow(by: Self.provenFactor).partialValue)
    }

    mutating func admit(_ source: IPAddress, now: Duration) -> Verdict {
        if var proof = proven[source], proof.until > now {
            let verdict = Self.take(&proof.bucket, now: now)
            proven[source] = proof
            return verdict
        }
        if var proof = provenBefore[source], proof.until > now {
            let verdict = Self.take(&proof.bucket, now: now)
            provenBefore[source] = proof
            return verdict
        }
        let prefix = Prefix(source)
        var bucket = current.removeValue(forKey: prefix) ?? previous.removeValue(forKey: prefix) ?? Bucket(tokens: TokenBucket(limit, now: now))
        let verdict = Self.take(&bucket, now: now)
        if current.count >= Self.generationSize {
            previous = current
            current = [:]
        }
        current[prefix] = bucket
        return verdict
    }

    /// Forgets prefixes not seen since `time` (their buckets are full again by now anyway, for
    /// any limit of at least one question per ten seconds).
    mutating func forget(before time: Duration) {
        current = current.filter { $0.value.tokens.updated >= time }
        previous = previous.filter { $0.value.tokens.updated >= time }
        proven = proven.filter { $0.value.until > time }
        provenBefore = provenBefore.filter { $0.value.until > time }
    }

    /// A question from `bucket`'s owner: admitted while there are tokens; over, dropped and
    /// slipped in turn.
    private static func take(_ bucket: inout Bucket, now: Duration) -> Verdict {
        if bucket.tokens.take(now: now) { return .admit }
        bucket.overruns += 1
        return bucket.overruns % 2 == 0 ? .slip : .drop
    }

    static func seconds(_ duration: Duration) -> Double { TokenBucket.seconds(duration) }
}
