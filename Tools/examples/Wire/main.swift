import DNSWire

// Service types follow RFC 6335; a bad one says which rule it broke.
let type = try ServiceType(parsing: "_openagents._tcp")          // domain local.
let name = try ServiceInstanceName("Build Box", type: type)       // any UTF-8, ≤ 63 bytes
print(name.domainName)                                            // Build\032Box._openagents._tcp.local.

// TXT "discovery info": ordered, case-insensitive keys, flags, empty and binary values.
var info = DiscoveryInfo()
try info.set("version", to: "0.2.2")
try info.setFlag("tls")                     // "tls" alone: a boolean attribute
// try info.set("version", to: String(repeating: "v", count: 248)) throws:
//   TXT entry "version=vvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvv…" is 256 bytes; an entry (key, "=" and value) holds at most 255
print(info.warnings)                        // advice: keys over 9 characters, records over 1300 bytes

// Or from a Codable struct (Bool as a flag, numbers and strings as text, nil omitted).
struct Agent: Codable { var version: String; var port: Int; var beta: Bool }
let txt = try DiscoveryInfoEncoder().encode(Agent(version: "0.2.2", port: 9099, beta: true))
let agent = try DiscoveryInfoDecoder().decode(Agent.self, from: txt)

// Messages: encode with name compression, split under a packet size, decode hostile bytes.
let response = Message(header: .response, answers: [
    ResourceRecord(name: type.domainName, data: .ptr(name.domainName), ttl: 4500),
    ResourceRecord(name: name.domainName, data: .txt(info.txt), ttl: 4500, cacheFlush: true),
])
let packets = try response.encodedPackets()            // each ≤ 1472 bytes; TC on split queries
let decoded = try Message.decode(packets[0])           // .message, .skippedRecords
print(decoded.message.answers.count, "answers;", agent.version, agent.port, agent.beta)
