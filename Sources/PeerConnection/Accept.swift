#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
import NIOPosix
public import PeerTrust

extension PeerConnection {
    /// Accepts an invitation: dials the link's addresses (happy-eyeballs style), accepts only
    /// the peer whose key hashes to the link's peer ID, proves the secret without revealing it,
    /// pins the inviter in `store` (the inviter pins us before it says yes), runs `initialize`,
    /// and returns the live connection.
    ///
    /// An invitee the inviter trusts already just connects: its invitation is not used up.
    ///
    /// - Parameters:
    ///   - invitation: the link (`InvitationLink.init(parsing:)`).
    ///   - configuration: this side's identity (required) and settings; TLS cannot be off. Its
    ///     trust policy is not consulted for the inviter: the link names the inviter's key.
    ///   - store: where the inviter is pinned, under the name in its certificate.
    ///   - now: the time to check the link's expiry against.
    /// - Throws: `PeerConnectionError`: `invitation` (refused by the inviter, with its reason;
    ///   expired; no address answered), `untrusted` (a different peer answered at every
    ///   address), `invalidInput` (no identity, or our own invitation), `cancelled`.
    public static func accept(
        _ invitation: InvitationLink, configuration: PeerConnectionConfiguration, store: TrustStore, now: Date = Date()
    ) async throws(PeerConnectionError) -> PeerConnection {
        guard let identity = configuration.identity, !configuration.insecure else {
            throw PeerConnectionError(.invalidInput, "accepting an invitation needs an identity and TLS (both keys are proven)")
        }
        guard invitation.peerID != identity.peerID else {
            throw PeerConnectionError(.invalidInput, "this is an invitation to ourselves (it names our own peer ID, \(identity.peerID.short))")
        }
        guard !invitation.hasExpired(at: now) else {
            throw PeerConnectionError(
                .invitation, "this invitation expired at \(InvitationBook.time(invitation.expires)) (by this machine's clock); ask for a new one")
        }
        let side = Setup.Side(
            role: .connecting, configuration: configuration, tls: nil, expected: invitation.peerID, requireTrust: false, decide: nil,
            host: "", invitation: InvitationSetup(side: .use(invitation)))
        let addresses = invitation.addresses
        let attempt: @Sendable (Int) async -> Result<PeerConnection, PeerConnectionError> = { index in
            await dialInvited(addresses[index], side: side)
        }
        let connection: PeerConnection
        // The inviter's refusal ends the race: the other addresses reach the same inviter, and
        // each try with a wrong secret would count towards voiding the invitation.
        switch await race(count: addresses.count, stagger: .milliseconds(250), atOnce: 8, isFinal: { $0.code == .invitation }, attempt: attempt) {
        case .won(let winner):
            connection = winner
        case .lost(let failures):
            throw summary(of: failures, invitation: invitation)
        }
        let leaf = connection.presentedChain.first
        let name = leaf.map { $0.commonName.isEmpty ? $0.subject : $0.commonName } ?? invitation.peerID.short
        let peerID = invitation.peerID
        do {
            try await NIOThreadPool.singleton.runIfActive { try store.pin(peerID, name: name) }
        } catch {
            _ = await connection.close(code: .serverError, reason: "could not pin the inviter")
            throw PeerConnectionError(.invitation, "the inviter admitted us, but it could not be pinned here: \(error)")
        }
        return connection
    }

    /// One dial to an invitation's address.
    private static func dialInvited(_ address: InvitationLink.Address, side: Setup.Side) async -> Result<PeerConnection, PeerConnectionError> {
        let configuration = side.configuration
        do {
            let connection = try await dial(host: address.host, port: address.port, side: side) { opening, open, channel, duration throws(PeerConnectionError) in
                guard case .initialized(let hello) = opening else { throw PeerConnectionError(.handshake, "the inviter paired instead of initializing") }
                return PeerConnection(
                    role: .connecting, peer: hello, proof: open.proof, channel: channel, session: open.session, streams: open.streams,
                    requestTimeout: configuration.requestTimeout, setupDuration: duration)
            }
            return .success(connection)
        } catch {
            return .failure(error)
        }
    }

    enum RaceOutcome: Sendable {
        case won(PeerConnection)
        /// Every attempt failed: why each one did, in the order of the attempts.
        case lost([(index: Int, error: PeerConnectionError)])
    }

    /// Runs `attempts` happy-eyeballs style: the first at once, the next `stagger` later (or at
    /// once when one fails), at most `atOnce` at a time; the first to succeed wins and the others
    /// are cancelled (or closed, when they succeed too). A failure for which `isFinal` is true
    /// ends the race at once.
    static func race(
        count: Int, stagger: Duration, atOnce: Int, isFinal: @escaping @Sendable (PeerConnectionError) -> Bool = { _ in false },
        attempt: @escaping @Sendable (Int) async -> Result<PeerConnection, PeerConnectionError>
    ) async -> RaceOutcome {
        enum Step: Sendable {
            case finished(Int, Result<PeerConnection, PeerConnectionError>)
            case tick
        }
        return await withTaskGroup(of: Step.self) { group in
            var next = 0, running = 0
            var failures: [(index: Int, error: PeerConnectionError)] = []
            var winner: PeerConnection?
            func launch() {
                guard next < count, running < atOnce else { return }
                let index = next
                next += 1
                running += 1
                group.addTask { .finished(index, await attempt(index)) }
                if next < count {
                    group.addTask {
                        try? await Task.sleep(for: stagger)
                        return .tick
                    }
                }
            }
            launch()
            while let step = await group.next() {
                switch step {
                case .tick:
                    if winner == nil { launch() }
                case .finished(_, .success(let connection)):
                    running -= 1
                    if winner == nil {
                        winner = connection
                        group.cancelAll()
                    } else {
                        _ = await connection.close(code: .normal, reason: "another address answered first")
                    }
                case .finished(let index, .failure(let error)):
                    running -= 1
                    failures.append((index, error))
                    if winner == nil, isFinal(error) {
                        next = count
                        group.cancelAll()
                    }
                    if winner == nil { launch() }
                }
            }
            if let winner { return .won(winner) }
            return .lost(failures.sorted { $0.index < $1.index })
        }
    }

    /// One error for a link none of whose addresses worked: the inviter's refusal if any said
    /// one, else an impostor at the address, else nothing reached.
    static func summary(of failures: [(index: Int, error: PeerConnectionError)], invitation: InvitationLink) -> PeerConnectionError {
        func at(_ index: Int) -> String { invitation.addresses.indices.contains(index) ? invitation.addresses[index].description : "?" }
        if let refused = failures.first(where: { $0.error.code == .invitation }) {
            return refused.error
        }
        if failures.contains(where: { $0.error.code == .cancelled }) {
            return PeerConnectionError(.cancelled, "accepting the invitation was cancelled")
        }
        if let impostor = failures.first(where: { $0.error.reasons.contains { $0.code == .peerIDMismatch } }) {
            let key = impostor.error.peerID?.description ?? "another key"
            return PeerConnectionError(
                .untrusted,
                "the peer at \(at(impostor.index)) is not the inviter: its key is \(key), the invitation is for \(invitation.peerID.short); nothing was sent to it")
        }
        let tried = invitation.addresses.map(\.description).joined(separator: ", ")
        if failures.allSatisfy({ $0.error.code == .unreachable || $0.error.code == .timeout }) {
            return PeerConnectionError(
                .invitation,
                "no address of the invitation answered (\(tried)): the inviter stopped, which revokes its invitations, or cannot be reached from here")
        }
        let first = failures.first { $0.error.code != .unreachable && $0.error.code != .timeout } ?? failures.first
        guard let first else { return PeerConnectionError(.invitation, "the invitation has no address to try") }
        return PeerConnectionError(first.error.code, "\(at(first.index)): \(first.error.message)", reasons: first.error.reasons, peerID: first.error.peerID)
    }
}
