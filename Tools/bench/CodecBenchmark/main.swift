// Codec benchmark: how long DNSWire takes to decode and encode two typical mDNS packets.
//
//   nearby-codec-bench [--write-packets DIR] [--json]
//
// Tools/bench/codec builds this in release mode, runs it, times python-zeroconf on the very same
// bytes and prints the ratios. Figures are the median and 95th percentile of 21 rounds (each
// round the mean of many calls); nothing is asserted.

import DNSWire
import Foundation

/// A DNS-SD response as a responder sends it after a browse: PTR answer, SRV/TXT/A/AAAA/NSEC
/// additionals, TXT with several entries.
func realisticResponse() throws -> Message {
    let type = try ServiceType(parsing: "_openagents._tcp")
    let instance = try ServiceInstanceName("Build Box", type: type).domainName
    let host: DomainName = "buildbox.local."
    var info = DiscoveryInfo()
    try info.set("version", to: "0.2.2")
    try info.set("protocol", to: "jsonrpc-2.0")
    try info.set("mode", to: "bridge")
    try info.set("id", to: "KD2P-7QX3-M4TA-9RWE")
    try info.set("name", to: "Build Box")
    try info.setFlag("tls")
    return Message(
        header: .response,
        answers: [ResourceRecord(name: type.domainName, data: .ptr(instance), ttl: 4500)],
        additionals: [
            ResourceRecord(name: instance, data: .srv(SRVData(port: 9099, target: host)), ttl: 120, cacheFlush: true),
            ResourceRecord(name: instance, data: .txt(info.txt), ttl: 4500, cacheFlush: true),
            ResourceRecord(name: host, data: .a(IPv4Address(198, 18, 1, 2)), ttl: 120, cacheFlush: true),
            ResourceRecord(name: host, data: .aaaa(IPv6Address("fe80::a8bb:ccff:fedd:eeff")!), ttl: 120, cacheFlush: true),
            ResourceRecord(name: instance, data: .nsec(NSECData(nextName: instance, types: [.txt, .srv])), ttl: 4500, cacheFlush: true),
            ResourceRecord(name: host, data: .nsec(NSECData(nextName: host, types: [.a, .aaaa])), ttl: 120, cacheFlush: true),
        ])
}

/// A browse query for `_openagents._tcp` listing ten known answers (RFC 6762 §7.1).
func queryWithKnownAnswers() throws -> Message {
    let type = try ServiceType(parsing: "_openagents._tcp")
    let known = try (1...10).map { index in
        ResourceRecord(
            name: type.domainName,
            data: .ptr(try ServiceInstanceName("Peer number \(index)", type: type).domainName), ttl: 4500)
    }
    return Message(questions: [Question(name: type.domainName, type: .ptr)], answers: known)
}

struct Figure: Codable {
    var packet: String
    var operation: String
    var bytes: Int
    /// Median over the rounds.
    var nanosecondsPerPacket: Double
    /// 95th percentile over the rounds.
    var nanosecondsPerPacketP95: Double
    var packetsPerSecond: Double
}

/// Runs `body` `iterations` times per round and returns the median and the 95th percentile of
/// the rounds' ns per call.
func measure(iterations: Int, rounds: Int = 21, _ body: () throws -> Int) rethrows -> (median: Double, p95: Double) {
    var sink = 0
    var samples: [Double] = []
    for _ in 0..<rounds {
        let start = ContinuousClock.now
        for _ in 0..<iterations { sink &+= try body() }
        let elapsed = ContinuousClock.now - start
        let ns = Double(elapsed.components.seconds) * 1e9 + Double(elapsed.components.attoseconds) / 1e9
        samples.append(ns / Double(iterations))
    }
    if sink == 42 { print("") }  // keeps the optimiser from dropping the work
    let sorted = samples.sorted()
    let p95 = sorted[min(sorted.count - 1, Int((Double(sorted.count) * 0.95).rounded(.up)) - 1)]
    return (sorted[sorted.count / 2], p95)
}

var arguments = CommandLine.arguments.dropFirst()
var packetDirectory: String?
var json = false
var operations: Set<String> = ["decode", "encode"]
while let argument = arguments.popFirst() {
    switch argument {
    case "--write-packets": packetDirectory = arguments.popFirst()
    case "--only":
        // For profiling one side: --only decode | --only encode.
        operations = [arguments.popFirst() ?? ""]
    case "--json": json = true
    case "--help", "-h":
        print("usage: nearby-codec-bench [--write-packets DIR] [--only decode|encode] [--json]")
        exit(0)
    default:
        FileHandle.standardError.write(Data("nearby-codec-bench: unknown argument \(argument)\n".utf8))
        exit(2)
    }
}

let cases: [(String, Message)] = [
    ("dns-sd-response", try realisticResponse()),
    ("query-10-known-answers", try queryWithKnownAnswers()),
]
var figures: [Figure] = []
for (label, message) in cases {
    let bytes = try message.encoded()
    if let packetDirectory {
        try Data(bytes).write(to: URL(fileURLWithPath: packetDirectory).appendingPathComponent("\(label).bin"))
    }
    // Sanity: the bytes decode to the message we meant.
    let check = try Message(decoding: bytes)
    precondition(check == message, "benchmark packet does not round-trip")
    let iterations = 50_000
    if operations.contains("decode") {
        let decode = try measure(iterations: iterations) {
            try Message(decoding: bytes).answers.count
        }
        figures.append(
            Figure(
                packet: label, operation: "decode", bytes: bytes.count, nanosecondsPerPacket: decode.median,
                nanosecondsPerPacketP95: decode.p95, packetsPerSecond: 1e9 / decode.median))
    }
    if operations.contains("encode") {
        let encode = try measure(iterations: iterations) {
            try message.encoded().count
        }
        figures.append(
            Figure(
                packet: label, operation: "encode", bytes: bytes.count, nanosecondsPerPacket: encode.median,
                nanosecondsPerPacketP95: encode.p95, packetsPerSecond: 1e9 / encode.median))
    }
}

if json {
    let encoder = JSONEncoder()
    for figure in figures { print(String(decoding: try encoder.encode(figure), as: UTF8.self)) }
} else {
    print("packet                    op      bytes   ns median    ns p95   packets/s")
    for figure in figures {
        print(
            figure.packet.padding(toLength: 26, withPad: " ", startingAt: 0)
                + figure.operation.padding(toLength: 8, withPad: " ", startingAt: 0)
                + String(
                    format: "%5d  %9.0f  %8.0f  %10.0f", figure.bytes, figure.nanosecondsPerPacket,
                    figure.nanosecondsPerPacketP95, figure.packetsPerSecond))
    }
}
