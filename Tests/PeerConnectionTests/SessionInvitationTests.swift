import Foundation
import PeerTrust
import Testing

@testable import PeerConnection

/// The invitation phase of a session: two session machines, the inviter's book answered by hand.
@Suite("session state machine: invitations")
struct SessionInvitationTests {
    typealias Action = SessionStateMachine.Action
    let helpers = SessionStateMachineTests()
    static let secret = [UInt8](repeating: 3, count: 16)
    static let handle = "VTPVXVR1"
    static let challenge = [UInt8](repeating: 0x42, count: 32)

    static func invitee() -> SessionStateMachine {
        var configuration = SessionStateMachine.Configuration()
        configuration.invitation = .init(role: .invitee(secret: secret, handle: handle))
        return SessionStateMachine(
            handshake: Handshake(role: .connecting, local: SessionStateMachineTests.local(SessionStateMachineTests.clientID, "Laptop"),
                                 remotePeerID: SessionStateMachineTests.serverID),
            configuration: configuration)
    }

    static func inviter(trusted: Bool = false) -> SessionStateMachine {
        var configuration = SessionStateMachine.Configuration()
        configuration.invitation = .init(role: .inviter(peerTrusted: trusted, challenge: challenge))
        return SessionStateMachine(
            handshake: Handshake(
                role: .accepting, local: SessionStateMachineTests.local(SessionStateMachineTests.serverID, "Build Box"),
                remotePeerID: SessionStateMachineTests.clientID, offersInvitations: true),
            configuration: configuration)
    }

    func methods(_ actions: [Action]) -> [String] {
        helpers.messages(actions).compactMap { if case .request(_, let method, _) = $0 { method } else { nil } }
    }

    @Test("invitee and inviter: open, challenge, proof, the book's yes, then initialize; the inviter admits without asking the app")
    func wholeSession() throws {
        var invitee = Self.invitee(), inviter = Self.inviter()
        let start = invitee.start(at: .zero)
        #expect(methods(start) == ["invitation/open"])
        _ = inviter.start(at: .zero)
        var atInviter = helpers.deliver(start, to: &inviter)
        #expect(atInviter.contains(.lookUpInvitation(handle: Self.handle, peer: SessionStateMachineTests.clientID)))
        atInviter = inviter.invitationLookedUp(nil, at: .milliseconds(1))
        var atInvitee = helpers.deliver(atInviter, to: &invitee)
        #expect(methods(atInvitee) == ["invitation/prove"])
        atInviter = helpers.deliver(atInvitee, to: &inviter)
        let proof = InvitationLink.proof(
            secret: Self.secret, inviter: SessionStateMachineTests.serverID, invitee: SessionStateMachineTests.clientID, challenge: Self.challenge)
        #expect(atInviter.contains(.redeemInvitation(handle: Self.handle, proof: proof, challenge: Self.challenge, peer: SessionStateMachineTests.clientID)))
        atInviter = inviter.invitationRedeemed(nil, at: .milliseconds(2))
        atInvitee = helpers.deliver(atInviter, to: &invitee)
        #expect(methods(atInvitee) == ["initialize"])
        atInviter = helpers.deliver(atInvitee, to: &inviter)
        #expect(!atInviter.contains { if case .invite = $0 { true } else { false } })
        #expect(helpers.opening(atInviter) != nil)
        atInvitee = helpers.deliver(atInviter, to: &invitee)
        #expect(helpers.opening(atInvitee) != nil)
        #expect(invitee.isEstablished && inviter.isEstablished)
    }

    @Test("a refusal from the book is written as -32005 with its reason, and both openings fail with the invitation's words")
    func refused() throws {
        var invitee = Self.invitee(), inviter = Self.inviter()
        _ = inviter.start(at: .zero)
        _ = helpers.deliver(invitee.start(at: .zero), to: &inviter)
        let atInviter = inviter.invitationLookedUp(InvitationRefusal(.expired, "this invitation expired at then"), at: .zero)
        guard case .failure(_, let error)? = helpers.messages(atInviter).first else { Issue.record("no error written"); return }
        #expect(error.code == JSONRPCError.invitationRefused && error.data?["reason"] == "expired")
        #expect(helpers.failure(atInviter)?.code == .invitation)
        let atInvitee = helpers.deliver(atInviter, to: &invitee)
        #expect(helpers.failure(atInvitee)?.code == .invitation)
        #expect(helpers.failure(atInvitee)?.message == "the inviter refused: this invitation expired at then")
        #expect(inviter.isClosed && invitee.isClosed)
    }

    @Test("an invitee the inviter trusts already: no book, no use, reported as not needed; initialize follows")
    func trusted() throws {
        var invitee = Self.invitee(), inviter = Self.inviter(trusted: true)
        _ = inviter.start(at: .zero)
        let atInviter = helpers.deliver(invitee.start(at: .zero), to: &inviter)
        #expect(atInviter.contains(.invitationNotNeeded(handle: Self.handle, peer: SessionStateMachineTests.clientID)))
        #expect(!atInviter.contains { if case .lookUpInvitation = $0 { true } else { false } })
        #expect(methods(helpers.deliver(atInviter, to: &invitee)) == ["initialize"])
    }

    @Test("a listener that takes no invitations answers one with notOffered; an inviter whose invitee stalls fails at the exchange's deadline")
    func notOfferedAndStalled() throws {
        var plain = SessionStateMachine(
            handshake: Handshake(
                role: .accepting, local: SessionStateMachineTests.local(SessionStateMachineTests.serverID, "Build Box"),
                remotePeerID: SessionStateMachineTests.clientID))
        var invitee = Self.invitee()
        _ = plain.start(at: .zero)
        let answer = helpers.deliver(invitee.start(at: .zero), to: &plain)
        guard case .failure(_, let error)? = helpers.messages(answer).first else { Issue.record("no error written"); return }
        #expect(error.data?["reason"] == "notOffered")
        #expect(helpers.failure(helpers.deliver(answer, to: &invitee))?.message.contains("takes no invitations") == true)

        var inviter = Self.inviter()
        _ = inviter.start(at: .zero)
        var stalling = Self.invitee()
        _ = helpers.deliver(stalling.start(at: .zero), to: &inviter)
        _ = inviter.invitationLookedUp(nil, at: .zero)
        #expect(inviter.deadline == .seconds(10))
        let late = inviter.advance(to: .seconds(10))
        #expect(helpers.failure(late)?.code == .handshake)
        #expect(inviter.isClosed)
    }
}
