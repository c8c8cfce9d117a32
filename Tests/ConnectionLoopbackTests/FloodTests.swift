import Foundation
import PeerTrust
import Testing

@testable import PeerConnection

/// A peer that sends faster than the other side's app reads, on real sockets: the reading
/// side stops reading (its queue stays at its limit), the sender's writes stall on TCP, and
/// once the app reads again every message arrives once, in order. Both directions.
@Suite("loopback: back-pressure under a flood")
struct FloodTests {
    static let limit = IncomingLimit(messages: 16)
    /// Far more than any kernel's socket buffers hold before the window closes; the sender
    /// stops at the first sign of a stall, long before this.
    static let cap = 50_000
    static let padding = String(repeating: "x", count: 1000)

    @Test("a client flooding a server whose app does not read is held back; then all arrive in order", arguments: [true, false])
    func flood(clientSends: Bool) async throws {
        let server = try Peers.identity("Server")
        let client = try Peers.identity("Client")
        var serving = Peers.configuration(server, pinning: [client])
        serving.incomingLimit = Self.limit
        var connecting = Peers.configuration(client, pinning: [server])
        connecting.incomingLimit = Self.limit
        let listener = try await PeerListener.listen(host: "127.0.0.1", port: 0, configuration: serving, accept: .trusted)
        async let accepted = firstConnection(listener)
        let dialed = try await PeerConnection.connect(host: "127.0.0.1", port: listener.port, configuration: connecting)
        let serverSide = try #require(await accepted)
        let (sender, receiver) = clientSends ? (dialed, serverSide) : (serverSide, dialed)

        // Send until a write would wait (the peer's window is closed and our buffer is full).
        var sent = 0
        var stalled = false
        while sent < Self.cap, !stalled {
            guard let error = await sendOrFail(sender, message(sent)) else {
                sent += 1
                continue
            }
            guard error.code == .busy else { throw error }
            stalled = true
        }
        #expect(stalled, "\(sent) messages went out without the sender ever being held back")
        // The sender's buffer can fill while the receiver still reads what is in flight (on a
        // loaded machine, its event loop runs late): wait, bounded, until it has held back.
        var held = await receiver.statistics().heldBack
        for _ in 0..<1000 where held == 0 {
            try await Task.sleep(for: .milliseconds(10))
            held = await receiver.statistics().heldBack
        }
        #expect(held >= 1)
        let queued = receiver.incoming.inbox.count
        // The limit, plus what one read of the socket had already decoded when the queue filled.
        #expect(queued >= Self.limit.messages && queued <= Self.limit.messages + 256, "queued: \(queued)")

        // The app reads again: the rest goes out at the pace it is read, nothing lost or reordered.
        let total = sent + 500
        let finishing = Task {
            for index in sent..<total { try await sender.send(text: message(index)) }
        }
        var next = 0
        var outOfOrder = 0
        for await incoming in receiver.incoming {
            if case .integer(let index)? = incoming.params?["i"], index != next { outOfOrder += 1 }
            next += 1
            if next == total { break }
        }
        try await finishing.value
        #expect(next == total && outOfOrder == 0)
        await dialed.close()
        await listener.close()
    }

    @Test("two peers flooding each other at once, both reading, both finish: writes that wait never stop reading")
    func bothWays() async throws {
        let server = try Peers.identity("Server")
        let client = try Peers.identity("Client")
        let listener = try await PeerListener.listen(
            host: "127.0.0.1", port: 0, configuration: Peers.configuration(server, pinning: [client]), accept: .trusted)
        async let accepted = firstConnection(listener)
        let dialed = try await PeerConnection.connect(host: "127.0.0.1", port: listener.port, configuration: Peers.configuration(client, pinning: [server]))
        let serverSide = try #require(await accepted)
        // 8 senders a side, 16 KiB messages: far more waiting to be written than the 64 KiB
        // high-water mark, on both sides at once. A side that stopped reading while its own
        // writes waited would wait for the other forever.
        let (senders, each) = (8, 60)
        let big = String(repeating: "y", count: 16 * 1024)
        let text = #"{"jsonrpc":"2.0","method":"bulk","params":{"pad":"\#(big)"}}"#
        let finished = try await withThrowingTaskGroup(of: Int.self) { group in
            for side in [dialed, serverSide] {
                for _ in 0..<senders {
                    group.addTask {
                        for _ in 0..<each { try await side.send(text: text) }
                        return 0
                    }
                }
                group.addTask {
                    var received = 0
                    for await _ in side.incoming {
                        received += 1
                        if received == senders * each { break }
                    }
                    return received
                }
            }
            // Bounded: a deadlock shows as this child finishing first. Closing both connections
            // fails the writes that wait, so that every child ends. (With reading stopped while
            // writes wait, as it once was, this is what happens.)
            group.addTask {
                try await Task.sleep(for: .seconds(60))
                for side in [dialed, serverSide] { await side.close(code: .goingAway, reason: "deadlocked") }
                return -1
            }
            var totals: [Int] = []
            while let result = try await group.next() {
                if result == -1 { break }
                if result > 0 { totals.append(result) }
                if totals.count == 2 { break }
            }
            group.cancelAll()
            return totals
        }
        #expect(finished == [senders * each, senders * each], "received \(finished) (a deadlock leaves it short)")
        await dialed.close()
        await listener.close()
    }

    private func sendOrFail(_ connection: PeerConnection, _ text: String) async -> PeerConnectionError? {
        do {
            try await connection.send(text: text, mode: .failIfBusy)
            return nil
        } catch {
            return error
        }
    }

    private func message(_ index: Int) -> String {
        #"{"jsonrpc":"2.0","method":"flood","params":{"i":\#(index),"pad":"\#(Self.padding)"}}"#
    }

    private func firstConnection(_ listener: PeerListener) async -> PeerConnection? {
        for await event in listener.events {
            if case .connected(let connection) = event { return connection }
        }
        return nil
    }
}
