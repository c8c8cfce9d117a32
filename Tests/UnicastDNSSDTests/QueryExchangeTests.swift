import DNSWire
import Testing

@testable import UnicastDNSSD

/// The exchange of one request with a list of servers, driven by hand: no sockets, no clock.
@Suite("unicast DNS: one exchange")
struct QueryExchangeTests {
    static let servers = [try! DNSServer(parsing: "192.0.2.1"), try! DNSServer(parsing: "[2001:db8::53]:5300")]
    static let request = Message.unicastQuery(id: 0xBEEF, name: "_openagents._tcp.lab.example.test.", type: .ptr)

    static func answer(id: UInt16 = 0xBEEF, name: DomainName = "_openagents._tcp.lab.example.test.", type: RecordType = .ptr,
                       code: UInt8 = 0, truncated: Bool = false, records: [ResourceRecord] = []) -> [UInt8] {
        var header = Header(id: id)
        header.isResponse = true
        header.responseCode = code
        header.isTruncated = truncated
        return try! Message(header: header, questions: [Question(name: name, type: type)], answers: records).encoded()
    }

    func exchange() -> QueryExchange {
        QueryExchange(request: Self.request, servers: Self.servers, timeout: .seconds(2), attempts: 2)
    }

    @Test("the first server is asked over UDP; its answer ends the exchange")
    func answered() {
        var machine = exchange()
        #expect(machine.start(at: .zero) == [.send(.udp, server: 0)])
        #expect(machine.deadline == .seconds(2))
        let bytes = Self.answer(records: [ResourceRecord(name: "_openagents._tcp.lab.example.test.", data: .ptr("Box._openagents._tcp.lab.example.test."), ttl: 30)])
        let actions = machine.received(bytes, over: .udp, from: 0, at: .milliseconds(3))
        guard case .finish(.answer(let message, _, let server)) = actions.first else {
            Issue.record("no answer: \(actions)")
            return
        }
        #expect(server == 0 && message.answers.count == 1)
        #expect(machine.received(bytes, over: .udp, from: 0, at: .milliseconds(4)).isEmpty)
    }

    @Test("answers with another ID, question, opcode, or no QR bit are ignored and counted (RFC 5452)")
    func forgeries() {
        var machine = exchange()
        _ = machine.start(at: .zero)
        var query = Header(id: 0xBEEF)
        query.isResponse = false
        let notResponse = try! Message(header: query, questions: [Question(name: "_openagents._tcp.lab.example.test.", type: .ptr)]).encoded()
        var update = Header(id: 0xBEEF)
        update.isResponse = true
        update.opcode = Header.updateOpcode
        let otherOpcode = try! Message(header: update, questions: [Question(name: "_openagents._tcp.lab.example.test.", type: .ptr)]).encoded()
        for bytes in [Self.answer(id: 0xBEEE), Self.answer(name: "evil.example."), Self.answer(type: .a), notResponse, otherOpcode, [1, 2, 3]] {
            #expect(machine.received(bytes, over: .udp, from: 0, at: .milliseconds(1)).isEmpty)
        }
        #expect(machine.ignored == 6)
        #expect(machine.deadline == .seconds(2))
    }

    @Test("a truncated UDP answer sends the same question over TCP to the same server, with a fresh timeout")
    func truncation() {
        var machine = exchange()
        _ = machine.start(at: .zero)
        #expect(machine.received(Self.answer(truncated: true), over: .udp, from: 0, at: .seconds(1)) == [.send(.tcp, server: 0)])
        #expect(machine.deadline == .seconds(3))
        let whole = Self.answer()
        guard case .finish(.answer) = machine.received(whole, over: .tcp, from: 0, at: .milliseconds(1100)).first else {
            Issue.record("the TCP answer did not end the exchange")
            return
        }
    }

    @Test("silence moves to the next server, round after round, then fails naming the servers and what happened")
    func timeouts() {
        var machine = exchange()
        _ = machine.start(at: .zero)
        #expect(machine.advance(to: .seconds(1)).isEmpty)
        #expect(machine.advance(to: .seconds(2)) == [.send(.udp, server: 1)])
        #expect(machine.failed(over: .udp, server: 1, reason: "nothing listens there (connection refused)", at: .seconds(3)) == [.send(.udp, server: 0)])
        #expect(machine.advance(to: .seconds(5)) == [.send(.udp, server: 1)])
        let last = machine.advance(to: .seconds(7))
        guard case .finish(.failure(let error)) = last.first else {
            Issue.record("expected a failure: \(last)")
            return
        }
        #expect(error.code == .unreachable)
        #expect(error.message.contains("192.0.2.1") && error.message.contains("[2001:db8::53]:5300"))
        #expect(error.message.contains("4 attempts") && error.message.contains("connection refused"))
    }

    @Test("SERVFAIL or REFUSED moves on to the next server; when none does better, that answer is the outcome")
    func refusals() {
        var machine = exchange()
        _ = machine.start(at: .zero)
        #expect(machine.received(Self.answer(code: 2), over: .udp, from: 0, at: .milliseconds(5)) == [.send(.udp, server: 1)])
        #expect(machine.received(Self.answer(code: 5), over: .udp, from: 1, at: .milliseconds(9)) == [.send(.udp, server: 0)])
        _ = machine.received(Self.answer(code: 5), over: .udp, from: 0, at: .milliseconds(12))
        let end = machine.received(Self.answer(code: 5), over: .udp, from: 1, at: .milliseconds(15))
        guard case .finish(.answer(let message, _, _)) = end.first else {
            Issue.record("expected the refusal as the outcome: \(end)")
            return
        }
        #expect(message.responseCode == .refused)
    }

    @Test("NXDOMAIN is an answer, not a failure: it ends the exchange at once")
    func negative() {
        var machine = exchange()
        _ = machine.start(at: .zero)
        guard case .finish(.answer(let message, _, _)) = machine.received(Self.answer(code: 3), over: .udp, from: 0, at: .zero).first else {
            Issue.record("NXDOMAIN did not end the exchange")
            return
        }
        #expect(message.responseCode == .nameError)
    }

    @Test("with no server at all, it says so at once")
    func noServers() {
        var machine = QueryExchange(request: Self.request, servers: [], timeout: .seconds(1), attempts: 2)
        guard case .finish(.failure(let error)) = machine.start(at: .zero).first else {
            Issue.record("expected a failure")
            return
        }
        #expect(error.message.contains("no DNS server"))
    }
}

@Suite("unicast DNS: configuration")
struct ResolverConfigurationTests {
    @Test("resolv.conf: up to three servers, the search list (search wins over domain), timeout and attempts; junk skipped")
    func parses() {
        let text = """
            # written by hand
            domain ignored.example
            search lab.example.test corp.example ; comment
            nameserver 198.18.1.4
            nameserver fd6e:6272:1::4
            nameserver fe80::1%eth0
            nameserver 192.0.2.9
            nameserver not-an-address
            options ndots:2 timeout:3 attempts:4 rotate
            """
        let configuration = ResolverConfiguration(parsing: text)
        #expect(configuration.servers.map(\.description) == ["198.18.1.4", "fd6e:6272:1::4", "fe80::1"])
        #expect(configuration.searchDomains == ["lab.example.test.", "corp.example."])
        #expect(configuration.timeout == .seconds(3))
        #expect(configuration.attempts == 4)
        let empty = ResolverConfiguration(parsing: "domain only.example\n")
        #expect(empty.servers.map(\.description) == ["127.0.0.1"])
        #expect(empty.searchDomains == ["only.example."])
    }

    @Test("server addresses: ADDR, ADDR:PORT, [IPV6]:PORT and bare IPv6; bad ones say what is allowed")
    func servers() throws {
        #expect(try DNSServer(parsing: "198.18.1.4").description == "198.18.1.4")
        #expect(try DNSServer(parsing: "198.18.1.4:5300").port == 5300)
        #expect(try DNSServer(parsing: "[fd6e:6272:1::4]:5300").description == "[fd6e:6272:1::4]:5300")
        #expect(try DNSServer(parsing: "fd6e:6272:1::4").port == 53)
        for bad in ["ns.example", "198.18.1.4:0", "198.18.1.4:99999", "[::1", "[::1]:x", ""] {
            #expect(throws: UnicastDNSError.self) { _ = try DNSServer(parsing: bad) }
        }
    }

    @Test("domain enumeration starts from the search list, the given domains and each IPv4 subnet's reverse name (host bits zeroed)")
    func startingDomains() {
        let starting = DomainEnumeration.startingDomains(
            searchList: ["lab.example.test."], domains: ["local.", "corp.example.", "lab.example.test."],
            subnets: [(IPv4Address(198, 18, 1, 4), 24), (IPv4Address(198, 18, 1, 9), 24), (IPv4Address(172, 16, 200, 7), 12)])
        #expect(starting == ["lab.example.test.", "corp.example.", "0.1.18.198.in-addr.arpa.", "0.0.16.172.in-addr.arpa."])
        #expect(DomainEnumeration.reverseSubnetDomain(IPv4Address(10, 1, 2, 3), prefixLength: 32) == "3.2.1.10.in-addr.arpa.")
    }

    @Test("a unicast query asks for recursion and offers EDNS(0) with a 1232-byte payload (RFC 6891); the OPT extends the response code")
    func queryShape() throws {
        let query = Message.unicastQuery(id: 7, name: "lab.example.test.", type: .soa)
        #expect(query.header.recursionDesired && !query.header.isResponse && query.header.opcode == 0)
        let opt = try #require(query.optRecord)
        #expect(opt.name == .root && opt.class.rawValue == 1232 && opt.ttl == 0)
        let decoded = try Message(decoding: try query.encoded())
        #expect(decoded.optRecord?.class.rawValue == 1232)
        var answer = query
        answer.header.responseCode = 0
        answer.additionals = [ResourceRecord(name: .root, data: .opt([]), ttl: 1 << 24, class: RecordClass(1232))]
        #expect(answer.responseCode == ResponseCode(16))
    }
}
