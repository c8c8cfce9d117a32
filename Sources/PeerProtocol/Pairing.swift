import NearbyBasics
public import NearbyCrypto

/// A pairing that both people confirmed: the peer is now pinned in the trust store.
public struct PairingResult: Hashable, Sendable {
    /// The peer's ID, proven by its key in the TLS handshake.
    public let peerID: PeerID
    /// The name the peer gave (else its certificate's), as pinned.
    public let name: String
    /// The 6-digit code both sides showed.
    public let code: String
}

/// A pairing waiting for a person: do both devices show the same ``code``?
public struct PairingRequest: Hashable, Sendable {
    /// The peer's ID, proven by its key in the TLS handshake.
    public let peerID: PeerID
    /// The name it gave, else its certificate's.
    public let name: String
    /// Six digits, the same on both devices unless someone is in the middle.
    public let code: String
    /// The peer's address.
    public let address: String
    /// The pairing must be done by then (both people's answers included); a later answer counts for nothing.
    public let answerBy: ContinuousClock.Instant

    package init(peerID: PeerID, name: String, code: String, address: String, answerBy: ContinuousClock.Instant) {
        self.peerID = peerID
        self.name = name
        self.code = code
        self.address = address
        self.answerBy = answerBy
    }
}

/// The pairing exchange (both roles) as a pure state machine: messages, the person's answer
/// and time in; messages to send and outcomes out. It runs over a TLS channel, where each
/// side's peer ID is fixed by its key.
///
/// Commit, then reveal: the initiator (the connecting side) sends a commitment to a random
/// nonce (`pair/request`), the responder answers with its own nonce, the initiator reveals
/// its nonce (`pair/reveal`) and the responder checks it against the commitment. Both then
/// show six digits derived from both peer IDs and both nonces, and each person answers
/// (`pair/confirm`). Each side pins the other only when both people said yes.
///
/// Why this leaves a man in the middle one guess: he holds a different TLS key towards each
/// side, so the two codes are computed over different peer IDs. To make them equal he must
/// pick his nonce towards the initiator before the initiator's nonce is revealed (it is only
/// committed), and the responder picks its nonce after his commitment arrives. Either way one
/// of the codes is fixed by a nonce he could not know: a one-in-a-million guess, not the
/// offline grinding of keys that a code made from the two keys alone allows.
package struct PairingExchange: Sendable {
    package enum Role: Sendable, Hashable { case initiator, responder }

    package enum Action: Hashable, Sendable {
        /// Write this message.
        case send(JSONRPCMessage)
        /// Ask the person whether the other device shows this code; answer with ``confirm(_:at:)``.
        case showCode(String, peerName: String)
        /// Both people said yes: pin the peer under this name. The exchange is over.
        case paired(code: String, peerName: String)
        /// The pairing failed (the reason, in words); close the connection.
        case failed(String)
    }

    private enum State: Hashable {
        case idle
        /// Initiator: commitment sent, the responder's nonce awaited.
        case awaitingNonce
        /// Responder: our nonce sent, the initiator's reveal awaited.
        case awaitingReveal(commitment: [UInt8], peerNonce: [UInt8]?)
        /// Initiator: nonce revealed, the responder's acknowledgement awaited.
        case awaitingAcknowledgement(peerNonce: [UInt8])
        /// Both sides show the code; what each person said so far.
        case confirming(code: String, local: Bool?, remote: Bool?)
        case done
    }

    package static let requestID = JSONRPCID.string("pair-request")
    package static let revealID = JSONRPCID.string("pair-reveal")
    package static let nonceSize = 32

    package let role: Role
    /// Our peer ID and the peer's, as TLS proved them.
    package let localID: PeerID
    package let remoteID: PeerID
    package let localName: String
    /// The name to show and pin for the peer when it gives none (its certificate's).
    package let fallbackName: String
    /// Our secret nonce (random; given by the caller so that tests can fix it).
    package let nonce: [UInt8]
    /// The whole pairing, people included, must be done within this.
    package let timeout: Duration

    private var state: State = .idle
    package private(set) var deadline: Duration?
    private var remoteName: String?

    package init(
        role: Role, localID: PeerID, remoteID: PeerID, localName: String, fallbackName: String, nonce: [UInt8],
        timeout: Duration = .seconds(60)
    ) {
        self.role = role
        self.localID = localID
        self.remoteID = remoteID
        self.localName = localName
        self.fallbackName = fallbackName
        self.nonce = nonce
        self.timeout = timeout
    }

    package var isOver: Bool { state == .done }
    package var peerName: String { remoteName.flatMap { $0.isEmpty ? nil : $0 } ?? fallbackName }

    /// A fresh random nonce.
    package static func randomNonce() -> [UInt8] {
        var generator = SystemRandomNumberGenerator()
        return (0..<nonceSize).map { _ in UInt8.random(in: .min ... .max, using: &generator) }
    }

    /// The commitment to `nonce`: it hides the nonce and binds the initiator to it.
    package static func commitment(to nonce: [UInt8]) -> [UInt8] {
        SHA256.hash(Array("nearby pairing commitment 1".utf8) + nonce)
    }

    /// The six digits both sides show: from both peer IDs (initiator's first) and both nonces.
    package static func code(initiator: PeerID, responder: PeerID, initiatorNonce: [UInt8], responderNonce: [UInt8]) -> String {
        let digest = SHA256.hash(Array("nearby pairing code 1".utf8) + initiator.bytes + responder.bytes + initiatorNonce + responderNonce)
        let number = digest.prefix(8).reduce(UInt64(0)) { $0 << 8 | UInt64($1) } % 1_000_000
        let digits = String(number)
        return String(repeating: "0", count: 6 - digits.count) + digits
    }

    // MARK: Events

    /// Initiator: the channel is open at `now`; sends the commitment.
    package mutating func start(at now: Duration) -> [Action] {
        guard state == .idle, role == .initiator else { return [] }
        state = .awaitingNonce
        deadline = now + timeout
        let params: JSONValue = .object(["commitment": .string(hexString(Self.commitment(to: nonce))), "display_name": .string(localName)])
        return [.send(.request(id: Self.requestID, method: "pair/request", params: params))]
    }

    /// Responder: the peer's `pair/request` (already admitted by the rate limit) at `now`.
    package mutating func receiveRequest(id: JSONRPCID, params: JSONValue?, at now: Duration) -> [Action] {
        guard state == .idle, role == .responder else { return [refuse(id, "a pairing is already under way on this connection")] }
        deadline = now + timeout
        guard let commitment = params?["commitment"]?.stringValue.flatMap(bytes(fromHex:)), commitment.count == 32 else {
            return fail(id: id, JSONRPCError(JSONRPCError.invalidParams, "pair/request needs \"commitment\": 64 hex digits"))
        }
        remoteName = params?["display_name"]?.stringValue
        state = .awaitingReveal(commitment: commitment, peerNonce: nil)
        let result: JSONValue = .object(["nonce": .string(hexString(nonce)), "display_name": .string(localName)])
        return [.send(.response(id: id, result: result))]
    }

    /// A message from the peer at `now`.
    package mutating func receive(_ message: JSONRPCMessage, at now: Duration) -> [Action] {
        switch (state, message) {
        case (.idle, .request(let id, "pair/request", let params)) where role == .responder:
            return receiveRequest(id: id, params: params, at: now)
        case (.awaitingNonce, .response(Self.requestID, let result)):
            guard let peerNonce = result["nonce"]?.stringValue.flatMap(bytes(fromHex:)), peerNonce.count == Self.nonceSize else {
                return finish("the peer's answer to pair/request has no usable nonce")
            }
            remoteName = result["display_name"]?.stringValue
            state = .awaitingAcknowledgement(peerNonce: peerNonce)
            return [.send(.request(id: Self.revealID, method: "pair/reveal", params: .object(["nonce": .string(hexString(nonce))])))]
        case (.awaitingAcknowledgement(let peerNonce), .response(Self.revealID, _)):
            let code = Self.code(initiator: localID, responder: remoteID, initiatorNonce: nonce, responderNonce: peerNonce)
            state = .confirming(code: code, local: nil, remote: nil)
            return [.showCode(code, peerName: peerName)]
        case (.awaitingReveal(let commitment, _), .request(let id, "pair/reveal", let params)):
            guard let peerNonce = params?["nonce"]?.stringValue.flatMap(bytes(fromHex:)), peerNonce.count == Self.nonceSize else {
                return fail(id: id, JSONRPCError(JSONRPCError.invalidParams, "pair/reveal needs \"nonce\": 64 hex digits"))
            }
            guard Self.commitment(to: peerNonce) == commitment else {
                return fail(id: id, JSONRPCError(JSONRPCError.pairingFailed, "the revealed nonce does not match the commitment"))
            }
            let code = Self.code(initiator: remoteID, responder: localID, initiatorNonce: peerNonce, responderNonce: nonce)
            state = .confirming(code: code, local: nil, remote: nil)
            return [.send(.response(id: id, result: .object([:]))), .showCode(code, peerName: peerName)]
        case (.confirming(let code, let local, nil), .notification("pair/confirm", let params)):
            guard case .bool(let accepted)? = params?["accept"] else {
                return finish("the peer's pair/confirm has no \"accept\": true or false")
            }
            guard accepted else { return finish("the other side said the codes differ, or declined") }
            state = .confirming(code: code, local: local, remote: true)
            return local == true ? succeed(code) : []
        case (_, .failure(let id?, let error)) where id == Self.requestID || id == Self.revealID:
            return finish("the peer refused pairing: \(error.message) (\(error.code))")
        case (.done, _):
            return []
        case (_, .request(let id, let method, _)):
            return [refuse(id, "\"\(method)\" is not served on a pairing connection; this connection only pairs")]
        default:
            return []
        }
    }

    /// The person's answer: does the other device show the same code?
    package mutating func confirm(_ accepted: Bool, at now: Duration) -> [Action] {
        guard case .confirming(let code, nil, let remote) = state else { return [] }
        let send = Action.send(.notification(method: "pair/confirm", params: .object(["accept": .bool(accepted)])))
        guard accepted else { return [send] + finish("declined here: the codes differ, or the pairing was not wanted") }
        state = .confirming(code: code, local: true, remote: remote)
        return [send] + (remote == true ? succeed(code) : [])
    }

    /// Time passes: a pairing that takes too long fails.
    package mutating func advance(to now: Duration) -> [Action] {
        guard let deadline, now >= deadline, state != .done else { return [] }
        return finish("the pairing was not completed within \(secondsText(timeout))")
    }

    /// The connection ended before the pairing did.
    package mutating func connectionEnded(_ reason: String) -> [Action] {
        guard state != .done else { return [] }
        return finish("the connection ended during pairing: \(reason)")
    }

    // MARK: Helpers

    private mutating func succeed(_ code: String) -> [Action] {
        state = .done
        deadline = nil
        return [.paired(code: code, peerName: peerName)]
    }

    private mutating func finish(_ reason: String) -> [Action] {
        state = .done
        deadline = nil
        return [.failed(reason)]
    }

    private mutating func fail(id: JSONRPCID, _ error: JSONRPCError) -> [Action] {
        [.send(.failure(id: id, error))] + finish(error.message)
    }

    private func refuse(_ id: JSONRPCID, _ message: String) -> Action {
        .send(.failure(id: id, JSONRPCError(JSONRPCError.notInitialized, message)))
    }
}

/// How often pairing may fail before a listener stops offering it for a while, as a pure
/// value: time in, a verdict out. One pairing runs at a time, so a stranger cannot queue up
/// questions for the person at the keyboard.
package struct PairingLimiter: Sendable {
    /// Failed pairings (wrong reveals, "no" on either side, timeouts) allowed within ``window``.
    package let maximumFailures: Int
    package let window: Duration
    private var failures: [Duration] = []
    package private(set) var inProgress = false

    package init(maximumFailures: Int = 5, window: Duration = .seconds(600)) {
        self.maximumFailures = maximumFailures
        self.window = window
    }

    /// Whether a new pairing may start at `now`; nil when it may (and it is then in progress),
    /// else why not.
    package mutating func admit(at now: Duration) -> String? {
        failures.removeAll { now - $0 >= window }
        if inProgress { return "another pairing is in progress; try again when it is over" }
        if failures.count >= maximumFailures, let oldest = failures.first {
            let wait = window - (now - oldest)
            return "too many failed pairings (\(failures.count) in \(secondsText(window))); try again in \(secondsText(wait))"
        }
        inProgress = true
        return nil
    }

    /// The pairing admitted last ended at `now`.
    package mutating func finished(succeeded: Bool, at now: Duration) {
        inProgress = false
        if !succeeded { failures.append(now) }
    }
}
