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
        let queued = receiver.incoming.inbox.count
        // The limit, plus what one read of the socket had already decoded when the queue filled.
        #expect(queued >= Self.limit.messages && queued <= Self.limit.messages + 256, "queued: \(queued)")
        #expect(await receiver.statistics().heldBack >= 1)

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
