#if canImport(FoundationEssentials)
package import FoundationEssentials
#else
package import Foundation
#endif
public import NearbyBasics
public import NearbyCrypto

/// Why an inviter refused an invitation, in words, with a stable kind for programs.
public struct InvitationRefusal: Error, Hashable, Sendable, CustomStringConvertible {
    /// What kind of refusal this is; sent to the invitee as `error.data.reason`. New kinds may
    /// be added; switch with a `default`.
    public typealias Kind = OpenKind<InvitationRefusal>

    public var kind: Kind
    public var message: String

    public init(_ kind: Kind, _ message: String) {
        self.kind = kind
        self.message = message
    }

    public var description: String { message }
}

extension OpenKind where Owner == InvitationRefusal {
    /// The inviter does not know this invitation: it was revoked (the inviter stopped or
    /// restarted, or revoked it) or never made there.
    public static var unknown: Self { Self("unknown") }
    /// Its time is up.
    public static var expired: Self { Self("expired") }
    /// Every use it allowed is taken.
    public static var usedUp: Self { Self("usedUp") }
    /// Too many wrong proofs were tried with it: it no longer works, not even with the right secret.
    public static var void: Self { Self("void") }
    /// The proof did not match: the invitee does not hold the secret (a changed link, or an impostor).
    public static var wrongProof: Self { Self("wrongProof") }
    /// This listener takes no invitations.
    public static var notOffered: Self { Self("notOffered") }
    /// The proof held, but the inviter could not finish (its trust store could not be written).
    public static var failed: Self { Self("failed") }
}

/// What happened to one attempt at using an invitation, as the inviter saw it.
public struct InvitationAttempt: Sendable {
    public enum Outcome: Sendable, Hashable {
        /// The invitee proved the secret; each side pins the other. `usesLeft`: what the
        /// invitation still allows (0: used up). `again`: this invitee had used it before (a
        /// second dial of the same acceptance), so no use was taken.
        case accepted(usesLeft: Int, again: Bool)
        /// The invitee was already trusted here: it connects without using the invitation.
        case alreadyTrusted
        case refused(InvitationRefusal)
    }

    /// The invitation (nil when the handle named none this listener knows).
    public let invitation: InvitationLink?
    /// The invitee's key, proven in TLS.
    public let peerID: PeerID
    /// The name in its certificate.
    public let name: String
    /// Its address.
    public let address: String
    public let outcome: Outcome

    package init(invitation: InvitationLink?, peerID: PeerID, name: String, address: String, outcome: Outcome) {
        self.invitation = invitation
        self.peerID = peerID
        self.name = name
        self.address = address
        self.outcome = outcome
    }
}

/// The invitations a listener holds, as a pure value: each with its uses left, its wrong
/// proofs so far and who used it. It lives in the inviter's memory only: stopping the inviter
/// revokes every invitation. The listener keeps it under a lock, so that checking a proof and
/// taking a use are one step (two invitees racing for the last use cannot both get it).
package struct InvitationBook: Sendable {
    package struct Entry: Sendable {
        package var link: InvitationLink
        package var usesLeft: Int
        package var wrongProofs = 0
        /// Invitees that used it: one that dials again (a second address of the same
        /// acceptance) is let in without taking another use.
        package var usedBy: Set<PeerID> = []
    }

    /// Wrong proofs that make an invitation void.
    package let maximumWrongProofs: Int
    package private(set) var entries: [String: Entry] = [:]

    package init(maximumWrongProofs: Int = 3) {
        self.maximumWrongProofs = max(1, maximumWrongProofs)
    }

    package mutating func add(_ link: InvitationLink, uses: Int) {
        entries[link.handle] = Entry(link: link, usesLeft: max(1, uses))
    }

    /// Removes an invitation; returns whether it was there.
    @discardableResult
    package mutating func revoke(_ link: InvitationLink) -> Bool {
        entries.removeValue(forKey: link.handle) != nil
    }

    /// The invitation named by `handle`, whatever its state.
    package func link(for handle: String) -> InvitationLink? { entries[handle]?.link }

    /// Whether `handle` names an invitation that `invitee` can still use at `now`; nil when it
    /// can. One that used it before may come again (a second dial of the same acceptance).
    package func check(_ handle: String, invitee: PeerID? = nil, at now: Date) -> InvitationRefusal? {
        guard let entry = entries[handle] else {
            return InvitationRefusal(
                .unknown, "this invitation is not known here: it was revoked (the inviter stopped or restarted since it was made) or never made here")
        }
        if let invitee, entry.usedBy.contains(invitee), entry.usesLeft <= 0, entry.wrongProofs < maximumWrongProofs, !entry.link.hasExpired(at: now) {
            return nil
        }
        return refusal(for: entry, at: now)
    }

    private func refusal(for entry: Entry, at now: Date) -> InvitationRefusal? {
        if entry.wrongProofs >= maximumWrongProofs {
            return InvitationRefusal(.void, "this invitation is void: \(entry.wrongProofs) wrong proofs were tried with it (ask for a new one)")
        }
        if entry.link.hasExpired(at: now) {
            return InvitationRefusal(.expired, "this invitation expired at \(Self.time(entry.link.expires)) (ask for a new one)")
        }
        if entry.usesLeft <= 0 {
            return InvitationRefusal(.usedUp, "this invitation was already used (it allowed \(entry.usedBy.count) use\(entry.usedBy.count == 1 ? "" : "s"))")
        }
        return nil
    }

    /// Checks `proof` from `invitee` against the secret and, when it holds, takes one use
    /// (none when this invitee used it before). A wrong proof counts towards voiding it.
    package mutating func redeem(
        _ handle: String, proof: [UInt8], invitee: PeerID, challenge: [UInt8], at now: Date
    ) -> Result<(link: InvitationLink, usesLeft: Int, again: Bool), InvitationRefusal> {
        guard var entry = entries[handle] else {
            return .failure(check(handle, at: now) ?? InvitationRefusal(.unknown, "this invitation is not known here"))
        }
        let again = entry.usedBy.contains(invitee)
        // Used up is no refusal for the invitee that used it: it is the same acceptance.
        if !(again && entry.usesLeft <= 0), let refusal = refusal(for: entry, at: now) { return .failure(refusal) }
        let expected = InvitationLink.proof(secret: entry.link.secret, inviter: entry.link.peerID, invitee: invitee, challenge: challenge)
        guard !expected.isEmpty, equalInConstantTime(expected, proof) else {
            entry.wrongProofs += 1
            entries[handle] = entry
            let left = maximumWrongProofs - entry.wrongProofs
            let consequence =
                left > 0 ? "\(left) more wrong proof\(left == 1 ? "" : "s") make\(left == 1 ? "s" : "") it void" : "it is now void"
            return .failure(InvitationRefusal(
                .wrongProof, "the proof does not match this invitation's secret (a changed or mistyped link?); \(consequence)"))
        }
        if !again {
            entry.usesLeft -= 1
            entry.usedBy.insert(invitee)
        }
        entries[handle] = entry
        return .success((entry.link, entry.usesLeft, again))
    }

    /// Whether every invitation is over (used up, void or expired) at `now`.
    package func allOver(at now: Date) -> Bool {
        entries.values.allSatisfy { refusal(for: $0, at: now) != nil }
    }

    package static func time(_ date: Date) -> String {
        CivilTime.internetDateTime(sinceReferenceDate: date.timeIntervalSinceReferenceDate)
    }
}

/// The invitation exchange on one connection (both roles) as a pure state machine: messages,
/// the book's answers and time in; messages to send and outcomes out. It runs over TLS, after
/// the invitee checked that the inviter's key hashes to the link's peer ID, and before
/// `initialize`:
///
/// 1. invitee → `invitation/open` `{"invitation": handle}`; the inviter answers
///    `{"challenge": 64 hex digits}` (fresh, random, for this connection), or
///    `{"trusted": true}` when it trusts the invitee already (then no use is taken).
/// 2. invitee → `invitation/prove` `{"proof": 64 hex digits}` (``InvitationLink/proof(secret:inviter:invitee:challenge:)``);
///    the inviter checks it, takes a use, pins the invitee, and answers `{}`.
///
/// Refusals are JSON-RPC errors -32005 with `data.reason` (``InvitationRefusal/Kind``).
/// Then `initialize` runs as on any connection, and the inviter admits the invitee.
package struct InvitationExchange: Sendable {
    package enum Role: Sendable, Hashable {
        /// Holds the link's secret.
        case invitee(secret: [UInt8])
        /// `peerTrusted`: the invitee's certificate is trusted here already. `challenge`: fresh random bytes.
        case inviter(peerTrusted: Bool, challenge: [UInt8])
    }

    package enum Action: Hashable, Sendable {
        case send(JSONRPCMessage)
        /// Inviter: may the invitation named `handle` be used? Answer with ``lookedUp(_:at:)``.
        case lookUp(handle: String)
        /// Inviter: check `proof`, take a use and pin the invitee; answer with ``redeemed(_:at:)``.
        case redeem(handle: String, proof: [UInt8], challenge: [UInt8])
        /// The exchange is over and the invitee is in: `initialize` comes next. `used`: an
        /// invitation was used (false: the inviter trusted the invitee already).
        /// `handle`: the invitation the invitee named (inviter side).
        case admitted(used: Bool, handle: String?)
        /// Over, refused: close the connection. `refusal`: the inviter's (or, on the inviter's side, ours).
        case failed(String, refusal: InvitationRefusal.Kind?)
    }

    private enum State: Hashable {
        case idle
        /// Invitee: `invitation/open` sent.
        case awaitingChallenge
        /// Invitee: the proof sent.
        case awaitingAcceptance
        /// Inviter: the book is asked about the handle.
        case lookingUp(JSONRPCID, handle: String)
        /// Inviter: the challenge sent, the proof awaited.
        case awaitingProof(handle: String)
        /// Inviter: the book checks the proof.
        case redeeming(JSONRPCID)
        case done
    }

    package static let openID = JSONRPCID.string("invitation-open")
    package static let proveID = JSONRPCID.string("invitation-prove")
    package static let openMethod = "invitation/open"
    package static let proveMethod = "invitation/prove"

    package let role: Role
    /// Our peer ID and the peer's, as TLS proved them.
    package let localID: PeerID
    package let remoteID: PeerID
    /// The invitation's handle (invitee side).
    package let handle: String
    /// The whole exchange must be done within this.
    package let timeout: Duration
    private var state: State = .idle
    package private(set) var deadline: Duration?

    package init(role: Role, localID: PeerID, remoteID: PeerID, handle: String = "", timeout: Duration = .seconds(10)) {
        self.role = role
        self.localID = localID
        self.remoteID = remoteID
        self.handle = handle
        self.timeout = timeout
    }

    package var isOver: Bool { state == .done }

    /// A fresh random challenge.
    package static func randomChallenge() -> [UInt8] {
        var generator = SystemRandomNumberGenerator()
        return (0..<InvitationLink.challengeSize).map { _ in UInt8.random(in: .min ... .max, using: &generator) }
    }

    /// Invitee: the channel is open at `now`; asks to use the invitation.
    package mutating func start(at now: Duration) -> [Action] {
        guard state == .idle, case .invitee = role else { return [] }
        state = .awaitingChallenge
        deadline = now + timeout
        return [.send(.request(id: Self.openID, method: Self.openMethod, params: .object(["invitation": .string(handle)])))]
    }

    /// Inviter: the peer's `invitation/open` at `now`.
    package mutating func receiveOpen(id: JSONRPCID, params: JSONValue?, at now: Duration) -> [Action] {
        guard state == .idle, case .inviter(let trusted, _) = role else {
            return [.send(.failure(id: id, JSONRPCError(JSONRPCError.invalidRequest, "an invitation is already being used on this connection")))]
        }
        deadline = now + timeout
        guard let text = params?["invitation"]?.stringValue, text.count == 8, let bytes = CrockfordBase32.decode(text, count: InvitationLink.idSize) else {
            return fail(id: id, JSONRPCError(JSONRPCError.invalidParams, "invitation/open needs \"invitation\": the invitation ID, 8 characters of 0-9 A-Z"), nil)
        }
        let handle = CrockfordBase32.encode(bytes)
        if trusted {
            return succeed(answering: id, .object(["trusted": .bool(true)]), used: false, handle: handle)
        }
        state = .lookingUp(id, handle: handle)
        return [.lookUp(handle: handle)]
    }

    /// Inviter: the book's answer to ``Action/lookUp(handle:)``.
    package mutating func lookedUp(_ refusal: InvitationRefusal?, at now: Duration) -> [Action] {
        guard case .lookingUp(let id, let handle) = state, case .inviter(_, let challenge) = role else { return [] }
        if let refusal { return fail(id: id, Self.error(refusal), refusal.kind) }
        state = .awaitingProof(handle: handle)
        return [.send(.response(id: id, result: .object(["challenge": .string(hexString(challenge))])))]
    }

    /// Inviter: the book's answer to ``Action/redeem(handle:proof:challenge:)``.
    package mutating func redeemed(_ refusal: InvitationRefusal?, at now: Duration) -> [Action] {
        guard case .redeeming(let id) = state else { return [] }
        if let refusal { return fail(id: id, Self.error(refusal), refusal.kind) }
        return succeed(answering: id, .object([:]), used: true, handle: nil)
    }

    /// A message from the peer at `now`.
    package mutating func receive(_ message: JSONRPCMessage, at now: Duration) -> [Action] {
        switch (state, message, role) {
        case (.idle, .request(let id, Self.openMethod, let params), .inviter):
            return receiveOpen(id: id, params: params, at: now)
        case (.awaitingProof(let handle), .request(let id, Self.proveMethod, let params), .inviter(_, let challenge)):
            guard let proof = params?["proof"]?.stringValue.flatMap(bytes(fromHex:)), proof.count == 32 else {
                return fail(id: id, JSONRPCError(JSONRPCError.invalidParams, "invitation/prove needs \"proof\": 64 hex digits"), nil)
            }
            state = .redeeming(id)
            return [.redeem(handle: handle, proof: proof, challenge: challenge)]
        case (.awaitingChallenge, .response(Self.openID, let result), .invitee(let secret)):
            if result["trusted"] == .bool(true) {
                state = .done
                deadline = nil
                return [.admitted(used: false, handle: nil)]
            }
            guard let challenge = result["challenge"]?.stringValue.flatMap(bytes(fromHex:)), challenge.count == InvitationLink.challengeSize else {
                return finish("the inviter's answer to invitation/open has no usable challenge", nil)
            }
            state = .awaitingAcceptance
            let proof = InvitationLink.proof(secret: secret, inviter: remoteID, invitee: localID, challenge: challenge)
            return [.send(.request(id: Self.proveID, method: Self.proveMethod, params: .object(["proof": .string(hexString(proof))])))]
        case (.awaitingAcceptance, .response(Self.proveID, _), .invitee):
            state = .done
            deadline = nil
            return [.admitted(used: true, handle: nil)]
        case (_, .failure(let id?, let error), .invitee) where id == Self.openID || id == Self.proveID:
            let kind = error.data?["reason"]?.stringValue.map(InvitationRefusal.Kind.init)
            if error.code != JSONRPCError.invitationRefused, error.message.contains("before initialize") {
                return finish("the inviter takes no invitations on this port (it answered: \(error.message))", .notOffered)
            }
            return finish("the inviter refused: \(error.message)", kind)
        case (.done, _, _):
            return []
        case (_, .request(let id, let method, _), _):
            return [.send(.failure(id: id, JSONRPCError(JSONRPCError.notInitialized, "\"\(method)\" while an invitation is being used: initialize comes after it")))]
        default:
            return []
        }
    }

    /// Time passes: an exchange that takes too long fails.
    package mutating func advance(to now: Duration) -> [Action] {
        guard let deadline, now >= deadline, state != .done else { return [] }
        return finish("the invitation was not settled within \(secondsText(timeout))", nil)
    }

    private mutating func succeed(answering id: JSONRPCID, _ result: JSONValue, used: Bool, handle: String?) -> [Action] {
        state = .done
        deadline = nil
        return [.send(.response(id: id, result: result)), .admitted(used: used, handle: handle)]
    }

    private mutating func finish(_ reason: String, _ kind: InvitationRefusal.Kind?) -> [Action] {
        state = .done
        deadline = nil
        return [.failed(reason, refusal: kind)]
    }

    private mutating func fail(id: JSONRPCID, _ error: JSONRPCError, _ kind: InvitationRefusal.Kind?) -> [Action] {
        [.send(.failure(id: id, error))] + finish(error.message, kind)
    }

    package static func error(_ refusal: InvitationRefusal) -> JSONRPCError {
        JSONRPCError(JSONRPCError.invitationRefused, refusal.message, data: .object(["reason": .string(refusal.kind.description)]))
    }
}
