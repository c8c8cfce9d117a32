import DNSWire
import Foundation
import Testing

/// DNSWire against live avahi-daemon and python-zeroconf peers in the virtual LAN: what they
/// send must decode, and what we encode they must understand.
extension LabTestSuite {
@Suite("the codec against live peers")
struct LiveCodecLabTests {
    static let repository = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    @Test("every packet avahi and python-zeroconf exchange decodes whole and round-trips")
    func liveTraffic() async throws {
        let lab = try Lab.require(hosts: 3)
        let directory = try Lab.temporaryDirectory()
        let capture = directory.appendingPathComponent("live.pcap").path
        try await lab.run(["capture", "start", "h2", capture])
        try await lab.withAvahi(in: ["h1", "h2"]) {
            let publisher = try lab.start([
                "avahi", "exec", "h1", "--", "avahi-publish", "-s", "Live Avahi", "_openagents._tcp", "9101",
                "version=0.2.2", "mode=bridge", "flag",
            ])
            let registrant = try lab.start([
                "zeroconf", "h3", "--", "register", "Live Zeroconf", "_openagents._tcp", "9102", "version=0.2.2", "flag",
            ])
            try await lab.withProcesses([publisher, registrant]) {
                _ = try await registrant.waitForLine(containing: "\"registered\"", timeout: .seconds(20))
                // avahi in h2 resolves both; python-zeroconf in h3 resolves avahi's.
                let avahiBrowse = try await lab.run(
                    ["avahi", "exec", "h2", "--", "timeout", "15", "avahi-browse", "-rpt", "_openagents._tcp"],
                    timeout: .seconds(30))
                #expect(avahiBrowse.contains("Live\\032Avahi"))
                #expect(avahiBrowse.contains("Live\\032Zeroconf"))
                let zeroconfBrowse = try await lab.run(
                    ["zeroconf", "h3", "--", "browse", "_openagents._tcp", "--resolve", "--timeout", "4"],
                    timeout: .seconds(30))
                #expect(zeroconfBrowse.contains("Live Avahi"))
            }
        }
        // The daemons said goodbye while stopping; now the capture is complete.
        try await lab.run(["capture", "stop", "h2", capture])

        let packets = try udpPayloads(ofPcap: [UInt8](try Data(contentsOf: URL(fileURLWithPath: capture))))
        #expect(packets.count >= 10, "captured only \(packets.count) packets")
        var sawAvahiTXT = false
        var sawZeroconfTXT = false
        var sawProbe = false
        var sawQuery = false
        var sawGoodbye = false
        for packet in packets {
            let decoded = try Message.decode(packet)
            #expect(decoded.skippedRecords.isEmpty, "skipped records in \(packet)")
            let message = decoded.message
            let again = try Message.decode(try message.encoded())
            #expect(again.message == message)
            sawProbe = sawProbe || message.isProbe
            sawQuery = sawQuery || (!message.header.isResponse && !message.isProbe)
            sawGoodbye = sawGoodbye || message.answers.contains { $0.isGoodbye }
            for record in message.allRecords {
                guard case .txt(let txt) = record.data, DiscoveryInfo(txt).string(for: "version") == "0.2.2" else { continue }
                let owner = record.name.description
                if owner.hasPrefix("Live\\032Avahi.") { sawAvahiTXT = true }
                if owner.hasPrefix("Live\\032Zeroconf.") { sawZeroconfTXT = true }
            }
        }
        #expect(sawAvahiTXT, "no TXT of avahi's service among \(packets.count) packets")
        #expect(sawZeroconfTXT, "no TXT of python-zeroconf's service among \(packets.count) packets")
        #expect(sawProbe, "no probe among \(packets.count) packets")
        #expect(sawQuery, "no query among \(packets.count) packets")
        #expect(sawGoodbye, "no goodbye among \(packets.count) packets: \(packets.compactMap(summary))")
    }

    @Test("a DNS-SD announcement encoded by DNSWire is resolved by avahi and python-zeroconf")
    func ourAnnouncementIsUnderstood() async throws {
        let lab = try Lab.require(hosts: 3)
        let type = try ServiceType(parsing: "_openagents._tcp")
        let instance = try ServiceInstanceName("Wire Box", type: type).domainName
        let host: DomainName = "wirebox.local."
        var info = DiscoveryInfo()
        try info.set("version", to: "1.2.3")
        try info.setFlag("tls")
        let announcement = Message(
            header: .response,
            answers: [
                ResourceRecord(name: type.domainName, data: .ptr(instance), ttl: 4500),
                ResourceRecord(name: instance, data: .srv(SRVData(port: 9111, target: host)), ttl: 120, cacheFlush: true),
                ResourceRecord(name: instance, data: .txt(info.txt), ttl: 4500, cacheFlush: true),
                ResourceRecord(name: host, data: .a(IPv4Address(198, 18, 1, 1)), ttl: 120, cacheFlush: true),
            ])
        let directory = try Lab.temporaryDirectory()
        let packetFile = directory.appendingPathComponent("announce.bin")
        let packets = try announcement.encodedPackets()
        #expect(packets.count == 1)
        try Data(packets[0]).write(to: packetFile)

        try await lab.withAvahi(in: ["h2"]) {
            let avahiBrowser = try lab.start(["avahi", "exec", "h2", "--", "stdbuf", "-oL", "avahi-browse", "-rp", "_openagents._tcp"])
            let zeroconfBrowser = try lab.start(["zeroconf", "h3", "--", "browse", "_openagents._tcp", "--resolve", "--timeout", "20"])
            try await lab.withProcesses([avahiBrowser, zeroconfBrowser]) {
                try await Task.sleep(for: .seconds(2))  // let both browsers start listening
                let python = ProcessInfo.processInfo.environment["NEARBY_LAB_PYTHON"] ?? "python3"
                let sender = Self.repository.appendingPathComponent("Tools/lab.d/peers/send_mdns.py").path
                try await lab.run(["exec", "h1", "--", python, sender, "--repeat", "3", "--interval", "1", packetFile.path])

                let resolved = try await avahiBrowser.waitForLine(containing: "=;lan1;IPv4;Wire\\032Box;", timeout: .seconds(15))
                let fields = resolved.split(separator: ";", omittingEmptySubsequences: false).map(String.init)
                #expect(fields.count >= 10)
                #expect(fields.count >= 10 && fields[6] == "wirebox.local")
                #expect(fields.count >= 10 && fields[7] == "198.18.1.1")
                #expect(fields.count >= 10 && fields[8] == "9111")
                #expect(fields.count >= 10 && fields[9].contains("\"version=1.2.3\"") && fields[9].contains("\"tls\""))

                let found = try await zeroconfBrowser.waitForLine(containing: "Wire Box", timeout: .seconds(15))
                let event = try JSONSerialization.jsonObject(with: Data(found.utf8)) as? [String: Any]
                #expect(event?["port"] as? Int == 9111)
                #expect((event?["addresses"] as? [String])?.contains("198.18.1.1") == true)
                #expect((event?["txt"] as? [String: Any])?["version"] as? String == "1.2.3")
            }
        }
    }
}
}

/// One line about a packet, for failure messages.
private func summary(_ packet: [UInt8]) -> String? {
    guard let message = try? Message(decoding: packet) else { return nil }
    let kind = message.header.isResponse ? "R" : (message.isProbe ? "P" : "Q")
    let records = message.allRecords.map { "\($0.name) \($0.type) ttl=\($0.ttl)" }
    return "\(kind) q=\(message.questions.map(\.name)) \(records)"
}
