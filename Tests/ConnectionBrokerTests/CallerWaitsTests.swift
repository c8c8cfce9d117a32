import PeerTrust
import Testing

@testable import ConnectionBroker

/// The broker's callers as a pure value: which waits are answered, by what, and when they end
/// (times are plain clock readings: no clock, no threads).
@Suite("callers waiting on the broker")
struct CallerWaitsTests {
    static func id(_ byte: UInt8) -> PeerID { PeerID(bytes: [UInt8](repeating: byte, count: 32))! }
    let a = Self.id(0x0a), b = Self.id(0x0b)

    @Test("a connection answers every caller waiting for that peer, and only them")
    func connectedAnswersItsCallers() {
        var waits = CallerWaits()
        let first = waits.waitForPeer(a, until: .seconds(10))
        let second = waits.waitForPeer(a, until: .seconds(5))
        let other = waits.waitForPeer(b, until: .seconds(10))
        #expect(waits.answered(a) == [first, second])
        #expect(waits.answered(a).isEmpty)
        #expect(waits.nextDeadline == .seconds(10))
        #expect(waits.answered(b) == [other])
        #expect(waits.isEmpty)
    }

    @Test("callers give up at their own deadlines; news waits end at theirs; the next deadline is the earliest")
    func deadlines() {
        var waits = CallerWaits()
        let soon = waits.waitForPeer(a, until: .seconds(2))
        let late = waits.waitForPeer(a, until: .seconds(8))
        let news = waits.waitForNews(until: .seconds(3))
        #expect(waits.nextDeadline == .seconds(2))
        var due = waits.due(at: .seconds(1))
        #expect(due.gaveUp.isEmpty && due.news.isEmpty)
        due = waits.due(at: .seconds(2))
        #expect(due.gaveUp.map(\.ticket) == [soon] && due.gaveUp.map(\.peer) == [a])
        #expect(waits.nextDeadline == .seconds(3))
        due = waits.due(at: .seconds(3))
        #expect(due.news == [news] && due.gaveUp.isEmpty)
        #expect(waits.nextDeadline == .seconds(8))
        #expect(waits.answered(a) == [late])
    }

    @Test("a peer asking someone whether to let us in extends its callers' waits, never shortens them")
    func extendedByAdmission() {
        var waits = CallerWaits()
        let short = waits.waitForPeer(a, until: .seconds(5))
        let long = waits.waitForPeer(a, until: .seconds(40))
        waits.extend(a, to: .seconds(32))
        waits.extend(b, to: .seconds(99))  // nobody waits for b: nothing changes
        #expect(waits.due(at: .seconds(31)).gaveUp.isEmpty)
        #expect(waits.due(at: .seconds(32)).gaveUp.map(\.ticket) == [short])
        #expect(waits.due(at: .seconds(39)).gaveUp.isEmpty)
        #expect(waits.due(at: .seconds(40)).gaveUp.map(\.ticket) == [long])
        #expect(waits.isEmpty)
    }

    @Test("news answers every news waiter at once; shutting down answers everyone, and nobody twice")
    func newsAndShutdown() {
        var waits = CallerWaits()
        let n1 = waits.waitForNews(until: .seconds(9))
        let n2 = waits.waitForNews(until: .seconds(9))
        #expect(waits.news() == [n1, n2])
        #expect(waits.news().isEmpty)
        let p = waits.waitForPeer(b, until: .seconds(9))
        let n3 = waits.waitForNews(until: .seconds(9))
        let everyone = waits.shutDown()
        #expect(everyone.peers == [p] && everyone.news == [n3])
        #expect(waits.isEmpty && waits.nextDeadline == nil)
        #expect(waits.due(at: .seconds(100)).gaveUp.isEmpty)
    }
}
