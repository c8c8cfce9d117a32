import Foundation
import NIOCore
import PeerConnection
import PeerTrust
import Testing

/// A listener whose connections are handed to the test, one by one.
private final class StreamServer: Sendable {
    let listener: PeerListener
    let connections: AsyncStream<PeerConnection>
    private let task: Task<Void, Never>

    init(_ configuration: PeerConnectionConfiguration) async throws {
        listener = try await PeerListener.listen(host: "127.0.0.1", port: 0, configuration: configuration, accept: .trusted)
        let (connections, connected) = AsyncStream.makeStream(of: PeerConnection.self)
        self.connections = connections
        task = Task { [listener] in
            for await event in listener.events {
                if case .connected(let connection) = event {
                    connected.yield(connection)
                    // Its JSON-RPC (ping) is answered by the built-in method; requests for the app are not used here.
                }
            }
            connected.finish()
        }
    }

    func next() async -> PeerConnection? {
        for await connection in connections { return connection }
        return nil
    }

    func stop() async {
        await listener.close()
        task.cancel()
    }
}

/// A client and a server connected over loopback TLS, with the server's side of the connection.
private func connectedPair(
    client clientStreams: StreamSettings? = StreamSettings(), server serverStreams: StreamSettings? = StreamSettings()
) async throws -> (client: PeerConnection, server: PeerConnection, stop: @Sendable () async -> Void) {
    let serverIdentity = try Peers.identity("Build Box")
    let clientIdentity = try Peers.identity("Laptop")
    var serverConfiguration = Peers.configuration(serverIdentity, pinning: [clientIdentity])
    serverConfiguration.streams = serverStreams
    var clientConfiguration = Peers.configuration(clientIdentity, pinning: [serverIdentity])
    clientConfiguration.streams = clientStreams
    let server = try await StreamServer(serverConfiguration)
    let client = try await PeerConnection.connect(host: "127.0.0.1", port: server.listener.port, configuration: clientConfiguration)
    let accepted = try #require(await server.next())
    return (client, accepted, { await client.close(); await server.stop() })
}

/// Everything a stream delivers until the peer finishes it.
private func readAll(_ stream: PeerStream) async throws(PeerConnectionError) -> [UInt8] {
    var all: [UInt8] = []
    for try await chunk in stream { all += chunk.readableBytesView }
    return all
}

private func pattern(_ count: Int, seed: Int = 0) -> [UInt8] { (0..<count).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ seed) } }

@Suite("loopback: byte streams beside JSON-RPC")
struct StreamLoopbackTests {
    @Test("a stream carries bytes both ways, in order and whole; finishing one side ends the other's loop")
    func bothWays() async throws {
        let (client, server, stop) = try await connectedPair()
        let sent = pattern(3 << 20)
        let stream = try await client.openStream(label: "upload")
        async let echoed: [UInt8] = {
            var incoming = server.incomingStreams.makeAsyncIterator()
            guard let accepted = await incoming.next() else { return [] }
            #expect(accepted.label == "upload")
            let received = try await readAll(accepted)
            // Answer with the bytes reversed, then finish.
            try await accepted.write(received.reversed())
            try await accepted.finish()
            return received
        }()
        try await stream.write(sent)
        try await stream.finish()
        let back = try await readAll(stream)
        #expect(try await echoed == sent)
        #expect(back == sent.reversed())
        let statistics = await client.streamStatistics()
        #expect(statistics.opened == 1 && statistics.bytesSent == sent.count && statistics.bytesReceived == sent.count)
        await stop()
    }

    @Test("a reader that stops holds back its own stream only: the writer waits at the window, pings and another stream go on")
    func slowReaderHoldsOnlyItsStream() async throws {
        let window = 64 << 10
        let (client, server, stop) = try await connectedPair(server: StreamSettings(window: window))
        let stalled = try await client.openStream(label: "stalled")
        let other = try await client.openStream(label: "other")
        var incoming = server.incomingStreams.makeAsyncIterator()
        let stalledHere = try #require(await incoming.next())
        let otherHere = try #require(await incoming.next())
        // 1 MiB into a stream nobody reads: the write cannot finish.
        let writer = Task { try await stalled.write(pattern(1 << 20)) }
        // Meanwhile JSON-RPC and the other stream work.
        for _ in 0..<20 { #expect(try await client.request("ping", timeout: .seconds(2)) == .object([:])) }
        async let otherBytes = readAll(otherHere)
        try await other.write(pattern(2 << 20, seed: 5))
        try await other.finish()
        #expect(try await otherBytes == pattern(2 << 20, seed: 5))
        // The stalled stream took exactly its window, no more.
        let statistics = await client.streamStatistics()
        #expect(statistics.bytesSent == window + (2 << 20))
        // Reading it now lets the writer finish.
        writer.cancel()
        await #expect(throws: PeerConnectionError.self) { try await writer.value }
        // The writer's cancellation reset the stream: the reader hears why.
        do {
            _ = try await readAll(stalledHere)
            Issue.record("the reset stream ended without an error")
        } catch {
            #expect(error.code == .streamReset && error.message.contains("cancelled"), "\(error)")
        }
        await stop()
    }

    @Test("a reset with a reason reaches the other side's reader and writer")
    func resetReachesThePeer() async throws {
        let (client, server, stop) = try await connectedPair()
        let stream = try await client.openStream(label: "job")
        var incoming = server.incomingStreams.makeAsyncIterator()
        let accepted = try #require(await incoming.next())
        try await stream.write([1, 2, 3])
        var reader = accepted.makeAsyncIterator()
        #expect(try await reader.next().map { Array($0.readableBytesView) } == [1, 2, 3])
        stream.reset("disk full", code: .failed)
        do {
            _ = try await reader.next()
            Issue.record("read after a reset")
        } catch {
            #expect(error.code == .streamReset && error.message.contains("disk full"), "\(error)")
        }
        await #expect(throws: PeerConnectionError.self) { try await accepted.write([9]) }
        await stop()
    }

    @Test("a peer that offers no streams: opening one fails at once with the reason, and JSON-RPC still works")
    func peerWithoutStreams() async throws {
        let (client, _, stop) = try await connectedPair(server: nil)
        do {
            _ = try await client.openStream()
            Issue.record("a stream opened to a peer without streams")
        } catch {
            #expect(error.code == .unsupported && error.message.contains("offered no streams"), "\(error)")
        }
        #expect(try await client.request("ping") == .object([:]))
        await stop()
    }

    @Test("the connection's end ends its streams: a waiting reader hears that the connection closed")
    func connectionEndEndsStreams() async throws {
        let (client, server, stop) = try await connectedPair()
        let stream = try await client.openStream()
        var incoming = server.incomingStreams.makeAsyncIterator()
        let accepted = try #require(await incoming.next())
        let reading = Task { try await readAll(accepted) }
        await client.close()
        await #expect(throws: PeerConnectionError.self) { try await reading.value }
        _ = stream
        await stop()
    }
}
