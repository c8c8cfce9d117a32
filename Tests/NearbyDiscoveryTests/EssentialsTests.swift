import CNearbySocket
import DNSWire
import Foundation
import NearbyBasics
import Testing

/// The replacements for what full Foundation gave the `nearby` executable (which now links only
/// FoundationEssentials), checked here against Foundation itself on the same inputs: a fixed
/// seed, so every run checks the same thousands of values.
@Suite("basics: text and times as Foundation wrote them, without Foundation")
struct EssentialsTests {

    @Test("internet date-times match ISO8601DateFormatter, from 1583 to 9999 and at the edges of a second")
    func internetDateTimes() {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime]
        var random = SplitMix64(seed: 7)
        var intervals: [Double] = [0, -0.0004, 0.9995, 1.0005, -978_307_200, 1_795_591_689.654]
        for _ in 0..<5000 { intervals.append(Double.random(in: -13_000_000_000...250_000_000_000, using: &random)) }
        for interval in intervals {
            #expect(CivilTime.internetDateTime(sinceReferenceDate: interval) == formatter.string(from: Date(timeIntervalSinceReferenceDate: interval)),
                    "at \(interval)")
        }
    }

    @Test("milliseconds are written as Duration.formatted(.units(allowed: [.milliseconds])) wrote them")
    func milliseconds() {
        var random = SplitMix64(seed: 11)
        var durations: [Duration] = [.zero, .milliseconds(175), .microseconds(1500), .microseconds(2500), .milliseconds(1234), .seconds(-3)]
        for _ in 0..<3000 { durations.append(.nanoseconds(Int64.random(in: -10_000_000_000...100_000_000_000, using: &random))) }
        for duration in durations {
            #expect(millisecondsText(duration) == duration.formatted(.units(allowed: [.milliseconds])), "for \(duration)")
        }
    }

    @Test("fixed-point numbers match String(format:)")
    func fixedPoints() {
        var random = SplitMix64(seed: 13)
        for _ in 0..<3000 {
            let value = Double.random(in: -1e6...1e6, using: &random)
            for digits in [0, 1, 2] {
                #expect(fixedPoint(value, digits: digits) == String(format: "%.\(digits)f", value))
            }
        }
        #expect(fixedPoint(.infinity, digits: 1) == String(format: "%.1f", Double.infinity))
    }

    @Test("blanks are trimmed as trimmingCharacters(in:) trimmed them")
    func blanks() {
        let samples = ["", " a ", "\t\nb\r\n", "\u{00A0}c\u{200B}", "d\u{3000}", "  mid dle  ", "\u{2028}e\u{2029}", "ä", "\u{85}f"]
        for sample in samples {
            #expect(sample.trimmingBlanks() == sample.trimmingCharacters(in: .whitespaces), "\(Array(sample.unicodeScalars))")
            #expect(sample.trimmingBlanks(newlines: true) == sample.trimmingCharacters(in: .whitespacesAndNewlines), "\(Array(sample.unicodeScalars))")
        }
    }

    @Test("mapped pages are given back to the kernel, and the process goes on working with them")
    func releaseMappedPages() {
        let result = nearby_release_mapped_pages()
        #expect(result.error == 0)
        #expect(result.objects > 1)  // the test binary and its libraries
        #expect(result.advised > 1 << 20)
        // Code and data come back from the files when used again.
        let text = (1...1000).map(String.init).joined(separator: ",")
        #expect(text.split(separator: ",").count == 1000)
        #expect(fixedPoint(2.5, digits: 1) == "2.5")
    }
}
