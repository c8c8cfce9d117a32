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
        var buffer = BrokerEventBuffer(limit: 4)
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
        var buffer = BrokerEventBuffer(limit: 4)
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
