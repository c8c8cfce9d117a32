public import DNSWire

/// One DNS Push session, server side (RFC 8765 over DSO, RFC 8490), as a pure state machine:
/// the client's DSO messages and the time go in; messages to send, subscriptions to start and
/// end, and the session's end come out. The shell owns the TLS connection; the proxy's
/// ``ProxyStateMachine`` decides whether a subscription is answered and what is pushed.
///
/// The rules kept (RFC 8490 §5, §6, §7; RFC 8765 §6):
/// - The session is established by the first DSO request answered NOERROR: a Keepalive (the
///   answer carries the server's timeouts) or a SUBSCRIBE.
/// - A request whose primary TLV is unknown gets DSOTYPENI; a unidirectional message with an
///   unknown primary TLV, a response from the client (the server asks it nothing), a request
///   with ID 0, bytes that do not read, and a second SUBSCRIBE to the same question are errors
///   that end the session at once (abort).
/// - UNSUBSCRIBE and RECONFIRM are unidirectional (ID 0); as requests they get FORMERR.
/// - Two timers (RFC 8490 §6.2–§6.6): the inactivity timer runs while the session has no
///   subscription and is reset by any request but a Keepalive; when it passes the inactivity
///   timeout the server asks the client to go (a unidirectional Retry Delay) and aborts the
///   session if it is still there after twice the timeout (at least 5 s). The keepalive timer
///   is reset by any message sent or received; after twice the keepalive interval the session
///   is aborted.
/// - A Retry Delay from the client as a request is an error that ends the session.
/// - PUSH messages are unidirectional and at most 16,382 bytes each, so that one fits a TLS
///   record.
public struct PushSession: Sendable {
    /// The timeouts this server grants, and its limits.
    public struct Configuration: Sendable {
        /// How long a session without subscriptions may stay silent (RFC 8490 §6.2: 15 s).
        public var inactivityTimeout: Duration = .seconds(15)
        /// How often the client must send something while it has subscriptions (RFC 8490 §6.5
        /// recommends an hour for a server; at least 10 s).
        public var keepaliveInterval: Duration = .seconds(3600)
        /// At most this many subscriptions on one session; more are REFUSED.
        public var maximumSubscriptions = 256
        public init() {}
    }

    /// What the shell must do.
    public enum Action: Sendable, Equatable {
        /// Send this DSO message (without TCP's 2-byte length).
        case send([UInt8])
        /// The client subscribes to `question` (its SUBSCRIBE's message ID is `id`); answer it
        /// with ``PushSession/subscribed(_:code:)``.
        case subscribe(UInt16, Question)
        /// The subscription `id` ended (UNSUBSCRIBE, or the session ending).
        case unsubscribe(UInt16)
        /// The client believes this record is gone: ask the link again (RFC 8765 §6.5).
        case reconfirm(ResourceRecord)
        /// End the session: gracefully (after what was sent) or at once (`abort`: a protocol
        /// error, RFC 8490 §5.3), saying why.
        case close(abort: Bool, reason: String)
    }

    public static let maximumPushMessage = 16_382

    public let configuration: Configuration
    public private(set) var isEstablished = false
    public private(set) var isClosed = false
    /// The live subscriptions, by their SUBSCRIBE's message ID.
    public private(set) var subscriptions: [UInt16: Question] = [:]
    /// SUBSCRIBEs waiting for the proxy's answer.
    private var pending: [UInt16: Question] = [:]
    /// The last message sent or received (the keepalive timer).
    private var lastTraffic: Duration
    /// The last request other than a Keepalive, or the end of the last subscription (the
    /// inactivity timer).
    private var lastActivity: Duration
    private var askedToLeave = false

    public init(_ configuration: Configuration = Configuration(), now: Duration) {
        self.configuration = configuration
        lastTraffic = now
        lastActivity = now
    }

    private var isIdle: Bool { subscriptions.isEmpty && pending.isEmpty }
    /// How long an idle client that was asked to leave may stay before the session is aborted.
    private var leaveTime: Duration { max(.seconds(5), configuration.inactivityTimeout * 2) }

    /// The next time ``advance(to:)`` has something to check.
    public var nextDeadline: Duration? {
        guard !isClosed else { return nil }
        let keepalive = lastTraffic + configuration.keepaliveInterval * 2
        guard isIdle else { return keepalive }
        return min(keepalive, lastActivity + (askedToLeave ? leaveTime : configuration.inactivityTimeout))
    }

    /// The shell wrote a message to the client: the keepalive timer starts again.
    public mutating func sent(now: Duration) {
        lastTraffic = max(lastTraffic, now)
    }

    // MARK: From the client

    /// A DSO message arrived.
    public mutating func received(_ bytes: [UInt8], now: Duration) -> [Action] {
        guard !isClosed else { return [] }
        lastTraffic = now
        let message: DSOMessage
        do {
            message = try DSOMessage(decoding: bytes)
        } catch {
            return abort("an unreadable DSO message: \(error)")
        }
        if message.isResponse { return abort("a DSO response, but this server asked nothing") }
        if case .keepalive = message.primary {} else {
            lastActivity = now
            askedToLeave = false
        }
        guard let primary = message.primary else {
            return message.id == 0 ? abort("a unidirectional DSO message with no TLV") : respond(to: message, code: .formatError)
        }
        if message.id == 0 {
            // Unidirectional.
            switch primary {
            case .unsubscribe(let id):
                guard isEstablished else { return abort("UNSUBSCRIBE before the session was established") }
                guard subscriptions.removeValue(forKey: id) != nil else { return [] }  // an ID we do not know: ignored (RFC 8765 §6.4)
                return [.unsubscribe(id)]  // the inactivity timer starts now if it was the last
            case .reconfirm(let record):
                guard isEstablished else { return abort("RECONFIRM before the session was established") }
                return [.reconfirm(record)]
            case .keepalive:
                return abort("a unidirectional Keepalive from the client (only the server may send one)")
            default:
                return abort("a unidirectional DSO message of \(primary.typeName), which is not allowed")
            }
        }
        switch primary {
        case .keepalive:
            isEstablished = true
            var answer = DSOMessage(id: message.id, isResponse: true, tlvs: [
                .keepalive(inactivityTimeout: Self.milliseconds(configuration.inactivityTimeout), keepaliveInterval: Self.milliseconds(configuration.keepaliveInterval))
            ])
            answer.tlvs += Self.padding(echoing: message)
            return [.send((try? answer.encoded()) ?? [])]
        case .subscribe(let name, let type, let recordClass):
            let question = Question(name: name, type: type, class: recordClass)
            if subscriptions.values.contains(question) || pending.values.contains(question) {
                return abort("a second SUBSCRIBE to \(name) \(type) on one session (RFC 8765 §6.2)")
            }
            if subscriptions[message.id] != nil || pending[message.id] != nil {
                return abort("a SUBSCRIBE reusing message ID \(message.id) of a live subscription")
            }
            guard subscriptions.count + pending.count < configuration.maximumSubscriptions else {
                return respond(to: message, code: .refused)
            }
            pending[message.id] = question
            return [.subscribe(message.id, question)]
        case .unsubscribe, .reconfirm:
            return respond(to: message, code: .formatError)
        case .retryDelay:
            return abort("a Retry Delay request from the client (RFC 8490 §7.2: only a server sends one)")
        case .encryptionPadding, .push:
            return respond(to: message, code: .formatError)
        case .unknown:
            return respond(to: message, code: .dsoTypeNotImplemented)
        }
    }

    /// The proxy's answer to SUBSCRIBE `id`: NOERROR starts the subscription (and establishes the
    /// session); REFUSED, NOTAUTH, SERVFAIL and the like end it. Push the current records
    /// right after a NOERROR.
    public mutating func subscribed(_ id: UInt16, code: ResponseCode) -> [Action] {
        guard !isClosed, let question = pending.removeValue(forKey: id) else { return [] }
        if code == .noError {
            subscriptions[id] = question
            isEstablished = true
        }
        let answer = DSOMessage(id: id, isResponse: true, responseCode: code, tlvs: [])
        return [.send((try? answer.encoded()) ?? [])]
    }

    // MARK: To the client

    /// PUSH messages carrying `changes` (for any of this session's subscriptions), split so
    /// that each is at most ``maximumPushMessage`` bytes.
    public func push(_ changes: [PushChange]) -> [Action] {
        guard !isClosed, !changes.isEmpty else { return [] }
        var actions: [Action] = []
        var batch: [PushChange] = []
        var size = 16  // header and TLV header
        for change in changes {
            let cost = Self.size(of: change)
            if !batch.isEmpty, size + cost > Self.maximumPushMessage {
                actions.append(.send((try? DSOMessage(id: 0, tlvs: [.push(batch)]).encoded()) ?? []))
                batch = []
                size = 16
            }
            batch.append(change)
            size += cost
        }
        if !batch.isEmpty { actions.append(.send((try? DSOMessage(id: 0, tlvs: [.push(batch)]).encoded()) ?? [])) }
        return actions.filter { $0 != .send([]) }
    }

    // MARK: Time

    /// Ends a silent session: an idle one (no subscription) is asked to leave after the
    /// inactivity timeout and aborted after twice it (at least 5 s); any session is aborted
    /// after twice the keepalive interval without a message either way.
    public mutating func advance(to now: Duration) -> [Action] {
        guard !isClosed else { return [] }
        if now - lastTraffic >= configuration.keepaliveInterval * 2 {
            return abort("no message either way for twice the keepalive interval")
        }
        guard isIdle else { return [] }
        if now - lastActivity >= leaveTime {
            return abort("idle for \(leaveTime) with no subscription, and still there after being asked to leave")
        }
        if now - lastActivity >= configuration.inactivityTimeout, !askedToLeave {
            askedToLeave = true
            let leave = DSOMessage(id: 0, tlvs: [.retryDelay(0)])
            return [.send((try? leave.encoded()) ?? [])]
        }
        return []
    }

    /// The session's end from the shell's side (the connection closed): every subscription ends.
    public mutating func ended() -> [Action] {
        guard !isClosed else { return [] }
        isClosed = true
        let ids = subscriptions.keys.sorted() + pending.keys.sorted()
        subscriptions = [:]
        pending = [:]
        return ids.map { .unsubscribe($0) }
    }

    // MARK: Helpers

    private mutating func abort(_ reason: String) -> [Action] {
        let ended = self.ended()
        return ended + [.close(abort: true, reason: reason)]
    }

    private func respond(to message: DSOMessage, code: ResponseCode) -> [Action] {
        let answer = DSOMessage(id: message.id, isResponse: true, responseCode: code, tlvs: Self.padding(echoing: message))
        return [.send((try? answer.encoded()) ?? [])]
    }

    /// A request's Encryption Padding is answered with padding of its own (RFC 8490 §7.3).
    static func padding(echoing message: DSOMessage) -> [DSOTLV] {
        message.tlvs.dropFirst().contains { if case .encryptionPadding = $0 { true } else { false } } ? [.encryptionPadding(0)] : []
    }

    static func milliseconds(_ duration: Duration) -> UInt32 {
        let parts = duration.components
        let value = parts.seconds * 1000 + parts.attoseconds / 1_000_000_000_000_000
        return UInt32(clamping: max(0, value))
    }

    static func size(of change: PushChange) -> Int {
        switch change {
        case .add(let record), .remove(let record):
            return record.name.wireLength + 10 + ((try? record.data.uncompressedBytes().count) ?? 0)
        case .removeRecordSet(let name, _, _), .removeName(let name, _):
            return name.wireLength + 10
        }
    }
}
