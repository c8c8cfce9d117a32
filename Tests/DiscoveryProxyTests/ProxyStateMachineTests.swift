import DNSWire
import Testing

@testable import DiscoveryProxyCore

/// The proxy's decisions, driven by hand: questions as bytes, the link's records as events,
/// time as a number. No sockets, no clock, no tasks.
@Suite("discovery proxy: answering")
struct ProxyStateMachineTests {
    static let zone = TranslationTests.zone
    static let client = IPAddress.v4(IPv4Address("198.18.2.6")!)
    static let link = LinkIndex(0)
    static let browse = LinkQuestion(name: "_ipp._tcp.local.", type: .ptr)

    static func machine(_ change: (inout ProxyStateMachine.Configuration) -> Void = { _ in }) -> ProxyStateMachine {
        var configuration = ProxyStateMachine.Configuration(zones: [zone])
        change(&configuration)
        return ProxyStateMachine(configuration)
    }

    static func query(_ name: DomainName, _ type: RecordType, id: UInt16 = 0x1234, edns: UInt16? = 1232) -> [UInt8] {
        var message = Message.unicastQuery(id: id, name: name, type: type, payloadSize: edns ?? 512)
        if edns == nil { message.additionals = [] }
        return try! message.encoded()
    }

    static func ask(
        _ machine: inout ProxyStateMachine, _ name: DomainName, _ type: RecordType, request: UInt64 = 1, at now: Duration = .zero,
        over transport: ProxyStateMachine.Transport = .udp, edns: UInt16? = 1232, from source: IPAddress = client
    ) -> [ProxyStateMachine.Action] {
        machine.received(query(name, type, edns: edns), from: source, over: transport, request: .init(request), now: now)
    }

    /// The reply for `request` among `actions`, decoded.
    static func reply(_ actions: [ProxyStateMachine.Action], request: UInt64 = 1) throws -> Message {
        for action in actions {
            if case .reply(let id, let bytes) = action, id.rawValue == request { return try Message(decoding: bytes) }
        }
        throw ProxyError(.invalidInput, "no reply for request \(request) in \(actions)")
    }

    static func ptr(_ instance: String) -> ResourceRecord {
        ResourceRecord(name: "_ipp._tcp.local.", data: .ptr(try! DomainName(parsing: "\(instance)._ipp._tcp.local.")), ttl: 4500)
    }

    // MARK: What the zone itself answers

    @Test("a question outside the zone is refused, and nothing is asked of the link: no recursion, no open resolver")
    func outsideZone() throws {
        var machine = Self.machine()
        for name: DomainName in ["example.test.", "lan2.example.test.", "www.example.com.", "printer.local."] {
            let answer = try Self.reply(Self.ask(&machine, name, .a))
            #expect(answer.responseCode == .refused, "\(name)")
            #expect(answer.answers.isEmpty && !answer.header.isAuthoritative && !answer.header.recursionAvailable)
        }
        #expect(machine.linkQuestions.isEmpty)
        #expect(machine.statistics.refusedOutsideZones == 4)
    }

    @Test("the apex serves SOA and NS, authoritatively; another type there is NODATA with the SOA")
    func apex() throws {
        var machine = Self.machine()
        let soa = try Self.reply(Self.ask(&machine, "lan1.example.test.", .soa))
        #expect(soa.header.isAuthoritative && soa.responseCode == .noError)
        #expect(soa.answers == [Self.zone.soaRecord])
        let ns = try Self.reply(Self.ask(&machine, "LAN1.example.test.", .ns))
        #expect(ns.answers.map(\.data) == [.ns("proxy-lan1.example.test.")])
        #expect(ns.questions.first?.name.description == "LAN1.example.test.", "the question is echoed as asked")
        let a = try Self.reply(Self.ask(&machine, "lan1.example.test.", .a))
        #expect(a.responseCode == .noError && a.answers.isEmpty && a.authorities == [Self.zone.soaRecord])
        #expect(machine.linkQuestions.isEmpty)
    }

    @Test("a name server named inside the zone is answered with the addresses it was given")
    func nameServerInside() throws {
        let zone = try ProxyZone("lan1.example.test.", nameServers: [.init(name: "ns.lan1.example.test.", addresses: [.v4(IPv4Address("198.18.1.5")!)])])
        var machine = ProxyStateMachine(.init(zones: [zone]))
        let ns = try Self.reply(Self.ask(&machine, "lan1.example.test.", .ns))
        #expect(ns.additionals.contains(ResourceRecord(name: "ns.lan1.example.test.", data: .a(IPv4Address("198.18.1.5")!), ttl: 10)))
        let a = try Self.reply(Self.ask(&machine, "ns.lan1.example.test.", .a))
        #expect(a.answers.map(\.data) == [.a(IPv4Address("198.18.1.5")!)])
        #expect(machine.linkQuestions.isEmpty)
    }

    @Test("b, db and lb._dns-sd._udp under the zone point at it; r and dr have nothing (no registration here)")
    func browseDomains() throws {
        var machine = Self.machine()
        for label in ["b", "db", "lb"] {
            let answer = try Self.reply(Self.ask(&machine, try DomainName(parsing: "\(label)._dns-sd._udp.lan1.example.test."), .ptr))
            #expect(answer.answers.map(\.data) == [.ptr("lan1.example.test.")], "\(label)")
        }
        for label in ["r", "dr"] {
            let answer = try Self.reply(Self.ask(&machine, try DomainName(parsing: "\(label)._dns-sd._udp.lan1.example.test."), .ptr))
            #expect(answer.answers.isEmpty && answer.authorities == [Self.zone.soaRecord], "\(label)")
        }
        #expect(machine.linkQuestions.isEmpty)
    }

    @Test("service type enumeration (_services._dns-sd._udp, RFC 6763 §9) is asked of the link and answered with its types, moved into the zone")
    func serviceTypeEnumeration() throws {
        var machine = Self.machine()
        let types = LinkQuestion(name: "_services._dns-sd._udp.local.", type: .ptr)
        let started = Self.ask(&machine, "_SERVICES._dns-sd._udp.lan1.example.test.", .ptr)
        #expect(started == [.startLinkQuestion(Self.link, types)], "the link is asked, not answered from the zone")
        let offered = ["_ipp._tcp.local.", "_openagents._tcp.local."].map {
            ResourceRecord(name: "_services._dns-sd._udp.local.", data: .ptr(try! DomainName(parsing: $0)), ttl: 4500)
        }
        _ = machine.linkChanged(Self.link, types, added: offered, removed: [], now: .milliseconds(30))
        let answer = try Self.reply(machine.advance(to: .milliseconds(180)))
        #expect(answer.responseCode == .noError && answer.header.isAuthoritative)
        #expect(answer.answers.map(\.data) == [.ptr("_ipp._tcp.lan1.example.test."), .ptr("_openagents._tcp.lan1.example.test.")])
        #expect(answer.answers.allSatisfy { $0.name.description == "_services._dns-sd._udp.lan1.example.test." })
        // A DNS Push subscriber to it is told the same, and a type that leaves the link is pushed as gone.
        let (result, _) = machine.subscribe(Question(name: "_services._dns-sd._udp.lan1.example.test.", type: .ptr), session: .init(1), id: 3, now: .seconds(1))
        guard case .accepted(let now) = result else { Issue.record("subscription refused: \(result)"); return }
        #expect(now.count == 2)
        var goodbye = offered[0]
        goodbye.ttl = 0
        let pushed = machine.linkChanged(Self.link, types, added: [goodbye], removed: [], now: .seconds(2))
        #expect(pushed.contains { if case .push(_, let changes) = $0 { changes.count == 1 } else { false } })
    }

    @Test("update, LLQ and Push service names, and SOA/NS/DS below the apex, are NODATA at once (RFC 8766 §6.3, §6.4)")
    func administrative() throws {
        var machine = Self.machine()
        for name: DomainName in ["_dns-update._udp.lan1.example.test.", "_dns-push-tls._tcp.lan1.example.test.", "_dns-llq._udp.lan1.example.test."] {
            let answer = try Self.reply(Self.ask(&machine, name, .srv))
            #expect(answer.answers.isEmpty && answer.authorities == [Self.zone.soaRecord], "\(name)")
        }
        for type in [RecordType.soa, .ns, RecordType(43)] {
            let answer = try Self.reply(Self.ask(&machine, "_ipp._tcp.lan1.example.test.", type))
            #expect(answer.responseCode == .noError && answer.answers.isEmpty, "\(type)")
        }
        #expect(machine.linkQuestions.isEmpty)
    }

    // MARK: Refusals and malformed input

    @Test("malformed questions: FORMERR when the header is readable, nothing when it is not or when it is a response")
    func malformed() throws {
        var machine = Self.machine()
        // Too short for a header: silence.
        #expect(machine.received([1, 2, 3], from: Self.client, over: .udp, request: .init(1), now: .zero) == [.drop(.init(1))])
        // A header that promises a question that is not there: FORMERR with the same ID.
        let broken: [UInt8] = [0xAB, 0xCD, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0, 7, 0x61]
        let formerr = try Self.reply(machine.received(broken, from: Self.client, over: .udp, request: .init(2), now: .zero), request: 2)
        #expect(formerr.header.id == 0xABCD && formerr.responseCode == .formatError && formerr.header.isResponse)
        // A response sent to the proxy is never answered (two servers would echo forever).
        var response = Message.unicastQuery(id: 9, name: "_ipp._tcp.lan1.example.test.", type: .ptr)
        response.header.isResponse = true
        #expect(machine.received(try response.encoded(), from: Self.client, over: .udp, request: .init(3), now: .zero) == [.drop(.init(3))])
        // Two questions in one message: FORMERR.
        var two = Message.unicastQuery(id: 10, name: "_ipp._tcp.lan1.example.test.", type: .ptr)
        two.questions.append(Question(name: "_http._tcp.lan1.example.test.", type: .ptr))
        #expect(try Self.reply(machine.received(try two.encoded(), from: Self.client, over: .udp, request: .init(4), now: .zero), request: 4).responseCode == .formatError)
        #expect(machine.statistics.droppedUnreadable == 1 && machine.statistics.droppedResponses == 1 && machine.statistics.formatErrors == 2)
        #expect(machine.linkQuestions.isEmpty)
    }

    @Test("an UPDATE is not implemented, zone transfers are refused, ANY gets one HINFO (RFC 8482); EDNS version 1 gets BADVERS")
    func notImplemented() throws {
        var machine = Self.machine()
        var update = Message.unicastQuery(id: 1, name: "lan1.example.test.", type: .soa)
        update.header.opcode = Header.updateOpcode
        #expect(try Self.reply(machine.received(try update.encoded(), from: Self.client, over: .udp, request: .init(1), now: .zero)).responseCode == .notImplemented)
        #expect(try Self.reply(Self.ask(&machine, "lan1.example.test.", RecordType(252))).responseCode == .refused)
        #expect(try Self.reply(Self.ask(&machine, "lan1.example.test.", RecordType(251))).responseCode == .refused)
        #expect(try Self.reply(Self.ask(&machine, "lan1.example.test.", RecordType(254))).responseCode == .notImplemented)
        // ANY: RFC 8482's one small record, not everything the link holds.
        let any = try Self.reply(Self.ask(&machine, "_ipp._tcp.lan1.example.test.", .any))
        #expect(any.responseCode == .noError && any.answers.map(\.type) == [.hinfo])
        var version1 = Message.unicastQuery(id: 2, name: "_ipp._tcp.lan1.example.test.", type: .ptr)
        version1.additionals[0].ttl = 1 << 16
        let badvers = try Self.reply(machine.received(try version1.encoded(), from: Self.client, over: .udp, request: .init(2), now: .zero), request: 2)
        #expect(badvers.responseCode == ResponseCode(16))
        #expect(machine.linkQuestions.isEmpty)
    }

    // MARK: Answers from the link

    @Test("a new question starts a link question and waits; the first answers and a gathering time later, it is answered")
    func firstQuestionWaits() throws {
        var machine = Self.machine()
        let started = Self.ask(&machine, "_ipp._tcp.lan1.example.test.", .ptr)
        #expect(started == [.startLinkQuestion(Self.link, Self.browse)])
        #expect(machine.nextDeadline == .seconds(1))
        // The first responder answers after 40 ms: the proxy gathers for 150 ms more.
        #expect(machine.linkChanged(Self.link, Self.browse, added: [Self.ptr("Alpha")], removed: [], now: .milliseconds(40)).isEmpty)
        #expect(machine.nextDeadline == .milliseconds(190))
        #expect(machine.linkChanged(Self.link, Self.browse, added: [Self.ptr("Beta")], removed: [], now: .milliseconds(110)).isEmpty)
        let actions = machine.advance(to: .milliseconds(190))
        let answer = try Self.reply(actions)
        #expect(answer.header.isAuthoritative && answer.responseCode == .noError && answer.header.id == 0x1234)
        #expect(answer.answers == [
            ResourceRecord(name: "_ipp._tcp.lan1.example.test.", data: .ptr("Alpha._ipp._tcp.lan1.example.test."), ttl: 10),
            ResourceRecord(name: "_ipp._tcp.lan1.example.test.", data: .ptr("Beta._ipp._tcp.lan1.example.test."), ttl: 10),
        ])
        #expect(answer.optRecord != nil, "EDNS(0) in, EDNS(0) out")
        // Now the link has been asked: the next question is answered at once, the link asked nothing new.
        let again = Self.ask(&machine, "_IPP._tcp.lan1.example.test.", .ptr, request: 2, at: .seconds(5))
        #expect(try Self.reply(again, request: 2).answers.count == 2)
        #expect(again.count == 1)
        #expect(machine.statistics.linkQuestionsStarted == 1)
    }

    @Test("when the link says nothing, the answer after the timeout is NOERROR with no records and the SOA: never NXDOMAIN")
    func nothingOnTheLink() throws {
        var machine = Self.machine()
        _ = Self.ask(&machine, "Nobody._ipp._tcp.lan1.example.test.", .srv)
        #expect(machine.advance(to: .milliseconds(999)).isEmpty)
        let answer = try Self.reply(machine.advance(to: .seconds(1)))
        #expect(answer.responseCode == .noError)
        #expect(answer.answers.isEmpty && answer.authorities == [Self.zone.soaRecord])
        #expect(machine.statistics.noData == 1)
    }

    @Test("several clients asking one new name share one link question, and are all answered")
    func sharedQuestion() throws {
        var machine = Self.machine()
        #expect(Self.ask(&machine, "_ipp._tcp.lan1.example.test.", .ptr, request: 1).count == 1)
        #expect(Self.ask(&machine, "_ipp._tcp.lan1.example.test.", .ptr, request: 2, at: .milliseconds(10), over: .tcp).isEmpty)
        _ = machine.linkChanged(Self.link, Self.browse, added: [Self.ptr("Alpha")], removed: [], now: .milliseconds(50))
        let actions = machine.advance(to: .milliseconds(200))
        #expect(try Self.reply(actions, request: 1).answers.count == 1)
        #expect(try Self.reply(actions, request: 2).answers.count == 1)
        #expect(machine.statistics.linkQuestionsStarted == 1)
    }

    @Test("records the link loses, or says goodbye to, leave the next answer; records of other names are ignored")
    func removals() throws {
        var machine = Self.machine()
        _ = Self.ask(&machine, "_ipp._tcp.lan1.example.test.", .ptr)
        _ = machine.linkChanged(Self.link, Self.browse, added: [Self.ptr("Alpha"), Self.ptr("Beta"), Self.ptr("Gamma")], removed: [], now: .milliseconds(10))
        _ = machine.advance(to: .seconds(1))
        var goodbye = Self.ptr("Beta")
        goodbye.ttl = 0
        var stray = Self.ptr("Delta")
        stray.name = "_http._tcp.local."
        _ = machine.linkChanged(Self.link, Self.browse, added: [goodbye, stray], removed: [Self.ptr("Gamma")], now: .seconds(2))
        let answer = try Self.reply(Self.ask(&machine, "_ipp._tcp.lan1.example.test.", .ptr, request: 2, at: .seconds(3)), request: 2)
        #expect(answer.answers.map(\.data) == [.ptr("Alpha._ipp._tcp.lan1.example.test.")])
    }

    @Test("a PTR answer carries what the link has told of each instance (SRV, TXT, host addresses) as additional records, link-local ones left out")
    func additionals() throws {
        var machine = Self.machine()
        let srvQuestion = LinkQuestion(name: "Alpha._ipp._tcp.local.", type: .srv)
        let host: DomainName = "alpha.local."
        _ = Self.ask(&machine, "Alpha._ipp._tcp.lan1.example.test.", .srv)
        // The host's own record (one owner) is answered as it comes, without gathering.
        let srvActions = machine.linkChanged(
            Self.link, srvQuestion, added: [ResourceRecord(name: "Alpha._ipp._tcp.local.", data: .srv(SRVData(port: 631, target: host)), ttl: 120)], removed: [],
            now: .milliseconds(10))
        #expect(try Self.reply(srvActions).answers.count == 1)
        // The SRV answer makes the proxy ask for the host's addresses too.
        #expect(srvActions.contains(.startLinkQuestion(Self.link, LinkQuestion(name: host, type: .a))))
        #expect(srvActions.contains(.startLinkQuestion(Self.link, LinkQuestion(name: host, type: .aaaa))))
        // Asked at once, the address waits for the link like a first question, instead of "no records".
        #expect(Self.ask(&machine, "alpha.lan1.example.test.", .a, request: 5, at: .milliseconds(170)).isEmpty)
        _ = machine.linkChanged(
            Self.link, LinkQuestion(name: host, type: .a), added: [ResourceRecord(name: host, data: .a(IPv4Address("198.18.1.9")!), ttl: 120)], removed: [],
            now: .milliseconds(200))
        _ = machine.linkChanged(Self.link, LinkQuestion(name: host, type: .aaaa), added: [ResourceRecord(name: host, data: .aaaa(IPv6Address("fe80::9")!), ttl: 120)], removed: [], now: .milliseconds(200))
        // Addresses gather a moment (20 ms: avahi hands them over one by one), not 150 ms.
        #expect(machine.advance(to: .milliseconds(219)).isEmpty)
        let address = try Self.reply(machine.advance(to: .milliseconds(220)), request: 5)
        #expect(address.answers.map(\.data) == [.a(IPv4Address("198.18.1.9")!)])
        _ = Self.ask(&machine, "_ipp._tcp.lan1.example.test.", .ptr, request: 2, at: .seconds(1))
        _ = machine.linkChanged(Self.link, Self.browse, added: [Self.ptr("Alpha")], removed: [], now: .milliseconds(1010))
        let answer = try Self.reply(machine.advance(to: .milliseconds(1160)), request: 2)
        #expect(answer.answers.count == 1)
        let extra = answer.additionals.filter { $0.type != .opt }
        #expect(extra.map(\.type) == [.srv, .a])
        #expect(extra.allSatisfy { $0.name.hasSuffix("lan1.example.test.") && $0.ttl <= 10 })
        #expect(machine.statistics.suppressed[.linkLocalAddress] == 1)
    }

    // MARK: Size

    static func manyServices(_ machine: inout ProxyStateMachine, count: Int) {
        _ = Self.ask(&machine, "_ipp._tcp.lan1.example.test.", .ptr, request: 99)
        let records = (0..<count).map { Self.ptr("Printer number \($0) on the second floor") }
        _ = machine.linkChanged(Self.link, Self.browse, added: records, removed: [], now: .milliseconds(10))
        _ = machine.advance(to: .seconds(1))
    }

    @Test("UDP answers fit the client's buffer: 512 bytes without EDNS(0), the offer (at most 1232) with it; beyond that TC and no records")
    func udpSizes() throws {
        var machine = Self.machine()
        Self.manyServices(&machine, count: 100)
        let plain = Self.ask(&machine, "_ipp._tcp.lan1.example.test.", .ptr, request: 1, at: .seconds(2), edns: nil)
        guard case .reply(_, let plainBytes) = plain.first else { throw ProxyError(.invalidInput, "no reply") }
        #expect(plainBytes.count <= 512)
        let plainAnswer = try Message(decoding: plainBytes)
        #expect(plainAnswer.header.isTruncated && plainAnswer.answers.isEmpty)
        let offered = Self.ask(&machine, "_ipp._tcp.lan1.example.test.", .ptr, request: 2, at: .seconds(2), edns: 4096)
        guard case .reply(_, let offeredBytes) = offered.first else { throw ProxyError(.invalidInput, "no reply") }
        #expect(offeredBytes.count <= 1232)
        let tcp = try Self.reply(Self.ask(&machine, "_ipp._tcp.lan1.example.test.", .ptr, request: 3, at: .seconds(2), over: .tcp), request: 3)
        #expect(!tcp.header.isTruncated && tcp.answers.count == 100)
        // Three: the first answer (to request 99, offering 1232 bytes) was truncated too.
        #expect(machine.statistics.truncated == 3)
    }

    @Test("a few services fit a plain 512-byte UDP answer")
    func smallFits() throws {
        var machine = Self.machine()
        Self.manyServices(&machine, count: 3)
        let answer = try Self.reply(Self.ask(&machine, "_ipp._tcp.lan1.example.test.", .ptr, request: 1, at: .seconds(2), edns: nil))
        #expect(!answer.header.isTruncated && answer.answers.count == 3 && answer.optRecord == nil)
    }

    // MARK: Limits

    @Test("over a source's UDP rate, questions are dropped, every second one answered empty with TC; TCP and other networks go on, the same /24 does not")
    func rateLimit() throws {
        var machine = Self.machine { $0.rateLimit = RateLimit(perSecond: 2, burst: 3) }
        var replies = 0
        for request in 1...3 {
            if case .reply = Self.ask(&machine, "lan1.example.test.", .soa, request: UInt64(request)).first { replies += 1 }
        }
        #expect(replies == 3)
        #expect(Self.ask(&machine, "lan1.example.test.", .soa, request: 4) == [.drop(.init(4))])
        let slip = try Self.reply(Self.ask(&machine, "lan1.example.test.", .soa, request: 5), request: 5)
        #expect(slip.header.isTruncated && slip.answers.isEmpty)
        #expect(try Self.reply(Self.ask(&machine, "lan1.example.test.", .soa, request: 6, over: .tcp), request: 6).answers.count == 1)
        // Another address of the same /24 shares the bucket; another network has its own.
        let neighbour = IPAddress.v4(IPv4Address("198.18.2.7")!)
        #expect(Self.ask(&machine, "lan1.example.test.", .soa, request: 9, from: neighbour) == [.drop(.init(9))])
        let other = IPAddress.v4(IPv4Address("198.18.3.7")!)
        #expect(try Self.reply(Self.ask(&machine, "lan1.example.test.", .soa, request: 7, from: other), request: 7).answers.count == 1)
        // Half a second later the bucket has one question again.
        #expect(try Self.reply(Self.ask(&machine, "lan1.example.test.", .soa, request: 8, at: .milliseconds(500)), request: 8).answers.count == 1)
        #expect(machine.statistics.rateLimited == 3 && machine.statistics.rateLimitedTruncated == 1)
    }

    @Test("an address that asks over TCP (a site's resolver told TC) is no forgery: for ten minutes its UDP questions have a bucket of their own, twenty times the limit; its /24 neighbours do not")
    func provenOverTCP() throws {
        var machine = Self.machine { $0.rateLimit = RateLimit(perSecond: 1, burst: 2) }
        let resolver = Self.client
        let neighbour = IPAddress.v4(IPv4Address("198.18.2.200")!)
        var request: UInt64 = 1
        func ask(from source: IPAddress, at now: Duration, over transport: ProxyStateMachine.Transport = .udp) -> [ProxyStateMachine.Action] {
            defer { request += 1 }
            return Self.ask(&machine, "lan1.example.test.", .soa, request: request, at: now, over: transport, from: source)
        }
        _ = ask(from: resolver, at: .zero)
        _ = ask(from: resolver, at: .zero)
        #expect(ask(from: resolver, at: .zero).first.map { if case .drop = $0 { true } else { false } } == true, "over the rate")
        // The resolver is slipped a TC answer and asks over TCP, as resolvers do.
        #expect(try Self.reply(ask(from: resolver, at: .milliseconds(10), over: .tcp), request: request - 1).answers.count == 1)
        // From then on it has a bucket of its own, twenty times the limit (burst 40 here); beyond
        // it, even a proven address is limited, so a flood that forges it stays bounded.
        for _ in 0..<40 {
            #expect(try Self.reply(ask(from: resolver, at: .milliseconds(20)), request: request - 1).answers.count == 1)
        }
        #expect(ask(from: resolver, at: .milliseconds(20)).first == .drop(.init(request - 1)))
        // Its /24 is still limited for everyone else.
        let limited = ask(from: neighbour, at: .milliseconds(20))
        if case .reply(_, let bytes) = limited.first {
            let slip = try Message(decoding: bytes)
            #expect(slip.header.isTruncated && slip.answers.isEmpty, "slipped, not answered")
        } else {
            #expect(limited.first == .drop(.init(request - 1)))
        }
        // Ten minutes on, the proof has run out: the limit is back.
        let later = Duration.seconds(601)
        _ = ask(from: resolver, at: later)
        _ = ask(from: resolver, at: later)
        #expect(ask(from: resolver, at: later).first.map { if case .drop = $0 { true } else { false } } == true)
    }

    @Test("new link questions are limited (RFC 8766 §9.3): beyond the budget SERVFAIL, and the link is not asked")
    func linkBudget() throws {
        var machine = Self.machine { $0.linkQuestionRate = RateLimit(perSecond: 1, burst: 2) }
        #expect(Self.ask(&machine, "A._ipp._tcp.lan1.example.test.", .srv, request: 1).count == 1)
        #expect(Self.ask(&machine, "B._ipp._tcp.lan1.example.test.", .srv, request: 2).count == 1)
        let third = Self.ask(&machine, "C._ipp._tcp.lan1.example.test.", .srv, request: 3)
        #expect(try Self.reply(third, request: 3).responseCode == .serverFailure)
        #expect(machine.linkQuestions.count == 2)
        // A name the link is already asked about is not limited.
        #expect(Self.ask(&machine, "A._ipp._tcp.lan1.example.test.", .srv, request: 4).isEmpty)
        #expect(machine.statistics.linkQuestionsOverBudget == 1)
    }

    @Test("one source cannot take every waiting place: beyond its share it gets SERVFAIL, others still wait")
    func waitingPerSource() throws {
        var machine = Self.machine { $0.maximumWaitingPerSource = 2 }
        #expect(Self.ask(&machine, "_ipp._tcp.lan1.example.test.", .ptr, request: 1).count == 1)
        #expect(Self.ask(&machine, "_ipp._tcp.lan1.example.test.", .ptr, request: 2, over: .tcp).isEmpty)
        let third = Self.ask(&machine, "_ipp._tcp.lan1.example.test.", .ptr, request: 3, over: .tcp)
        #expect(try Self.reply(third, request: 3).responseCode == .serverFailure)
        let other = IPAddress.v4(IPv4Address("198.18.3.7")!)
        #expect(Self.ask(&machine, "_ipp._tcp.lan1.example.test.", .ptr, request: 4, from: other).isEmpty)
        let answered = machine.advance(to: .seconds(1))
        #expect(answered.count == 3)
        // Answered, the places are free again.
        _ = Self.ask(&machine, "_http._tcp.lan1.example.test.", .ptr, request: 5, at: .seconds(2))
        #expect(Self.ask(&machine, "_http._tcp.lan1.example.test.", .ptr, request: 6, at: .seconds(2), over: .tcp).isEmpty)
        #expect(machine.statistics.waitingOverSourceLimit == 1)
    }

    @Test("a kept answer is made again when the link changes, also for its additional records")
    func cachedAnswers() throws {
        var machine = Self.machine()
        _ = Self.ask(&machine, "_ipp._tcp.lan1.example.test.", .ptr)
        _ = machine.linkChanged(Self.link, Self.browse, added: [Self.ptr("Alpha")], removed: [], now: .milliseconds(10))
        let first = try Self.reply(machine.advance(to: .seconds(1)))
        #expect(first.additionals.filter { $0.type != .opt }.isEmpty)
        // The instance's SRV is learned later, through a question of its own.
        let srvQuestion = LinkQuestion(name: "Alpha._ipp._tcp.local.", type: .srv)
        _ = Self.ask(&machine, "Alpha._ipp._tcp.lan1.example.test.", .srv, request: 2, at: .seconds(2))
        _ = machine.linkChanged(Self.link, srvQuestion, added: [ResourceRecord(name: "Alpha._ipp._tcp.local.", data: .srv(SRVData(port: 631, target: "alpha.local.")), ttl: 120)], removed: [], now: .seconds(2))
        _ = machine.advance(to: .seconds(3))
        let second = try Self.reply(Self.ask(&machine, "_ipp._tcp.lan1.example.test.", .ptr, request: 3, at: .seconds(4)), request: 3)
        #expect(second.additionals.map(\.type).contains(.srv), "the PTR answer now carries the SRV: \(second.additionals)")
        // The same question again, nothing changed: the same bytes but for the ID.
        let third = try Self.reply(Self.ask(&machine, "_ipp._tcp.lan1.example.test.", .ptr, request: 4, at: .seconds(5)), request: 4)
        #expect(third.answers == second.answers && third.additionals == second.additionals)
    }

    @Test("a link question nobody asks about for the idle lifetime is stopped; one still asked about is kept")
    func idle() {
        var machine = Self.machine { $0.idleLifetime = .seconds(60) }
        _ = Self.ask(&machine, "_ipp._tcp.lan1.example.test.", .ptr)
        _ = Self.ask(&machine, "_http._tcp.lan1.example.test.", .ptr, request: 2)
        _ = machine.advance(to: .seconds(1))
        _ = Self.ask(&machine, "_http._tcp.lan1.example.test.", .ptr, request: 3, at: .seconds(50))
        var stopped: [ProxyStateMachine.Action] = []
        var now = Duration.seconds(1)
        while now < .seconds(75) {
            now = machine.nextDeadline
            stopped += machine.advance(to: now)
        }
        #expect(stopped == [.stopLinkQuestion(Self.link, Self.browse)])
        #expect(machine.linkQuestions.map(\.1) == [LinkQuestion(name: "_http._tcp.local.", type: .ptr)])
    }

    // MARK: Replies kept for questions asked again

    static func replyBytes(_ actions: [ProxyStateMachine.Action], request: UInt64 = 1) -> [UInt8]? {
        for action in actions {
            if case .reply(let id, let bytes) = action, id.rawValue == request { return bytes }
        }
        return nil
    }

    @Test("a UDP question asked again byte for byte gets the reply kept from the first, under its own ID; a change on the link is never answered from an older reply")
    func keptReplies() throws {
        var machine = Self.machine()
        _ = Self.ask(&machine, "_ipp._tcp.lan1.example.test.", .ptr)
        _ = machine.linkChanged(Self.link, Self.browse, added: [Self.ptr("Alpha")], removed: [], now: .milliseconds(30))
        let first = try #require(Self.replyBytes(machine.advance(to: .milliseconds(180))))
        // Asked again with another ID: the same reply but its ID, counted as answered from the link.
        let again = machine.received(Self.query("_ipp._tcp.lan1.example.test.", .ptr, id: 0x5678), from: Self.client, over: .udp, request: .init(2), now: .seconds(2))
        let kept = try #require(Self.replyBytes(again, request: 2))
        #expect(again.count == 1)
        #expect(Array(kept.dropFirst(2)) == Array(first.dropFirst(2)) && kept[0] == 0x56 && kept[1] == 0x78)
        #expect(machine.statistics.cachedReplies == 0, "the second ask made the reply; the third finds it")
        let third = machine.received(Self.query("_ipp._tcp.lan1.example.test.", .ptr, id: 0x9ABC), from: Self.client, over: .udp, request: .init(3), now: .seconds(3))
        let hit = try #require(Self.replyBytes(third, request: 3))
        #expect(Array(hit.dropFirst(2)) == Array(first.dropFirst(2)) && hit[0] == 0x9A && hit[1] == 0xBC)
        #expect(machine.statistics.cachedReplies == 1)
        #expect(machine.statistics.questions == 3 && machine.statistics.answeredFromLink == 3 && machine.statistics.answered == 3)
        // The link changes: the next answer has Beta, and is not the kept one.
        _ = machine.linkChanged(Self.link, Self.browse, added: [Self.ptr("Beta")], removed: [], now: .seconds(4))
        let changed = try Self.reply(Self.ask(&machine, "_ipp._tcp.lan1.example.test.", .ptr, request: 4, at: .seconds(5)), request: 4)
        #expect(changed.answers.count == 2)
        #expect(machine.statistics.cachedReplies == 1)
        // Another spelling of the name is another question: its reply echoes it as asked.
        let upper = try Self.reply(Self.ask(&machine, "_IPP._TCP.lan1.example.test.", .ptr, request: 5, at: .seconds(6)), request: 5)
        #expect(upper.questions.first?.name.description == "_IPP._TCP.lan1.example.test." && upper.answers.count == 2)
        // Over TCP nothing is kept or taken from the kept replies.
        for request in 6...7 {
            _ = Self.ask(&machine, "_ipp._tcp.lan1.example.test.", .ptr, request: UInt64(request), at: .seconds(7), over: .tcp)
        }
        #expect(machine.statistics.cachedReplies == 1)
    }

    @Test("questions answered from kept replies still count as asking: the link question is not stopped as idle while they come; stopped, its kept replies go with it")
    func keptRepliesKeepTheLinkQuestion() throws {
        var machine = Self.machine { $0.idleLifetime = .seconds(60) }
        _ = Self.ask(&machine, "_ipp._tcp.lan1.example.test.", .ptr)
        _ = machine.linkChanged(Self.link, Self.browse, added: [Self.ptr("Alpha")], removed: [], now: .milliseconds(30))
        _ = machine.advance(to: .milliseconds(180))
        var stopped: [ProxyStateMachine.Action] = []
        var request: UInt64 = 2
        var now = Duration.seconds(1)
        while now < .seconds(200) {
            _ = Self.ask(&machine, "_ipp._tcp.lan1.example.test.", .ptr, request: request, at: now)
            request += 1
            now += .seconds(10)
            stopped += machine.advance(to: now)
        }
        #expect(machine.statistics.cachedReplies > 15)
        #expect(stopped.isEmpty, "\(stopped)")
        // Nobody asks for 75 s: the question stops, and the next ask starts it again rather than
        // getting the old reply.
        while now < .seconds(275) {
            now = machine.nextDeadline
            stopped += machine.advance(to: now)
        }
        #expect(stopped == [.stopLinkQuestion(Self.link, Self.browse)])
        let cachedBefore = machine.statistics.cachedReplies
        #expect(Self.ask(&machine, "_ipp._tcp.lan1.example.test.", .ptr, request: request, at: now) == [.startLinkQuestion(Self.link, Self.browse)])
        #expect(machine.statistics.cachedReplies == cachedBefore)
    }

    @Test("a full cache of kept replies is emptied and starts again; answers stay right")
    func keptRepliesFull() throws {
        var machine = Self.machine { $0.maximumCachedReplies = 2 }
        _ = Self.ask(&machine, "_ipp._tcp.lan1.example.test.", .ptr)
        _ = machine.linkChanged(Self.link, Self.browse, added: [Self.ptr("Alpha")], removed: [], now: .milliseconds(30))
        _ = machine.advance(to: .milliseconds(180))
        for (index, name) in ["lan1.example.test.", "b._dns-sd._udp.lan1.example.test.", "db._dns-sd._udp.lan1.example.test.", "_ipp._tcp.lan1.example.test."].enumerated() {
            for round in 0..<2 {
                let request = UInt64(10 + index * 2 + round)
                let type: RecordType = index == 0 ? .soa : .ptr
                let answer = try Self.reply(Self.ask(&machine, try DomainName(parsing: name), type, request: request, at: .seconds(1)), request: request)
                #expect(answer.answers.count == 1, "\(name)")
            }
        }
        #expect(machine.statistics.cachedReplies == 4)
        #expect(machine.replies.count <= 2 && machine.replies.emptiedFull == 1, "the capacity holds: \(machine.replies.count) kept")
    }

    @Test("at the most link questions, the one asked about longest ago makes room")
    func eviction() {
        var machine = Self.machine { $0.maximumLinkQuestions = 2 }
        _ = Self.ask(&machine, "A._ipp._tcp.lan1.example.test.", .txt, request: 1)
        _ = Self.ask(&machine, "B._ipp._tcp.lan1.example.test.", .txt, request: 2, at: .milliseconds(10))
        _ = machine.advance(to: .seconds(2))
        _ = Self.ask(&machine, "A._ipp._tcp.lan1.example.test.", .txt, request: 3, at: .seconds(3))
        let actions = Self.ask(&machine, "C._ipp._tcp.lan1.example.test.", .txt, request: 4, at: .seconds(4))
        #expect(actions == [
            .stopLinkQuestion(Self.link, LinkQuestion(name: "B._ipp._tcp.local.", type: .txt)),
            .startLinkQuestion(Self.link, LinkQuestion(name: "C._ipp._tcp.local.", type: .txt)),
        ])
        #expect(machine.statistics.linkQuestionsEvicted == 1)
    }

    @Test("two zones, two links: each name is asked on its own zone's link")
    func twoLinks() throws {
        let second = try ProxyZone("lan2.example.test.", nameServers: [.init(name: "proxy-lan2.example.test.", addresses: [])])
        var machine = ProxyStateMachine(.init(zones: [Self.zone, second]))
        #expect(Self.ask(&machine, "_ipp._tcp.lan2.example.test.", .ptr) == [.startLinkQuestion(LinkIndex(1), Self.browse)])
        #expect(Self.ask(&machine, "_ipp._tcp.lan1.example.test.", .ptr, request: 2) == [.startLinkQuestion(LinkIndex(0), Self.browse)])
        _ = machine.linkChanged(LinkIndex(1), Self.browse, added: [Self.ptr("Upstairs")], removed: [], now: .milliseconds(10))
        let actions = machine.advance(to: .seconds(1))
        #expect(try Self.reply(actions, request: 1).answers.map(\.data) == [.ptr("Upstairs._ipp._tcp.lan2.example.test.")])
        #expect(try Self.reply(actions, request: 2).answers.isEmpty)
    }
}

/// DNS Push subscriptions in the answering machine: what a subscriber is told, and how long the
/// link is asked for it.
@Suite("discovery proxy: subscriptions")
struct SubscriptionTests {
    static let link = LinkIndex(0)
    static let browse = ProxyStateMachineTests.browse
    static let question = Question(name: "_ipp._tcp.lan1.example.test.", type: .ptr)
    static let one = ProxyStateMachine.SessionID(1)
    static let two = ProxyStateMachine.SessionID(2)

    static func zonePTR(_ instance: String, ttl: UInt32 = 4500) -> ResourceRecord {
        ResourceRecord(name: "_ipp._tcp.lan1.example.test.", data: .ptr(try! DomainName(parsing: "\(instance)._ipp._tcp.lan1.example.test.")), ttl: ttl)
    }

    @Test("a subscription starts the link question; every change after it is pushed with the record's own TTL, removals as removals")
    func pushes() {
        var machine = ProxyStateMachineTests.machine()
        let (result, actions) = machine.subscribe(Self.question, session: Self.one, id: 5, now: .zero)
        #expect(result == .accepted([]))
        #expect(actions == [.startLinkQuestion(Self.link, Self.browse)])
        let added = machine.linkChanged(Self.link, Self.browse, added: [ProxyStateMachineTests.ptr("Alpha")], removed: [], now: .milliseconds(40))
        #expect(added == [.push(Self.one, [.add(Self.zonePTR("Alpha"))])])
        var goodbye = ProxyStateMachineTests.ptr("Alpha")
        goodbye.ttl = 0
        let gone = machine.linkChanged(Self.link, Self.browse, added: [goodbye], removed: [], now: .seconds(5))
        #expect(gone == [.push(Self.one, [.remove(Self.zonePTR("Alpha", ttl: 1))])])
        // Something that changes nothing is not pushed.
        #expect(machine.linkChanged(Self.link, Self.browse, added: [], removed: [ProxyStateMachineTests.ptr("Nobody")], now: .seconds(6)).isEmpty)
    }

    @Test("a second subscriber gets what is known at once, and both hear later changes; link-local addresses are never pushed")
    func twoSubscribers() {
        var machine = ProxyStateMachineTests.machine()
        _ = machine.subscribe(Self.question, session: Self.one, id: 5, now: .zero)
        _ = machine.linkChanged(Self.link, Self.browse, added: [ProxyStateMachineTests.ptr("Alpha")], removed: [], now: .milliseconds(40))
        let (second, actions) = machine.subscribe(Self.question, session: Self.two, id: 9, now: .seconds(1))
        #expect(second == .accepted([.add(Self.zonePTR("Alpha"))]))
        #expect(actions.isEmpty, "the link is already asked")
        let both = machine.linkChanged(Self.link, Self.browse, added: [ProxyStateMachineTests.ptr("Beta")], removed: [], now: .seconds(2))
        #expect(both == [.push(Self.one, [.add(Self.zonePTR("Beta"))]), .push(Self.two, [.add(Self.zonePTR("Beta"))])])

        let host = LinkQuestion(name: "alpha.local.", type: .aaaa)
        _ = machine.subscribe(Question(name: "alpha.lan1.example.test.", type: .aaaa), session: Self.one, id: 6, now: .seconds(3))
        let local = machine.linkChanged(Self.link, host, added: [ResourceRecord(name: "alpha.local.", data: .aaaa(IPv6Address("fe80::1")!), ttl: 120)], removed: [], now: .seconds(3))
        #expect(local.isEmpty)
    }

    @Test("outside the zones NOTAUTH; meta types NOTIMP; the zone's own names are told as they are")
    func refusalsAndZoneNames() {
        var machine = ProxyStateMachineTests.machine()
        #expect(machine.subscribe(Question(name: "www.example.com.", type: .a), session: Self.one, id: 1, now: .zero).0 == .refused(.notAuthoritative))
        #expect(machine.subscribe(Question(name: "_ipp._tcp.lan1.example.test.", type: RecordType(252)), session: Self.one, id: 2, now: .zero).0 == .refused(.notImplemented))
        let soa = machine.subscribe(Question(name: "lan1.example.test.", type: .soa), session: Self.one, id: 3, now: .zero)
        #expect(soa.0 == .accepted([.add(ProxyStateMachineTests.zone.soaRecord)]) && soa.1.isEmpty)
        let enumeration = machine.subscribe(Question(name: "b._dns-sd._udp.lan1.example.test.", type: .ptr), session: Self.one, id: 4, now: .zero)
        #expect(enumeration.0 == .accepted([.add(ResourceRecord(name: "b._dns-sd._udp.lan1.example.test.", data: .ptr("lan1.example.test."), ttl: 10))]))
        #expect(machine.linkQuestions.isEmpty)
    }

    @Test("a subscribed link question outlives the idle lifetime; once unsubscribed (or its session gone) it stops after it")
    func lifetime() {
        var machine = ProxyStateMachineTests.machine { $0.idleLifetime = .seconds(60) }
        _ = machine.subscribe(Self.question, session: Self.one, id: 5, now: .zero)
        var stopped: [ProxyStateMachine.Action] = []
        var now = Duration.zero
        while now < .seconds(300) {
            now = machine.nextDeadline
            stopped += machine.advance(to: now).filter { if case .stopLinkQuestion = $0 { true } else { false } }
        }
        #expect(stopped.isEmpty, "stopped while subscribed: \(stopped)")
        machine.sessionEnded(Self.one, now: now)
        let end = now + .seconds(120)
        while now < end {
            now = machine.nextDeadline
            stopped += machine.advance(to: now).filter { if case .stopLinkQuestion = $0 { true } else { false } }
        }
        #expect(stopped == [.stopLinkQuestion(Self.link, Self.browse)])
        // Nothing is pushed to a session that has gone.
        #expect(machine.linkChanged(Self.link, Self.browse, added: [ProxyStateMachineTests.ptr("Late")], removed: [], now: now).isEmpty)
    }
}
