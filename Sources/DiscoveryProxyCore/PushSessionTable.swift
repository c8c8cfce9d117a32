public import DNSWire

/// Every DNS Push session of the proxy, as a pure value: which connections are admitted, each
/// session's machine (``PushSession``), the bytes each has waiting to be written, and the one
/// deadline of them all. The shell owns the TLS connections and their writers; it hands this
/// what arrives, what was written and the time, and carries out the actions in order.
///
/// The backlog policy: every message a session sends counts as unsent until the shell says it
/// was written. A session whose client leaves more than
/// ``Configuration/maximumUnsentBytes`` unread is aborted (counted in
/// ``Statistics/overfull``): nothing is dropped from a live session, which the client could not
/// tell from a record that did not change, and a client that reads nothing holds at most that
/// much of the proxy's memory. The client resubscribes on a new session and gets the current
/// records again.
public struct PushSessionTable: Sendable {
    public struct Configuration: Sendable {
        /// Each session's timeouts and its limit of subscriptions.
        public var session = PushSession.Configuration()
        /// At most this many sessions at once, and this many from one address.
        public var maximumSessions = 256
        public var maximumSessionsPerSource = 16
        /// A session whose client leaves more than this many bytes unread is aborted.
        public var maximumUnsentBytes = 512 * 1024
        public init() {}
    }

    public typealias SessionID = ProxyStateMachine.SessionID

    /// What the shell must do, in this order.
    public enum Action: Sendable, Equatable {
        /// Hand this DSO message (without its 2-byte length) to the session's writer; say
        /// ``PushSessionTable/written(_:bytes:)`` once it is written.
        case write(SessionID, [UInt8])
        /// Ask the proxy's machine for this subscription, and give its answer to
        /// ``PushSessionTable/subscribed(_:_:_:now:)``.
        case subscribe(SessionID, UInt16, Question)
        /// Tell the proxy's machine that this subscription ended.
        case unsubscribe(SessionID, UInt16)
        /// Ask the proxy's machine to reconfirm this record on the link (RFC 8765 §6.5).
        case reconfirm(SessionID, ResourceRecord)
        /// The session is over: tell the proxy's machine (every subscription of it ends) and
        /// finish its writer, which closes the connection once what is queued is written; an
        /// abort closes the connection at once.
        case end(SessionID, abort: Bool, reason: String)
    }

    public struct Statistics: Sendable, Equatable {
        /// Sessions admitted.
        public var sessions = 0
        /// Connections refused: over a limit, or after ``PushSessionTable/closeAll()``.
        public var refused = 0
        /// Sessions aborted because their client left too many bytes unread.
        public var overfull = 0
        /// RECONFIRMs received.
        public var reconfirms = 0
        public init() {}
    }

    private struct Entry {
        var session: PushSession
        var source: IPAddress
        /// Bytes handed to the writer and not yet written.
        var unsent = 0
        /// False once the session has ended; the entry stays until its connection is closed,
        /// so that its place counts until then.
        var isLive = true
    }

    public let configuration: Configuration
    public private(set) var statistics = Statistics()
    private var entries: [SessionID: Entry] = [:]
    private var connections = ConnectionCount()
    private var nextID: UInt64 = 1
    private var isClosed = false

    public init(_ configuration: Configuration = Configuration()) {
        self.configuration = configuration
    }

    /// Live sessions.
    public var liveSessions: Int { entries.values.filter(\.isLive).count }

    /// Bytes a session has waiting to be written (nil: no such session).
    public func unsent(_ id: SessionID) -> Int? { entries[id]?.unsent }

    /// A new connection from `source`: its session, or nil (counted) when a limit is reached or
    /// the table is closed.
    public mutating func open(from source: IPAddress, now: Duration) -> SessionID? {
        guard !isClosed,
            connections.admit(source, most: configuration.maximumSessions, fromOne: configuration.maximumSessionsPerSource)
        else {
            statistics.refused += 1
            return nil
        }
        statistics.sessions += 1
        let id = SessionID(nextID)
        nextID += 1
        entries[id] = Entry(session: PushSession(configuration.session, now: now), source: source)
        return id
    }

    /// A DSO message arrived on a session.
    public mutating func received(_ id: SessionID, _ bytes: [UInt8], now: Duration) -> [Action] {
        guard let entry = entries[id], entry.isLive else { return [] }
        return carryOut(id, entries[id]?.session.received(bytes, now: now) ?? [], now: now)
    }

    /// The proxy's machine answered a SUBSCRIBE: the answer, and after a NOERROR the records
    /// it holds now, pushed at once (so the client never waits for a change to learn them).
    public mutating func subscribed(_ id: SessionID, _ messageID: UInt16, _ result: ProxyStateMachine.SubscribeResult, now: Duration) -> [Action] {
        guard let entry = entries[id], entry.isLive else { return [] }
        var actions: [PushSession.Action]
        switch result {
        case .accepted(let current):
            actions = entries[id]?.session.subscribed(messageID, code: .noError) ?? []
            actions += entries[id]?.session.push(current) ?? []
        case .refused(let code):
            actions = entries[id]?.session.subscribed(messageID, code: code) ?? []
        }
        return carryOut(id, actions, now: now)
    }

    /// The proxy's machine has changes for one of the session's subscriptions.
    public mutating func push(_ id: SessionID, _ changes: [PushChange], now: Duration) -> [Action] {
        guard let entry = entries[id], entry.isLive else { return [] }
        return carryOut(id, entry.session.push(changes), now: now)
    }

    /// The shell's writer wrote this many of a session's bytes.
    public mutating func written(_ id: SessionID, bytes: Int) {
        guard let unsent = entries[id]?.unsent else { return }
        entries[id]?.unsent = max(0, unsent - bytes)
    }

    /// The next time any session has something to check (inactivity, keepalive).
    public var nextDeadline: Duration? {
        entries.values.lazy.filter(\.isLive).compactMap(\.session.nextDeadline).min()
    }

    /// Time has come to `now`: every session whose deadline has come is looked at.
    public mutating func advance(to now: Duration) -> [Action] {
        var actions: [Action] = []
        for id in entries.keys.sorted(by: { $0.rawValue < $1.rawValue }) {
            guard let entry = entries[id], entry.isLive, let deadline = entry.session.nextDeadline, deadline <= now else { continue }
            actions += carryOut(id, entries[id]?.session.advance(to: now) ?? [], now: now)
        }
        return actions
    }

    /// The session's connection is gone (the client closed it, or it failed): its place is
    /// free, and a session still live ends.
    public mutating func closed(_ id: SessionID) -> [Action] {
        guard let entry = entries[id] else { return [] }
        let actions = entry.isLive ? end(id, abort: false, reason: "the connection closed") : []
        entries[id] = nil
        connections.closed(entry.source)
        return actions
    }

    /// Shutdown: every live session ends, and no connection is admitted any more.
    public mutating func closeAll() -> [Action] {
        isClosed = true
        return entries.keys.sorted(by: { $0.rawValue < $1.rawValue }).flatMap { end($0, abort: false, reason: "the proxy stops") }
    }

    // MARK: Helpers

    /// A session machine's actions as the shell's, with the backlog counted.
    private mutating func carryOut(_ id: SessionID, _ actions: [PushSession.Action], now: Duration) -> [Action] {
        var out: [Action] = []
        for action in actions {
            guard let entry = entries[id], entry.isLive else { break }
            switch action {
            case .send(let message):
                let backlog = entry.unsent + message.count
                if backlog > configuration.maximumUnsentBytes {
                    statistics.overfull += 1
                    return out + end(id, abort: true, reason: "its client left \(backlog) bytes unread")
                }
                entries[id]?.unsent = backlog
                entries[id]?.session.sent(now: now)
                out.append(.write(id, message))
            case .subscribe(let messageID, let question):
                out.append(.subscribe(id, messageID, question))
            case .unsubscribe(let messageID):
                out.append(.unsubscribe(id, messageID))
            case .reconfirm(let record):
                statistics.reconfirms += 1
                out.append(.reconfirm(id, record))
            case .close(let abort, let reason):
                out += end(id, abort: abort, reason: reason)
            }
        }
        return out
    }

    private mutating func end(_ id: SessionID, abort: Bool, reason: String) -> [Action] {
        guard entries[id]?.isLive == true else { return [] }
        entries[id]?.isLive = false
        _ = entries[id]?.session.ended()
        return [.end(id, abort: abort, reason: reason)]
    }
}
