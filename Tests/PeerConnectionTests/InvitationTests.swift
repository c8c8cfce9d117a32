import Foundation
import NearbyBasics
import Testing

@testable import PeerConnection
@testable import PeerTrust

/// The invitation link, the book of invitations and the exchange, without a channel: values and
/// pure machines, time given by hand.
@Suite("invitations: the link, the book, the exchange")
struct InvitationTests {
    static let inviter = PeerID(bytes: sha256(Array("inviter".utf8)))!
    static let invitee = PeerID(bytes: sha256(Array("invitee".utf8)))!
    static let secret = Array(UInt8(0)..<16)
    static let id: [UInt8] = [0xDE, 0xAD, 0xBE, 0xEF, 0x01]
    static let challenge = [UInt8](repeating: 0xAA, count: 32)
    static let now = Date(timeIntervalSince1970: 1_800_000_000)

    static func link(expires: Date = now + 600, addresses: [String] = ["198.18.1.1:9099"]) throws -> InvitationLink {
        try InvitationLink(
            peerID: inviter, id: id, secret: secret, expires: expires, addresses: try addresses.map { try InvitationLink.Address(parsing: $0) })
    }

    // MARK: The link

    @Test("test vectors: the ID's and the secret's text and the proof, as Documentation/Protocols.md defines them (computed independently with Python's hashlib and hmac)")
    func vectors() throws {
        let link = try Self.link()
        #expect(link.handle == "VTPVXVR1")
        #expect(hexString(InvitationLink.proof(secret: Self.secret, inviter: Self.inviter, invitee: Self.invitee, challenge: Self.challenge))
            == "2878ac615ed53db1762168b7f6e9e77fa42af1348c6033e591ee9a6aa18732a0")
        #expect(link.text.split(separator: "/")[2] == "VTPVXVR1")
        #expect(link.text.split(separator: "/")[3] == "000G40R40M30E209185GR38E1W")
    }

    @Test("a link's text reads back to the same fields: IPv4, IPv6 without brackets (port after the last colon), a DNS name")
    func roundTrip() throws {
        let link = try Self.link(addresses: ["198.18.1.1:9099", "[fd7a:115c:a1e0::7]:9100", "buildbox.local:9099"])
        let text = link.text
        #expect(text.hasPrefix("NEARBY:1/\(Self.inviter.description.filter { $0 != "-" })/VTPVXVR1/000G40R40M30E209185GR38E1W/1800000600/"))
        #expect(text.hasSuffix("/198.18.1.1:9099/FD7A:115C:A1E0::7:9100/BUILDBOX.LOCAL:9099"))
        let read = try InvitationLink(parsing: text)
        #expect(read == link)
        #expect(read.addresses.map(\.description) == ["198.18.1.1:9099", "[fd7a:115c:a1e0::7]:9100", "buildbox.local:9099"])
        // Only upper-case letters, digits and :/.- (QR alphanumeric mode, no shell quoting).
        #expect(text.unicodeScalars.allSatisfy { "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789:/.-".unicodeScalars.contains($0) })
    }

    @Test("reading ignores case and finds the link inside other text: an app's URL, a chat line with quotes")
    func embedded() throws {
        let link = try Self.link()
        #expect(try InvitationLink(parsing: link.text.lowercased()) == link)
        #expect(try InvitationLink(parsing: "myapp://pair?invite=\(link.text)&from=chat") == link)
        #expect(try InvitationLink(parsing: "  here: '\(link.text)' \n") == link)
    }

    @Test("a damaged or foreign link says which part is wrong", arguments: [
        ("https://example.com/", "not a Nearby invitation"),
        ("NEARBY:2/AAAA", "version 2 of the invitation protocol; this nearby reads version 1"),
        ("NEARBY:X/AAAA", "no version"),
        ("NEARBY:1/ABC", "cut short"),
    ])
    func damaged(input: String, expected: String) {
        #expect(throws: PeerConnectionError.self) { try InvitationLink(parsing: input) }
        do {
            _ = try InvitationLink(parsing: input)
        } catch {
            #expect(error.code == .invalidInput)
            #expect(error.message.contains(expected), "\(error.message)")
        }
    }

    @Test("each field is checked: a typo in the peer ID (check character), a short secret, a bad expiry, an address without a port")
    func fields() throws {
        let fields = try Self.link().text.split(separator: "/", omittingEmptySubsequences: false).map(String.init)
        func refusal(_ index: Int, _ value: String) -> String {
            var changed = fields
            changed[index] = value
            do {
                _ = try InvitationLink(parsing: changed.joined(separator: "/"))
                return "accepted"
            } catch {
                return error.message
            }
        }
        var peerID = Array(fields[1])
        peerID[3] = peerID[3] == "A" ? "B" : "A"
        #expect(refusal(1, String(peerID)).contains("peer ID is damaged"))
        #expect(refusal(2, "VTPVX").contains("ID is damaged"))
        #expect(refusal(3, "000G40R40").contains("secret is damaged"))
        #expect(refusal(3, "000G40R40M30E209185GR38E1Z").contains("secret is damaged"))  // stray bits at the end
        #expect(refusal(4, "soon").contains("expiry"))
        #expect(refusal(5, "198.18.1.1").contains("has no port"))
        #expect(refusal(5, "198.18.1.1:70000").contains("out of range"))
        #expect(refusal(5, "bad_host:1").contains("is damaged"))
    }

    @Test("a link with two IPv4 addresses, a full IPv6 address and a .local name is a version-7 QR code at most (25 terminal lines)")
    func size() throws {
        let link = try Self.link(addresses: [
            "192.168.178.20:41234", "10.200.30.40:41234", "[fd7a:115c:a1e0:ab12:4843:cd96:6263:2a4b]:41234", "build-box.local:41234",
        ])
        // QR version 7 holds 224 alphanumeric characters at low correction, 178 at medium.
        #expect(link.text.count <= 224, "\(link.text.count): \(link.text)")
        let short = try Self.link(addresses: ["192.168.178.20:41234", "10.200.30.40:41234", "[fd7a:115c:a1e0::7]:41234"])
        #expect(short.text.count <= 178, "\(short.text.count): \(short.text)")
    }

    @Test("addresses given on the command line: a bare IPv6 address or a name takes the default port")
    func addressInput() throws {
        #expect(try InvitationLink.Address(parsing: "fd7a::1", defaultPort: 9099).description == "[fd7a::1]:9099")
        #expect(try InvitationLink.Address(parsing: "[fd7a::1]:80", defaultPort: 9099).description == "[fd7a::1]:80")
        #expect(try InvitationLink.Address(parsing: "Box.Tailnet.Example", defaultPort: 9099).description == "box.tailnet.example:9099")
        #expect(try InvitationLink.Address(parsing: "100.64.0.7:443", defaultPort: 9099).description == "100.64.0.7:443")
    }

    // MARK: The book

    func proof(_ invitee: PeerID = invitee, secret: [UInt8] = secret, challenge: [UInt8] = challenge) -> [UInt8] {
        InvitationLink.proof(secret: secret, inviter: Self.inviter, invitee: invitee, challenge: challenge)
    }

    @Test("the book: the right proof takes a use; a second invitee finds it used up; the same invitee again takes none")
    func uses() throws {
        let link = try Self.link()
        var book = InvitationBook()
        book.add(link, uses: 1)
        #expect(book.check(link.handle, at: Self.now) == nil)
        let first = book.redeem(link.handle, proof: proof(), invitee: Self.invitee, challenge: Self.challenge, at: Self.now)
        #expect(try first.get().usesLeft == 0 && first.get().again == false)
        #expect(book.check(link.handle, at: Self.now)?.kind == .usedUp)
        let other = PeerID(bytes: sha256(Array("other".utf8)))!
        let second = book.redeem(link.handle, proof: proof(other), invitee: other, challenge: Self.challenge, at: Self.now)
        #expect(second.failure?.kind == .usedUp)
        let again = book.redeem(link.handle, proof: proof(), invitee: Self.invitee, challenge: Self.challenge, at: Self.now)
        #expect(try again.get().again == true)
        #expect(book.allOver(at: Self.now))
    }

    @Test("the book: three wrong proofs make an invitation void, for the right secret too; each refusal says how many are left")
    func void() throws {
        let link = try Self.link()
        var book = InvitationBook(maximumWrongProofs: 3)
        book.add(link, uses: 5)
        let wrong = proof(secret: [UInt8](repeating: 7, count: 16))
        let messages = (1...3).map { _ in
            book.redeem(link.handle, proof: wrong, invitee: Self.invitee, challenge: Self.challenge, at: Self.now).failure
        }
        #expect(messages.map(\.?.kind) == [.wrongProof, .wrongProof, .wrongProof])
        #expect(messages[0]?.message.contains("2 more wrong proofs make it void") == true)
        #expect(messages[2]?.message.contains("it is now void") == true)
        let right = book.redeem(link.handle, proof: proof(), invitee: Self.invitee, challenge: Self.challenge, at: Self.now)
        #expect(right.failure?.kind == .void)
        #expect(book.check(link.handle, at: Self.now)?.kind == .void)
    }

    @Test("the book: a proof made for another challenge (an earlier session) or for another key is wrong")
    func replay() throws {
        let link = try Self.link()
        var book = InvitationBook()
        book.add(link, uses: 1)
        let earlier = proof(challenge: [UInt8](repeating: 0x55, count: 32))
        #expect(book.redeem(link.handle, proof: earlier, invitee: Self.invitee, challenge: Self.challenge, at: Self.now).failure?.kind == .wrongProof)
        let other = PeerID(bytes: sha256(Array("other".utf8)))!
        #expect(book.redeem(link.handle, proof: proof(), invitee: other, challenge: Self.challenge, at: Self.now).failure?.kind == .wrongProof)
        #expect(try book.redeem(link.handle, proof: proof(), invitee: Self.invitee, challenge: Self.challenge, at: Self.now).get().usesLeft == 0)
    }

    @Test("the book: expired at its time, unknown when revoked or never made")
    func expiryAndRevocation() throws {
        let link = try Self.link(expires: Self.now + 10)
        var book = InvitationBook()
        book.add(link, uses: 1)
        #expect(book.check(link.handle, at: Self.now + 9) == nil)
        #expect(book.check(link.handle, at: Self.now + 10)?.kind == .expired)
        #expect(book.allOver(at: Self.now + 10))
        let revoked = book.revoke(link)
        #expect(revoked)
        #expect(book.check(link.handle, at: Self.now)?.kind == .unknown)
        #expect(book.check("00000000", at: Self.now)?.message.contains("revoked") == true)
    }

    // MARK: The exchange

    /// Runs both sides to the end: messages go across, the book answers the inviter's questions.
    func run(trusted: Bool = false, book: inout InvitationBook, secret: [UInt8] = secret, handle: String) -> (invitee: [InvitationExchange.Action], inviter: [InvitationExchange.Action]) {
        var invitee = InvitationExchange(role: .invitee(secret: secret), localID: Self.invitee, remoteID: Self.inviter, handle: handle)
        var inviter = InvitationExchange(role: .inviter(peerTrusted: trusted, challenge: Self.challenge), localID: Self.inviter, remoteID: Self.invitee)
        var seenByInvitee: [InvitationExchange.Action] = [], seenByInviter: [InvitationExchange.Action] = []
        var toInviter = invitee.start(at: .zero)
        var rounds = 0
        while !toInviter.isEmpty, rounds < 10 {
            rounds += 1
            seenByInvitee += toInviter
            var toInvitee: [InvitationExchange.Action] = []
            for case .send(let message) in toInviter {
                var answers = inviter.receive(message, at: .zero)
                // The shell's part: ask the book.
                while let question = answers.firstIndex(where: {
                    if case .lookUp = $0 { return true }
                    if case .redeem = $0 { return true }
                    return false
                }) {
                    let action = answers.remove(at: question)
                    seenByInviter.append(action)
                    switch action {
                    case .lookUp(let handle): answers += inviter.lookedUp(book.check(handle, invitee: Self.invitee, at: Self.now), at: .zero)
                    case .redeem(let handle, let proof, let challenge):
                        answers += inviter.redeemed(book.redeem(handle, proof: proof, invitee: Self.invitee, challenge: challenge, at: Self.now).failure, at: .zero)
                    default: break
                    }
                }
                seenByInviter += answers
                toInvitee += answers
            }
            toInviter = []
            for case .send(let message) in toInvitee { toInviter += invitee.receive(message, at: .zero) }
        }
        return (seenByInvitee, seenByInviter)
    }

    @Test("the exchange: open, challenge, proof, yes; both sides end admitted, and the secret itself is never sent")
    func exchange() throws {
        let link = try Self.link()
        var book = InvitationBook()
        book.add(link, uses: 1)
        let (invitee, inviter) = run(book: &book, handle: link.handle)
        #expect(invitee.contains(.admitted(used: true, handle: nil)))
        #expect(inviter.contains(.admitted(used: true, handle: nil)))
        let sent = (invitee + inviter).compactMap { action -> String? in
            if case .send(let message) = action { return message.jsonText }
            return nil
        }
        #expect(sent.count == 4)
        #expect(!sent.contains { $0.contains(hexString(Self.secret)) || $0.contains(CrockfordBase32.encode(Self.secret)) })
        #expect(book.check(link.handle, at: Self.now)?.kind == .usedUp)
    }

    @Test("the exchange: an invitee trusted already is let in at once, and nothing is used up")
    func trusted() throws {
        let link = try Self.link()
        var book = InvitationBook()
        book.add(link, uses: 1)
        let (invitee, inviter) = run(trusted: true, book: &book, handle: link.handle)
        #expect(invitee.contains(.admitted(used: false, handle: nil)))
        #expect(inviter.contains(.admitted(used: false, handle: link.handle)))
        #expect(book.check(link.handle, at: Self.now) == nil)
    }

    @Test("the exchange: the inviter's refusal reaches the invitee with its reason (a wrong secret; then used up)")
    func refusals() throws {
        let link = try Self.link()
        var book = InvitationBook()
        book.add(link, uses: 1)
        let (invitee, _) = run(book: &book, secret: [UInt8](repeating: 9, count: 16), handle: link.handle)
        let failure = invitee.compactMap { action -> (String, InvitationRefusal.Kind?)? in
            if case .failed(let reason, let kind) = action { return (reason, kind) }
            return nil
        }.first
        #expect(failure?.1 == .wrongProof)
        #expect(failure?.0.contains("the proof does not match") == true)
        _ = run(book: &book, handle: link.handle)
        let other = run(book: &book, handle: link.handle).invitee
        // The same invitee key comes back: the same acceptance, let in again.
        #expect(other.contains(.admitted(used: true, handle: nil)))
    }

    @Test("the exchange: an invitee that never proves is failed at the deadline; malformed params are refused")
    func deadlineAndMalformed() {
        var inviter = InvitationExchange(role: .inviter(peerTrusted: false, challenge: Self.challenge), localID: Self.inviter, remoteID: Self.invitee, timeout: .seconds(10))
        #expect(inviter.receiveOpen(id: .string("x"), params: .object(["invitation": "zz"]), at: .zero).contains { action in
            if case .failed(let reason, nil) = action { return reason.contains("8 characters") }
            return false
        })
        var waiting = InvitationExchange(role: .inviter(peerTrusted: false, challenge: Self.challenge), localID: Self.inviter, remoteID: Self.invitee, timeout: .seconds(10))
        _ = waiting.receiveOpen(id: .string("x"), params: .object(["invitation": "VTPVXVR1"]), at: .zero)
        _ = waiting.lookedUp(nil, at: .zero)
        #expect(waiting.advance(to: .seconds(9)).isEmpty)
        #expect(waiting.advance(to: .seconds(10)) == [.failed("the invitation was not settled within 10 s", refusal: nil)])
    }
}

extension Result {
    var failure: Failure? {
        if case .failure(let error) = self { return error }
        return nil
    }
}
