import DNSWire
import DiscoveryProxyCore
import Logging
import NIOCore
import NearbyBasics
import UnicastDNSSD

/// Plain DNS over TCP (RFC 1035 §4.2.2, RFC 7766) on the proxy's TCP listeners: questions with
/// their 2-byte lengths, any number in a row, answered in the order the answers are ready. Who
/// is admitted is a ``ConnectionCount``'s decision, and when a connection ends a
/// ``TCPConnectionState``'s; this reads and writes the sockets and waits for each connection's
/// one deadline.
final class TCPAnswering: Sendable {
    typealias Server = NIOAsyncChannel<NIOAsyncChannel<ByteBuffer, ByteBuffer>, Never>

    struct Statistics: Sendable, Equatable {
        var connections = 0
        var refused = 0
        var idleClosed = 0
        var overfull = 0
    }

    struct Limits: Sendable {
        var maximumConnections: Int
        var maximumConnectionsPerSource: Int
        var connection: TCPConnectionState.Limits
    }

    private let servers: [Server]
    private let limits: Limits
    private let state: Locked<(open: ConnectionCount, statistics: Statistics, isClosed: Bool, metrics: ProxyMetrics.TCP)>
    private let desk: AnsweringDesk
    /// The proxy's alarm: a question may give the machine an earlier deadline.
    private let alarm: Alarm
    private let clock: any ShellClock
    private let logger: Logger

    init(servers: [Server], limits: Limits, desk: AnsweringDesk, alarm: Alarm, clock: any ShellClock, metrics: ProxyMetrics.TCP, logger: Logger) {
        state = Locked((open: ConnectionCount(), statistics: Statistics(), isClosed: false, metrics: metrics))
        self.servers = servers
        self.limits = limits
        self.desk = desk
        self.alarm = alarm
        self.clock = clock
        self.logger = logger
    }

    var statistics: Statistics { state.withLockedValue { $0.statistics } }

    /// The listeners and their connections, until cancelled.
    func run() async {
        await withDiscardingTaskGroup { group in
            for server in servers {
                group.addTask { await self.serve(server) }
            }
        }
    }

    /// No more connections; the listeners close (connections end with ``run()``'s task).
    func close() async {
        state.withLockedValue { $0.isClosed = true }
        for server in servers { try? await server.channel.close() }
    }

    private func serve(_ server: Server) async {
        do {
            try await server.executeThenClose { connections in
                try await withThrowingDiscardingTaskGroup { group in
                    for try await connection in connections {
                        guard let remote = connection.channel.remoteAddress.flatMap({ IPAddress($0) }), admit(remote) else {
                            try? await connection.channel.close()
                            continue
                        }
                        group.addTask {
                            await self.serveConnection(connection, from: remote)
                            self.state.withLockedValue { state in
                                state.open.closed(remote)
                                state.metrics.record(state.statistics, open: state.open.count)
                            }
                        }
                    }
                }
            }
        } catch {
            logger.debug("TCP listener \(server.channel.localAddress?.description ?? "?") ended: \(error)")
        }
    }

    private func admit(_ source: IPAddress) -> Bool {
        state.withLockedValue { state in
            defer { state.metrics.record(state.statistics, open: state.open.count) }
            guard !state.isClosed, state.open.admit(source, most: limits.maximumConnections, fromOne: limits.maximumConnectionsPerSource) else {
                state.statistics.refused += 1
                return false
            }
            state.statistics.connections += 1
            return true
        }
    }

    /// One connection: a reader, a writer and the connection's alarm; the first to end (the
    /// peer closed, a verdict to close, the writer failed) ends them all.
    private func serveConnection(_ connection: NIOAsyncChannel<ByteBuffer, ByteBuffer>, from source: IPAddress) async {
        // Not bounded by a count: at most `maximumInFlight` questions are in flight (one more
        // closes the connection), and each gives one answer (or nil: none).
        let (answers, continuation) = AsyncStream<[UInt8]?>.makeStream()
        let (clock, desk, proxyAlarm) = (clock, desk, alarm)
        let life = Locked(TCPConnectionState(limits.connection, now: clock.now))
        let alarm = Alarm()
        alarm.set(life.withLockedValue { $0.nextDeadline })
        /// Carries out a verdict: a connection to close ends its child, which ends the others.
        @Sendable func go(on verdict: TCPConnectionState.Verdict) throws {
            alarm.set(life.withLockedValue { $0.nextDeadline })
            guard case .close(let reason) = verdict else { return }
            state.withLockedValue { state in
                switch reason {
                case .idle: state.statistics.idleClosed += 1
                case .overfull: state.statistics.overfull += 1
                case .drained, .drainTimedOut: break
                }
                state.metrics.record(state.statistics, open: state.open.count)
            }
            throw Closed(reason: reason)
        }
        do {
            try await connection.executeThenClose { inbound, outbound in
                await withThrowingTaskGroup(of: Void.self) { group in
                    group.addTask {
                        for await answer in answers {
                            if let answer { try await outbound.write(DNSOverTCP.framed(answer)) }
                            try go(on: life.withLockedValue { $0.answered() })
                        }
                        throw CancellationError()  // no more answers: the proxy stops
                    }
                    group.addTask {
                        // The connection's one wait: its state's next deadline. A verdict to
                        // close ends the wait (this child's task is cancelled), then the child.
                        let verdict = Locked(TCPConnectionState.Verdict.keep)
                        await alarm.run(clock: clock) {
                            let now = life.withLockedValue { $0.advance(to: clock.now) }
                            verdict.withLockedValue { $0 = now }
                            if now != .keep { withUnsafeCurrentTask { $0?.cancel() } }
                        }
                        try go(on: verdict.withLockedValue { $0 })
                        throw CancellationError()
                    }
                    group.addTask {
                        try await DNSOverTCP.messages(in: inbound) { message in
                            try go(on: life.withLockedValue { $0.asked(now: clock.now) })
                            let (reply, dropped) = desk.received(message, from: source, over: .tcp, path: .tcp(continuation), now: clock.now)
                            if let reply { continuation.yield(reply) } else if dropped { continuation.yield(nil) }
                            proxyAlarm.set(desk.nextDeadline)
                            return true
                        }
                        // The peer is done asking: the answers in flight get the drain time, and
                        // the writer or the alarm ends the connection.
                        try go(on: life.withLockedValue { $0.peerFinished(now: clock.now) })
                    }
                    // A child that throws (a verdict to close, the peer gone, a failed write)
                    // ends them all; the reader returns normally when the peer is done asking.
                    do {
                        while try await group.next() != nil {}
                    } catch {}
                    group.cancelAll()
                    continuation.finish()
                }
            }
        } catch {
            logger.debug("TCP connection from \(source) ended: \(error)")
        }
        continuation.finish()
    }

    private struct Closed: Error {
        var reason: TCPConnectionState.Reason
    }
}
