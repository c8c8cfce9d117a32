import DNSWire
import Testing

@testable import DiscoveryProxyCore

/// Between the answering machine's link questions and the one querier, driven by hand.
@Suite("discovery proxy: one link query shared by the links")
struct LinkQuerySharingTests {
    static let browse = ProxyStateMachineTests.browse
    static let host = LinkQuestion(name: "box.local.", type: .a)
    static let (first, second) = (LinkIndex(0), LinkIndex(1))

    static func ptr(_ instance: String) -> ResourceRecord { ProxyStateMachineTests.ptr(instance) }

    @Test("the first link to ask starts the query (new ones together, after the rest); a second is replayed what is known; the last to stop stops it")
    func sharing() {
        var sharing = LinkQuerySharing(interfaces: ["eth0", "eth0"])
        #expect(sharing.work(for: [.startLinkQuestion(Self.first, Self.browse), .startLinkQuestion(Self.first, Self.host)], now: .zero) == [.start([Self.browse, Self.host])])
        #expect(sharing.work(for: [.startLinkQuestion(Self.second, Self.browse)], now: .zero) == [.replay(Self.browse, Self.second)])
        #expect(sharing.work(for: [.stopLinkQuestion(Self.first, Self.browse)], now: .seconds(1)).isEmpty, "the second link still asks")
        #expect(sharing.work(for: [.stopLinkQuestion(Self.second, Self.browse)], now: .seconds(2)) == [.stop(Self.browse)])
        #expect(sharing.questions == [Self.host])
        // Started and stopped in one batch: the querier is never asked.
        #expect(sharing.work(for: [.startLinkQuestion(Self.first, Self.browse), .stopLinkQuestion(Self.first, Self.browse)], now: .seconds(3)).isEmpty)
        // Replies and pushes are not the querier's.
        #expect(sharing.work(for: [.drop(.init(1)), .push(.init(1), [])], now: .seconds(3)).isEmpty)
    }

    @Test("the replay race: a record reported gone for a link while its replay was read is not brought back")
    func replayRace() {
        var sharing = LinkQuerySharing(interfaces: ["eth0", "eth0"])
        _ = sharing.work(for: [.startLinkQuestion(Self.first, Self.browse)], now: .zero)
        _ = sharing.work(for: [.startLinkQuestion(Self.second, Self.browse)], now: .zero)
        // While the querier's cache is read, Alpha goes and Beta says goodbye.
        var goodbye = Self.ptr("Beta")
        goodbye.ttl = 0
        let changes = sharing.reported([("eth0", Self.ptr("Alpha"), false), ("eth0", goodbye, true)])
        #expect(changes.map(\.link) == [Self.first, Self.second], "each link of the interface hears it, in order")
        #expect(changes.first?.removed == [Self.ptr("Alpha")] && changes.first?.added == [goodbye])
        // The cache, read before they went, still held them.
        let replay = sharing.replayed([Self.ptr("Alpha"), Self.ptr("Beta"), Self.ptr("Gamma")], question: Self.browse, link: Self.second)
        #expect(replay == [Self.ptr("Gamma")])
        // Once over, the replay notes nothing more.
        _ = sharing.reported([("eth0", Self.ptr("Gamma"), false)])
        #expect(sharing.replayed([Self.ptr("Gamma")], question: Self.browse, link: Self.second) == [Self.ptr("Gamma")])
    }

    @Test("reports go to the links on their interface only")
    func interfaces() {
        var sharing = LinkQuerySharing(interfaces: ["eth0", "eth1"])
        let changes = sharing.reported([("eth1", Self.ptr("Alpha"), true), ("eth9", Self.ptr("Beta"), true)])
        #expect(changes == [.init(link: Self.second, question: Self.browse, added: [Self.ptr("Alpha")])])
    }

    @Test("reconfirm policy: a flood of RECONFIRMs for one record (a fast producer, the querier busy) reaches the querier once per 10 s, the rest counted")
    func reconfirmFlood() {
        var sharing = LinkQuerySharing(interfaces: ["eth0"])
        var record = Self.ptr("Alpha")
        record.ttl = 0
        var work: [LinkQuerySharing.Work] = []
        for index in 0..<1000 {
            work += sharing.work(for: [.reconfirmOnLink(Self.first, record)], now: .milliseconds(index))
        }
        #expect(work == [.reconfirm(record)])
        #expect(sharing.reconfirmsCoalesced == 999)
        #expect(sharing.work(for: [.reconfirmOnLink(Self.first, Self.ptr("Beta"))], now: .seconds(1)).count == 1, "another record is its own")
        #expect(sharing.work(for: [.reconfirmOnLink(Self.first, record)], now: .seconds(10)) == [.reconfirm(record)])
    }
}
