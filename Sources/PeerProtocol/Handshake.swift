public import NearbyCrypto

/// What a peer said about itself in `initialize`, with who TLS proved it to be.
public struct PeerHello: Hashable, Sendable {
    /// The peer ID its certificate's key hashes to (from the TLS handshake, not from the peer);
    /// nil on an insecure (`ws://`) connection, where nothing proves who the peer is.
    public var peerID: PeerID?
    /// The display name it gave in `_meta`, if any.
    public var displayName: String?
    /// The protocol version it speaks.
    public var protocolVersion: ProtocolVersion
    /// `client_info` (from a connecting peer) or `agent_info` (from an accepting one).
    public var info: JSONValue
    /// `client_capabilities` or `agent_capabilities`.
    public var capabilities: JSONValue
}

/// The `initialize` exchange that opens every connection, as a pure state machine: messages
/// and time in, messages to send and decisions out. The connecting side sends `initialize`
/// first; the accepting side checks the version and the peer ID the peer claims, asks the app
/// (an invitation), then answers. Until that is done, nothing but `initialize` is served.
///
/// It runs after TLS has authenticated the peer: `remotePeerID` is what the peer's key proved.
package struct Handshake: Sendable {
    package enum Role: Sendable { case connecting, accepting }

    /// What this side says about itself.
    package struct Local: Sendable {
        /// Nil on an insecure connection without an identity.
        package var peerID: PeerID?
        package var displayName: String
        package var protocolVersion: ProtocolVersion
        /// `client_info` or `agent_info`: `{"name","title","version"}`.
        package var info: JSONValue
        package var capabilities: JSONValue = .object([:])
        /// `auth_methods` (accepting side).
        package var authMethods: JSONValue = .array([])

        package init(peerID: PeerID? = nil, displayName: String, protocolVersion: ProtocolVersion, info: JSONValue, capabilities: JSONValue = .object([:]), authMethods: JSONValue = .array([])) {
            self.peerID = peerID
            self.displayName = displayName
            self.protocolVersion = protocolVersion
            self.info = info
            self.capabilities = capabilities
            self.authMethods = authMethods
        }
    }

    package enum Action: Hashable, Sendable {
        /// Write this message.
        case send(JSONRPCMessage)
        /// Accepting side: ask the app whether to let this peer in (``decide(accept:reason:at:)``).
        case invite(PeerHello)
        /// Connecting side: the peer said someone there decides whether to let us in, and may
        /// take up to this long; the handshake now waits that long (within its limit).
        case waiting(Duration)
        /// The handshake is done; the connection is the app's from now on.
        case established(PeerHello)
        /// After ``established(_:)``: a message for the app.
        case deliver(JSONRPCMessage)
        /// Close the connection, saying why.
        case close(reason: String)
        /// Accepting side, when pairing is offered: the peer asked to pair instead of
        /// initializing; this connection now belongs to a ``PairingExchange``.
        case pair(id: JSONRPCID, params: JSONValue?)
        /// Accepting side, when invitations are offered: the peer asked to use one before
        /// initializing; an ``InvitationExchange`` runs, then ``resumeAfterInvitation(at:)``.
        case invitation(id: JSONRPCID, params: JSONValue?)
    }

    private enum State: Hashable {
        case idle
        /// Connecting side: `initialize` sent, its answer awaited.
        case awaitingAnswer
        /// Accepting side: waiting for the peer's `initialize`.
        case awaitingInitialize
        /// Accepting side: the app is asked about this peer; the request id to answer.
        case awaitingDecision(JSONRPCID, PeerHello)
        case established
        /// The connection pairs instead (accepting side); the handshake has nothing more to do.
        case pairing
        /// An invitation is being used (accepting side); `initialize` comes after it.
        case inviting
        case closed
    }

    package let role: Role
    package let local: Local
    /// What TLS proved; nil on an insecure connection (then `_meta.peer_id` is not checked,
    /// and not believed either).
    package let remotePeerID: PeerID?
    /// How long the peer has to send (or answer) `initialize`.
    package let initializeTimeout: Duration
    /// How long the app has to accept an invitation before it counts as declined.
    package let invitationTimeout: Duration
    /// Accepting side: a `pair/request` before `initialize` turns the connection into a pairing.
    package let offersPairing: Bool
    /// Accepting side: an `invitation/open` before `initialize` starts an invitation exchange.
    package let offersInvitations: Bool
    /// Accepting side: an invitation let this peer in; its `initialize` is accepted without asking.
    package private(set) var admittedByInvitation = false
    /// Connecting side: the longest wait for a person or app on the other side that this side
    /// accepts when told about one (``waitingMethod``), counted from the start.
    package let admissionWaitLimit: Duration

    /// Accepting side, to the connecting side while its `initialize` waits for a decision:
    /// `{"timeout_ms": N, "reason": "..."}`. A connecting side that knows it waits up to N ms
    /// more (and says so to its user); one that does not ignores a notification it does not know.
    package static let waitingMethod = "initialize/waiting"
    /// Slack for the network on top of the time the accepting side announced.
    package static let waitingSlack: Duration = .seconds(2)

    private var state: State = .idle
    private var startedAt: Duration = .zero
    package private(set) var deadline: Duration?
    package static let initializeID = JSONRPCID.integer(0)

    package init(
        role: Role, local: Local, remotePeerID: PeerID?, initializeTimeout: Duration = .seconds(5), invitationTimeout: Duration = .seconds(30),
        offersPairing: Bool = false, offersInvitations: Bool = false, admissionWaitLimit: Duration = .seconds(120)
    ) {
        self.offersInvitations = offersInvitations
        self.role = role
        self.admissionWaitLimit = admissionWaitLimit
        self.offersPairing = offersPairing
        self.local = local
        self.remotePeerID = remotePeerID
        self.initializeTimeout = initializeTimeout
        self.invitationTimeout = invitationTimeout
    }

    package var isEstablished: Bool { state == .established }

    /// Accepting side: the peer the app is being asked about, while it is.
    package var invitee: PeerHello? {
        if case .awaitingDecision(_, let hello) = state { return hello }
        return nil
    }

    /// The channel is open (TLS and WebSocket done) at `now`.
    package mutating func start(at now: Duration) -> [Action] {
        guard state == .idle else { return [] }
        startedAt = now
        deadline = now + initializeTimeout
        switch role {
        case .accepting:
            state = .awaitingInitialize
            return []
        case .connecting:
            state = .awaitingAnswer
            let params: JSONValue = .object([
                "protocol_version": .string(local.protocolVersion.description),
                "client_capabilities": local.capabilities,
                "client_info": local.info,
                "_meta": meta,
            ])
            return [.send(.request(id: Self.initializeID, method: "initialize", params: params))]
        }
    }

    private var meta: JSONValue {
        var members: [String: JSONValue] = ["display_name": .string(local.displayName)]
        if let peerID = local.peerID { members["peer_id"] = .string(peerID.description) }
        return .object(members)
    }

    /// A message arrived at `now`.
    package mutating func receive(_ message: JSONRPCMessage, at now: Duration) -> [Action] {
        switch state {
        case .established:
            if case .request(let id, "initialize", _) = message {
                return [.send(.failure(id: id, JSONRPCError(JSONRPCError.invalidRequest, "already initialized")))]
            }
            return [.deliver(message)]
        case .closed, .idle, .pairing, .inviting:
            return []
        case .awaitingAnswer:
            if case .notification(Self.waitingMethod, let params) = message { return receiveWaiting(params, at: now) }
            return receiveAnswer(message)
        case .awaitingInitialize:
            if case .request(let id, "initialize", let params) = message { return receiveInitialize(id: id, params: params, at: now) }
            if offersPairing, remotePeerID != nil, case .request(let id, "pair/request", let params) = message {
                state = .pairing
                deadline = nil
                return [.pair(id: id, params: params)]
            }
            if case .request(let id, InvitationExchange.openMethod, let params) = message {
                guard offersInvitations, remotePeerID != nil else {
                    return [.send(.failure(id: id, InvitationExchange.error(InvitationRefusal(
                        .notOffered, "this peer takes no invitations on this port (it was not started with invitations)"))))]
                }
                state = .inviting
                deadline = nil
                return [.invitation(id: id, params: params)]
            }
            return refuseEarly(message)
        case .awaitingDecision:
            if case .request(let id, "initialize", _) = message {
                return [.send(.failure(id: id, JSONRPCError(JSONRPCError.invalidRequest, "initialize was already received")))]
            }
            return refuseEarly(message)
        }
    }

    /// Anything but `initialize` before the handshake is done: requests get -32002, other
    /// messages are dropped (the connection layer counts them).
    private func refuseEarly(_ message: JSONRPCMessage) -> [Action] {
        guard case .request(let id, let method, _) = message else { return [] }
        return [.send(.failure(id: id, JSONRPCError(JSONRPCError.notInitialized, "\"\(method)\" before initialize: send initialize first")))]
    }

    private mutating func receiveInitialize(id: JSONRPCID, params: JSONValue?, at now: Duration) -> [Action] {
        let hello: PeerHello
        switch readHello(params, infoKey: "client_info", capabilitiesKey: "client_capabilities") {
        case .failure(let error):
            return fail(id: id, error)
        case .success(let read):
            hello = read
        }
        guard hello.protocolVersion.isCompatible(with: local.protocolVersion) else {
            return fail(id: id, incompatible(hello.protocolVersion))
        }
        state = .awaitingDecision(id, hello)
        deadline = now + invitationTimeout
        if admittedByInvitation { return decide(accept: true, at: now) }
        return [.invite(hello)]
    }

    /// Accepting side: the invitation exchange let the peer in at `now`; its `initialize` is
    /// awaited (within the usual time) and accepted without asking anyone.
    package mutating func resumeAfterInvitation(at now: Duration) {
        guard state == .inviting else { return }
        state = .awaitingInitialize
        admittedByInvitation = true
        deadline = now + initializeTimeout
    }

    /// Accepting side: the app asks someone (a person) about the peer, which may take until the
    /// invitation's deadline; the peer is told so and by when, so that it waits that long
    /// instead of giving up after its own `initialize` timeout.
    package func announceWaiting(reason: String, at now: Duration) -> [Action] {
        guard case .awaitingDecision = state, let deadline, deadline > now else { return [] }
        let params: JSONValue = .object(["timeout_ms": .integer(Int(nanoseconds(deadline - now) / 1_000_000)), "reason": .string(reason)])
        return [.send(.notification(method: Self.waitingMethod, params: params))]
    }

    /// Connecting side: the peer asks someone about us and says how long that may take. The
    /// deadline moves out to that (plus slack for the network), never beyond
    /// ``admissionWaitLimit`` from the start, and never in.
    private mutating func receiveWaiting(_ params: JSONValue?, at now: Duration) -> [Action] {
        guard case .integer(let announced)? = params?["timeout_ms"], announced > 0 else { return [] }
        let wait = min(Duration.milliseconds(announced), admissionWaitLimit)
        let latest = startedAt + initializeTimeout + admissionWaitLimit
        let proposed = min(now + wait + Self.waitingSlack, latest)
        guard let current = deadline, proposed > current else { return [] }
        deadline = proposed
        return [.waiting(min(wait, proposed - now))]
    }

    private mutating func receiveAnswer(_ message: JSONRPCMessage) -> [Action] {
        switch message {
        case .response(Self.initializeID, let result):
            switch readHello(result, infoKey: "agent_info", capabilitiesKey: "agent_capabilities") {
            case .failure(let error):
                return close("the peer's answer to initialize is unusable: \(error.message)")
            case .success(let hello):
                guard hello.protocolVersion.isCompatible(with: local.protocolVersion) else {
                    return close(incompatible(hello.protocolVersion).message)
                }
                state = .established
                deadline = nil
                return [.established(hello)]
            }
        case .failure(Self.initializeID?, let error):
            let what = switch error.code {
            case JSONRPCError.declined: "the peer declined the connection"
            case JSONRPCError.incompatibleVersion: "the peer refused our protocol version"
            default: "the peer refused initialize"
            }
            // "declined" alone adds nothing to "the peer declined the connection".
            let detail = error.message == "declined" || error.message.isEmpty ? "" : ": \(error.message)"
            return close("\(what)\(detail) (\(error.code))")
        default:
            return refuseEarly(message)
        }
    }

    /// The app's answer to ``Action/invite(_:)``; `reason` tells a declined peer why.
    package mutating func decide(accept: Bool, reason: String? = nil, at now: Duration) -> [Action] {
        guard case .awaitingDecision(let id, let hello) = state else { return [] }
        guard accept else {
            // A "no" that comes when the time is up is the time being up, whoever noticed first.
            let late = deadline.map { now >= $0 } ?? false
            let why = reason ?? (late ? "nobody accepted within \(secondsText(invitationTimeout))" : "declined")
            return fail(id: id, JSONRPCError(JSONRPCError.declined, why))
        }
        state = .established
        deadline = nil
        let result: JSONValue = .object([
            "protocol_version": .string(local.protocolVersion.description),
            "agent_capabilities": local.capabilities,
            "auth_methods": local.authMethods,
            "agent_info": local.info,
            "_meta": meta,
        ])
        return [.send(.response(id: id, result: result)), .established(hello)]
    }

    /// Time passes: a peer that says nothing, or an app that does not decide, runs out of it.
    package mutating func advance(to now: Duration) -> [Action] {
        guard let deadline, now >= deadline else { return [] }
        switch state {
        case .awaitingAnswer:
            return close("no answer to initialize within \(secondsText(deadline - startedAt))")
        case .awaitingInitialize:
            return close("no initialize within \(initializeTimeout)")
        case .awaitingDecision:
            return decide(accept: false, at: now)
        default:
            return []
        }
    }

    // MARK: Helpers

    private func incompatible(_ theirs: ProtocolVersion) -> JSONRPCError {
        JSONRPCError(
            JSONRPCError.incompatibleVersion,
            "protocol version \(theirs) is not compatible with \(local.protocolVersion) (the major numbers, and for 0.x the minor numbers, must match)")
    }

    /// Answers `id` with `error`, then closes.
    private mutating func fail(id: JSONRPCID, _ error: JSONRPCError) -> [Action] {
        [.send(.failure(id: id, error))] + close(error.message)
    }

    private mutating func close(_ reason: String) -> [Action] {
        state = .closed
        deadline = nil
        return [.close(reason: reason)]
    }

    /// Reads `initialize`'s params or result; the peer ID it claims must be the one TLS proved.
    private func readHello(_ value: JSONValue?, infoKey: String, capabilitiesKey: String) -> Result<PeerHello, JSONRPCError> {
        func invalid(_ why: String) -> Result<PeerHello, JSONRPCError> { .failure(JSONRPCError(JSONRPCError.invalidParams, why)) }
        guard case .object? = value, let value else { return invalid("initialize takes an object") }
        guard let text = value["protocol_version"]?.stringValue else { return invalid("\"protocol_version\" (a string like \"0.2.2\") is missing") }
        let version: ProtocolVersion
        do {
            version = try ProtocolVersion(parsing: text)
        } catch {
            return invalid(error.description)
        }
        var displayName: String?
        if let meta = value["_meta"] {
            guard case .object = meta else { return invalid("\"_meta\" must be an object") }
            if let claimed = meta["peer_id"], let remotePeerID {
                guard claimed.stringValue.flatMap({ PeerID($0) }) == remotePeerID else {
                    return invalid("\"_meta.peer_id\" is not the peer ID of the certificate this connection was made with")
                }
            }
            displayName = meta["display_name"]?.stringValue
        }
        return .success(
            PeerHello(
                peerID: remotePeerID, displayName: displayName, protocolVersion: version,
                info: value[infoKey] ?? .object([:]), capabilities: value[capabilitiesKey] ?? .object([:])))
    }
}
