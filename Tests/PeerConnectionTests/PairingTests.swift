import NearbyBasics
import PeerTrust
import Testing

@testable import PeerConnection

/// The pairing exchange, both sides, driven by hand: messages pass through their wire form,
/// nonces and time are fixed by the test.
@Suite("pairing: commit, reveal, compare a code, pin only on two yeses")
struct PairingTests {
    static let laptop = PeerID(bytes: [UInt8](repeating: 0xA1, count: 32))!
    static let buildBox = PeerID(bytes: [UInt8](repeating: 0xB2, count: 32))!
    static let mallory = PeerID(bytes: [UInt8](repeating: 0x66, count: 32))!
    static let laptopNonce = [UInt8](repeating: 1, count: 32)
    static let buildBoxNonce = [UInt8](repeating: 2, count: 32)

    func initiator(nonce: [UInt8] = laptopNonce, local: PeerID = laptop, remote: PeerID = buildBox) -> PairingExchange {
        PairingExchange(role: .initiator, localID: local, remoteID: remote, localName: "Laptop", fallbackName: "cert name", nonce: nonce)
    }

    func responder(nonce: [UInt8] = buildBoxNonce, local: PeerID = buildBox, remote: PeerID = laptop) -> PairingExchange {
        PairingExchange(role: .responder, localID: local, remoteID: remote, localName: "Build Box", fallbackName: "cert name", nonce: nonce)
    }

    /// Sends `actions`' messages through JSON text, as the connection does.
    func wire(_ actions: [PairingExchange.Action]) throws -> [JSONRPCMessage] {
        var messages: [JSONRPCMessage] = []
        for case .send(let message) in actions {
            messages.append(try #require(JSONRPCFrame(parsing: message.jsonText).messages.first))
        }
        return messages
    }

    func deliver(_ actions: [PairingExchange.Action], to other: inout PairingExchange, at now: Duration = .zero) throws -> [PairingExchange.Action] {
        try wire(actions).flatMap { other.receive($0, at: now) }
    }

    func code(_ actions: [PairingExchange.Action]) -> String? {
        for case .showCode(let code, _) in actions { return code }
        return nil
    }

    func failure(_ actions: [PairingExchange.Action]) -> String? {
        for case .failed(let reason) in actions { return reason }
        return nil
    }

    func paired(_ actions: [PairingExchange.Action]) -> (code: String, name: String)? {
        for case .paired(let code, let name) in actions { return (code, name) }
        return nil
    }

    /// Runs an exchange up to the point where both sides show their code.
    func runToCodes(_ a: inout PairingExchange, _ b: inout PairingExchange) throws -> (String?, String?) {
        let request = a.start(at: .zero)
        let nonce = try deliver(request, to: &b)
        let reveal = try deliver(nonce, to: &a)
        let acknowledgement = try deliver(reveal, to: &b)
        let shown = try deliver(acknowledgement, to: &a)
        return (code(shown), code(acknowledgement))
    }

    @Test("the initiator's first message commits to its nonce without revealing it")
    func commitHidesNonce() throws {
        var a = initiator()
        let message = try #require(wire(a.start(at: .zero)).first)
        guard case .request(_, "pair/request", let params?) = message else { Issue.record("not pair/request: \(message)"); return }
        let commitment = try #require(params["commitment"]?.stringValue)
        #expect(commitment == hexString(PairingExchange.commitment(to: Self.laptopNonce)))
        #expect(!message.jsonText.contains(hexString(Self.laptopNonce)))
        #expect(params["display_name"] == .string("Laptop"))
    }

    @Test("both sides show the same six digits; both yeses pin on both sides, under the names the peers gave")
    func bothConfirm() throws {
        var a = initiator()
        var b = responder()
        let (codeA, codeB) = try runToCodes(&a, &b)
        let shown = try #require(codeA)
        #expect(shown == codeB)
        #expect(shown.count == 6 && shown.allSatisfy(\.isNumber))
        #expect(shown == PairingExchange.code(initiator: Self.laptop, responder: Self.buildBox, initiatorNonce: Self.laptopNonce, responderNonce: Self.buildBoxNonce))
        // A says yes first: nothing is pinned until B says yes too.
        let yesA = a.confirm(true, at: .seconds(3))
        #expect(paired(yesA) == nil)
        #expect(paired(try deliver(yesA, to: &b)) == nil)
        let yesB = b.confirm(true, at: .seconds(4))
        #expect(paired(yesB)?.name == "Laptop")
        #expect(paired(try deliver(yesB, to: &a))?.name == "Build Box")
        #expect(a.isOver && b.isOver)
    }

    @Test("a no on either side pins nothing on either side", arguments: [true, false])
    func noOnEitherSide(initiatorSaysNo: Bool) throws {
        var a = initiator()
        var b = responder()
        _ = try runToCodes(&a, &b)
        let yes = initiatorSaysNo ? b.confirm(true, at: .zero) : a.confirm(true, at: .zero)
        let no = initiatorSaysNo ? a.confirm(false, at: .zero) : b.confirm(false, at: .zero)
        #expect(paired(yes) == nil)
        #expect(failure(no)?.contains("declined here") == true)
        var received: [PairingExchange.Action] = []
        if initiatorSaysNo {
            received += try deliver(yes, to: &a)
            received += try deliver(no, to: &b)
        } else {
            received += try deliver(yes, to: &b)
            received += try deliver(no, to: &a)
        }
        #expect(paired(received) == nil)
        #expect(failure(received)?.contains("the other side") == true)
    }

    @Test("a reveal that does not match the commitment fails the pairing (-32004) before any code is shown")
    func wrongReveal() throws {
        var b = responder()
        let commitment = hexString(PairingExchange.commitment(to: Self.laptopNonce))
        _ = b.receive(.request(id: .string("r"), method: "pair/request", params: .object(["commitment": .string(commitment)])), at: .zero)
        let other = hexString([UInt8](repeating: 9, count: 32))
        let actions = b.receive(.request(id: .string("v"), method: "pair/reveal", params: .object(["nonce": .string(other)])), at: .zero)
        #expect(code(actions) == nil)
        #expect(failure(actions)?.contains("does not match the commitment") == true)
        let answer = try #require(wire(actions).first)
        guard case .failure(_, let error) = answer else { Issue.record("not an error: \(answer)"); return }
        #expect(error.code == JSONRPCError.pairingFailed)
    }

    @Test("a relay that holds another key towards each side makes the two codes differ, though every message passes")
    func relayInTheMiddle() throws {
        // The laptop believes Mallory's key is the build box's; the build box sees Mallory's key
        // as the laptop's. Mallory relays every message unchanged.
        var a = initiator(remote: Self.mallory)
        var b = responder(remote: Self.mallory)
        let (codeA, codeB) = try runToCodes(&a, &b)
        let seenByLaptop = try #require(codeA)
        let seenByBuildBox = try #require(codeB)
        #expect(seenByLaptop != seenByBuildBox)
    }

    @Test("codes depend on both nonces and both keys, and keep their leading zeros")
    func codeDerivation() {
        let base = PairingExchange.code(initiator: Self.laptop, responder: Self.buildBox, initiatorNonce: Self.laptopNonce, responderNonce: Self.buildBoxNonce)
        #expect(base != PairingExchange.code(initiator: Self.laptop, responder: Self.buildBox, initiatorNonce: Self.buildBoxNonce, responderNonce: Self.laptopNonce))
        #expect(base != PairingExchange.code(initiator: Self.buildBox, responder: Self.laptop, initiatorNonce: Self.laptopNonce, responderNonce: Self.buildBoxNonce))
        // Across many nonces every code is six digits, and they spread (no constant output).
        var seen: Set<String> = []
        for value in 0..<200 {
            let nonce = [UInt8](repeating: UInt8(value), count: 32)
            let code = PairingExchange.code(initiator: Self.laptop, responder: Self.buildBox, initiatorNonce: nonce, responderNonce: Self.buildBoxNonce)
            #expect(code.count == 6 && code.allSatisfy(\.isNumber))
            seen.insert(code)
        }
        #expect(seen.count > 190)
        #expect(seen.contains { $0.hasPrefix("0") })
    }

    @Test("a pairing not finished in time fails, on either side, at its deadline and not before")
    func timeout() throws {
        var a = initiator()
        var b = responder()
        _ = try runToCodes(&a, &b)
        #expect(a.advance(to: .seconds(59)).isEmpty)
        #expect(failure(a.advance(to: .seconds(60)))?.contains("within 60") == true)
        #expect(failure(b.advance(to: .seconds(60))) != nil)
    }

    @Test("other requests on a pairing connection are refused; a request, nonce or confirm that is malformed fails it")
    func malformed() throws {
        var b = responder()
        let missing = b.receiveRequest(id: .integer(1), params: .object([:]), at: .zero)
        #expect(failure(missing)?.contains("commitment") == true)

        var a = initiator()
        _ = a.start(at: .zero)
        let echo = a.receive(.request(id: .integer(7), method: "echo", params: nil), at: .zero)
        guard case .failure(let id, let error)? = try wire(echo).first else { Issue.record("no refusal: \(echo)"); return }
        #expect(id == .integer(7) && error.code == JSONRPCError.notInitialized)
        let shortNonce = a.receive(.response(id: PairingExchange.requestID, result: .object(["nonce": .string("abcd")])), at: .zero)
        #expect(failure(shortNonce)?.contains("nonce") == true)

        var c = initiator()
        var d = responder()
        _ = try runToCodes(&c, &d)
        let bad = c.receive(.notification(method: "pair/confirm", params: .object(["accept": .string("yes")])), at: .zero)
        #expect(failure(bad)?.contains("true or false") == true)
    }

    @Test("the peer's refusal (rate limit, another pairing) fails the initiator with the peer's words")
    func refusedByPeer() {
        var a = initiator()
        _ = a.start(at: .zero)
        let refusal = JSONRPCError(JSONRPCError.pairingFailed, "too many failed pairings")
        let actions = a.receive(.failure(id: PairingExchange.requestID, refusal), at: .zero)
        #expect(failure(actions)?.contains("too many failed pairings") == true)
    }

    @Test("the limiter: one pairing at a time; after 5 failures in 10 minutes, none until the oldest is 10 minutes old")
    func limiter() {
        var limiter = PairingLimiter()
        #expect(limiter.admit(at: .zero) == nil)
        #expect(limiter.admit(at: .seconds(1))?.contains("in progress") == true)
        limiter.finished(succeeded: false, at: .seconds(10))
        for minute in 1...4 {
            #expect(limiter.admit(at: .seconds(60 * minute)) == nil)
            limiter.finished(succeeded: false, at: .seconds(60 * minute + 10))
        }
        let refused = limiter.admit(at: .seconds(300))
        #expect(refused?.contains("too many failed pairings (5") == true)
        #expect(refused?.contains("try again in") == true)
        #expect(limiter.admit(at: .seconds(609)) != nil)
        // The first failure (at 10 s) is older than the window at 610 s.
        #expect(limiter.admit(at: .seconds(610)) == nil)
        limiter.finished(succeeded: true, at: .seconds(611))
        #expect(limiter.admit(at: .seconds(612)) == nil)
    }

    @Test("the accepting handshake hands a pair/request over only when pairing is offered and TLS proved a key")
    func handshakeOffersPairing() {
        let local = Handshake.Local(peerID: Self.buildBox, displayName: "Build Box", protocolVersion: ProtocolVersion(major: 0, minor: 2), info: .object([:]))
        let request = JSONRPCMessage.request(id: .integer(1), method: "pair/request", params: .object(["commitment": .string("00")]))
        var offering = Handshake(role: .accepting, local: local, remotePeerID: Self.laptop, offersPairing: true)
        _ = offering.start(at: .zero)
        #expect(offering.receive(request, at: .zero) == [.pair(id: .integer(1), params: .object(["commitment": .string("00")]))])
        #expect(offering.deadline == nil)
        #expect(offering.advance(to: .seconds(30)).isEmpty)

        var plain = Handshake(role: .accepting, local: local, remotePeerID: Self.laptop)
        _ = plain.start(at: .zero)
        guard case .send(.failure(_, let error))? = plain.receive(request, at: .zero).first else { Issue.record("not refused"); return }
        #expect(error.code == JSONRPCError.notInitialized)

        var insecure = Handshake(role: .accepting, local: local, remotePeerID: nil, offersPairing: true)
        _ = insecure.start(at: .zero)
        #expect(insecure.receive(request, at: .zero).allSatisfy { if case .pair = $0 { false } else { true } })
    }

    @Test("hex round trip; odd lengths and non-hex digits are refused")
    func hexCoding() {
        let sample: [UInt8] = [0, 1, 0x7F, 0x80, 0xFF]
        #expect(hexString(sample) == "00017f80ff")
        #expect(bytes(fromHex: "00017F80ff") == sample)
        #expect(bytes(fromHex: "abc") == nil)
        #expect(bytes(fromHex: "zz") == nil)
        #expect(bytes(fromHex: "") == [])
    }
}
