import DNSWire
import NearbyBasics
import NearbyDiscovery
import PeerConnection
import PeerTrust
import UnicastDNSSD

// The server side of the front door: advertise, listen, admit the peers this identity trusts,
// and answer their requests with one closure. The shell is the event stream's producer: it
// owns the listener, the advertisement, the registration and a child per connection, and ends
// them all on SIGINT, SIGTERM, `stop()`, or when the program drops the events.

/// A request a peer sent to a server from ``serve(_:type:port:info:registrar:stateDirectory:answer:)``.
public struct NearbyRequest: Sendable, CustomStringConvertible {
    /// The method called, e.g. `hello`.
    public let method: String
    /// The params as JSON text (nil: none).
    public let params: String?
    /// The asking peer's ID: always one of the peers pinned in the state directory.
    public let peerID: String
    /// The name the peer gave for itself (its identity's display name).
    public let peerName: String

    public var description: String { "\(method) from \(peerName)" }
}

/// What happened at a server. A closed enum with whole payloads: a `switch` needs no `default`.
public enum ServerEvent: Hashable, Sendable, CustomStringConvertible {
    /// A trusted peer connected: its name, its whole peer ID, and where it came from.
    case connected(name: String, peerID: String, address: String)
    /// A connected peer left, and why (it closed, the network dropped it, the server stopped).
    case disconnected(name: String, peerID: String, reason: String)
    /// Someone was refused: where from, the peer ID its key proved (nil when it proved none),
    /// and why, with the command that would let it in where there is one.
    case turnedAway(address: String, peerID: String?, reason: String)
    /// Connections turned away before they proved anything (a port scan, a flood), summed up.
    case strangers(String)
    /// Events that were not kept because the program did not read them in time: this many.
    case missed(Int)

    public var description: String {
        switch self {
        case .connected(let name, let peerID, let address): "connected: \(name) (peer ID \(peerID)) from \(address)"
        case .disconnected(let name, _, let reason): "disconnected: \(name): \(reason)"
        case .turnedAway(let address, let peerID?, let reason): "turned away \(address) (peer ID \(peerID)): \(reason)"
        case .turnedAway(let address, nil, let reason): "turned away \(address): \(reason)"
        case .strangers(let summary): summary
        case .missed(let count): "\(count) events not shown: the program read them too slowly"
        }
    }

    /// At most this many events wait unread; beyond that they are counted in one `missed`.
    static let waiting = 64

    static var policy: SummarizingBuffer<ServerEvent> {
        SummarizingBuffer(limit: waiting, isNotice: { _ in true }) { summary, _ in
            if case .missed(let count)? = summary { return .missed(count + 1) }
            return .missed(1)
        }
    }
}

/// The events of a server, from ``NearbyServer/events``.
public struct ServerEvents: AsyncSequence, Sendable {
    let base: EventStream<ServerEvent>

    public func makeAsyncIterator() -> Iterator { Iterator(base: base.makeAsyncIterator()) }

    public struct Iterator: AsyncIteratorProtocol {
        var base: EventStream<ServerEvent>.Iterator

        public mutating func next() async -> ServerEvent? { await base.next() }
    }
}

/// A server from ``serve(_:type:port:info:registrar:stateDirectory:answer:)``: listening,
/// advertised, and answering until SIGINT or SIGTERM (Ctrl-C) or ``stop()``.
public final class NearbyServer: Sendable {
    /// The name won on the network, e.g. `Build Box (2)` when `Build Box` was taken.
    public let name: String
    /// The TCP port listened on (the one the system chose when 0 was asked for).
    public let port: Int
    /// This server's peer ID, for peers to pin: `nearby trust pin <peerID>` on their side.
    public let peerID: String
    /// Who connected, left, or was turned away, in order. Bounded: while the program has not
    /// read them, at most 64 events wait; later ones are counted in one ``ServerEvent/missed(_:)``.
    /// The events end when the server stops (SIGINT, SIGTERM, ``stop()``), so a `for await`
    /// loop over them ends and the program exits normally. Dropping them stops the server.
    public let events: ServerEvents
    private let stopping: CancelScope
    private let stopped: CancelScope

    init(name: String, port: Int, peerID: String, events: ServerEvents, stopping: CancelScope, stopped: CancelScope) {
        self.name = name
        self.port = port
        self.peerID = peerID
        self.events = events
        self.stopping = stopping
        self.stopped = stopped
    }

    /// Stops serving: connections close (1001, going away), the service says goodbye (or its
    /// registration is removed), and discovery stops. Returns once all of it is done.
    public func stop() async {
        stopping.cancel()
        await stopped.wait()
    }
}

/// Serves `type` (e.g. `_openagents._tcp`) as `name` on `port`: advertises it on the link with
/// TXT `info` plus `id` (this peer's ID) and `pv` (the protocol version), listens for TLS 1.3
/// WebSocket connections, admits the peers pinned in the state directory (a peer pinned while
/// it serves gets in at its next connection), and answers each request they send with `answer`.
///
/// `answer` gets the request and returns the result as JSON text, nil for a method it does not
/// know (the peer gets "method not found"), or throws (the peer gets the error's text). `ping`
/// is answered by itself. Each peer's requests are answered one at a time, in order; peers in
/// parallel. Notifications (requests without an id) reach `answer` too; what it returns for them
/// goes nowhere.
///
/// The identity is the one `nearby` keeps (made there when there is none); with nobody pinned,
/// every peer is turned away, and each ``ServerEvent/turnedAway(address:peerID:reason:)`` names
/// the command that lets it in.
/// - Parameters:
///   - name: the instance name people see, e.g. `Build Box`.
///   - type: the service type, e.g. `_openagents._tcp`.
///   - port: the TCP port, 1-65535, or 0 for any free one (``NearbyServer/port`` says which).
///   - info: more TXT entries (`id` and `pv` are the server's own).
///   - registrar: also register with this SRP registrar, for a server in a container or on a
///     subnet the LAN's multicast does not reach (see ``advertise(_:type:port:info:registrar:stateDirectory:)``).
///   - stateDirectory: the folder of the identity and pins (nil: `$NEARBY_STATE_DIR`, else
///     `~/.local/state/nearby`, as `nearby` uses).
///   - answer: answers one request: its result as JSON text, nil for "method not found".
/// - Throws: ``NearbyError`` for a bad name, type, port or TXT entry, or when the identity,
///   the port, advertising or the registrar fails, saying which.
public func serve(
    _ name: String, type: String, port: Int = 0, info: [String: String] = [:], registrar: String? = nil, stateDirectory: String? = nil,
    answer: @escaping @Sendable (NearbyRequest) async throws -> String?
) async throws(NearbyError) -> NearbyServer {
    let serviceType = try parse(type)
    try checkInstanceName(name, type: serviceType)
    guard (0...65535).contains(port) else { throw NearbyError("port \(port) is out of range; use 1-65535, or 0 for any free port") }
    for key in info.keys where ["id", "pv"].contains(key.lowercased()) {
        throw NearbyError("TXT \(key) is the server's own (\(key.lowercased() == "id" ? "its peer ID" : "its protocol version")); use another key")
    }
    let identity = try loadIdentity(stateDirectory, creating: true)
    var configuration = PeerConnectionConfiguration(identity: identity, trust: try pinnedTrust(stateDirectory, identity: identity, required: false))
    configuration.streams = nil
    let peerID = identity.peerID.description
    var announced = info
    announced["id"] = peerID
    announced["pv"] = configuration.protocolVersion.description
    let txt = try discoveryInfo(announced)

    let listener: PeerListener
    do {
        listener = try await PeerListener.listen(port: port, configuration: configuration, accept: .trusted)
    } catch {
        throw NearbyError(error.message)
    }
    let discovery: NearbyDiscovery
    let advertisement: Advertisement
    do {
        discovery = try await startDiscovery()
    } catch {
        await listener.close()
        throw error
    }
    do {
        advertisement = try await discovery.advertise(name, type: serviceType, port: UInt16(listener.port), info: txt)
    } catch {
        await listener.close()
        await discovery.shutdown()
        throw NearbyError("cannot advertise \(name.quotedPrefix()): \(error)")
    }
    let registration: SRPRegistration?
    if let registrar {
        do {
            registration = try await register(
                SRPRequest.Service(instance: name, type: serviceType, port: UInt16(listener.port), info: txt), identity: identity, registrar: registrar)
        } catch {
            await advertisement.cancel()
            await listener.close()
            await discovery.shutdown()
            throw error
        }
    } else {
        registration = nil
    }

    let stopping = CancelScope()
    let stopped = CancelScope()
    let events = EventStream<ServerEvent>(buffer: ServerEvent.policy) { source in
        await withDiscardingTaskGroup { group in
            // What ends it: a signal, stop(), or the program dropping the events (this task is
            // cancelled). Closing the listener ends its events, and so the loop below.
            group.addTask {
                await withTaskGroup(of: Void.self) { first in
                    first.addTask { await interrupted() }
                    first.addTask { await stopping.wait() }
                    await first.next()
                    first.cancelAll()
                }
                await listener.close()
            }
            if let registration { group.addTask { await registration.keepRefreshed() } }
            for await event in listener.events {
                switch event {
                case .connected(let connection):
                    let who = (name: connection.peer.displayName ?? "", peerID: connection.peerID?.description ?? "")
                    source.yield(.connected(name: who.name, peerID: who.peerID, address: connection.remoteAddress))
                    group.addTask {
                        await answerRequests(on: connection, from: who, with: answer)
                        let end = await connection.closed()
                        source.yield(.disconnected(name: who.name, peerID: who.peerID, reason: end.message))
                    }
                case .rejected(let rejection):
                    let error = rejection.error
                    let reason = turnedAwayReason(error.message, reasons: error.reasons, peerID: rejection.peerID?.description)
                    source.yield(.turnedAway(address: rejection.address, peerID: rejection.peerID?.description, reason: reason))
                case .strangers(let summary):
                    source.yield(.strangers(summary.text))
                case .paired, .invitation:
                    continue  // neither is offered by this listener
                }
            }
            group.cancelAll()
        }
        try? await registration?.remove()
        await advertisement.cancel()
        await discovery.shutdown()
        stopped.cancel()
    }
    return NearbyServer(name: advertisement.name, port: listener.port, peerID: peerID, events: ServerEvents(base: events), stopping: stopping, stopped: stopped)
}

/// Answers one peer's requests, one at a time, until its connection ends.
func answerRequests(
    on connection: PeerConnection, from who: (name: String, peerID: String), with answer: @Sendable (NearbyRequest) async throws -> String?
) async {
    for await message in connection.incoming {
        guard let method = message.method else { continue }
        let request = NearbyRequest(method: method, params: message.params?.jsonText, peerID: who.peerID, peerName: who.name)
        do {
            guard let text = try await answer(request) else {
                message.respond(withError: JSONRPCError(JSONRPCError.methodNotFound, "no method \"\(method)\" here"))
                continue
            }
            do {
                message.respond(with: try JSONValue(parsing: text))
            } catch {
                message.respond(withError: JSONRPCError(JSONRPCError.internalError, "the server's answer to \(method) is not JSON"))
            }
        } catch {
            // -32000: the first of JSON-RPC 2.0's implementation-defined server errors, unused by Nearby's own.
            message.respond(withError: JSONRPCError(-32000, "\(error)"))
        }
    }
}

/// Why a peer was refused. A peer that proved a key nobody pinned here gets the command that
/// lets it in, and nothing else: its peer ID is already in the event, and said twice more it
/// would hide the command.
func turnedAwayReason(_ message: String, reasons: [TrustReason], peerID: String?) -> String {
    if let peerID, reasons.contains(where: { $0.code == .notPinned }) {
        let others = reasons.filter { $0.code != .notPinned }.map(\.message)
        return (["not pinned here"] + others).joined(separator: "; ") + " (to let it in: nearby trust pin \(peerID))"
    }
    return ([message] + reasons.map(\.message)).joined(separator: "; ")
}
