import DNSWire
import Testing

@testable import DiscoveryProxyCore

/// A DNS Push session, server side, driven by hand: DSO messages in, actions out, time as a
/// number (RFC 8490, RFC 8765).
@Suite("discovery proxy: DNS Push sessions")
struct PushSessionTests {
    static let question = Question(name: "_ipp._tcp.lan1.example.test.", type: .ptr)

    static func bytes(_ message: DSOMessage) -> [UInt8] { (try? message.encoded()) ?? [] }

    static func subscribe(_ id: UInt16, _ question: Question = question) -> [UInt8] {
        bytes(DSOMessage(id: id, tlvs: [.subscribe(name: question.name, type: question.type, class: question.class)]))
    }

    /// The messages the actions send, decoded.
    static func sent(_ actions: [PushSession.Action]) throws -> [DSOMessage] {
        try actions.compactMap { action in
            if case .send(let bytes) = action { try DSOMessage(decoding: bytes) } else { nil }
        }
    }

    static func aborted(_ actions: [PushSession.Action]) -> Bool {
        actions.contains { if case .close(true, _) = $0 { true } else { false } }
    }

    @Test("a Keepalive request establishes the session and is answered with the server's timeouts")
    func keepalive() throws {
        var session = PushSession(now: .zero)
        let actions = session.received(Self.bytes(DSOMessage(id: 1, tlvs: [.keepalive(inactivityTimeout: 15_000, keepaliveInterval: 15_000)])), now: .zero)
        let answer = try #require(try Self.sent(actions).first)
        #expect(answer.id == 1 && answer.isResponse && answer.responseCode == .noError)
        #expect(answer.primary == .keepalive(inactivityTimeout: 15_000, keepaliveInterval: 3_600_000))
        #expect(session.isEstablished)
    }

    @Test("SUBSCRIBE asks the proxy; NOERROR answers it and starts the subscription, a refusal does not")
    func subscribeFlow() throws {
        var session = PushSession(now: .zero)
        #expect(session.received(Self.subscribe(5), now: .zero) == [.subscribe(5, Self.question)])
        #expect(!session.isEstablished)
        let answer = try #require(try Self.sent(session.subscribed(5, code: .noError)).first)
        #expect(answer.id == 5 && answer.isResponse && answer.responseCode == .noError && answer.tlvs.isEmpty)
        #expect(session.isEstablished && session.subscriptions == [5: Self.question])

        let other = Question(name: "www.example.com.", type: .a)
        _ = session.received(Self.subscribe(6, other), now: .seconds(1))
        let refused = try #require(try Self.sent(session.subscribed(6, code: .notAuthoritative)).first)
        #expect(refused.responseCode == .notAuthoritative)
        #expect(session.subscriptions.count == 1)
    }

    @Test("UNSUBSCRIBE ends a subscription; an unknown ID is ignored; as a request it is FORMERR")
    func unsubscribe() throws {
        var session = PushSession(now: .zero)
        _ = session.received(Self.subscribe(5), now: .zero)
        _ = session.subscribed(5, code: .noError)
        #expect(session.received(Self.bytes(DSOMessage(id: 0, tlvs: [.unsubscribe(messageID: 9)])), now: .seconds(1)).isEmpty)
        #expect(session.received(Self.bytes(DSOMessage(id: 3, tlvs: [.unsubscribe(messageID: 5)])), now: .seconds(1)).count == 1)
        #expect(try Self.sent(session.received(Self.bytes(DSOMessage(id: 3, tlvs: [.unsubscribe(messageID: 5)])), now: .seconds(1))).first?.responseCode == .formatError)
        #expect(session.received(Self.bytes(DSOMessage(id: 0, tlvs: [.unsubscribe(messageID: 5)])), now: .seconds(2)) == [.unsubscribe(5)])
        #expect(session.subscriptions.isEmpty)
    }

    @Test("an unknown primary TLV: DSOTYPENI for a request, the end of the session for a unidirectional message")
    func unknownTypes() throws {
        var session = PushSession(now: .zero)
        let answer = try Self.sent(session.received(Self.bytes(DSOMessage(id: 4, tlvs: [.unknown(type: 0xF000, data: [])])), now: .zero))
        #expect(answer.first?.responseCode == .dsoTypeNotImplemented)
        #expect(!session.isClosed)
        #expect(Self.aborted(session.received(Self.bytes(DSOMessage(id: 0, tlvs: [.unknown(type: 0xF000, data: [])])), now: .zero)))
        #expect(session.isClosed)
    }

    @Test("protocol errors end the session at once: a response, unreadable bytes, a duplicate SUBSCRIBE, a unidirectional Keepalive, UNSUBSCRIBE before any session")
    func protocolErrors() {
        var a = PushSession(now: .zero)
        #expect(Self.aborted(a.received(Self.bytes(DSOMessage(id: 1, isResponse: true, tlvs: [])), now: .zero)))
        var b = PushSession(now: .zero)
        #expect(Self.aborted(b.received([0, 1, 0x30], now: .zero)))
        var c = PushSession(now: .zero)
        _ = c.received(Self.subscribe(5), now: .zero)
        _ = c.subscribed(5, code: .noError)
        let duplicate = c.received(Self.subscribe(6), now: .zero)
        #expect(Self.aborted(duplicate))
        #expect(duplicate.contains(.unsubscribe(5)), "the session's subscriptions end with it")
        var d = PushSession(now: .zero)
        #expect(Self.aborted(d.received(Self.bytes(DSOMessage(id: 0, tlvs: [.keepalive(inactivityTimeout: 1, keepaliveInterval: 1)])), now: .zero)))
        var e = PushSession(now: .zero)
        #expect(Self.aborted(e.received(Self.bytes(DSOMessage(id: 0, tlvs: [.unsubscribe(messageID: 1)])), now: .zero)))
    }

    @Test("beyond the most subscriptions, SUBSCRIBE is REFUSED and the session goes on")
    func subscriptionLimit() throws {
        var configuration = PushSession.Configuration()
        configuration.maximumSubscriptions = 1
        var session = PushSession(configuration, now: .zero)
        _ = session.received(Self.subscribe(1), now: .zero)
        let second = try Self.sent(session.received(Self.subscribe(2, Question(name: "_http._tcp.lan1.example.test.", type: .ptr)), now: .zero))
        #expect(second.first?.responseCode == .refused)
        #expect(!session.isClosed)
    }

    @Test("an idle session (no subscription) is asked to leave after 15 s (Retry Delay) and aborted at 30 s; Keepalives do not keep it")
    func idle() throws {
        var idle = PushSession(now: .zero)
        _ = idle.received(Self.bytes(DSOMessage(id: 1, tlvs: [.keepalive(inactivityTimeout: 0, keepaliveInterval: 0)])), now: .zero)
        #expect(idle.nextDeadline == .seconds(15))
        // A Keepalive at 10 s resets the keepalive timer, not the inactivity timer.
        _ = idle.received(Self.bytes(DSOMessage(id: 2, tlvs: [.keepalive(inactivityTimeout: 0, keepaliveInterval: 0)])), now: .seconds(10))
        #expect(idle.advance(to: .seconds(14)).isEmpty)
        let leave = try Self.sent(idle.advance(to: .seconds(15)))
        #expect(leave.count == 1 && leave.first?.id == 0 && leave.first?.primary == .retryDelay(0))
        #expect(idle.advance(to: .seconds(20)).isEmpty, "asked once")
        #expect(idle.nextDeadline == .seconds(30))
        #expect(Self.aborted(idle.advance(to: .seconds(30))))

        // The last UNSUBSCRIBE starts the inactivity timer.
        var emptied = PushSession(now: .zero)
        _ = emptied.received(Self.subscribe(5), now: .zero)
        _ = emptied.subscribed(5, code: .noError)
        _ = emptied.received(Self.bytes(DSOMessage(id: 0, tlvs: [.unsubscribe(messageID: 5)])), now: .seconds(100))
        #expect(emptied.nextDeadline == .seconds(115))
        // A new request after the Retry Delay keeps the session.
        _ = emptied.advance(to: .seconds(115))
        _ = emptied.received(Self.subscribe(6), now: .seconds(116))
        _ = emptied.subscribed(6, code: .noError)
        #expect(emptied.advance(to: .seconds(200)).isEmpty)
    }

    @Test("a session with subscriptions is aborted only after twice the keepalive interval with no message either way; messages sent count")
    func keepaliveTimer() {
        var busy = PushSession(now: .zero)
        _ = busy.received(Self.subscribe(5), now: .zero)
        _ = busy.subscribed(5, code: .noError)
        #expect(busy.nextDeadline == .seconds(7200))
        #expect(busy.advance(to: .seconds(3600)).isEmpty)
        // The server pushed at 5000 s: the client, only listening, is alive as far as the timer goes.
        busy.sent(now: .seconds(5000))
        #expect(busy.advance(to: .seconds(7200)).isEmpty)
        #expect(busy.nextDeadline == .seconds(12200))
        let ended = busy.advance(to: .seconds(12200))
        #expect(ended.contains(.unsubscribe(5)) && Self.aborted(ended))
    }

    @Test("a Retry Delay request from the client ends the session (only a server sends one)")
    func clientRetryDelay() {
        var session = PushSession(now: .zero)
        #expect(Self.aborted(session.received(Self.bytes(DSOMessage(id: 4, tlvs: [.retryDelay(1000)])), now: .zero)))
    }

    @Test("PUSH: changes go in unidirectional messages of at most 16,382 bytes, in order, none lost")
    func pushSplitting() throws {
        var session = PushSession(now: .zero)
        _ = session.received(Self.subscribe(5), now: .zero)
        _ = session.subscribed(5, code: .noError)
        let changes: [PushChange] = (0..<1000).map { n in
            .add(ResourceRecord(name: "_ipp._tcp.lan1.example.test.", data: .ptr(try! DomainName(parsing: "Printer number \(n) on the second floor._ipp._tcp.lan1.example.test.")), ttl: 4500))
        }
        let actions = session.push(changes)
        #expect(actions.count > 1)
        var received: [PushChange] = []
        for case .send(let bytes) in actions {
            #expect(bytes.count <= PushSession.maximumPushMessage)
            let message = try DSOMessage(decoding: bytes)
            #expect(message.id == 0 && !message.isResponse)
            guard case .push(let part) = message.primary else {
                Issue.record("not a PUSH: \(message)")
                continue
            }
            received += part
        }
        #expect(received == changes)
    }

    @Test("the connection's end ends every subscription, answered or not")
    func connectionEnds() {
        var session = PushSession(now: .zero)
        _ = session.received(Self.subscribe(5), now: .zero)
        _ = session.subscribed(5, code: .noError)
        _ = session.received(Self.subscribe(6, Question(name: "_http._tcp.lan1.example.test.", type: .ptr)), now: .zero)
        #expect(session.ended() == [.unsubscribe(5), .unsubscribe(6)])
        #expect(session.received(Self.subscribe(7), now: .zero).isEmpty)
    }

    @Test("Encryption Padding in a request is answered with padding (RFC 8490 §7.3); none asked, none given")
    func padding() throws {
        var session = PushSession(now: .zero)
        let padded = session.received(Self.bytes(DSOMessage(id: 3, tlvs: [.keepalive(inactivityTimeout: 15_000, keepaliveInterval: 15_000), .encryptionPadding(24)])), now: .zero)
        let answer = try #require(try Self.sent(padded).first)
        #expect(answer.tlvs.count == 2 && answer.tlvs.last == .encryptionPadding(0))
        let plain = session.received(Self.bytes(DSOMessage(id: 4, tlvs: [.keepalive(inactivityTimeout: 15_000, keepaliveInterval: 15_000)])), now: .zero)
        #expect(try Self.sent(plain).first?.tlvs.count == 1)
    }

    @Test("RECONFIRM: passed on once the session is established; as a request FORMERR; before any session an abort")
    func reconfirm() throws {
        // A RECONFIRM carries no TTL (RFC 8765 §6.5): it reads as 0.
        let record = ResourceRecord(name: "Box._ipp._tcp.lan1.example.test.", data: .txt(.empty), ttl: 0)
        let message = Self.bytes(DSOMessage(id: 0, tlvs: [.reconfirm(record)]))
        var early = PushSession(now: .zero)
        #expect(Self.aborted(early.received(message, now: .zero)))
        var session = PushSession(now: .zero)
        _ = session.received(Self.subscribe(5), now: .zero)
        _ = session.subscribed(5, code: .noError)
        #expect(session.received(message, now: .seconds(1)) == [.reconfirm(record)])
        let request = try Self.sent(session.received(Self.bytes(DSOMessage(id: 8, tlvs: [.reconfirm(record)])), now: .seconds(2)))
        #expect(request.first?.responseCode == .formatError && request.first?.id == 8)
    }
}
