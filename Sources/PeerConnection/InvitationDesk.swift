#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import NearbyBasics
import PeerTrust

/// A listener's invitations at run time: the `InvitationBook` under a lock, the trust store
/// invitees are pinned in, and where each attempt is reported. Shared by every connection of
/// the listener; each call is one step under the lock.
final class InvitationDesk: Sendable {
    let store: TrustStore
    private let book: Locked<InvitationBook>
    private let report: @Sendable (InvitationAttempt) -> Void
    private let now: @Sendable () -> Date

    init(store: TrustStore, maximumWrongProofs: Int, now: @escaping @Sendable () -> Date = { Date() }, report: @escaping @Sendable (InvitationAttempt) -> Void) {
        self.store = store
        book = Locked(InvitationBook(maximumWrongProofs: maximumWrongProofs))
        self.now = now
        self.report = report
    }

    func add(_ link: InvitationLink, uses: Int) {
        book.withLockedValue { $0.add(link, uses: uses) }
    }

    @discardableResult
    func revoke(_ link: InvitationLink) -> Bool {
        book.withLockedValue { $0.revoke(link) }
    }

    /// Whether every invitation is over (used up, void or expired).
    var allOver: Bool {
        let now = self.now()
        return book.withLockedValue { $0.allOver(at: now) }
    }

    /// May `handle` be used? A refusal is reported.
    func lookUp(_ handle: String, peer: PeerID, name: String, address: String) -> InvitationRefusal? {
        let now = self.now()
        let (refusal, link) = book.withLockedValue { ($0.check(handle, invitee: peer, at: now), $0.link(for: handle)) }
        if let refusal {
            report(InvitationAttempt(invitation: link, peerID: peer, name: name, address: address, outcome: .refused(refusal)))
        }
        return refusal
    }

    /// Checks the proof and takes a use (one step under the lock); a refusal is reported, an
    /// acceptance only once the pin is written (``accepted(_:peer:name:address:)``).
    func redeem(
        _ handle: String, proof: [UInt8], challenge: [UInt8], peer: PeerID, name: String, address: String
    ) -> Result<(link: InvitationLink, usesLeft: Int, again: Bool), InvitationRefusal> {
        let now = self.now()
        let outcome = book.withLockedValue { $0.redeem(handle, proof: proof, invitee: peer, challenge: challenge, at: now) }
        if case .failure(let refusal) = outcome {
            let link = book.withLockedValue { $0.link(for: handle) }
            report(InvitationAttempt(invitation: link, peerID: peer, name: name, address: address, outcome: .refused(refusal)))
        }
        return outcome
    }

    func accepted(_ redeemed: (link: InvitationLink, usesLeft: Int, again: Bool), peer: PeerID, name: String, address: String) {
        report(InvitationAttempt(
            invitation: redeemed.link, peerID: peer, name: name, address: address,
            outcome: .accepted(usesLeft: redeemed.usesLeft, again: redeemed.again)))
    }

    func notNeeded(_ handle: String, peer: PeerID, name: String, address: String) {
        let link = book.withLockedValue { $0.link(for: handle) }
        report(InvitationAttempt(invitation: link, peerID: peer, name: name, address: address, outcome: .alreadyTrusted))
    }

    /// A pin could not be written after the proof held: the attempt failed after all.
    func pinFailed(_ link: InvitationLink, peer: PeerID, name: String, address: String, _ refusal: InvitationRefusal) {
        report(InvitationAttempt(invitation: link, peerID: peer, name: name, address: address, outcome: .refused(refusal)))
    }
}

/// Invitations on one connection: the connecting side uses one (``PeerConnection/accept(_:configuration:store:now:)``),
/// the accepting side takes them (a listener with an ``PeerListener/InvitationOffer``).
struct InvitationSetup: Sendable {
    enum Side: Sendable {
        case use(InvitationLink)
        case offer(InvitationDesk)
    }
    var side: Side
}
