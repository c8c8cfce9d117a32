/// Where one file's transfer stands.
public struct TransferProgress: Hashable, Sendable {
    /// The file's name (with its folders, `/`-separated, when sent with them).
    public var name: String
    /// Its size in bytes.
    public var size: Int64
    /// Bytes the receiver has, counting what it had before a resume.
    public var done: Int64
    /// Where this run started (non-zero after a resume).
    public var resumedAt: Int64
    /// Bytes per second over the last few seconds; nil until there is enough to tell.
    public var rate: Double?
    /// Seconds until done at that rate; nil without a rate.
    public var secondsLeft: Double?

    /// From 0 to 1.
    public var fraction: Double { size == 0 ? 1 : Double(done) / Double(size) }
}

/// What a transfer reports, one file after another.
public enum TransferUpdate: Hashable, Sendable {
    /// The receiver accepted the file; bytes are about to flow (from `resumedAt`).
    case started(TransferProgress)
    /// Every interval while bytes flow.
    case progress(TransferProgress)
    /// The receiver has the whole file, verified by SHA-256, under its final name.
    case finished(TransferResult)
    /// This file did not make it; the transfer goes on with the next one only when the error allows it.
    case failed(name: String, FileTransferError)
}

/// One file that went across.
public struct TransferResult: Hashable, Sendable {
    /// The name it was offered under.
    public var name: String
    /// Where the receiver saved it, relative to its folder (another name when that one was taken).
    public var savedAs: String
    public var size: Int64
    /// Bytes that went over the connection this time (less than `size` after a resume).
    public var transferred: Int64
    /// The SHA-256 both sides computed, in hexadecimal.
    public var sha256: String
    /// How long the bytes took.
    public var seconds: Double
}

/// The rate and what is left, from the bytes done at points in time: a pure value fed by the
/// transfer's loop, reporting at most once an interval.
struct ProgressMeter {
    let name: String
    let size: Int64
    let resumedAt: Int64
    let interval: Duration
    private var samples: [(time: Duration, done: Int64)] = []
    private var lastReport: Duration?
    /// The rate is measured over about this long.
    static let span: Duration = .seconds(3)

    init(name: String, size: Int64, resumedAt: Int64, interval: Duration, at start: Duration) {
        self.name = name
        self.size = size
        self.resumedAt = resumedAt
        self.interval = interval
        samples = [(start, resumedAt)]
        lastReport = start
    }

    /// Bytes done now; a value to report when an interval has passed since the last one.
    mutating func update(done: Int64, at now: Duration) -> TransferProgress? {
        guard let last = lastReport, now - last >= interval else { return nil }
        lastReport = now
        samples.append((now, done))
        while samples.count > 2, now - samples[1].time >= Self.span { samples.removeFirst() }
        return progress(done: done, at: now)
    }

    /// Where it stands now, whatever the interval.
    func progress(done: Int64, at now: Duration) -> TransferProgress {
        var rate: Double?
        if let first = samples.first, now > first.time, done > first.done {
            rate = Double(done - first.done) / seconds(now - first.time)
        }
        let left = rate.map { Double(size - done) / $0 }
        return TransferProgress(name: name, size: size, done: done, resumedAt: resumedAt, rate: rate, secondsLeft: left)
    }
}

func seconds(_ duration: Duration) -> Double {
    let (whole, attoseconds) = duration.components
    return Double(whole) + Double(attoseconds) / 1e18
}
