import DNSWire

/// One request (a query or an UPDATE) and its answer, asked of a list of servers the way a stub
/// resolver does (RFC 1035 §7.2, resolv.conf(5)): each server in turn over UDP with a timeout,
/// rounds over the list, TCP when an answer comes back truncated (RFC 7766), the next server at
/// once when one fails or says SERVFAIL, NOTIMP or REFUSED. An answer counts only if it is a
/// response with the request's ID, opcode and question (RFC 5452 §4.1); others are ignored
/// and counted. A pure state machine: bytes and time in, sends and the outcome out.
struct QueryExchange {
    enum Transport: Hashable, Sendable, CustomStringConvertible {
        case udp, tcp
        var description: String { self == .udp ? "UDP" : "TCP" }
    }

    enum Action: Equatable, Sendable {
        /// Send the request to `servers[server]` over `transport` (a new socket each time, so
        /// each attempt has a new random source port).
        case send(Transport, server: Int)
        case finish(Outcome)
    }

    enum Outcome: Equatable, Sendable {
        /// An answer, with its bytes (a signature covers those) and the server it came from.
        case answer(Message, bytes: [UInt8], server: Int)
        case failure(UnicastDNSError)
    }

    let id: UInt16
    let question: Question
    let opcode: UInt8
    let servers: [DNSServer]
    let timeout: Duration
    let attempts: Int

    private(set) var deadline: Duration?
    private(set) var ignored = 0
    private var sent = 0
    private var overTCP: Set<Int> = []
    private var finished = false
    /// The last server's refusal or failure, reported if no server does better.
    private var fallback: Outcome?
    private var problems: [String] = []

    init(request: Message, servers: [DNSServer], timeout: Duration, attempts: Int) {
        id = request.header.id
        question = request.questions.first ?? Question(name: .root, type: .soa)
        opcode = request.header.opcode
        self.servers = servers
        self.timeout = timeout
        self.attempts = max(1, attempts)
    }

    mutating func start(at now: Duration) -> [Action] {
        guard !servers.isEmpty else {
            finished = true
            return [.finish(.failure(UnicastDNSError(.unreachable, "no DNS server to ask (none in /etc/resolv.conf, none given with --server)")))]
        }
        return nextAttempt(at: now)
    }

    /// An answer arrived from `servers[server]`.
    mutating func received(_ bytes: [UInt8], over transport: Transport, from server: Int, at now: Duration) -> [Action] {
        guard !finished, servers.indices.contains(server) else { return [] }
        guard let message = try? Message(decoding: bytes), isAnswer(message) else {
            ignored += 1
            return []
        }
        if message.header.isTruncated && transport == .udp {
            // The rest comes over TCP, from the same server, with a fresh timeout.
            overTCP.insert(server)
            deadline = now + timeout
            return [.send(.tcp, server: server)]
        }
        let code = message.responseCode
        if [.serverFailure, .notImplemented, .refused].contains(code) {
            fallback = .answer(message, bytes: bytes, server: server)
            problems.append("\(servers[server]) said \(code)")
            return nextAttempt(at: now)
        }
        finished = true
        deadline = nil
        return [.finish(.answer(message, bytes: bytes, server: server))]
    }

    /// Sending to or reading from `servers[server]` failed (refused, unreachable, closed early).
    mutating func failed(over transport: Transport, server: Int, reason: String, at now: Duration) -> [Action] {
        guard !finished, servers.indices.contains(server) else { return [] }
        problems.append("\(servers[server]) over \(transport): \(reason)")
        return nextAttempt(at: now)
    }

    mutating func advance(to now: Duration) -> [Action] {
        guard !finished, let deadline, now >= deadline else { return [] }
        problems.append("\(servers[(sent - 1) % servers.count]) did not answer within \(timeout)")
        return nextAttempt(at: now)
    }

    private func isAnswer(_ message: Message) -> Bool {
        guard message.header.isResponse, message.header.id == id, message.header.opcode == opcode else { return false }
        // A server may leave the question out of an error (FORMERR, NOTIMP); an answer must echo it.
        if message.questions.isEmpty { return message.responseCode != .noError }
        guard message.questions.count == 1, let echoed = message.questions.first else { return false }
        return echoed.name == question.name && echoed.type == question.type && echoed.class == question.class
    }

    private mutating func nextAttempt(at now: Duration) -> [Action] {
        guard sent < servers.count * attempts else {
            finished = true
            deadline = nil
            if let fallback { return [.finish(fallback)] }
            let asked = Set(servers.map(\.description)).sorted().joined(separator: ", ")
            let last = problems.suffix(3).joined(separator: "; ")
            return [.finish(.failure(UnicastDNSError(
                .unreachable, "no answer from the DNS server\(servers.count == 1 ? "" : "s") \(asked) for \(question.name) \(question.type) (\(sent) attempt\(sent == 1 ? "" : "s"): \(last))")))]
        }
        let server = sent % servers.count
        sent += 1
        deadline = now + timeout
        return [.send(overTCP.contains(server) ? .tcp : .udp, server: server)]
    }
}
