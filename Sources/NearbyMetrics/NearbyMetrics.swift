package import CoreMetrics

// How the libraries publish what they count: swift-metrics' API only (CoreMetrics), recorded to
// whatever backend the program bootstrapped (none: swift-metrics' no-op, which costs a call),
// never an exposition of their own. Each library names its metrics in a list of
// ``MetricDescription``s (the executable takes the help lines of its Prometheus exposition from
// those lists, and Documentation/Operations.md shows them in one table), and feeds its counters
// from the statistics it already keeps (``CounterFeed``), so that a metric and the statistic it
// shows cannot disagree.

/// One metric a library records: its name (Prometheus' conventions: `nearby_<part>_<what>`,
/// base units, `_total` for counters), its kind, its label names and what it means.
package struct MetricDescription: Sendable, Hashable {
    package enum Kind: String, Sendable, Hashable {
        /// Only goes up (swift-metrics' `Counter`).
        case counter
        /// A level that goes up and down (swift-metrics' `Gauge`).
        case gauge
        /// Durations, in seconds (swift-metrics' `Timer`).
        case histogram
    }

    package var name: String
    package var kind: Kind
    package var labels: [String]
    /// One sentence, the exposition's `# HELP` line.
    package var help: String
    /// A histogram's bucket upper bounds, in seconds.
    package var buckets: [Double]

    package init(_ name: String, _ kind: Kind, labels: [String] = [], buckets: [Double] = [], help: String) {
        self.name = name
        self.kind = kind
        self.labels = labels
        self.help = help
        self.buckets = buckets
    }

    /// A counter of this metric with these label values (in ``labels``' order), from `factory`.
    package func counter(_ values: String..., factory: any MetricsFactory) -> Counter {
        Counter(label: name, dimensions: dimensions(values), factory: factory)
    }

    /// A gauge of this metric with these label values, from `factory`.
    package func gauge(_ values: String..., factory: any MetricsFactory) -> Gauge {
        Gauge(label: name, dimensions: dimensions(values), factory: factory)
    }

    /// A timer (a histogram of seconds) of this metric with these label values, from `factory`.
    package func timer(_ values: String..., factory: any MetricsFactory) -> Timer {
        Timer(label: name, dimensions: dimensions(values), factory: factory)
    }

    private func dimensions(_ values: [String]) -> [(String, String)] {
        precondition(values.count == labels.count, "\(name) takes the labels \(labels), given \(values.count) values")
        return Array(zip(labels, values))
    }
}

/// Counters that follow counts a module keeps anyway (its statistics): each ``record(_:)`` adds
/// to every counter what its count grew by since the last call. The module counts as it always
/// did; the feed only publishes. A count that goes down (a value made anew) is taken as the new
/// starting point. Each record calls one closure per counter (about 1 µs for 30 counters over a
/// large statistics value): for a path taken per packet, write the fields out with
/// `Counter.add(_:since:)` instead.
package struct CounterFeed<Counts>: Sendable {
    private struct Source: Sendable {
        let counter: Counter
        let read: @Sendable (Counts) -> Int
    }

    private var sources: [Source] = []
    private var last: [Int] = []

    package init() {}

    /// Adds `counter`, which follows what `read` takes from the counts (from zero on).
    package mutating func follow(_ counter: Counter, _ read: @escaping @Sendable (Counts) -> Int) {
        sources.append(Source(counter: counter, read: read))
        last.append(0)
    }

    /// The counts start again from zero (a value made anew, such as an interval's counts):
    /// the next ``record(_:)`` publishes all of them.
    package mutating func restart() {
        for index in last.indices { last[index] = 0 }
    }

    /// Publishes what grew since the last call.
    package mutating func record(_ counts: Counts) {
        for index in sources.indices {
            let value = sources[index].read(counts)
            let before = last[index]
            guard value != before else { continue }
            if value > before { sources[index].counter.increment(by: value - before) }
            last[index] = value
        }
    }
}

extension Counter {
    /// Adds what a count grew by from `before` to `now` (nothing when it did not grow): a
    /// counter that follows one field of a module's statistics, written out where a
    /// ``CounterFeed``'s closure per counter would cost too much (a path taken per packet).
    @inline(__always)
    package func add(_ now: Int, since before: Int) {
        if now > before { increment(by: now - before) }
    }
}

extension Timer {
    /// Records a duration (negative ones as zero).
    package func record(_ duration: Duration) {
        let (seconds, attoseconds) = duration.components
        guard seconds >= 0 else { return recordNanoseconds(Int64(0)) }
        let nanoseconds = seconds.multipliedReportingOverflow(by: 1_000_000_000)
        recordNanoseconds(nanoseconds.overflow ? Int64.max : nanoseconds.partialValue &+ attoseconds / 1_000_000_000)
    }
}

extension Array where Element == MetricDescription {
    /// What is wrong with the metrics a program made (each one's name, kind and label names)
    /// against these descriptions: a name not described, a kind or labels other than described,
    /// a description of which nothing was made. Empty when they agree (for tests).
    package func problems(made: [(name: String, kind: MetricDescription.Kind, labels: [String])]) -> [String] {
        var problems: [String] = []
        let byName = Dictionary(map { ($0.name, $0) }, uniquingKeysWith: { first, _ in first })
        if byName.count < count { problems.append("a name is described twice") }
        for metric in made {
            guard let description = byName[metric.name] else {
                problems.append("\(metric.name) is made but not described")
                continue
            }
            if description.kind != metric.kind { problems.append("\(metric.name) is made a \(metric.kind), described a \(description.kind)") }
            if description.labels != metric.labels {
                problems.append("\(metric.name) is made with the labels \(metric.labels), described with \(description.labels)")
            }
        }
        let madeNames = Set(made.map(\.name))
        for description in self where !madeNames.contains(description.name) {
            problems.append("\(description.name) is described but never made")
        }
        return problems
    }
}
