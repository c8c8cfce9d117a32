import DNSWire
import Testing

@testable import UnicastDNSSD

/// The DNS Push client session (RFC 8765 over DSO, RFC 8490), driven by hand: the server's
/// messages in, what to send and what changed out.
@Suite("unicast DNS: DNS Push client sessions")
struct PushClientTests {
    static let list = RecordPoller.Key("_openagents._tcp.lan1.example.test.", .ptr)
    static let srv = RecordPoller.Key("Box._openagents._tcp.lan1.example.test.", .srv)

    static func bytes(_ message: DSOMessage) -> [UInt8] { (try? message.encoded()) ?? [] }

    static func sent(_ actions: [PushClient.Action]) throws -> [DSOMessage] {
        try actions.compactMap { if case .send(let bytes) = $0 { try DSOMessage(decoding: bytes) } else { nil } }
    }

    static func ptr(_ label: String) -> ResourceRecord {
        ResourceRecord(name: list.name, data: .ptr(try! DomainName(parsing: "\(label)._openagents._tcp.lan1.example.test.")), ttl: 4500)
    }

    /// A client with `list` subscribed and accepted; returns the SUBSCRIBE's ID.
    static func subscribed(_ client: inout PushClient) throws -> UInt16 {
        let subscribe = try #require(try sent(client.subscribe(list, now: .zero)).first)
        let accepted = client.received(bytes(DSOMessage(id: subscribe.id, isResponse: true, tlvs: [])), now: .milliseconds(5))
        #expect(accepted == [.subscribed(list)])
        return subscribe.id
    }

    @Test("SUBSCRIBE is a request with a fresh ID; NOERROR starts it and establishes the session; asking twice sends nothing")
    func subscribe() throws {
        var client = PushClient(now: .zero)
        let first = try #require(try Self.sent(client.subscribe(Self.list, now: .zero)).first)
        #expect(first.id != 0 && !first.isResponse)
        #expect(first.primary == .subscribe(name: Self.list.name, type: .ptr, class: .internet))
        #expect(client.subscribe(Self.list, now: .zero).isEmpty)
        let second = try #require(try Self.sent(client.subscribe(Self.srv, now: .zero)).first)
        #expect(second.id != first.id && second.id != 0)
        #expect(!client.isEstablished)
        #expect(client.received(Self.bytes(DSOMessage(id: first.id, isResponse: true, tlvs: [])), now: .zero) == [.subscribed(Self.list)])
        #expect(client.isEstablished)
        #expect(client.received(Self.bytes(DSOMessage(id: second.id, isResponse: true, responseCode: .notAuthoritative, tlvs: [])), now: .zero) == [.refused(Self.srv, .notAuthoritative)])
        // A refused key may be asked again later.
        #expect(client.subscribe(Self.srv, now: .zero).count == 1)
    }

    @Test("PUSH: additions, removals, a removed record set and a removed name come out per subscription; others' records are ignored")
    func pushes() throws {
        var client = PushClient(now: .zero)
        _ = try Self.subscribed(&client)
        let push = DSOMessage(id: 0, tlvs: [.push([
            .add(Self.ptr("Alpha")), .add(Self.ptr("Beta")), .remove(Self.ptr("Gamma")),
            .add(ResourceRecord(name: "other.lan1.example.test.", data: .a(IPv4Address(192, 0, 2, 1)), ttl: 10)),
        ])])
        #expect(client.received(Self.bytes(push), now: .seconds(1)) == [
            .changed(Self.list, added: [Self.ptr("Alpha").data, Self.ptr("Beta").data], removed: [Self.ptr("Gamma").data], removeAll: false)
        ])
        let cleared = DSOMessage(id: 0, tlvs: [.push([.removeRecordSet(name: Self.list.name, type: .ptr, class: .internet), .add(Self.ptr("Delta"))])])
        #expect(client.received(Self.bytes(cleared), now: .seconds(2)) == [.changed(Self.list, added: [Self.ptr("Delta").data], removed: [], removeAll: true)])
        let name = DSOMessage(id: 0, tlvs: [.push([.removeName(name: Self.list.name, class: .internet)])])
        #expect(client.received(Self.bytes(name), now: .seconds(3)) == [.changed(Self.list, added: [], removed: [], removeAll: true)])
        // An add and a remove of the same record in one PUSH: the last word counts.
        let flip = DSOMessage(id: 0, tlvs: [.push([.add(Self.ptr("Eps")), .remove(Self.ptr("Eps"))])])
        #expect(client.received(Self.bytes(flip), now: .seconds(4)) == [.changed(Self.list, added: [], removed: [Self.ptr("Eps").data], removeAll: false)])
    }

    @Test("UNSUBSCRIBE is unidirectional and names the SUBSCRIBE; a SUBSCRIBE withdrawn before its answer is unsubscribed once accepted")
    func unsubscribe() throws {
        var client = PushClient(now: .zero)
        let id = try Self.subscribed(&client)
        let message = try #require(try Self.sent(client.unsubscribe(Self.list, now: .seconds(1))).first)
        #expect(message.id == 0 && message.primary == .unsubscribe(messageID: id))
        #expect(client.unsubscribe(Self.list, now: .seconds(1)).isEmpty)
        let pending = try #require(try Self.sent(client.subscribe(Self.srv, now: .seconds(2))).first)
        #expect(client.unsubscribe(Self.srv, now: .seconds(2)).isEmpty, "never accepted: nothing to end on the server")
        let late = try Self.sent(client.received(Self.bytes(DSOMessage(id: pending.id, isResponse: true, tlvs: [])), now: .seconds(3)))
        #expect(late.map(\.primary) == [.unsubscribe(messageID: pending.id)], "accepted after it was withdrawn: ended on the server too")
        // A PUSH for what is no longer subscribed changes nothing.
        #expect(client.received(Self.bytes(DSOMessage(id: 0, tlvs: [.push([.add(Self.ptr("Late"))])])), now: .seconds(4)).isEmpty)
    }

    @Test("a Keepalive goes out when nothing was sent for the server's interval (sent at 90 %) or a minute; the server's Keepalive sets the interval")
    func keepalive() throws {
        var client = PushClient(now: .zero)
        #expect(client.nextDeadline == nil, "nothing subscribed: nothing to keep alive")
        _ = try Self.subscribed(&client)
        #expect(client.nextDeadline == PushClient.defaultKeepaliveInterval)
        // The server's own Keepalive (unidirectional) sets the interval: 20 s, sent at 18 s.
        #expect(client.received(Self.bytes(DSOMessage(id: 0, tlvs: [.keepalive(inactivityTimeout: 15_000, keepaliveInterval: 20_000)])), now: .seconds(1)).isEmpty)
        #expect(client.nextDeadline == .seconds(18))
        #expect(client.advance(to: .seconds(17)).isEmpty)
        let keepalive = try #require(try Self.sent(client.advance(to: .seconds(18))).first)
        #expect(keepalive.id != 0 && keepalive.primary == .keepalive(inactivityTimeout: 0, keepaliveInterval: 0))
        #expect(client.nextDeadline == .seconds(36))
        // Its answer grants an hour: something still goes out every minute.
        #expect(client.received(Self.bytes(DSOMessage(id: keepalive.id, isResponse: true, tlvs: [.keepalive(inactivityTimeout: 15_000, keepaliveInterval: 3_600_000)])), now: .seconds(18)).isEmpty)
        #expect(client.keepaliveInterval == .seconds(3240))
        #expect(client.nextDeadline == .seconds(78))
    }

    @Test("errors by the server's Keepalive end the session: a Keepalive request from the server, an interval below 10 s")
    func keepaliveErrors() throws {
        var asked = PushClient(now: .zero)
        _ = try Self.subscribed(&asked)
        let request = asked.received(Self.bytes(DSOMessage(id: 77, tlvs: [.keepalive(inactivityTimeout: 15_000, keepaliveInterval: 3_600_000)])), now: .seconds(1))
        #expect(asked.isEnded && request.count == 1)
        var short = PushClient(now: .zero)
        _ = try Self.subscribed(&short)
        _ = short.received(Self.bytes(DSOMessage(id: 0, tlvs: [.keepalive(inactivityTimeout: 15_000, keepaliveInterval: 1_000)])), now: .seconds(1))
        #expect(short.isEnded)
    }

    @Test("a request unanswered for 30 s ends the session: a SUBSCRIBE, or a Keepalive to a server that went silent")
    func requestTimeout() throws {
        var client = PushClient(now: .zero)
        _ = client.subscribe(Self.list, now: .zero)
        #expect(client.nextDeadline == .seconds(15))
        _ = client.advance(to: .seconds(15))  // a Keepalive: nothing was sent for 15 s
        #expect(client.advance(to: .seconds(29)).isEmpty)
        #expect(client.advance(to: .seconds(30)) == [.ended("the server answered nothing for 30.0 seconds", retryAfter: nil)])

        var silent = PushClient(now: .zero)
        _ = try Self.subscribed(&silent)
        let keepalive = try #require(try Self.sent(silent.advance(to: .seconds(15))).first)
        #expect(keepalive.primary == .keepalive(inactivityTimeout: 0, keepaliveInterval: 0))
        #expect(silent.nextDeadline == .seconds(30), "the next Keepalive is due at 30 s, the answer at 45 s")
        _ = silent.advance(to: .seconds(30))
        #expect(silent.advance(to: .seconds(45)) == [.ended("the server answered nothing for 30.0 seconds", retryAfter: nil)])
    }

    @Test("a SUBSCRIBE withdrawn before its answer is unsubscribed when accepted; watched again meanwhile, it is taken back, never sent twice")
    func withdrawn() throws {
        var client = PushClient(now: .zero)
        let first = try #require(try Self.sent(client.subscribe(Self.list, now: .zero)).first)
        #expect(client.unsubscribe(Self.list, now: .zero).isEmpty)
        let late = try Self.sent(client.received(Self.bytes(DSOMessage(id: first.id, isResponse: true, tlvs: [])), now: .seconds(1)))
        #expect(late.map(\.primary) == [.unsubscribe(messageID: first.id)] && late.first?.id == 0)

        var again = PushClient(now: .zero)
        let asked = try #require(try Self.sent(again.subscribe(Self.list, now: .zero)).first)
        #expect(again.unsubscribe(Self.list, now: .zero).isEmpty)
        #expect(again.subscribe(Self.list, now: .zero).isEmpty, "the SUBSCRIBE on its way is taken back, not sent again")
        #expect(again.received(Self.bytes(DSOMessage(id: asked.id, isResponse: true, tlvs: [])), now: .seconds(1)) == [.subscribed(Self.list)])
    }

    @Test("a second response with an error cancels that subscription alone (RFC 8490 §5.6); a second NOERROR ends the session")
    func cancelled() throws {
        var client = PushClient(now: .zero)
        let id = try Self.subscribed(&client)
        let other = try #require(try Self.sent(client.subscribe(Self.srv, now: .zero)).first)
        _ = client.received(Self.bytes(DSOMessage(id: other.id, isResponse: true, tlvs: [])), now: .zero)
        #expect(client.received(Self.bytes(DSOMessage(id: id, isResponse: true, responseCode: .serverFailure, tlvs: [])), now: .seconds(1)) == [.refused(Self.list, .serverFailure)])
        #expect(!client.isEnded && client.keys == [Self.srv])
        _ = client.received(Self.bytes(DSOMessage(id: other.id, isResponse: true, tlvs: [])), now: .seconds(2))
        #expect(client.isEnded)
    }

    @Test("the session ends on a Retry Delay (with its delay), bytes that do not read, a second NOERROR to one SUBSCRIBE, and a closed connection")
    func endings() throws {
        var client = PushClient(now: .zero)
        _ = try Self.subscribed(&client)
        #expect(client.received(Self.bytes(DSOMessage(id: 0, tlvs: [.retryDelay(60_000)])), now: .seconds(1)) == [
            .ended("the server asked to be left alone (Retry Delay)", retryAfter: .seconds(60))
        ])
        #expect(client.isEnded && client.keys.isEmpty && client.nextDeadline == nil)
        #expect(client.subscribe(Self.list, now: .seconds(2)).isEmpty)

        var garbled = PushClient(now: .zero)
        _ = try Self.subscribed(&garbled)
        let ended = garbled.received([0, 0, 0x30, 0, 0, 1], now: .seconds(1))
        #expect(ended.count == 1 && { if case .ended(_, nil) = ended[0] { true } else { false } }())

        var twice = PushClient(now: .zero)
        let id = try Self.subscribed(&twice)
        #expect(twice.received(Self.bytes(DSOMessage(id: id, isResponse: true, tlvs: [])), now: .seconds(1)).count == 1)
        #expect(twice.isEnded)

        var closed = PushClient(now: .zero)
        _ = try Self.subscribed(&closed)
        #expect(closed.connectionEnded("reset") == [.ended("reset", retryAfter: nil)])
        #expect(closed.connectionEnded("again").isEmpty)
    }

    @Test("a request of a type the client does not take gets DSOTYPENI; a unidirectional one ends the session")
    func unknownTypes() throws {
        var client = PushClient(now: .zero)
        _ = try Self.subscribed(&client)
        let answer = try Self.sent(client.received(Self.bytes(DSOMessage(id: 9, tlvs: [.unknown(type: 0xF901, data: [1])])), now: .seconds(1)))
        #expect(answer.first?.responseCode == .dsoTypeNotImplemented && answer.first?.id == 9)
        #expect(!client.isEnded)
        let ended = client.received(Self.bytes(DSOMessage(id: 0, tlvs: [.subscribe(name: Self.list.name, type: .ptr, class: .internet)])), now: .seconds(2))
        #expect(client.isEnded && ended.count == 1)
    }
}

/// The poller fed by DNS Push.
@Suite("unicast DNS: the record poller under DNS Push")
struct RecordPollerPushTests {
    static let list = RecordPollerTests.list
    static func ptr(_ label: String) -> RecordData { RecordPollerTests.ptr(label) }

    @Test("once pushed, a watch is asked nothing; pushes add and remove; what polling knew runs out at its TTL unless a push confirms it")
    func pushed() {
        var poller = RecordPoller()
        _ = poller.watch(Self.list, isList: true, at: .zero)
        _ = poller.answered(Self.list, with: RecordPollerTests.answer(Self.list, [(Self.ptr("A"), 10), (Self.ptr("B"), 10)]), at: .zero)
        poller.pushStarted(Self.list, at: .milliseconds(100))
        #expect(poller.pushed(Self.list, added: [Self.ptr("B"), Self.ptr("C")], removed: [], removeAll: false, at: .milliseconds(200)) == [.added(Self.list, Self.ptr("C"))])
        // No question for an hour; A (polled, never pushed) runs out at its TTL, B and C stay.
        var actions: [RecordPoller.Action] = []
        var now = Duration.zero
        while let next = poller.nextDeadline, next < .seconds(3600) {
            now = next
            actions += poller.advance(to: now)
        }
        #expect(actions == [.removed(Self.list, Self.ptr("A"))])
        #expect(poller.pushed(Self.list, added: [], removed: [Self.ptr("B")], removeAll: false, at: .seconds(20)) == [.removed(Self.list, Self.ptr("B"))])
        #expect(poller.pushed(Self.list, added: [Self.ptr("D")], removed: [], removeAll: true, at: .seconds(21)) == [.removed(Self.list, Self.ptr("C")), .added(Self.list, Self.ptr("D"))])
    }

    @Test("an answer asked for before Push began is ignored; pushes to a watch Push does not feed change nothing")
    func oldAnswers() {
        var poller = RecordPoller()
        _ = poller.watch(Self.list, isList: true, at: .zero)
        #expect(poller.pushed(Self.list, added: [Self.ptr("A")], removed: [], removeAll: false, at: .zero).isEmpty)
        poller.pushStarted(Self.list, at: .milliseconds(10))
        #expect(poller.answered(Self.list, with: RecordPollerTests.answer(Self.list, [(Self.ptr("Old"), 10)]), at: .milliseconds(20)).isEmpty)
        #expect(poller.failed(Self.list, at: .milliseconds(30)).isEmpty)
        #expect(poller.advance(to: .seconds(100)).isEmpty)
    }

    @Test("a whole record set pushed again after its removal: what stayed is not reported lost and found again")
    func setReplaced() {
        var poller = RecordPoller()
        _ = poller.watch(Self.list, isList: true, at: .zero)
        poller.pushStarted(Self.list, at: .zero)
        _ = poller.pushed(Self.list, added: [Self.ptr("A"), Self.ptr("B")], removed: [], removeAll: false, at: .zero)
        #expect(poller.pushed(Self.list, added: [Self.ptr("A"), Self.ptr("C")], removed: [], removeAll: true, at: .seconds(1)) == [
            .removed(Self.list, Self.ptr("B")), .added(Self.list, Self.ptr("C")),
        ])
    }

    @Test("a question asked before Push began and answered after Push ended is set aside and asked again")
    func staleAnswer() {
        var poller = RecordPoller()
        _ = poller.watch(Self.list, isList: true, at: .zero)  // asked at 0
        poller.pushStarted(Self.list, at: .milliseconds(5))
        _ = poller.pushed(Self.list, added: [Self.ptr("A")], removed: [], removeAll: false, at: .milliseconds(6))
        #expect(poller.pushEnded(Self.list, at: .seconds(1)).isEmpty, "the first question is still out")
        // Its answer, from before Push began, says nothing of A: it is not taken.
        #expect(poller.answered(Self.list, with: RecordPollerTests.answer(Self.list, []), at: .seconds(2)) == [.query(Self.list)])
        #expect(poller.answered(Self.list, with: RecordPollerTests.answer(Self.list, []), at: .seconds(3)) == [.removed(Self.list, Self.ptr("A"))])
    }

    @Test("when Push ends the watch is asked at once; pushed records wait for the answer, then go if it lacks them")
    func fallback() {
        var poller = RecordPoller()
        _ = poller.watch(Self.list, isList: true, at: .zero)
        poller.pushStarted(Self.list, at: .zero)
        _ = poller.answered(Self.list, with: RecordPollerTests.answer(Self.list, []), at: .zero)
        _ = poller.pushed(Self.list, added: [Self.ptr("A"), Self.ptr("B")], removed: [], removeAll: false, at: .seconds(1))
        #expect(poller.pushEnded(Self.list, at: .seconds(50)) == [.query(Self.list)])
        #expect(poller.pushEnded(Self.list, at: .seconds(50)).isEmpty)
        #expect(poller.answered(Self.list, with: RecordPollerTests.answer(Self.list, [(Self.ptr("A"), 10)]), at: .seconds(51)) == [.removed(Self.list, Self.ptr("B"))])
        // Without an answer, pushed records last the fallback lifetime.
        var other = RecordPoller()
        _ = other.watch(Self.list, isList: true, at: .zero)
        other.pushStarted(Self.list, at: .zero)
        _ = other.failed(Self.list, at: .zero)
        _ = other.pushed(Self.list, added: [Self.ptr("A")], removed: [], removeAll: false, at: .seconds(1))
        _ = other.pushEnded(Self.list, at: .seconds(10))
        _ = other.failed(Self.list, at: .seconds(11))
        #expect(other.advance(to: .seconds(39)).allSatisfy { $0 == .query(Self.list) })
        #expect(other.advance(to: .seconds(40)).contains(.removed(Self.list, Self.ptr("A"))))
    }
}
