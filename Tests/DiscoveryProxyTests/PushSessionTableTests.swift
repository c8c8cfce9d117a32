import DNSWire
import Testing

@testable import DiscoveryProxyCore

/// The proxy's DNS Push sessions together, driven by hand: connections, DSO messages, the
/// machine's answers, bytes written and time as numbers. No sockets, no TLS, no clock.
@Suite("discovery proxy: DNS Push session table")
struct PushSessionTableTests {
    static let client = IPAddress.v4(IPv4Address("198.18.2.6")!)
    static let other = IPAddress.v4(IPv4Address("198.18.2.7")!)
    static let question = PushSessionTests.question

    static func table(_ change: (inout PushSessionTable.Configuration) -> Void = { _ in }) -> PushSessionTable {
        var configuration = PushSessionTable.Configuration()
        change(&configuration)
        return PushSessionTable(configuration)
    }

    static func change(_ index: Int) -> PushChange {
        .add(ResourceRecord(name: "_ipp._tcp.lan1.example.test.", data: .ptr(try! DomainName(parsing: "Printer \(index)._ipp._tcp.lan1.example.test.")), ttl: 4500))
    }

    static func written(_ actions: [PushSessionTable.Action]) -> [[UInt8]] {
        actions.compactMap { if case .write(_, let bytes) = $0 { bytes } else { nil } }
    }

    static func ended(_ actions: [PushSessionTable.Action]) -> (abort: Bool, reason: String)? {
        for action in actions { if case .end(_, let abort, let reason) = action { return (abort, reason) } }
        return nil
    }

    /// A session with one live subscription.
    static func subscribed(_ table: inout PushSessionTable, from source: IPAddress = client) throws -> PushSessionTable.SessionID {
        let idOpened = table.open(from: source, now: .zero)
        let id = try #require(idOpened)
        #expect(table.received(id, PushSessionTests.subscribe(5), now: .zero) == [.subscribe(id, 5, question)])
        let answer = table.subscribed(id, 5, .accepted([]), now: .zero)
        #expect(written(answer).count == 1)
        // Written at once: only the backlog a test builds counts.
        for bytes in written(answer) { table.written(id, bytes: bytes.count) }
        return id
    }

    @Test("at most this many sessions in all and from one address; a closed one frees its place; refusals are counted")
    func admission() throws {
        var table = Self.table {
            $0.maximumSessions = 3
            $0.maximumSessionsPerSource = 2
        }
        let firstOpened = table.open(from: Self.client, now: .zero)
        let first = try #require(firstOpened)
        #expect(table.open(from: Self.client, now: .zero) != nil)
        #expect(table.open(from: Self.client, now: .zero) == nil, "a third from one address")
        #expect(table.open(from: Self.other, now: .zero) != nil)
        #expect(table.open(from: Self.other, now: .zero) == nil, "a fourth in all")
        #expect(table.statistics.refused == 2 && table.statistics.sessions == 3)

        #expect(table.closed(first).map { if case .end = $0 { true } else { false } } == [true], "a live session ends with its connection")
        #expect(table.open(from: Self.client, now: .seconds(1)) != nil, "its place is free again")
        _ = table.closeAll()
        #expect(table.open(from: Self.other, now: .seconds(2)) == nil, "none after shutdown")
    }

    @Test("a SUBSCRIBE accepted is answered NOERROR, and the records the proxy holds are pushed right after, in that order")
    func replayAfterSubscribe() throws {
        var table = Self.table()
        let idOpened = table.open(from: Self.client, now: .zero)
        let id = try #require(idOpened)
        _ = table.received(id, PushSessionTests.subscribe(5), now: .zero)
        let actions = table.subscribed(id, 5, .accepted([Self.change(1), Self.change(2)]), now: .milliseconds(5))
        let messages = try Self.written(actions).map { try DSOMessage(decoding: $0) }
        #expect(messages.count == 2)
        #expect(messages.first?.isResponse == true && messages.first?.id == 5 && messages.first?.responseCode == .noError)
        #expect(messages.last?.primary == .push([Self.change(1), Self.change(2)]))

        // A refusal pushes nothing.
        _ = table.received(id, PushSessionTests.subscribe(6, Question(name: "www.example.com.", type: .a)), now: .seconds(1))
        let refused = try Self.written(table.subscribed(id, 6, .refused(.notAuthoritative), now: .seconds(1))).map { try DSOMessage(decoding: $0) }
        #expect(refused.map(\.responseCode) == [.notAuthoritative])
    }

    @Test("backlog policy: a client that reads nothing while the link changes fast is aborted once it leaves more than the limit unread, and counted; nothing is dropped before")
    func slowReaderAborted() throws {
        var table = Self.table { $0.maximumUnsentBytes = 4096 }
        let id = try Self.subscribed(&table)
        var sent = 0
        var now = Duration.zero
        var end: (abort: Bool, reason: String)?
        // The producer: a change every 10 ms. The consumer: never writes.
        for index in 0..<1000 where end == nil {
            now += .milliseconds(10)
            let actions = table.push(id, [Self.change(index)], now: now)
            sent += Self.written(actions).reduce(0) { $0 + $1.count }
            end = Self.ended(actions)
        }
        #expect(end?.abort == true)
        #expect(end?.reason.contains("unread") == true)
        #expect(sent <= 4096, "the proxy never held more than the limit for it")
        #expect(table.statistics.overfull == 1)
        #expect(table.push(id, [Self.change(0)], now: now).isEmpty, "an ended session gets nothing more")
        #expect(table.liveSessions == 0)
    }

    @Test("backlog policy: a client that reads as fast as the link changes is never cut off")
    func readerKeepsUp() throws {
        var table = Self.table { $0.maximumUnsentBytes = 4096 }
        let id = try Self.subscribed(&table)
        for index in 0..<1000 {
            let actions = table.push(id, [Self.change(index)], now: .milliseconds(10 * index))
            #expect(Self.ended(actions) == nil)
            for bytes in Self.written(actions) { table.written(id, bytes: bytes.count) }
        }
        #expect(table.unsent(id) == 0 && table.statistics.overfull == 0)
    }

    @Test("one deadline for all sessions: an idle session is asked to leave, then aborted; a subscribed one is kept")
    func timers() throws {
        var table = Self.table()
        let idleOpened = table.open(from: Self.client, now: .zero)
        let idle = try #require(idleOpened)
        let busy = try Self.subscribed(&table, from: Self.other)
        #expect(table.nextDeadline == .seconds(15), "the idle session's inactivity timeout")
        #expect(table.advance(to: .seconds(14)).isEmpty)
        let leave = table.advance(to: .seconds(15))
        let messages = try Self.written(leave).map { try DSOMessage(decoding: $0) }
        #expect(messages.map(\.primary) == [.retryDelay(0)])
        #expect(leave.allSatisfy { if case .write(idle, _) = $0 { true } else { false } })
        let next = table.nextDeadline
        let deadline = try #require(next)
        let gone = table.advance(to: deadline)
        #expect(Self.ended(gone)?.abort == true)
        #expect(table.liveSessions == 1, "the subscribed session stays")
        #expect(table.nextDeadline == .seconds(7200), "only its keepalive is left")
        #expect(table.push(busy, [Self.change(1)], now: .seconds(40)).count == 1)
    }

    @Test("RECONFIRMs and UNSUBSCRIBEs reach the shell with their session; RECONFIRMs are counted")
    func passedOn() throws {
        var table = Self.table()
        let id = try Self.subscribed(&table)
        let record = ResourceRecord(name: "_ipp._tcp.lan1.example.test.", data: .ptr("Gone._ipp._tcp.lan1.example.test."), ttl: 0)
        #expect(table.received(id, PushSessionTests.bytes(DSOMessage(id: 0, tlvs: [.reconfirm(record)])), now: .seconds(1)) == [.reconfirm(id, record)])
        #expect(table.statistics.reconfirms == 1)
        #expect(table.received(id, PushSessionTests.bytes(DSOMessage(id: 0, tlvs: [.unsubscribe(messageID: 5)])), now: .seconds(2)) == [.unsubscribe(id, 5)])
    }
}
