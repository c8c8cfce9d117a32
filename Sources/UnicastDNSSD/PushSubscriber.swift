package import DNSWire
package import Logging
package import NearbyBasics
import NIOCore

/// Whether a browse in a DNS domain uses DNS Push (RFC 8765) where the zone offers it.
public enum DNSPushPolicy: Sendable, Hashable {
    /// Never: every change is learned by asking again.
    case off
    /// Where the zone names a Push server, over TLS without checking its certificate: it is
    /// found through the same unsigned DNS answers polling would trust, so checking would
    /// prove nothing more about the records, and the link is still encrypted.
    case opportunistic
    /// Where the zone names a Push server, over TLS with its certificate checked against the
    /// system's roots and the server's name (the SRV target); a server that fails the check is
    /// not used, and the browse polls.
    case authenticated
}

/// Where a zone's DNS Push server is (from `_dns-push-tls._tcp.<zone>` SRV, RFC 8765 §6.1).
package struct PushServer: Sendable, Hashable, CustomStringConvertible {
    package var zone: DomainName
    package var name: DomainName
    package var port: UInt16
    package var addresses: [IPAddress]

    package var description: String { "\(name) port \(port) (for \(zone))" }

    /// Finds the Push server for names under `name`'s zone: the zone from an SOA question (the
    /// answer's SOA, or the SOA of a negative answer), then the zone's Push SRV, then the
    /// target's addresses. Nil when any step finds nothing.
    package static func find(for name: DomainName, client: DNSClient) async -> PushServer? {
        guard let soa = try? await client.query(name, .soa), soa.responseCode == .noError || soa.responseCode == .nameError else { return nil }
        guard let zone = (soa.answers + soa.authorities).first(where: { $0.type == .soa && name.hasSuffix($0.name) })?.name else { return nil }
        guard let service = try? zone.prepending(Array("_tcp".utf8)).prepending(Array("_dns-push-tls".utf8)),
            let srvAnswer = try? await client.query(service, .srv)
        else { return nil }
        let targets = srvAnswer.answers.compactMap { record -> SRVData? in
            if case .srv(let srv) = record.data, record.name == service, srv.port != 0, !srv.target.isRoot { return srv }
            return nil
        }
        guard let srv = targets.min(by: { $0.priority < $1.priority }) else { return nil }
        var addresses: [IPAddress] = []
        for type in [RecordType.a, .aaaa] {
            guard let answer = try? await client.query(srv.target, type) else { continue }
            for record in RecordPoller.records(answering: .init(srv.target, type), in: answer.answers) {
                switch record.data {
                case .a(let v4): addresses.append(.v4(v4))
                case .aaaa(let v6): addresses.append(.v6(v6))
                default: break
                }
            }
        }
        guard !addresses.isEmpty else { return nil }
        return PushServer(zone: zone, name: srv.target, port: srv.port, addresses: addresses)
    }
}

/// A DNS Push session on a connection its ``DNSPushTransport`` opens (TLS): a ``PushClient``
/// machine on a socket. The owner
/// subscribes and unsubscribes; ``events`` says what the server accepted, refused and pushed,
/// and ends with the session. Subscribing and unsubscribing are synchronous (the machine is
/// behind a lock), so the owner's calls reach the server in the order it made them.
package final class PushSubscriber: Sendable {
    package enum Event: Sendable, Equatable {
        case subscribed(RecordPoller.Key)
        case refused(RecordPoller.Key, ResponseCode)
        case changed(RecordPoller.Key, added: [RecordData], removed: [RecordData], removeAll: Bool)
        case ended(String, retryAfter: Duration?)

        /// What an event is about, for an owner that falls behind a server pushing fast.
        enum Subject: Hashable, Sendable {
            case subscription(RecordPoller.Key)
            case records(RecordPoller.Key)
            case session
        }

        var subject: Subject {
            switch self {
            case .subscribed(let key), .refused(let key, _): .subscription(key)
            case .changed(let key, _, _, _): .records(key)
            case .ended: .session
            }
        }

        /// Two events about the same thing as one: the newer subscription state or session
        /// end, and two record changes as the change the two make together.
        static func merged(_ waiting: Event, _ newer: Event) -> Event {
            guard case .changed(let key, let added, let removed, let removeAll) = waiting,
                case .changed(_, let newAdded, let newRemoved, let newRemoveAll) = newer
            else { return newer }
            if newRemoveAll { return newer }
            let keptAdded = added.filter { !newRemoved.contains($0) && !newAdded.contains($0) } + newAdded
            // After a remove-all, a removal of what was not re-added is already done.
            let keptRemoved = (removed.filter { !newAdded.contains($0) && !newRemoved.contains($0) } + newRemoved)
                .filter { !removeAll || added.contains($0) }
            return .changed(key, added: keptAdded, removed: keptRemoved, removeAll: removeAll)
        }

        /// What waits for an owner that falls behind: one event per subscription state, per
        /// record set (changes merged) and for the session's end. Bounded by the subscriptions
        /// the owner made and the records the server holds for them.
        static func buffer() -> LatestPerKeyBuffer<Event, Subject> {
            LatestPerKeyBuffer(key: \.subject, merge: { merged($0, $1) })
        }
    }

    /// At most this many bytes waiting to be written: a server that reads nothing ends the
    /// session rather than the client's memory.
    package static let maximumUnsentBytes = 256 * 1024

    package let server: PushServer
    /// What the server accepted, refused and pushed (``Event/buffer()``: merged per record
    /// set while the owner is behind).
    package let events: EventStream<Event>
    private let eventSink: EventStream<Event>.Source
    /// What to write. Not an ``EventStream``: every message must go out, in order; bounded by
    /// ``maximumUnsentBytes`` (the session ends beyond it).
    private let outgoing: AsyncStream<[UInt8]>
    private let writer: AsyncStream<[UInt8]>.Continuation
    private struct State {
        var machine: PushClient
        var unsentBytes = 0
    }
    private let state: Locked<State>
    private let policy: DNSPushPolicy
    private let transport: any DNSPushTransport
    private let clock: any ShellClock
    private let logger: Logger

    /// - Parameter clock: the session's time (its keepalive, its requests' timeouts); the
    ///   browse's own clock, so tests drive both with one.
    package init(server: PushServer, policy: DNSPushPolicy, transport: any DNSPushTransport, logger: Logger, clock: any ShellClock = SystemClock()) {
        self.server = server
        self.policy = policy
        self.transport = transport
        self.logger = logger
        self.clock = clock
        (events, eventSink) = EventStream<Event>.makeStream(buffer: Event.buffer())
        // Bounded by `maximumUnsentBytes` (see `outgoing`).
        (outgoing, writer) = AsyncStream<[UInt8]>.makeStream()
        state = Locked(State(machine: PushClient(now: clock.now)))
    }

    package func subscribe(_ key: RecordPoller.Key) {
        let now = clock.now
        state.withLockedValue { state in perform(state.machine.subscribe(key, now: now), &state) }
    }

    package func unsubscribe(_ key: RecordPoller.Key) {
        let now = clock.now
        state.withLockedValue { state in perform(state.machine.unsubscribe(key, now: now), &state) }
    }

    /// Connects (each address in turn, 5 s each) and carries the session until it ends; the
    /// last event is `.ended`.
    package func run() async {
        let hostname = String(server.name.description.dropLast())
        var channel: NIOAsyncChannel<ByteBuffer, ByteBuffer>?
        var failures: [String] = []
        for address in server.addresses {
            do {
                channel = try await transport.connect(
                    to: address, port: server.port, serverName: hostname, checkCertificate: policy == .authenticated, timeout: .seconds(5))
                break
            } catch {
                // The transport finishes the TLS handshake before it returns: a certificate
                // that fails the check is said as such.
                if policy == .authenticated, Self.isCertificateFailure(error) { return finish(certificateRefused(hostname)) }
                failures.append("\(address): \(error)")
            }
        }
        guard let channel else { return finish("cannot connect to the DNS Push server \(server): \(failures.joined(separator: "; "))") }
        logger.debug("DNS Push: connected to \(server)")
        let (outgoing, clock) = (outgoing, clock)
        var reason = "the server closed the connection"
        do {
            try await channel.executeThenClose { inbound, outbound in
                try await withThrowingTaskGroup(of: Void.self) { group in
                    group.addTask {
                        for await message in outgoing {
                            try await outbound.write(DNSOverTCP.framed(message))
                            self.state.withLockedValue { $0.unsentBytes -= message.count }
                        }
                    }
                    group.addTask {
                        try await DNSOverTCP.messages(in: inbound) { message in
                            self.received(message)
                            return true
                        }
                    }
                    group.addTask {
                        while !Task.isCancelled {
                            // At most a second asleep: a subscription made meanwhile moves the deadline.
                            let deadline = self.state.withLockedValue { $0.machine.nextDeadline }
                            try await clock.sleep(until: min(deadline ?? clock.now + .seconds(1), clock.now + .seconds(1)))
                            self.tick()
                        }
                    }
                    try await group.next()
                    group.cancelAll()
                }
            }
        } catch {
            if policy == .authenticated, Self.isCertificateFailure(error) {
                reason = certificateRefused(hostname)
            } else {
                reason = "the connection failed: \(error)"
            }
        }
        finish(reason)
    }

    /// Whether `error` is a TLS certificate that failed the check (BoringSSL's words).
    static func isCertificateFailure(_ error: any Error) -> Bool {
        "\(error)".contains("CERTIFICATE_VERIFY_FAILED")
    }

    private func certificateRefused(_ hostname: String) -> String {
        "its certificate is not valid for \(hostname) under the system's trusted roots, which authenticated Push requires"
    }

    /// Ends the session from this side.
    package func close() {
        writer.finish()
    }

    private func received(_ bytes: [UInt8]) {
        let now = clock.now
        state.withLockedValue { state in perform(state.machine.received(bytes, now: now), &state) }
    }

    private func tick() {
        let now = clock.now
        state.withLockedValue { state in perform(state.machine.advance(to: now), &state) }
    }

    private func finish(_ reason: String) {
        state.withLockedValue { state in perform(state.machine.connectionEnded(reason), &state) }
        eventSink.finish()
    }

    private func perform(_ actions: [PushClient.Action], _ state: inout State) {
        for action in actions {
            switch action {
            case .send(let bytes):
                state.unsentBytes += bytes.count
                guard state.unsentBytes <= Self.maximumUnsentBytes else {
                    perform(state.machine.connectionEnded("the server left \(state.unsentBytes) bytes unread"), &state)
                    return
                }
                writer.yield(bytes)
            case .subscribed(let key): eventSink.yield(.subscribed(key))
            case .refused(let key, let code): eventSink.yield(.refused(key, code))
            case .changed(let key, let added, let removed, let removeAll):
                eventSink.yield(.changed(key, added: added, removed: removed, removeAll: removeAll))
            case .ended(let reason, let retryAfter):
                eventSink.yield(.ended(reason, retryAfter: retryAfter))
                writer.finish()
            }
        }
    }
}
