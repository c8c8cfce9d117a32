import DNSWire
import Testing

@testable import DiscoveryProxyCore

/// One DNS-over-TCP connection's life, driven by hand: questions, answers, the peer's end of
/// stream and time as numbers.
@Suite("discovery proxy: TCP connections")
struct TCPConnectionStateTests {
    static let limits = TCPConnectionState.Limits(idleTimeout: .seconds(10), maximumInFlight: 4, drainTime: .milliseconds(1500))

    @Test("in-flight policy: a client that asks without reading its answers is closed at one question over the limit, and counted as such")
    func asksWithoutReading() {
        var connection = TCPConnectionState(Self.limits, now: .zero)
        // The producer asks every millisecond; the consumer (its own reading) never drains.
        var verdicts: [TCPConnectionState.Verdict] = []
        for index in 1...10 {
            verdicts.append(connection.asked(now: .milliseconds(index)))
            if verdicts.last != .keep { break }
        }
        #expect(verdicts == [.keep, .keep, .keep, .keep, .close(.overfull)])
    }

    @Test("a client that reads its answers may ask any number in a row")
    func readsAsItAsks() {
        var connection = TCPConnectionState(Self.limits, now: .zero)
        for index in 1...1000 {
            #expect(connection.asked(now: .milliseconds(index)) == .keep)
            #expect(connection.answered() == .keep)
        }
    }

    @Test("idle: closed once nothing was asked for the idle time with nothing in flight; an answer still owed holds it open")
    func idle() {
        var connection = TCPConnectionState(Self.limits, now: .zero)
        #expect(connection.nextDeadline == .seconds(10))
        #expect(connection.advance(to: .seconds(9)) == .keep)
        #expect(connection.asked(now: .seconds(9)) == .keep)
        #expect(connection.nextDeadline == nil, "an answer, not the time, comes next")
        #expect(connection.advance(to: .seconds(30)) == .keep)
        #expect(connection.answered() == .keep)
        #expect(connection.nextDeadline == .seconds(19))
        #expect(connection.advance(to: .seconds(19)) == .close(.idle))
    }

    @Test("the peer's end of stream: closed at once with nothing owed, after the last answer otherwise, or at the drain time")
    func drain() {
        var done = TCPConnectionState(Self.limits, now: .zero)
        #expect(done.peerFinished(now: .seconds(1)) == .close(.drained))

        var owed = TCPConnectionState(Self.limits, now: .zero)
        _ = owed.asked(now: .zero)
        _ = owed.asked(now: .zero)
        #expect(owed.peerFinished(now: .seconds(1)) == .keep)
        #expect(owed.nextDeadline == .milliseconds(2500))
        #expect(owed.answered() == .keep)
        #expect(owed.answered() == .close(.drained))

        var late = TCPConnectionState(Self.limits, now: .zero)
        _ = late.asked(now: .zero)
        _ = late.peerFinished(now: .seconds(1))
        #expect(late.advance(to: .milliseconds(2499)) == .keep)
        #expect(late.advance(to: .milliseconds(2500)) == .close(.drainTimedOut))
    }

    @Test("connections are counted in all and per address, and a close frees one place")
    func admission() {
        var count = ConnectionCount()
        let a = IPAddress.v4(IPv4Address("198.18.2.6")!)
        let b = IPAddress.v4(IPv4Address("198.18.2.7")!)
        var admitted: [Bool] = []
        for source in [a, a, a, b, b] { admitted.append(count.admit(source, most: 3, fromOne: 2)) }
        #expect(admitted == [true, true, false, true, false], "two from one address, three in all")
        count.closed(a)
        let again = count.admit(b, most: 3, fromOne: 2)
        #expect(again && count.count == 3)
        count.closed(IPAddress.v4(IPv4Address("198.18.2.99")!))
        #expect(count.count == 3, "a source never admitted frees nothing")
    }
}
