public import DNSWire
public import Logging
import NearbyBasics
import NIOCore
import NIOPosix
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Asks DNS servers questions and sends them signed UPDATEs: the I/O around the exchange (a pure state machine),
/// which makes every decision. UDP from a fresh socket (so a random source port) and a random ID
/// for each attempt's request, EDNS(0), TCP when an answer is truncated.
public struct DNSClient: Sendable {
    /// The servers asked, in order.
    public var servers: [DNSServer]
    /// How long one server has to answer before the next is asked.
    public var timeout: Duration
    /// Rounds over the servers.
    public var attempts: Int
    public var logger: Logger

    public init(servers: [DNSServer], timeout: Duration = .seconds(2), attempts: Int = 2, logger: Logger) {
        self.servers = servers
        self.timeout = timeout
        self.attempts = attempts
        self.logger = logger
    }

    /// A client for the system's resolvers (`/etc/resolv.conf`), or `servers` when given. The
    /// timeout is resolv.conf's, but at most 2 s: DNS-SD asks often and a dead server should
    /// not hold a browse up for long.
    public init(configuration: ResolverConfiguration, servers: [DNSServer]? = nil, logger: Logger) {
        self.init(
            servers: servers ?? configuration.servers, timeout: min(configuration.timeout, .seconds(2)),
            attempts: configuration.attempts, logger: logger)
    }

    /// Asks one question. Returns the answer whatever its response code (NXDOMAIN is an answer);
    /// throws when no server answers.
    public func query(_ name: DomainName, _ type: RecordType) async throws(UnicastDNSError) -> Message {
        let message = Message.unicastQuery(id: UInt16.random(in: .min ... .max), name: name, type: type)
        let bytes: [UInt8]
        do { bytes = try message.encoded() } catch {
            throw UnicastDNSError(.invalidInput, "cannot encode a query for \(name): \(error)")
        }
        return try await exchange(message, bytes: bytes, servers: servers).message
    }

    /// Sends an UPDATE, signed with `key` when one is given, to `server`; returns the answer,
    /// whose signature has been checked. The caller reads its response code.
    public func send(_ update: DNSUpdate, key: TSIGKey?, to server: DNSServer) async throws(UnicastDNSError) -> Message {
        let id = UInt16.random(in: .min ... .max)
        let message = update.message(id: id)
        var bytes: [UInt8]
        do { bytes = try message.encoded() } catch {
            throw UnicastDNSError(.invalidInput, "cannot encode the update: \(error)")
        }
        var requestMAC: [UInt8] = []
        if let key {
            (bytes, requestMAC) = key.sign(bytes, id: id, at: Self.unixTime())
        }
        let answer = try await exchange(message, bytes: bytes, servers: [server])
        if let key {
            // A server that could not check our signature answers unsigned with NOTAUTH and the
            // TSIG error; verify() explains both.
            if let problem = key.verify(response: answer.bytes, requestMAC: requestMAC, at: Self.unixTime()) {
                if problem.code == .badResponse, answer.message.responseCode == .refused {
                    // BIND answers REFUSED unsigned when the key is good but not allowed here.
                    return answer.message
                }
                throw problem
            }
        }
        return answer.message
    }

    static func unixTime() -> UInt64 { UInt64(max(0, Date().timeIntervalSince1970)) }

    enum Input: Sendable, Equatable {
        case received([UInt8], QueryExchange.Transport, Int)
        case failed(QueryExchange.Transport, Int, String)
        case tick
    }

    /// What waits for an exchange's loop: datagrams up to ``limit`` (beyond it the oldest
    /// waiting is dropped and counted: a flood of forged answers to our port cannot grow it,
    /// and the real answer, newest, stays), every failure (one per server and attempt at most),
    /// and at most one tick.
    struct InputBuffer: EventBuffer {
        static let limit = 16
        private var received = NewestBuffer<Input>(limit: limit)
        private var failures = FIFO<Input>()
        private var tick = false

        mutating func push(_ input: Input) {
            switch input {
            case .received: received.push(input)
            case .failed: failures.append(input)
            case .tick: tick = true
            }
        }

        mutating func pop() -> Input? {
            if let input = received.pop() ?? failures.popFirst() { return input }
            guard tick else { return nil }
            tick = false
            return .tick
        }

        var count: Int { received.count + failures.count + (tick ? 1 : 0) }
        var merged: Int { received.merged }
    }

    /// Runs one exchange to its end.
    func exchange(_ message: Message, bytes: [UInt8], servers: [DNSServer], clock: any ShellClock = SystemClock())
        async throws(UnicastDNSError) -> (message: Message, bytes: [UInt8])
    {
        var machine = QueryExchange(request: message, servers: servers, timeout: timeout, attempts: attempts)
        let (inputs, input) = EventStream<Input>.makeStream(buffer: InputBuffer())
        let alarm = Alarm()
        let start = clock.now
        let logger = logger
        let timeout = timeout
        let outcome: QueryExchange.Outcome = await withTaskGroup(of: Void.self) { group in
            group.addTask { await alarm.run(clock: clock) { _ = input.yield(.tick) } }
            func perform(_ actions: [QueryExchange.Action]) -> QueryExchange.Outcome? {
                for action in actions {
                    switch action {
                    case .finish(let outcome):
                        return outcome
                    case .send(let transport, let index):
                        let server = servers[index]
                        logger.trace("asking \(server) over \(transport): \(message.questions.first.map { "\($0.name) \($0.type)" } ?? "")")
                        group.addTask {
                            do {
                                switch transport {
                                case .udp:
                                    try await Self.overUDP(bytes, to: server) { input.yield(.received($0, .udp, index)) }
                                case .tcp:
                                    let answer = try await Self.overTCP(bytes, to: server, timeout: timeout)
                                    input.yield(.received(answer, .tcp, index))
                                }
                            } catch {
                                if !Task.isCancelled { input.yield(.failed(transport, index, Self.explain(error))) }
                            }
                        }
                    }
                }
                alarm.set(machine.deadline.map { start + $0 })
                return nil
            }
            var outcome = perform(machine.start(at: .zero))
            var iterator = inputs.makeAsyncIterator()
            while outcome == nil, let next = await iterator.next() {
                let now = clock.now - start
                switch next {
                case .received(let answer, let transport, let index):
                    outcome = perform(machine.received(answer, over: transport, from: index, at: now))
                case .failed(let transport, let index, let reason):
                    logger.debug("\(servers[index]) over \(transport): \(reason)")
                    outcome = perform(machine.failed(over: transport, server: index, reason: reason, at: now))
                case .tick:
                    outcome = perform(machine.advance(to: now))
                }
            }
            group.cancelAll()
            input.finish()
            if machine.ignored > 0 { logger.debug("ignored \(machine.ignored) datagram(s) that were not the answer to \(message.questions.first.map { "\($0.name)" } ?? "the request")") }
            return outcome ?? .failure(UnicastDNSError(.unreachable, "the exchange was cancelled"))
        }
        switch outcome {
        case .answer(let answer, let bytes, _): return (answer, bytes)
        case .failure(let error): throw error
        }
    }

    private static func socketAddress(_ server: DNSServer) throws -> NIOCore.SocketAddress {
        try SocketAddress(ipAddress: server.address.withoutScope.description, port: Int(server.port))
    }

    /// Sends `request` from a new connected UDP socket and hands on every datagram that comes
    /// back, until cancelled. A connected socket hears only that server, and learns of an ICMP
    /// "port unreachable" as an error.
    private static func overUDP(_ request: [UInt8], to server: DNSServer, received: @escaping @Sendable ([UInt8]) -> Void) async throws {
        let address = try socketAddress(server)
        let channel = try await DatagramBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .connect(to: address) { channel in
                channel.eventLoop.makeCompletedFuture {
                    try NIOAsyncChannel<AddressedEnvelope<ByteBuffer>, AddressedEnvelope<ByteBuffer>>(wrappingChannelSynchronously: channel)
                }
            }
        try await channel.executeThenClose { inbound, outbound in
            try await outbound.write(AddressedEnvelope(remoteAddress: address, data: ByteBuffer(bytes: request)))
            for try await envelope in inbound {
                received(Array(envelope.data.readableBytesView))
            }
        }
    }

    /// Sends `request` over a new TCP connection with its 2-byte length (RFC 1035 §4.2.2) and
    /// returns the one answer.
    private static func overTCP(_ request: [UInt8], to server: DNSServer, timeout: Duration) async throws -> [UInt8] {
        let address = try socketAddress(server)
        let channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .connectTimeout(.milliseconds(Int64(timeout / .milliseconds(1))))
            .connect(to: address) { channel in
                channel.eventLoop.makeCompletedFuture {
                    try NIOAsyncChannel<ByteBuffer, ByteBuffer>(wrappingChannelSynchronously: channel)
                }
            }
        return try await channel.executeThenClose { inbound, outbound in
            try await outbound.write(DNSOverTCP.framed(request))
            var answer: [UInt8]?
            let left = try await DNSOverTCP.messages(in: inbound) { message in
                answer = message
                return false
            }
            guard let answer else { throw TCPClosedEarly(received: left) }
            return answer
        }
    }

    struct TCPClosedEarly: Error, CustomStringConvertible {
        var received: Int
        var description: String { "the server closed the TCP connection after \(received) bytes, before a whole answer" }
    }

    private static func explain(_ error: any Error) -> String {
        if let error = error as? IOError {
            switch error.errnoCode {
            case ECONNREFUSED: return "nothing listens there (connection refused)"
            case ENETUNREACH, EHOSTUNREACH: return "no route to it"
            default: return "\(error)"
            }
        }
        if error is ChannelError { return "the connection failed (\(error))" }
        return "\(error)"
    }
}
