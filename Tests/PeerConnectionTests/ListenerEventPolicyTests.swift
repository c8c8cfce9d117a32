import NearbyBasics
import PeerTrust
import Testing

@testable import PeerConnection

/// PeerListener.events for an application that does not read: refusals are summed up beyond a
/// few, and nothing that must be acted on is dropped (no threads: the policy is a value).
@Suite("listener events while nobody reads")
struct ListenerEventPolicyTests {
    func rejection(_ n: Int) -> PeerListener.Event {
        .rejected(PeerListener.Rejection(address: "192.0.2.\(n % 250)", port: 40000 + n, peerID: nil, error: PeerConnectionError(.tls, "no TLS 1.3")))
    }

    @Test("100,000 failed strangers and a pile of summaries wait as 16 refusals and one summary that counts the rest")
    func refusalsAreSummedUp() {
        var buffer = PeerListener.Event.policy
        for n in 0..<100_000 { buffer.push(rejection(n)) }
        var summary = StrangerSummary(interval: .seconds(1))
        summary.noHello = 5
        summary.peakSettingUp = 7
        for _ in 0..<100 { buffer.push(.strangers(summary)) }
        #expect(buffer.count == PeerListener.noticesWaiting + 1)
        var events: [PeerListener.Event] = []
        while let event = buffer.pop() { events.append(event) }
        let individual = events.filter { if case .rejected = $0 { true } else { false } }
        #expect(individual.count == PeerListener.noticesWaiting)
        guard case .strangers(let sum)? = events.last else {
            Issue.record("the last event is not a summary: \(String(describing: events.last))")
            return
        }
        #expect(sum.failedUnreported == 100_000 - PeerListener.noticesWaiting)
        #expect(sum.noHello == 500)
        #expect(sum.peakSettingUp == 7)
        #expect(sum.interval == .seconds(100))
        #expect(buffer.merged == 100_100 - PeerListener.noticesWaiting)
    }

    @Test("once the summary is read, refusals wait one by one again")
    func afterTheSummary() {
        var buffer = PeerListener.Event.policy
        for n in 0..<40 { buffer.push(rejection(n)) }
        while buffer.pop() != nil {}
        buffer.push(rejection(1))
        #expect(buffer.count == 1)
        guard case .rejected? = buffer.pop() else {
            Issue.record("a refusal after the summary was read is not reported by itself")
            return
        }
    }
}
