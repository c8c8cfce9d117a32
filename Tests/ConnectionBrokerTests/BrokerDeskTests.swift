import PeerConnection
import PeerProtocol
import PeerTrust
import Testing

@testable import ConnectionBroker

/// The broker's desk as a pure value: dial slots, races, surveys and callers, driven by plain
/// clock readings (no clock, no threads, no sockets).
@Suite("broker desk: slots, races, surveys, callers")
struct BrokerDeskTests {
    static func id(_ byte: UInt8) -> PeerID { PeerID(bytes: [UInt8](repeating: byte, count: 32))! }
    static func announcement(_ name: String, _ peer: PeerID, address: String = "192.0.2.1") -> PeerAnnouncement {
        PeerAnnouncement(name: name, peerID: peer.description, protocolVersion: "0.2.2", addresses: [PeerAddress(address)!], port: 9099)
    }
    static let address = [PeerAddress("192.0.2.1")!]
    static func desk(slots: Int = 8) -> BrokerDesk {
        BrokerDesk(localID: id(0xee), protocolVersion: ProtocolVersion(major: 0, minor: 2, patch: 2), slots: slots)
    }
    /// Announces each candidate on eth0.
    static func announce(_ candidates: [(PeerID, PeerAnnouncement)], to desk: inout BrokerDesk) {
        for (_, announcement) in candidates { _ = desk.seen(announcement, on: "eth0", at: announcement.addresses) }
    }

    @Test("at most the limit of dials run at once; the others start in order as slots free")
    func slots() {
        var desk = Self.desk(slots: 2)
        let peers = (1...4).map { Self.id(UInt8($0)) }
        #expect(desk.dial(peers[0], addresses: Self.address, port: 1).start.map(\.peer) == [peers[0]])
        #expect(desk.dial(peers[1], addresses: Self.address, port: 1).start.map(\.peer) == [peers[1]])
        #expect(desk.dial(peers[2], addresses: Self.address, port: 1).start.isEmpty)
        #expect(desk.dial(peers[3], addresses: Self.address, port: 1).start.isEmpty)
        #expect(desk.queuedJobs == 2)
        #expect(desk.dialEnded(peers[1], failure: nil).start.map(\.peer) == [peers[2]])
        let failure = PeerConnectionError(.unreachable, "refused by 192.0.2.1")
        #expect(desk.dialEnded(peers[0], failure: failure).start.map(\.peer) == [peers[3]])
        #expect(desk.queuedJobs == 0)
        #expect(desk.statistics.dials == 4 && desk.statistics.dialsSucceeded == 1 && desk.statistics.dialsFailed == 1)
        #expect(desk.lastFailure[peers[0]] == failure)
    }

    @Test("a caller who gives up is told 'not found' for a peer nobody announced, 'unreachable' with the last failure otherwise")
    func givingUp() {
        var desk = Self.desk()
        let (a, b) = (Self.id(0x0a), Self.id(0x0b))
        _ = desk.seen(Self.announcement("A", a), on: "eth0", at: Self.address)
        let failure = PeerConnectionError(.unreachable, "timed out")
        _ = desk.dial(a, addresses: Self.address, port: 9099)
        _ = desk.dialEnded(a, failure: failure)
        let forA = desk.waitForPeer(a, until: .seconds(5))
        let forB = desk.waitForPeer(b, until: .seconds(5))
        #expect(desk.nextDeadline(at: .zero) == .seconds(5))
        #expect(desk.advance(at: .seconds(4)).replies.isEmpty)
        let replies = desk.advance(at: .seconds(5)).replies
        #expect(replies.map(\.ticket) == [forA, forB])
        guard case .failed(let errorA) = replies[0].reply, case .failed(let errorB) = replies[1].reply else {
            Issue.record("both callers should fail: \(replies)")
            return
        }
        #expect(errorA.code == .unreachable && errorA.message.contains("timed out") && errorA.connectionError == failure)
        #expect(errorB.code == .notFound)
    }

    @Test("a name says whom to expect: nobody yet, one peer, or an error when two peers or none hide behind it")
    func names() {
        var desk = Self.desk()
        #expect(desk.peer(named: "A") == nil)
        _ = desk.seen(Self.announcement("A", Self.id(0x0a)), on: "eth0", at: Self.address)
        #expect(desk.peer(named: "A") == .success(Self.id(0x0a)))
        _ = desk.seen(PeerAnnouncement(name: "A", domain: "example.test.", peerID: Self.id(0x0b).description, protocolVersion: "0.2.2", addresses: [], port: 1), on: "example.test.", at: [])
        guard case .failure(let error)? = desk.peer(named: "A") else {
            Issue.record("two peers behind one name")
            return
        }
        #expect(error.message.contains("2 different peers"))
    }

    @Test("news answers every news waiter; a connection answers the peer's callers with its ID")
    func newsAndConnections() {
        var desk = Self.desk()
        let a = Self.id(0x0a)
        let news = desk.waitForNews(until: .seconds(3))
        let caller = desk.waitForPeer(a, until: .seconds(9))
        let (merged, work) = desk.seen(Self.announcement("A", a), on: "eth0", at: Self.address)
        #expect(merged.addresses == Self.address)
        #expect(work.replies == [.init(ticket: news, reply: .news)])
        #expect(desk.connected(a, 42).replies == [.init(ticket: caller, reply: .connected(42))])
        #expect(desk.nextDeadline(at: .seconds(1)) == nil)
    }

    @Test("a race gathers the candidates announced in time, queues their measurements, and answers once certain; its queued measurements are dropped and its probes ended")
    func race() {
        var desk = Self.desk(slots: 1)
        let (near, far) = (Self.id(0x01), Self.id(0x02))
        let candidates = [(near, Self.announcement("A near", near)), (far, Self.announcement("B far", far, address: "192.0.2.2"))]
        Self.announce(candidates, to: &desk)
        let ticket = desk.waitForNearest(NearestRace(answersDue: .milliseconds(130), deadline: .seconds(10)))
        var work = desk.advance(at: .milliseconds(10))
        // One slot: the first candidate is measured, the second waits for the slot.
        #expect(work.start == [.measure(near, candidates[0].1, for: ticket)])
        #expect(desk.queuedJobs == 1)
        #expect(work.replies.isEmpty)
        // Gathering is open until answersDue plus the link's share: ask again then.
        #expect(desk.nextDeadline(at: .milliseconds(10)) == .milliseconds(180))
        desk.probe(ticket, near, .asked(Self.address[0]), at: .milliseconds(11))
        work = desk.measured(ticket, near, rtt: .milliseconds(1), address: "192.0.2.1", at: .milliseconds(12))
        // The slot goes to the far candidate's measurement.
        #expect(work.start == [.measure(far, candidates[1].1, for: ticket)])
        desk.probe(ticket, far, .asked(PeerAddress("192.0.2.2")!), at: .milliseconds(13))
        // Past gathering and past the far one's bound: decided, the far one not waited for.
        work = desk.advance(at: .milliseconds(200))
        guard case .nearest(let nearest, let measured)? = work.replies.first?.reply else {
            Issue.record("the race should be decided: \(work)")
            return
        }
        #expect(nearest?.peerID == near)
        #expect(measured.map(\.peerID) == [near, far])
        #expect(measured[1].rttExceeds != nil)
        #expect(work.endProbes == [ticket])
        // The far probe, ended early, still gives its slot back; the race is gone.
        #expect(desk.measured(ticket, far, rtt: nil, address: nil, at: .milliseconds(201)).replies.isEmpty)
        #expect(desk.nextDeadline(at: .milliseconds(201)) == nil)
    }

    @Test("a race decided while measurements still queue drops them: they never start")
    func raceDropsQueued() {
        var desk = Self.desk(slots: 1)
        let peers = (1...3).map { Self.id(UInt8($0)) }
        let candidates = peers.enumerated().map { ($0.element, Self.announcement("P\($0.offset)", $0.element, address: "192.0.2.\($0.offset + 1)")) }
        Self.announce(candidates, to: &desk)
        let ticket = desk.waitForNearest(NearestRace(answersDue: .milliseconds(100), deadline: .milliseconds(500)))
        _ = desk.advance(at: .zero)
        #expect(desk.queuedJobs == 2)
        // The caller's deadline: whatever is known is the verdict.
        let work = desk.advance(at: .milliseconds(500))
        #expect(work.replies.map(\.ticket) == [ticket])
        #expect(desk.queuedJobs == 0)
        #expect(desk.measured(ticket, peers[0], rtt: nil, address: nil, at: .milliseconds(501)).start.isEmpty)
    }

    @Test("a survey answers once every candidate is measured; with no candidate at once")
    func survey() {
        var desk = Self.desk()
        let (a, b) = (Self.id(0x0a), Self.id(0x0b))
        let (empty, emptyWork) = desk.survey()
        #expect(emptyWork.replies == [.init(ticket: empty, reply: .surveyed([]))])
        Self.announce([(a, Self.announcement("A", a)), (b, Self.announcement("B", b, address: "192.0.2.2"))], to: &desk)
        // Our own announcement and one without an id are listed, never measured.
        _ = desk.seen(Self.announcement("Me", Self.id(0xee)), on: "eth0", at: Self.address)
        _ = desk.seen(PeerAnnouncement(name: "Printer", peerID: nil, protocolVersion: nil, addresses: [], port: 631), on: "eth0", at: [])
        #expect(desk.skippedText.contains("\"Printer\"") && !desk.skippedText.contains("Me"))
        let (ticket, work) = desk.survey()
        #expect(work.start.count == 2)
        #expect(desk.measured(ticket, a, rtt: .milliseconds(2), address: "192.0.2.1", at: .zero).replies.isEmpty)
        let last = desk.measured(ticket, b, rtt: nil, address: nil, at: .zero)
        guard case .surveyed(let measured)? = last.replies.first?.reply else {
            Issue.record("the survey should be answered: \(last)")
            return
        }
        #expect(measured.map(\.name) == ["A", "B"] && measured.map(\.rtt) == [.milliseconds(2), nil])
        let listing = desk.listing(measured: measured)
        #expect(listing.map(\.name) == ["A", "B", "Me", "Printer"])
        #expect(listing.map(\.compatible) == [true, true, false, false])
        #expect(listing[0].rtt == .milliseconds(2))
    }

    @Test("shutting down answers every caller once, ends every race's probes, and starts nothing more")
    func shutdown() {
        var desk = Self.desk(slots: 1)
        let a = Self.id(0x0a)
        let peer = desk.waitForPeer(a, until: .seconds(5))
        let news = desk.waitForNews(until: .seconds(5))
        let race = desk.waitForNearest(NearestRace(answersDue: .seconds(1), deadline: .seconds(5)))
        _ = desk.dial(a, addresses: Self.address, port: 1)
        _ = desk.dial(Self.id(0x0b), addresses: Self.address, port: 1)
        let work = desk.shutDown()
        #expect(Set(work.replies.map(\.ticket)) == [peer, news, race])
        #expect(work.endProbes == [race])
        #expect(desk.shutDown().replies.isEmpty)
        #expect(desk.queuedJobs == 0)
        #expect(desk.dialEnded(a, failure: nil).start.isEmpty)
        #expect(desk.nextDeadline(at: .zero) == nil)
        #expect(desk.advance(at: .seconds(9)).replies.isEmpty)
    }
}
