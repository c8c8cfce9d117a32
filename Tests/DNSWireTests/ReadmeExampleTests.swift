import DNSWire
import Testing

/// The DNSWire example of Documentation/Swift.md, so that it keeps compiling and saying the truth.
@Suite("README example")
struct ReadmeExampleTests {
    struct Agent: Codable, Equatable { var version: String; var port: Int; var beta: Bool }

    @Test("the example runs as written")
    func example() throws {
        let type = try ServiceType(parsing: "_openagents._tcp")
        let name = try ServiceInstanceName("Build Box", type: type)
        #expect(name.domainName.description == #"Build\032Box._openagents._tcp.local."#)

        var info = DiscoveryInfo()
        try info.set("version", to: "0.2.2")
        try info.setFlag("tls")
        let error = #expect(throws: DiscoveryInfoError.self) {
            try info.set("version", to: String(repeating: "v", count: 248))
        }
        #expect(error?.description == "TXT entry \"version=\(String(repeating: "v", count: 32))…\" is 256 bytes; an entry (key, \"=\" and value) holds at most 255")
        #expect(info.warnings.isEmpty)

        let txt = try DiscoveryInfoEncoder().encode(Agent(version: "0.2.2", port: 9099, beta: true))
        #expect(try DiscoveryInfoDecoder().decode(Agent.self, from: txt) == Agent(version: "0.2.2", port: 9099, beta: true))

        let response = Message(header: .response, answers: [
            ResourceRecord(name: type.domainName, data: .ptr(name.domainName), ttl: 4500),
            ResourceRecord(name: name.domainName, data: .txt(info.txt), ttl: 4500, cacheFlush: true),
        ])
        let packets = try response.encodedPackets()
        let decoded = try Message.decode(packets[0])
        #expect(decoded.message == response)
        #expect(decoded.skippedRecords.isEmpty)
    }
}
