import Foundation
import NIOCore
import NIOPosix
import PeerConnection
import PeerTrust
import Testing

@Suite("loopback: the round-trip probe")
struct ProbeTests {
    @Test("a listener answers the probe before TLS, reports nothing for it, and still serves TLS connections")
    func answered() async throws {
        let server = try Peers.identity("Build Box")
        let client = try Peers.identity("Laptop")
        let echo = try await EchoServer(Peers.configuration(server, pinning: [client]))
        var rtts: [Duration] = []
        for _ in 0..<5 {
            let rtt = try #require(await PeerConnection.measureRoundTrip(host: "127.0.0.1", port: echo.port))
            rtts.append(rtt)
        }
        #expect(rtts.allSatisfy { $0 > .zero && $0 < .seconds(1) }, "\(rtts)")
        let connection = try await PeerConnection.connect(host: "127.0.0.1", port: echo.port, configuration: Peers.configuration(client, pinning: [server]))
        #expect(try await connection.request("ping") == .object([:]))
        await connection.close()
        // The probes were not mistaken for failed TLS handshakes.
        let stranger = try Peers.identity("Stranger")
        _ = await dial(echo.port, as: Peers.configuration(stranger, pinning: [server]))
        let rejection = try #require(await echo.nextRejection())
        #expect(rejection.peerID == stranger.peerID, "the first rejection should be the stranger's, not a probe's: \(rejection.error)")
        await echo.stop()
    }

    @Test("a server that does not speak the probe is timed by its reaction (here: it closes); a closed port gives nil")
    func reactionAndNothing() async throws {
        // A TCP server that closes every connection on its first read, as a TLS server does with garbage.
        let closer = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .childChannelInitializer { channel in channel.eventLoop.makeCompletedFuture { try channel.pipeline.syncOperations.addHandler(CloseOnRead()) } }
            .bind(host: "127.0.0.1", port: 0).get()
        let port = try #require(closer.localAddress?.port)
        let rtt = await PeerConnection.measureRoundTrip(host: "127.0.0.1", port: port)
        #expect(rtt != nil)
        try await closer.close()
        #expect(await PeerConnection.measureRoundTrip(host: "127.0.0.1", port: port, timeout: .milliseconds(500)) == nil)
        #expect(await PeerConnection.measureRoundTrip(host: "not an address", port: port) == nil)
    }
}

extension ProbeTests {
    @Test("a prober that asks once and then stays silent is closed by the listener (after its 2 s linger limit)")
    func silentProberIsClosed() async throws {
        let server = try Peers.identity("Build Box")
        // A set-up timeout far beyond the linger limit: the close seen must be the prober's, also
        // on a machine so loaded (sanitizers, parallel floods) that timers run seconds late.
        var configuration = Peers.configuration(server)
        configuration.setupTimeout = .seconds(60)
        // Likewise admission's deadline for a first message: on such a machine the prober's
        // question can leave seconds after its connection (deferred accept hands the listener
        // a silent connection after 1 s), and the close seen must not be that deadline's.
        configuration.admission.helloDeadline = .seconds(60)
        let echo = try await EchoServer(configuration)
        let channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton).connect(host: "127.0.0.1", port: echo.port).get()
        try await channel.writeAndFlush(channel.allocator.buffer(string: "NEARBY-PROBE 1\n")).get()
        // Bounded: the test waits at most 30 s (the limit is 2 s; the margin is for loaded
        // machines, not a measurement), then says the connection was still open.
        let closed = try await withThrowingTaskGroup(of: Bool.self) { group in
            group.addTask { try await channel.closeFuture.get(); return true }
            group.addTask {
                // Closing from here ends the other child too (a close future ignores cancellation).
                try await Task.sleep(for: .seconds(30))
                try? await channel.close()
                return false
            }
            let first = try await group.next() ?? false
            group.cancelAll()
            return first
        }
        #expect(closed, "the listener kept a silent prober's connection open for 30 s")
        await echo.stop()
    }
}

final class CloseOnRead: ChannelInboundHandler, Sendable {
    typealias InboundIn = ByteBuffer
    func channelRead(context: ChannelHandlerContext, data: NIOAny) { context.close(promise: nil) }
}

/// Cancelling a dial closes its channel: a caller (a broker shutting down, which waits for its
/// dials) is not kept until the set-up timeout by a server that accepts and says nothing.
@Suite("dial cancellation")
struct DialCancellationTests {
    @Test("a dial to a server that accepts and never answers ends with cancelled when its task is cancelled")
    func cancelledDial() async throws {
        let (accepted, acceptedOne) = AsyncStream.makeStream(of: Void.self)
        let silent = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .childChannelInitializer { channel in
                acceptedOne.yield()
                return channel.eventLoop.makeSucceededVoidFuture()
            }
            .bind(host: "127.0.0.1", port: 0).get()
        let port = try #require(silent.localAddress?.port)
        var configuration = Peers.configuration(try Peers.identity("Laptop"))
        configuration.setupTimeout = .seconds(60)
        let dial = Task { () -> PeerConnectionError? in
            do throws(PeerConnectionError) {
                _ = try await PeerConnection.connect(host: "127.0.0.1", port: port, configuration: configuration)
                return nil
            } catch {
                return error
            }
        }
        var iterator = accepted.makeAsyncIterator()
        await iterator.next()  // TCP is up; TLS waits for a server that never answers
        dial.cancel()
        let error = await dial.value
        #expect(error?.code == .cancelled, "\(String(describing: error))")
        try await silent.close()
    }
}

extension ProbeTests {
    @Test("a probe is told when its first question went out, and cancelling it ends it at once with no sample (the unanswered question is no RTT)")
    func askedAndCancelled() async throws {
        // A TCP server that reads and never answers: a peer too far to wait for.
        let silent = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .childChannelInitializer { channel in channel.eventLoop.makeCompletedFuture { try channel.pipeline.syncOperations.addHandler(Swallow()) } }
            .bind(host: "127.0.0.1", port: 0).get()
        let port = try #require(silent.localAddress?.port)
        let (asked, askedSink) = AsyncStream.makeStream(of: Void.self)
        // A 60 s time-out: without cancellation the test would wait that long, then see nil anyway;
        // what is checked is that cancelling gives nil although a question was in flight.
        let probe = Task { await PeerConnection.measureRoundTrip(host: "127.0.0.1", port: port, timeout: .seconds(60), asked: { askedSink.yield() }) }
        var questions = 0
        for await _ in asked {
            questions += 1
            break
        }
        #expect(questions == 1)
        probe.cancel()
        #expect(await probe.value == nil)
        // Cancelled before it began: nothing is dialed, nil.
        let early = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            return await PeerConnection.measureRoundTrip(host: "127.0.0.1", port: port, asked: { Issue.record("asked although cancelled") })
        }
        #expect(await early.value == nil)
        try await silent.close()
    }
}

/// Reads everything and says nothing.
private final class Swallow: ChannelInboundHandler, Sendable {
    typealias InboundIn = ByteBuffer
    func channelRead(context: ChannelHandlerContext, data: NIOAny) {}
}
