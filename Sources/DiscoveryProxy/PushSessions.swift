import DNSWire
import DiscoveryProxyCore
import Logging
import NIOCore
import NearbyBasics
import UnicastDNSSD

/// The proxy's DNS Push service (RFC 8765 over DSO, RFC 8490) on its TLS listeners: one
/// session per connection, DSO messages with their 2-byte lengths in, the session's answers and
/// the proxy's pushes out, in order. The decisions (who is admitted, each session's protocol and
/// timers, the backlog a slow reader may leave) are ``PushSessionTable``'s; this actor reads and
/// writes the connections, asks the answering machine through the desk, and keeps the table's
/// one deadline with its alarm.
actor PushSessions {
    typealias Server = NIOAsyncChannel<NIOAsyncChannel<ByteBuffer, ByteBuffer>, Never>
    typealias SessionID = PushSessionTable.SessionID

    private var table: PushSessionTable
    /// Each live session's writer, and its connection (closed at once on an abort). A writer's
    /// stream is not bounded by a count: the table bounds what it holds by bytes (a session
    /// whose client leaves more than `maximumUnsentBytes` unread is aborted).
    private var connections: [SessionID: (writer: AsyncStream<[UInt8]>.Continuation, channel: any Channel)] = [:]
    private let servers: [Server]
    private let desk: AnsweringDesk
    private let alarm = Alarm()
    private let clock: any ShellClock
    private let logger: Logger
    /// The table's statistics as metrics, published after each call into it.
    private var metrics: ProxyMetrics.Push

    init(
        _ configuration: PushSessionTable.Configuration, servers: [Server], desk: AnsweringDesk, clock: any ShellClock, metrics: ProxyMetrics.Push,
        logger: Logger
    ) {
        table = PushSessionTable(configuration)
        self.metrics = metrics
        self.servers = servers
        self.desk = desk
        self.clock = clock
        self.logger = logger
    }

    var statistics: PushSessionTable.Statistics { table.statistics }

    /// The listeners and the sessions' timekeeper, until cancelled.
    func run() async {
        let (servers, alarm, clock) = (servers, alarm, clock)
        await withDiscardingTaskGroup { group in
            group.addTask { await alarm.run(clock: clock) { await self.tick() } }
            for server in servers {
                group.addTask { await self.serve(server) }
            }
        }
    }

    /// No more sessions: those live end (their writers finish), the listeners close.
    func close() async {
        carryOut(table.closeAll())
        for server in servers { try? await server.channel.close() }
    }

    /// The proxy's machine has changes for a session's subscription.
    func push(_ session: SessionID, _ changes: [PushChange]) {
        carryOut(table.push(session, changes, now: clock.now))
    }

    private func serve(_ server: Server) async {
        do {
            try await server.executeThenClose { connections in
                try await withThrowingDiscardingTaskGroup { group in
                    for try await connection in connections {
                        guard let remote = connection.channel.remoteAddress.flatMap({ IPAddress($0) }), let id = self.open(from: remote) else {
                            try? await connection.channel.close()
                            continue
                        }
                        group.addTask { await self.serveSession(id, connection, from: remote) }
                    }
                }
            }
        } catch {
            logger.debug("DNS Push listener \(server.channel.localAddress?.description ?? "?") ended: \(error)")
        }
    }

    private func open(from source: IPAddress) -> SessionID? {
        defer { metrics.record(table) }
        return table.open(from: source, now: clock.now)
    }

    /// One DSO session over TLS until the client closes, the table ends it, or the task is
    /// cancelled.
    private func serveSession(_ id: SessionID, _ connection: NIOAsyncChannel<ByteBuffer, ByteBuffer>, from source: IPAddress) async {
        // Bounded by `maximumUnsentBytes`: a session past it is aborted (PushSessionTable).
        let (outgoing, writer) = AsyncStream<[UInt8]>.makeStream()
        connections[id] = (writer, connection.channel)
        logger.debug("DNS Push \(id) from \(source)")
        do {
            try await connection.executeThenClose { inbound, outbound in
                await withThrowingTaskGroup(of: Void.self) { group in
                    group.addTask {
                        for await message in outgoing {
                            try await outbound.write(DNSOverTCP.framed(message))
                            await self.written(id, bytes: message.count)
                        }
                    }
                    group.addTask {
                        try await DNSOverTCP.messages(in: inbound) { message in
                            await self.received(id, message)
                            return true
                        }
                    }
                    // The first to end (the client closed, the writer finished or failed) ends both.
                    _ = try? await group.next()
                    group.cancelAll()
                }
            }
        } catch {
            logger.debug("DNS Push \(id) from \(source) ended: \(error)")
        }
        carryOut(table.closed(id))
        connections[id] = nil
    }

    private func received(_ id: SessionID, _ message: [UInt8]) { carryOut(table.received(id, message, now: clock.now)) }

    private func written(_ id: SessionID, bytes: Int) { table.written(id, bytes: bytes) }

    private func tick() { carryOut(table.advance(to: clock.now)) }

    /// Carries out the table's actions in order; a SUBSCRIBE's answer (and the records pushed
    /// right after it) comes before whatever followed it.
    private func carryOut(_ actions: [PushSessionTable.Action]) {
        var work = actions[...]
        while let action = work.popFirst() {
            switch action {
            case .write(let id, let message):
                connections[id]?.writer.yield(message)
            case .subscribe(let id, let messageID, let question):
                let now = clock.now
                let result = desk.act { $0.subscribe(question, session: id, id: messageID, now: now) }
                work = table.subscribed(id, messageID, result, now: now)[...] + work
            case .unsubscribe(let id, let messageID):
                let now = clock.now
                desk.act { machine in
                    machine.unsubscribe(session: id, id: messageID, now: now)
                    return []
                }
            case .reconfirm(let id, let record):
                logger.debug("DNS Push \(id): RECONFIRM of \(record.name) \(record.type)")
                desk.act { $0.reconfirm(record) }
            case .end(let id, let abort, let reason):
                logger.log(level: abort ? .info : .debug, "DNS Push \(id) \(abort ? "aborted" : "closed"): \(reason)")
                let now = clock.now
                desk.act { machine in
                    machine.sessionEnded(id, now: now)
                    return []
                }
                connections[id]?.writer.finish()
                if abort { connections[id]?.channel.close(promise: nil) }
            }
        }
        metrics.record(table)
        alarm.set(table.nextDeadline)
    }
}
