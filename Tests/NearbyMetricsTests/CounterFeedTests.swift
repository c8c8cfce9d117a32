import CoreMetrics
import MetricsTestKit
import NearbyMetrics
import Testing

/// The one piece the libraries share for their metrics: counters that follow the statistics a
/// module keeps, and the check that what a module makes is what it describes.
@Suite("metrics: counters fed from statistics")
struct CounterFeedTests {
    struct Counts {
        var asked = 0
        var refused = 0
    }

    static let asked = MetricDescription("test_asked_total", .counter, help: "Asked.")
    static let refused = MetricDescription("test_refused_total", .counter, labels: ["why"], help: "Refused.")

    @Test("each record publishes what grew since the last; nothing twice, nothing when nothing changed")
    func deltas() throws {
        let metrics = TestMetrics()
        var feed = CounterFeed<Counts>()
        feed.follow(Self.asked.counter(factory: metrics)) { $0.asked }
        feed.follow(Self.refused.counter("rate", factory: metrics)) { $0.refused }
        var counts = Counts()
        feed.record(counts)
        counts.asked = 3
        feed.record(counts)
        feed.record(counts)
        counts.asked = 5
        counts.refused = 2
        feed.record(counts)
        let asked = try metrics.expectCounter("test_asked_total")
        let refused = try metrics.expectCounter("test_refused_total", [("why", "rate")])
        #expect(asked.totalValue == 5 && asked.values == [3, 2])
        #expect(refused.totalValue == 2 && refused.values == [2])
    }

    @Test("counts made anew: restart publishes all of the new ones; a count that went down without one is a new start")
    func restart() throws {
        let metrics = TestMetrics()
        var feed = CounterFeed<Counts>()
        feed.follow(Self.asked.counter(factory: metrics)) { $0.asked }
        feed.record(Counts(asked: 4))
        feed.restart()
        feed.record(Counts(asked: 1))
        #expect(try metrics.expectCounter("test_asked_total").totalValue == 5)
        feed.record(Counts(asked: 0))
        feed.record(Counts(asked: 2))
        #expect(try metrics.expectCounter("test_asked_total").totalValue == 7)
    }

    @Test("the check names every disagreement between what was made and what is described")
    func problems() {
        let described = [Self.asked, Self.refused]
        #expect(described.problems(made: [("test_asked_total", .counter, []), ("test_refused_total", .counter, ["why"])]).isEmpty)
        let problems = described.problems(made: [("test_asked_total", .gauge, []), ("test_other_total", .counter, [])])
        #expect(problems.count == 3)
        #expect(problems.contains("test_asked_total is made a gauge, described a counter"))
        #expect(problems.contains("test_other_total is made but not described"))
        #expect(problems.contains("test_refused_total is described but never made"))
    }

    @Test("durations are recorded in nanoseconds; negative ones as zero")
    func durations() throws {
        let metrics = TestMetrics()
        let timer = Timer(label: "test_seconds", factory: metrics)
        timer.record(Duration.milliseconds(1500))
        timer.record(Duration.seconds(-1))
        #expect(try metrics.expectTimer("test_seconds").values == [1_500_000_000, 0])
    }
}
