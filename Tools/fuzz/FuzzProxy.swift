// libFuzzer target for the discovery proxy's answering machine (DiscoveryProxyCore): what a
// stranger on the network sends it, and what a stranger on the link tells it. Tools/fuzz/build
// compiles this file into the SAME module as Sources/DiscoveryProxyCore/*.swift.
//
// The input's first byte picks the transport (even: UDP, odd: TCP) and whether the rest is
// also played as the link's records; the rest is the DNS message. Properties, each a trap that
// libFuzzer saves:
//
//  P1 received() never traps, and every reply it gives decodes, is a response (QR set), and
//     carries the question's ID whenever the question had a readable header.
//  P2 a message with QR set (an answer, not a question) draws no reply at all.
//  P3 over UDP a reply never exceeds 512 bytes for a question without EDNS(0), nor 1232 with
//     it: a small question never draws a large answer.
//  P4 a question outside the zone is refused and never becomes a link question.
//  P5 with the input's records played as what the link says (for every link question the
//     machine asked), every reply's records are inside the zone, name no .local host or
//     instance in their data, carry no link-local address, and have TTLs of at most 10 s;
//     nothing traps as time passes.
//  P6 with bit 2 of the first byte set, the rest is also a DSO message from a DNS Push client
//     (RFC 8490/8765): the session machine never traps; everything it sends decodes as DSO; an
//     answer carries the request's ID; a SUBSCRIBE it passes on is answered by the answering
//     machine, and every PUSH that follows is unidirectional and at most 16,382 bytes.

import DNSWire
import NearbyBasics

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ start: UnsafeRawPointer?, _ count: Int) -> CInt {
    let input = UnsafeRawBufferPointer(start: count == 0 ? nil : start, count: count)
    FuzzProxy(input: Array(input)).run()
    return 0
}

struct FuzzProxy {
    let input: [UInt8]
    static let zone = try! ProxyZone("lan1.example.test.", nameServers: [.init(name: "proxy.example.test.", addresses: [])])
    static let source = IPAddress.v4(IPv4Address(198, 18, 2, 6))

    func fail(_ property: String, _ detail: String) -> Never {
        fuzzFailure("proxy", property, detail, input: input)
    }

    func run() {
        guard let mode = input.first else { return }
        let bytes = Array(input.dropFirst())
        let transport: ProxyStateMachine.Transport = mode & 1 == 0 ? .udp : .tcp
        var configuration = ProxyStateMachine.Configuration(zones: [Self.zone])
        configuration.rateLimit = nil
        var machine = ProxyStateMachine(configuration)
        let actions = machine.received(bytes, from: Self.source, over: transport, request: .init(1), now: .zero)
        let query = try? Message(decoding: bytes)
        check(actions, query: query, bytes: bytes, transport: transport)
        if let query, query.header.isResponse, actions.contains(where: { if case .reply = $0 { true } else { false } }) {
            fail("P2", "an answer sent to the proxy was answered: \(actions)")
        }
        if let question = query?.questions.first, query?.questions.count == 1, !Self.zone.contains(question.name) {
            if actions.contains(where: { if case .startLinkQuestion = $0 { true } else { false } }) {
                fail("P4", "\(question.name) is outside the zone and became a link question")
            }
        }
        if mode & 4 != 0 { session(bytes) }
        // P5: the input's records, as the link's answer to every question the machine asked.
        guard mode & 2 != 0, let records = query?.allRecords else { return }
        var later: [ProxyStateMachine.Action] = []
        for case .startLinkQuestion(let link, let question) in actions {
            let matching = records.map { record -> ResourceRecord in
                var moved = record
                moved.name = question.name
                return moved
            }
            later += machine.linkChanged(link, question, added: matching + records, removed: [], now: .milliseconds(10))
        }
        later += machine.advance(to: .seconds(2))
        later += machine.received(bytes, from: Self.source, over: transport, request: .init(2), now: .seconds(3))
        check(later, query: query, bytes: bytes, transport: transport)
        for case .reply(_, let reply) in later {
            guard let message = try? Message(decoding: reply) else { continue }
            for record in message.answers + message.authorities + message.additionals where record.type != .opt {
                if !Self.zone.contains(record.name) { fail("P5", "a record outside the zone: \(record)") }
                if record.ttl > 10 && record.type != .ns { fail("P5", "a TTL over 10 s: \(record)") }
                switch record.data {
                case .a(let address) where address.isLinkLocal: fail("P5", "a link-local address left: \(record)")
                case .aaaa(let address) where address.isLinkLocal: fail("P5", "a link-local address left: \(record)")
                case .ptr(let name), .cname(let name), .ns(let name):
                    if name.hasSuffix(ProxyZone.linkDomain) { fail("P5", "a .local name left in record data: \(record)") }
                case .srv(let srv):
                    if srv.target.hasSuffix(ProxyZone.linkDomain) { fail("P5", "a .local name left in an SRV target: \(record)") }
                default: break
                }
            }
        }
    }

    /// P6: the bytes as a Push client's DSO message, twice (a second SUBSCRIBE to one question
    /// is a protocol error), then the link's records pushed and time passing.
    func session(_ bytes: [UInt8]) {
        var configuration = ProxyStateMachine.Configuration(zones: [Self.zone])
        configuration.pushPort = 853
        var machine = ProxyStateMachine(configuration)
        var session = PushSession(now: .zero)
        let requestID = bytes.count >= 2 ? UInt16(bytes[0]) << 8 | UInt16(bytes[1]) : 0
        func checkSent(_ actions: [PushSession.Action]) {
            for case .send(let message) in actions {
                guard let decoded = try? DSOMessage(decoding: message) else { fail("P6", "a DSO message that does not decode: \(hexString(message))") }
                if decoded.isResponse, decoded.id != requestID { fail("P6", "an answer with ID \(decoded.id) to request \(requestID)") }
                if !decoded.isResponse {
                    if decoded.id != 0 { fail("P6", "the server sent a request (ID \(decoded.id))") }
                    if message.count > PushSession.maximumPushMessage { fail("P6", "a PUSH of \(message.count) bytes") }
                }
            }
        }
        for round in 0..<2 {
            let now = Duration.milliseconds(100 * round)
            let actions = session.received(bytes, now: now)
            checkSent(actions)
            for case .subscribe(let id, let question) in actions {
                let (result, more) = machine.subscribe(question, session: .init(1), id: id, now: now)
                switch result {
                case .accepted(let current): checkSent(session.subscribed(id, code: .noError) + session.push(current))
                case .refused(let code): checkSent(session.subscribed(id, code: code))
                }
                if let records = try? Message(decoding: bytes).allRecords {
                    for case .startLinkQuestion(let link, let linkQuestion) in more {
                        for case .push(_, let changes) in machine.linkChanged(link, linkQuestion, added: records, removed: [], now: now) {
                            checkSent(session.push(changes))
                        }
                    }
                }
            }
        }
        checkSent(session.advance(to: .seconds(30)))
        _ = session.ended()
        machine.sessionEnded(.init(1), now: .seconds(31))
        _ = machine.advance(to: .seconds(120))
    }

    func check(_ actions: [ProxyStateMachine.Action], query: Message?, bytes: [UInt8], transport: ProxyStateMachine.Transport) {
        for case .reply(_, let reply) in actions {
            guard let message = try? Message(decoding: reply) else { fail("P1", "a reply that does not decode: \(hexString(reply))") }
            if !message.header.isResponse { fail("P1", "a reply without QR") }
            if bytes.count >= 2 {
                let id = UInt16(bytes[0]) << 8 | UInt16(bytes[1])
                if message.header.id != id { fail("P1", "reply ID \(message.header.id), question ID \(id)") }
            }
            if transport == .udp {
                let limit = query?.optRecord == nil ? 512 : 1232
                if reply.count > limit { fail("P3", "a \(reply.count)-byte UDP reply to a \(bytes.count)-byte question (limit \(limit))") }
            }
        }
    }
}
