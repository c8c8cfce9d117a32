import DNSWire
import Testing

@testable import DiscoveryProxyCore
@testable import UnicastDNSSD

/// Nearby's DNS Push client against the proxy's session and answering machines, in memory:
/// what the client sends is what the server reads, and back, with the link's changes in
/// between. No sockets, no TLS, no clock.
@Suite("discovery proxy: DNS Push end to end, in memory")
struct PushRoundTripTests {
    static let key = RecordPoller.Key("_ipp._tcp.lan1.example.test.", .ptr)
    static let session = ProxyStateMachine.SessionID(1)

    /// Both ends and the proxy, wired: each send of one side is the other's receive.
    struct Wire {
        var client = PushClient(now: .zero)
        var server = PushSession(now: .zero)
        var proxy = ProxyStateMachineTests.machine { $0.pushPort = 853 }
        /// What reached the client's owner.
        var events: [PushClient.Action] = []
        var linkQuestions: [ProxyStateMachine.Action] = []

        mutating func toServer(_ actions: [PushClient.Action], now: Duration) {
            for action in actions {
                switch action {
                case .send(let bytes): fromServer(server.received(bytes, now: now), now: now)
                default: events.append(action)
                }
            }
        }

        mutating func fromServer(_ actions: [PushSession.Action], now: Duration) {
            for action in actions {
                switch action {
                case .send(let bytes): toServer(client.received(bytes, now: now), now: now)
                case .subscribe(let id, let question):
                    let (result, more) = proxy.subscribe(question, session: PushRoundTripTests.session, id: id, now: now)
                    linkQuestions += more
                    switch result {
                    case .accepted(let current):
                        fromServer(server.subscribed(id, code: .noError) + server.push(current), now: now)
                    case .refused(let code):
                        fromServer(server.subscribed(id, code: code), now: now)
                    }
                case .unsubscribe(let id): proxy.unsubscribe(session: PushRoundTripTests.session, id: id, now: now)
                case .reconfirm, .close: break
                }
            }
        }

        mutating func link(_ added: [ResourceRecord], removed: [ResourceRecord] = [], now: Duration) {
            for action in proxy.linkChanged(ProxyStateMachineTests.link, ProxyStateMachineTests.browse, added: added, removed: removed, now: now) {
                if case .push(_, let changes) = action { fromServer(server.push(changes), now: now) }
            }
        }
    }

    static func zonePTR(_ instance: String) -> RecordData { .ptr(try! DomainName(parsing: "\(instance)._ipp._tcp.lan1.example.test.")) }

    @Test("subscribe, hear an arrival and a goodbye, unsubscribe: the client sees each change once, names in the zone")
    func roundTrip() {
        var wire = Wire()
        wire.toServer(wire.client.subscribe(Self.key, now: .zero), now: .zero)
        #expect(wire.events == [.subscribed(Self.key)])
        #expect(wire.linkQuestions == [.startLinkQuestion(ProxyStateMachineTests.link, ProxyStateMachineTests.browse)])
        #expect(wire.server.isEstablished && wire.client.isEstablished)

        wire.link([ProxyStateMachineTests.ptr("Alpha")], now: .milliseconds(50))
        #expect(wire.events.last == .changed(Self.key, added: [Self.zonePTR("Alpha")], removed: [], removeAll: false))
        var goodbye = ProxyStateMachineTests.ptr("Alpha")
        goodbye.ttl = 0
        wire.link([goodbye], now: .seconds(3))
        #expect(wire.events.last == .changed(Self.key, added: [], removed: [Self.zonePTR("Alpha")], removeAll: false))
        #expect(wire.events.count == 3)

        wire.toServer(wire.client.unsubscribe(Self.key, now: .seconds(4)), now: .seconds(4))
        #expect(wire.server.subscriptions.isEmpty)
        wire.link([ProxyStateMachineTests.ptr("Beta")], now: .seconds(5))
        #expect(wire.events.count == 3, "nothing pushed after UNSUBSCRIBE")
    }

    @Test("a second client subscribing later gets what the link already said, at once")
    func lateSubscriber() {
        var first = Wire()
        first.toServer(first.client.subscribe(Self.key, now: .zero), now: .zero)
        first.link([ProxyStateMachineTests.ptr("Alpha")], now: .milliseconds(50))
        // The same proxy, a new session.
        var second = Wire()
        second.proxy = first.proxy
        second.toServer(second.client.subscribe(Self.key, now: .seconds(1)), now: .seconds(1))
        #expect(second.events == [.subscribed(Self.key), .changed(Self.key, added: [Self.zonePTR("Alpha")], removed: [], removeAll: false)])
    }

    @Test("a link record announced with a TTL a PUSH cannot carry (0x80000000 and up) is pushed with the largest it can, and the rest of the PUSH is not lost")
    func hugeTTL() {
        var wire = Wire()
        wire.toServer(wire.client.subscribe(Self.key, now: .zero), now: .zero)
        var huge = ProxyStateMachineTests.ptr("Forever")
        huge.ttl = 0xFFFF_FFF0
        wire.link([huge, ProxyStateMachineTests.ptr("Alpha")], now: .milliseconds(50))
        #expect(wire.events.last == .changed(Self.key, added: [Self.zonePTR("Forever"), Self.zonePTR("Alpha")], removed: [], removeAll: false))
    }

    @Test("RECONFIRM (RFC 8765 §6.5): a record the link told is asked again there, in the link's names; the zone's own records, unknown ones and names outside the zones are not")
    func reconfirm() {
        var wire = Wire()
        wire.toServer(wire.client.subscribe(Self.key, now: .zero), now: .zero)
        wire.link([ProxyStateMachineTests.ptr("Alpha")], now: .milliseconds(50))
        let alpha = ResourceRecord(name: "_ipp._tcp.lan1.example.test.", data: Self.zonePTR("Alpha"), ttl: 0)
        #expect(wire.proxy.reconfirm(alpha) == [.reconfirmOnLink(ProxyStateMachineTests.link, ResourceRecord(name: "_ipp._tcp.local.", data: .ptr("Alpha._ipp._tcp.local."), ttl: 0))])
        let unknown = ResourceRecord(name: "_ipp._tcp.lan1.example.test.", data: Self.zonePTR("Nobody"), ttl: 0)
        #expect(wire.proxy.reconfirm(unknown).isEmpty)
        #expect(wire.proxy.reconfirm(ResourceRecord(name: "b._dns-sd._udp.lan1.example.test.", data: .ptr("lan1.example.test."), ttl: 0)).isEmpty)
        #expect(wire.proxy.reconfirm(ResourceRecord(name: "www.example.com.", data: .a(IPv4Address(192, 0, 2, 1)), ttl: 0)).isEmpty)
        #expect(wire.proxy.statistics.reconfirms == 1)
    }

    @Test("outside the zone: the client is told NOTAUTH and keeps asking instead")
    func refused() {
        var wire = Wire()
        let outside = RecordPoller.Key("www.example.com.", .a)
        wire.toServer(wire.client.subscribe(outside, now: .zero), now: .zero)
        #expect(wire.events == [.refused(outside, .notAuthoritative)])
    }

    @Test("the zone names its Push server: _dns-push-tls._tcp SRV to the first name server when Push is offered, no records when not")
    func serviceRecord() throws {
        var offered = ProxyStateMachineTests.machine { $0.pushPort = 853 }
        let srv = try ProxyStateMachineTests.reply(ProxyStateMachineTests.ask(&offered, "_dns-push-tls._tcp.lan1.example.test.", .srv))
        #expect(srv.responseCode == .noError && srv.header.isAuthoritative)
        #expect(srv.answers.map(\.data) == [.srv(SRVData(port: 853, target: "proxy-lan1.example.test."))])
        let txt = try ProxyStateMachineTests.reply(ProxyStateMachineTests.ask(&offered, "_dns-push-tls._tcp.lan1.example.test.", .txt))
        #expect(txt.answers.isEmpty && txt.authorities.first?.type == .soa)
        var subscribed = ProxyStateMachineTests.machine { $0.pushPort = 853 }
        let told = subscribed.subscribe(Question(name: "_dns-push-tls._tcp.lan1.example.test.", type: .srv), session: Self.session, id: 1, now: .zero)
        #expect(told.0 == .accepted([.add(ResourceRecord(name: "_dns-push-tls._tcp.lan1.example.test.", data: .srv(SRVData(port: 853, target: "proxy-lan1.example.test.")), ttl: 10))]))
        var plain = ProxyStateMachineTests.machine()
        let none = try ProxyStateMachineTests.reply(ProxyStateMachineTests.ask(&plain, "_dns-push-tls._tcp.lan1.example.test.", .srv))
        #expect(none.responseCode == .noError && none.answers.isEmpty)
        #expect(plain.linkQuestions.isEmpty && offered.linkQuestions.isEmpty)
    }

    @Test("beside a registrar the zone names it: _dnssd-srp._udp SRV to the first name server and the registrar's port (RFC 9665 §3.1); without one the name is the link's")
    func registrarServiceRecord() throws {
        var beside = ProxyStateMachineTests.machine { $0.registrarPort = 8053 }
        let srv = try ProxyStateMachineTests.reply(ProxyStateMachineTests.ask(&beside, "_dnssd-srp._udp.lan1.example.test.", .srv))
        #expect(srv.responseCode == .noError && srv.header.isAuthoritative)
        #expect(srv.answers.map(\.data) == [.srv(SRVData(port: 8053, target: "proxy-lan1.example.test."))])
        let txt = try ProxyStateMachineTests.reply(ProxyStateMachineTests.ask(&beside, "_dnssd-srp._udp.lan1.example.test.", .txt))
        #expect(txt.answers.isEmpty && txt.authorities.first?.type == .soa)
        #expect(beside.linkQuestions.isEmpty)
        var plain = ProxyStateMachineTests.machine()
        _ = ProxyStateMachineTests.ask(&plain, "_dnssd-srp._udp.lan1.example.test.", .srv)
        #expect(!plain.linkQuestions.isEmpty)
    }
}
