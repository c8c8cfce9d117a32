package import DNSWire

/// One DNS Push session, client side (RFC 8765 over DSO, RFC 8490), as a pure state machine:
/// what the caller wants watched, the server's DSO messages and the time go in; messages to
/// send, the server's verdict on each subscription, record changes and the session's end come
/// out. The shell owns the TLS connection.
///
/// The rules kept:
/// - The session is established by the first SUBSCRIBE the server accepts (RFC 8490 §5.1: a
///   SUBSCRIBE may open a session; no Keepalive round trip first).
/// - Each watched name and type is one SUBSCRIBE (a request with a fresh non-zero ID); its
///   NOERROR starts it, any other code refuses it (the caller polls that one instead). A
///   second response with an error code later cancels that subscription alone (§5.6).
/// - UNSUBSCRIBE is unidirectional (ID 0) and names the SUBSCRIBE's ID. A SUBSCRIBE withdrawn
///   before its answer keeps its ID: if the server accepts it, it is unsubscribed then, and
///   watching the same name again meanwhile takes it back rather than asking twice (a second
///   SUBSCRIBE to one question is a protocol error that ends the session, RFC 8765 §6.2).
/// - The server's Keepalive (a response, or unidirectional) sets the keepalive interval; the
///   client sends a Keepalive request when it has sent nothing for that long, or for
///   ``livenessInterval``, whichever is shorter, so that a server that vanished without a word
///   is noticed within about ``livenessInterval`` + ``requestTimeout``.
/// - A request (SUBSCRIBE or Keepalive) unanswered for ``requestTimeout`` ends the session
///   (RFC 8490 §5.1.1 allows 30 s).
/// - A Retry Delay from the server, a Keepalive request from the server or a keepalive interval
///   below 10 s (§7.1: both errors), a second NOERROR to one SUBSCRIBE, and bytes that do not
///   read end the session (the caller falls back to polling, and may try again later).
package struct PushClient: Sendable {
    package enum Action: Sendable, Equatable {
        /// Send this DSO message (without TCP's 2-byte length).
        case send([UInt8])
        /// The server accepted the subscription to `key`: from now on it tells every change.
        case subscribed(RecordPoller.Key)
        /// The server refused or cancelled the subscription to `key` (with this code): watch it
        /// otherwise.
        case refused(RecordPoller.Key, ResponseCode)
        /// Records of `key` came or went; `removeAll` says every record of it went first.
        case changed(RecordPoller.Key, added: [RecordData], removed: [RecordData], removeAll: Bool)
        /// The session is over, for this reason; `retryAfter` is the server's Retry Delay.
        case ended(String, retryAfter: Duration?)
    }

    /// The keepalive interval until the server says otherwise (RFC 8490 §6.2's default
    /// inactivity timeout is 15 s; a client that sends something this often stays well clear
    /// of any server's limit).
    package static let defaultKeepaliveInterval: Duration = .seconds(15)
    /// Something is sent at least this often, so that a dead server is noticed.
    package static let livenessInterval: Duration = .seconds(60)
    /// How long a request may wait for its response.
    package static let requestTimeout: Duration = .seconds(30)

    package private(set) var isEstablished = false
    package private(set) var isEnded = false
    /// Subscriptions by the ID of their SUBSCRIBE; `accepted` once the server said NOERROR.
    private var subscriptions: [UInt16: (key: RecordPoller.Key, accepted: Bool)] = [:]
    private var ids: [RecordPoller.Key: UInt16] = [:]
    /// SUBSCRIBEs withdrawn before their answer came, by ID.
    private var withdrawn: [UInt16: RecordPoller.Key] = [:]
    /// Requests waiting for their response, with when they were sent.
    private var outstanding: [UInt16: Duration] = [:]
    private var keepaliveRequests: Set<UInt16> = []
    private var nextID: UInt16 = 1
    private var lastSent: Duration
    package private(set) var keepaliveInterval: Duration = PushClient.defaultKeepaliveInterval

    package init(now: Duration) {
        lastSent = now
    }

    /// The keys subscribed (asked or accepted).
    package var keys: [RecordPoller.Key] { Array(ids.keys) }

    /// When ``advance(to:)`` has something to do: a Keepalive to send, or a request to give up on.
    package var nextDeadline: Duration? {
        guard !isEnded else { return nil }
        let oldest = outstanding.values.min().map { $0 + Self.requestTimeout }
        guard !subscriptions.isEmpty || !withdrawn.isEmpty else { return oldest }
        let keepalive = lastSent + min(keepaliveInterval, Self.livenessInterval)
        return oldest.map { min($0, keepalive) } ?? keepalive
    }

    /// Asks the server to tell every change to `key`. Asking twice changes nothing.
    package mutating func subscribe(_ key: RecordPoller.Key, now: Duration) -> [Action] {
        guard !isEnded, ids[key] == nil else { return [] }
        if let id = withdrawn.first(where: { $0.value == key })?.key {
            // Withdrawn, still unanswered: taken back, so that its answer counts again.
            withdrawn[id] = nil
            subscriptions[id] = (key, false)
            ids[key] = id
            return []
        }
        let id = takeID()
        subscriptions[id] = (key, false)
        ids[key] = id
        outstanding[id] = now
        return send(DSOMessage(id: id, tlvs: [.subscribe(name: key.name, type: key.type, class: .internet)]), now: now)
    }

    /// Stops the subscription to `key`.
    package mutating func unsubscribe(_ key: RecordPoller.Key, now: Duration) -> [Action] {
        guard !isEnded, let id = ids.removeValue(forKey: key) else { return [] }
        let accepted = subscriptions.removeValue(forKey: id)?.accepted ?? false
        guard accepted else {
            // Not answered yet: unsubscribed when (and if) the server accepts it.
            withdrawn[id] = key
            return []
        }
        return send(DSOMessage(id: 0, tlvs: [.unsubscribe(messageID: id)]), now: now)
    }

    /// A DSO message from the server.
    package mutating func received(_ bytes: [UInt8], now: Duration) -> [Action] {
        guard !isEnded else { return [] }
        let message: DSOMessage
        do { message = try DSOMessage(decoding: bytes) } catch { return end("an unreadable DSO message from the server: \(error)") }
        if message.isResponse { return response(message, now: now) }
        guard let primary = message.primary else { return end("a DSO message from the server with no TLV") }
        switch primary {
        case .push(let changes):
            guard message.id == 0 else { return end("a PUSH sent as a request (RFC 8765 §6.3.1 makes it unidirectional)") }
            return changed(changes)
        case .keepalive:
            guard message.id == 0 else { return end("a Keepalive request from the server (RFC 8490 §7.1: only a client asks)") }
            return learnTimeouts(message) ? [] : end("the server's keepalive interval is below 10 s (RFC 8490 §7.1)")
        case .retryDelay(let milliseconds):
            return end("the server asked to be left alone (Retry Delay)", retryAfter: .milliseconds(Int64(milliseconds)))
        default:
            if message.id != 0 {
                return send(DSOMessage(id: message.id, isResponse: true, responseCode: .dsoTypeNotImplemented, tlvs: []), now: now)
            }
            return end("a unidirectional \(primary.typeName) from the server, which a client does not take")
        }
    }

    /// Time passes: a Keepalive when nothing was sent for a while; the end of the session when
    /// a request has waited too long for its response.
    package mutating func advance(to now: Duration) -> [Action] {
        guard let deadline = nextDeadline, now >= deadline else { return [] }
        if let oldest = outstanding.values.min(), now >= oldest + Self.requestTimeout {
            return end("the server answered nothing for \(Self.requestTimeout)")
        }
        let id = takeID()
        keepaliveRequests.insert(id)
        outstanding[id] = now
        return send(DSOMessage(id: id, tlvs: [.keepalive(inactivityTimeout: 0, keepaliveInterval: 0)]), now: now)
    }

    /// The connection closed or failed: the session is over.
    package mutating func connectionEnded(_ reason: String) -> [Action] {
        guard !isEnded else { return [] }
        return end(reason)
    }

    // MARK: Helpers

    private mutating func response(_ message: DSOMessage, now: Duration) -> [Action] {
        outstanding[message.id] = nil
        if keepaliveRequests.remove(message.id) != nil {
            guard message.responseCode == .noError else {
                return end("the server answered a Keepalive with \(message.responseCode)")
            }
            isEstablished = true
            return learnTimeouts(message) ? [] : end("the server's keepalive interval is below 10 s (RFC 8490 §7.1)")
        }
        if withdrawn.removeValue(forKey: message.id) != nil {
            // Withdrawn before this answer: now ended on the server too, if it began.
            return message.responseCode == .noError ? send(DSOMessage(id: 0, tlvs: [.unsubscribe(messageID: message.id)]), now: now) : []
        }
        guard let (key, accepted) = subscriptions[message.id] else {
            // A response to an ID this session never used, or already ended.
            return []
        }
        if accepted {
            // A second response: an error cancels this subscription alone (RFC 8490 §5.6); a
            // second NOERROR is a protocol error.
            guard message.responseCode != .noError else { return end("a second NOERROR to SUBSCRIBE \(message.id)") }
            subscriptions[message.id] = nil
            ids[key] = nil
            return [.refused(key, message.responseCode)]
        }
        guard learnTimeouts(message) else { return end("the server's keepalive interval is below 10 s (RFC 8490 §7.1)") }
        if message.responseCode == .noError {
            subscriptions[message.id] = (key, true)
            isEstablished = true
            return [.subscribed(key)]
        }
        subscriptions[message.id] = nil
        ids[key] = nil
        return [.refused(key, message.responseCode)]
    }

    private mutating func changed(_ changes: [PushChange]) -> [Action] {
        // Changes grouped by the subscriptions they touch, in the order they came.
        var order: [RecordPoller.Key] = []
        var added: [RecordPoller.Key: [RecordData]] = [:]
        var removed: [RecordPoller.Key: [RecordData]] = [:]
        var cleared: Set<RecordPoller.Key> = []
        func note(_ key: RecordPoller.Key) {
            if added[key] == nil, removed[key] == nil, !cleared.contains(key) { order.append(key) }
        }
        let live = subscriptions.values.filter(\.accepted).map(\.key)
        for change in changes {
            switch change {
            case .add(let record):
                for key in live where key.name == record.name && (key.type == record.type || key.type == .any) {
                    note(key)
                    added[key, default: []].append(record.data)
                    removed[key]?.removeAll { $0 == record.data }
                }
            case .remove(let record):
                for key in live where key.name == record.name && (key.type == record.type || key.type == .any) {
                    note(key)
                    removed[key, default: []].append(record.data)
                    added[key]?.removeAll { $0 == record.data }
                }
            case .removeRecordSet(let name, let type, _):
                for key in live where key.name == name && (key.type == type || key.type == .any) {
                    note(key)
                    cleared.insert(key)
                    added[key] = []
                    removed[key] = []
                }
            case .removeName(let name, _):
                for key in live where key.name == name {
                    note(key)
                    cleared.insert(key)
                    added[key] = []
                    removed[key] = []
                }
            }
        }
        return order.map { key in
            .changed(key, added: added[key] ?? [], removed: removed[key] ?? [], removeAll: cleared.contains(key))
        }
    }

    /// Takes the server's keepalive interval from a Keepalive TLV, if the message has one;
    /// false when it is below 10 s, which RFC 8490 §7.1 makes an error.
    private mutating func learnTimeouts(_ message: DSOMessage) -> Bool {
        for case .keepalive(_, let interval) in message.tlvs {
            guard interval >= 10_000 else { return false }
            // 0xFFFFFFFF: infinite; something is still sent every livenessInterval.
            let milliseconds = interval == UInt32.max ? 3_600_000 : Int64(interval)
            // Sent a little before the server's interval runs out.
            keepaliveInterval = .milliseconds(milliseconds * 9 / 10)
        }
        return true
    }

    private mutating func takeID() -> UInt16 {
        repeat {
            nextID = nextID == UInt16.max ? 1 : nextID + 1
        } while subscriptions[nextID] != nil || withdrawn[nextID] != nil || keepaliveRequests.contains(nextID)
        return nextID
    }

    private mutating func send(_ message: DSOMessage, now: Duration) -> [Action] {
        guard let bytes = try? message.encoded() else { return end("cannot encode a DSO message") }
        lastSent = now
        return [.send(bytes)]
    }

    private mutating func end(_ reason: String, retryAfter: Duration? = nil) -> [Action] {
        isEnded = true
        subscriptions = [:]
        ids = [:]
        withdrawn = [:]
        outstanding = [:]
        keepaliveRequests = []
        return [.ended(reason, retryAfter: retryAfter)]
    }
}
