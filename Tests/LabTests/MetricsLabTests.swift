import Foundation
import Testing

/// What an operator scrapes: `nearby proxy --metrics` in the router h5, asked and refused from
/// h6 on LAN 2, scraped from h6 with curl, the exposition checked by Prometheus' own promtool.
extension LabTestSuite {
@Suite("metrics: the proxy's Prometheus endpoint")
struct MetricsLabTests {
    static let endpoint = "\(ProxyLabTests.proxyAddress):9153"

    /// promtool, which Tools/lib/setup.sh installs (Debian package prometheus).
    static func promtool() throws -> String {
        guard let path = ["/usr/bin/promtool", "/usr/local/bin/promtool"].first(where: FileManager.default.isExecutableFile(atPath:)) else {
            throw LabError("promtool is missing: Tools/lib/setup.sh installs it with the Debian package prometheus (apt-get install prometheus)")
        }
        return path
    }

    /// The exposition as h6 gets it.
    func scrape(_ lab: Lab) async throws -> String {
        try await lab.run(["exec", "h6", "--", "curl", "--silent", "--fail", "--max-time", "5", "http://\(Self.endpoint)/metrics"])
    }

    /// A sample's value: the line that starts with `series` and a space.
    func value(_ series: String, in text: String) -> Double? {
        text.split(separator: "\n").first { $0.hasPrefix(series + " ") }.flatMap { Double($0.dropFirst(series.count + 1)) }
    }

    @Test("nearby proxy --metrics: a scrape promtool accepts, whose counters move by the questions answered and refused; other paths are not found")
    func scrapeTheProxy() async throws {
        let promtool = try Self.promtool()
        let proxyTests = ProxyLabTests()
        let lab = try proxyTests.routerLab()
        let zone = ProxyLabTests.zone
        let proxy = try lab.start([
            "exec", "h5", "--", ProxyLabTests.nearby, "proxy", "lan1=\(zone)", "--listen", ProxyLabTests.proxyAddress, "--name-server",
            "proxy-lan1.lab.example.test", "--backend", "embedded", "--no-push", "--json", "--metrics", Self.endpoint,
        ])
        try await lab.withProcesses([proxy]) {
            let announced = try await proxy.waitForLine(containing: "\"metrics\"", timeout: .seconds(20))
            #expect(announced.contains(Self.endpoint), "\(announced)")
            let before = try await scrape(lab)
            for _ in 0..<2 {
                let soa = try await proxyTests.dig(lab, ["@\(ProxyLabTests.proxyAddress)", zone, "SOA", "+norec"])
                #expect(soa.contains("status: NOERROR"), "\(soa)")
            }
            for name in ["www.example.com", "printer.example.org", "www.example.com"] {
                let refused = try await proxyTests.dig(lab, ["@\(ProxyLabTests.proxyAddress)", name, "A", "+norec"])
                #expect(refused.contains("status: REFUSED"), "\(refused)")
            }
            let after = try await scrape(lab)

            // Counted before each answer went out: the scrape that follows has them all.
            func moved(_ series: String) -> Double? {
                guard let now = value(series, in: after), let then = value(series, in: before) else { return nil }
                return now - then
            }
            #expect(moved("nearby_proxy_queries_total{rcode=\"NOERROR\"}") == 2, "\(after)")
            #expect(moved("nearby_proxy_queries_total{rcode=\"REFUSED\"}") == 3)
            #expect(moved("nearby_proxy_refused_total{reason=\"outside_zones\"}") == 3)
            #expect(moved("nearby_proxy_answers_total{records=\"zone\"}") == 2)
            #expect(moved("nearby_proxy_answer_duration_seconds_count") == 5)
            #expect(moved("nearby_proxy_queries_total{rcode=\"SERVFAIL\"}") == 0)
            #expect((value("process_resident_memory_bytes", in: after) ?? 0) > 0)
            #expect(after.contains("# TYPE nearby_mdns_datagrams_sent_total counter"), "the engine's metrics beside the proxy's")

            // Prometheus' own checker: the format, and its naming and help rules.
            let file = try Lab.temporaryDirectory().appendingPathComponent("scrape.txt")
            try after.write(to: file, atomically: true, encoding: .utf8)
            let checked = try await lab.run(["exec", "h6", "--", "sh", "-c", "'\(promtool)' check metrics < '\(file.path)' 2>&1"])
            #expect(checked.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty, "promtool: \(checked)")

            let missing = try await lab.run([
                "exec", "h6", "--", "curl", "--silent", "--output", "/dev/null", "--write-out", "%{http_code}", "--max-time", "5",
                "http://\(Self.endpoint)/other",
            ])
            #expect(missing == "404")
        }
    }
}
}
