import NearbyBasics
import PeerConnection
import PeerTrust
import Testing

@testable import ConnectionBroker

/// ConnectionBroker.events for an application that does not read: bounded by the peers.
@Suite("broker events while nobody reads")
struct BrokerEventBufferTests {
    static func id(_ byte: UInt8) -> PeerID { PeerID(bytes: [UInt8](repeating: byte, count: 32))! }

    @Test("a peer whose dials keep failing waits as its newest failure; an instance skipped again as its newest reason")
    func perPeerAndPerName() {
        var buffer = BrokerEventBuffer<BrokerEvent>(limit: 4)
        for n in 0..<10_000 {
            buffer.push(.dialFailed(Self.id(1), reason: "attempt \(n)"))
            buffer.push(.dialFailed(Self.id(2), reason: "attempt \(n)"))
            buffer.push(.skipped(name: "Printer", reason: "no id \(n)"))
        }
        #expect(buffer.count == 3)
        var reasons: [String] = []
        while let event = buffer.pop() {
            switch event {
            case .dialFailed(_, let reason), .skipped(_, let reason): reasons.append(reason)
            default: Issue.record("unexpected \(event)")
            }
        }
        #expect(reasons == ["attempt 9999", "attempt 9999", "no id 9999"])
        // Read: the next failure waits again.
        buffer.push(.dialFailed(Self.id(1), reason: "later"))
        #expect(buffer.count == 1)
    }

    @Test("refusals beyond the limit are summed up in one strangers event, after the ones that wait by themselves")
    func refusalsSummed() {
        var buffer = BrokerEventBuffer<BrokerEvent>(limit: 4)
        var one = StrangerSummary(interval: .seconds(1))
        one.failedUnreported = 1
        for _ in 0..<1000 { buffer.push(.strangers(one)) }
        buffer.push(.dialFailed(Self.id(3), reason: "refused"))
        #expect(buffer.count == 4 + 1 + 1)
        var kinds: [String] = []
        var unreported = 0
        while let event = buffer.pop() {
            switch event {
            case .strangers(let sum) where sum.interval == .seconds(1): kinds.append("one")
            case .strangers(let sum):
                kinds.append("summary")
                unreported = sum.failedUnreported
            case .dialFailed: kinds.append("dialFailed")
            default: kinds.append("other")
            }
        }
        #expect(kinds == ["one", "one", "one", "one", "summary", "dialFailed"])
        #expect(unreported == 996)
    }
}

/// The connection half of the policy, with events that carry only a connection's ID (a
/// `BrokerEvent.connected` needs a live connection).
@Suite("broker events while nobody reads: connections")
struct BrokerEventBufferConnectionTests {
    enum Event: BufferedBrokerEvent, Equatable {
        case connected(UInt64)
        case disconnected(UInt64)
        case dialFailed(UInt8, String)
        case refused(Int)
        case strangers(StrangerSummary)

        var bufferRole: BrokerEventRole {
            switch self {
            case .connected(let id): .opened(ConnectionID(value: id))
            case .disconnected(let id): .closed(ConnectionID(value: id))
            case .dialFailed(let byte, _): .failedDial(BrokerEventBufferTests.id(byte))
            case .refused: .notice
            case .strangers(let summary): .summary(summary)
            }
        }

        static func == (a: Event, b: Event) -> Bool { String(describing: a) == String(describing: b) }
    }

    static func drain(_ buffer: inout BrokerEventBuffer<Event>) -> [Event] {
        var events: [Event] = []
        while let event = buffer.pop() { events.append(event) }
        return events
    }

    @Test("a connection that opened and ended before the application read is not reported at all; the events around it keep their order")
    func connectedAndGoneUnread() {
        var buffer = BrokerEventBuffer<Event>(limit: 4)
        buffer.push(.dialFailed(1, "refused"))
        buffer.push(.connected(7))
        buffer.push(.refused(1))
        buffer.push(.disconnected(7))
        #expect(buffer.count == 2)
        #expect(buffer.merged == 2)
        #expect(Self.drain(&buffer) == [.dialFailed(1, "refused"), .refused(1)])
    }

    @Test("a connection the application has seen reports its end; a replacement that follows waits as its own connected")
    func connectedSeenThenGone() {
        var buffer = BrokerEventBuffer<Event>(limit: 4)
        buffer.push(.connected(7))
        #expect(Self.drain(&buffer) == [.connected(7)])
        buffer.push(.disconnected(7))
        buffer.push(.connected(8))
        #expect(buffer.merged == 0)
        #expect(Self.drain(&buffer) == [.disconnected(7), .connected(8)])
    }

    @Test("connected events are never merged: two connections (even many) all wait, and only the one that ended unread goes")
    func connectionsAllWait() {
        var buffer = BrokerEventBuffer<Event>(limit: 1)
        for id in 1...100 as ClosedRange<UInt64> { buffer.push(.connected(id)) }
        buffer.push(.disconnected(50))
        buffer.push(.disconnected(500))  // never seen: it waits as it is
        #expect(buffer.count == 100)
        let events = Self.drain(&buffer)
        #expect(events.count == 100)
        #expect(!events.contains(.connected(50)))
        #expect(events.last == .disconnected(500))
    }

    @Test("refusals beyond the limit fold into the summary even between connections, and a connection event is never folded")
    func refusalsBetweenConnections() {
        var buffer = BrokerEventBuffer<Event>(limit: 2)
        buffer.push(.refused(1))
        buffer.push(.refused(2))
        buffer.push(.connected(1))
        for n in 3...10 { buffer.push(.refused(n)) }
        buffer.push(.connected(2))
        let events = Self.drain(&buffer)
        #expect(events.count == 5)
        #expect(Array(events.prefix(3)) == [.refused(1), .refused(2), .connected(1)])
        guard case .strangers(let sum) = events[3] else {
            Issue.record("expected a summary, got \(events[3])")
            return
        }
        #expect(sum.failedUnreported == 8)
        #expect(events[4] == .connected(2))
    }
}
