import PeerTrust
import Testing

@testable import PeerConnection

/// The `initialize` exchange, both sides, driven by hand: no sockets, no clock but the one
/// passed in.
extension Handshake {
    /// A message that arrives at time zero (the tests that care about time say when).
    mutating func receive(_ message: JSONRPCMessage) -> [Action] { receive(message, at: .zero) }
}

@Suite("initialize handshake")
struct HandshakeTests {
    // Peer IDs are hashes of keys; any 32 bytes make one.
    static let clientID = PeerID(bytes: [UInt8](repeating: 0xC1, count: 32))!
    static let serverID = PeerID(bytes: [UInt8](repeating: 0x5E, count: 32))!

    func local(_ id: PeerID, _ name: String, version: String = "0.2.2") -> Handshake.Local {
        Handshake.Local(
            peerID: id, displayName: name, protocolVersion: ProtocolVersion(version) ?? ProtocolVersion(major: 0),
            info: .object(["name": .string("nearby"), "title": .string("Nearby"), "version": .string("0.1.0")]))
    }

    func client(version: String = "0.2.2") -> Handshake {
        Handshake(role: .connecting, local: local(Self.clientID, "Laptop", version: version), remotePeerID: Self.serverID)
    }

    func server(version: String = "0.2.2", peer: PeerID = clientID) -> Handshake {
        Handshake(role: .accepting, local: local(Self.serverID, "Build Box", version: version), remotePeerID: peer)
    }

    /// The messages among `actions` that are to be sent.
    func sent(_ actions: [Handshake.Action]) -> [JSONRPCMessage] {
        actions.compactMap { if case .send(let message) = $0 { message } else { nil } }
    }

    func errorCode(_ actions: [Handshake.Action]) -> Int? {
        for case .failure(_, let error) in sent(actions) { return error.code }
        return nil
    }

    func closes(_ actions: [Handshake.Action]) -> String? {
        for case .close(let reason) in actions { return reason }
        return nil
    }

    @Test("the connecting side asks, the app on the accepting side accepts, both are established with each other's info")
    func accepted() throws {
        var a = client()
        var b = server()
        let request = try #require(sent(a.start(at: .zero)).first)
        guard case .request(_, "initialize", let params?) = request else { Issue.record("not initialize: \(request)"); return }
        #expect(params["protocol_version"] == .string("0.2.2"))
        #expect(params["_meta"]?["peer_id"] == .string(Self.clientID.description))
        #expect(params["client_info"]?["name"] == .string("nearby"))
        #expect(b.start(at: .zero).isEmpty)
        // Round trip through the wire format, as the connection will do.
        let arriving = try #require(JSONRPCFrame(parsing: request.jsonText).messages.first)
        let invitation = b.receive(arriving)
        guard case .invite(let hello)? = invitation.first else { Issue.record("no invitation: \(invitation)"); return }
        #expect(hello.peerID == Self.clientID && hello.displayName == "Laptop")
        #expect(hello.protocolVersion == ProtocolVersion(major: 0, minor: 2, patch: 2))
        #expect(!b.isEstablished)
        let accepted = b.decide(accept: true, at: .seconds(1))
        #expect(accepted.contains(.established(hello)))
        #expect(b.isEstablished)
        let answer = try #require(sent(accepted).first)
        guard case .response(_, let result) = answer else { Issue.record("not a response: \(answer)"); return }
        for key in ["protocol_version", "agent_capabilities", "auth_methods", "agent_info", "_meta"] { #expect(result[key] != nil, "\(key)") }
        let done = a.receive(try #require(JSONRPCFrame(parsing: answer.jsonText).messages.first))
        guard case .established(let server)? = done.first else { Issue.record("client not established: \(done)"); return }
        #expect(server.peerID == Self.serverID && server.displayName == "Build Box" && server.info["title"] == .string("Nearby"))
        // From now on messages are the app's.
        let ping = JSONRPCMessage.request(id: .integer(1), method: "ping", params: nil)
        #expect(b.receive(ping) == [.deliver(ping)])
        #expect(a.receive(.notification(method: "tick", params: nil)) == [.deliver(.notification(method: "tick", params: nil))])
        #expect(errorCode(b.receive(.request(id: .integer(2), method: "initialize", params: .object([:])))) == JSONRPCError.invalidRequest)
    }

    @Test("before initialize, a request gets -32002 and the connection lives on; a notification is dropped")
    func nothingBeforeInitialize() {
        var b = server()
        _ = b.start(at: .zero)
        let early = b.receive(.request(id: .string("x"), method: "ping", params: nil))
        #expect(errorCode(early) == JSONRPCError.notInitialized)
        #expect(closes(early) == nil)
        #expect(b.receive(.notification(method: "tick", params: nil)).isEmpty)
        // The peer may still initialize afterwards.
        let late = b.receive(.request(id: .integer(0), method: "initialize", params: .object(["protocol_version": .string("0.2.5")])))
        guard case .invite? = late.first else { Issue.record("\(late)"); return }
    }

    @Test("a peer that says nothing for 5 s is closed with a reason; so is a server that never answers")
    func timeouts() {
        var b = server()
        _ = b.start(at: .seconds(10))
        #expect(b.deadline == .seconds(15))
        #expect(b.advance(to: .milliseconds(14_999)).isEmpty)
        #expect(closes(b.advance(to: .seconds(15)))?.contains("no initialize within") == true)
        var a = client()
        _ = a.start(at: .zero)
        #expect(closes(a.advance(to: .seconds(5)))?.contains("no answer to initialize") == true)
    }

    @Test("incompatible versions: -32001 naming both, then close, on either side")
    func incompatible() throws {
        var a = client(version: "0.3.0")
        var b = server(version: "0.2.2")
        let request = try #require(sent(a.start(at: .zero)).first)
        _ = b.start(at: .zero)
        let refused = b.receive(request)
        let error = try #require(sent(refused).first)
        guard case .failure(_, let failure) = error else { Issue.record("\(refused)"); return }
        #expect(failure.code == JSONRPCError.incompatibleVersion)
        #expect(failure.message.contains("0.3.0") && failure.message.contains("0.2.2"))
        #expect(closes(refused) != nil)
        #expect(closes(a.receive(error))?.contains("refused our protocol version") == true)
        // A server that answers with an incompatible version is refused by the client too.
        var c = client(version: "1.0")
        _ = c.start(at: .zero)
        let answer = JSONRPCMessage.response(id: .integer(0), result: .object(["protocol_version": .string("2.0")]))
        #expect(closes(c.receive(answer))?.contains("not compatible") == true)
    }

    @Test("declined, or not decided within 30 s: -32003 and close; the connecting side says it was declined")
    func declined() throws {
        var a = client()
        var b = server()
        let request = try #require(sent(a.start(at: .zero)).first)
        _ = b.start(at: .zero)
        _ = b.receive(request)
        let no = b.decide(accept: false, at: .seconds(1))
        #expect(errorCode(no) == JSONRPCError.declined && closes(no) != nil)
        #expect(closes(a.receive(try #require(sent(no).first)))?.contains("declined") == true)

        var slow = server()
        _ = slow.start(at: .zero)
        _ = slow.receive(request)
        #expect(slow.deadline == .seconds(30))
        #expect(slow.advance(to: .seconds(29)).isEmpty)
        let expired = slow.advance(to: .seconds(30))
        #expect(errorCode(expired) == JSONRPCError.declined && closes(expired) != nil)
        // A decision that comes too late changes nothing.
        #expect(slow.decide(accept: true, at: .seconds(31)).isEmpty)
    }

    @Test("a _meta.peer_id that is not the certificate's, or unusable params: -32602 and close")
    func badInitialize() {
        let cases: [JSONValue?] = [
            .object(["protocol_version": .string("0.2.2"), "_meta": .object(["peer_id": .string("SOMEONEELSE")])]),
            .object(["protocol_version": .string("0.2.2"), "_meta": .string("x")]),
            .object(["protocol_version": .string("zero")]),
            .object(["protocol_version": .integer(2)]),
            .object([:]),
            .array([.string("0.2.2")]),
            nil,
        ]
        for params in cases {
            var b = server()
            _ = b.start(at: .zero)
            let actions = b.receive(.request(id: .integer(0), method: "initialize", params: params))
            #expect(errorCode(actions) == JSONRPCError.invalidParams, "\(String(describing: params))")
            #expect(closes(actions) != nil)
            #expect(!actions.contains { if case .invite = $0 { true } else { false } })
        }
        // The certificate's own peer ID in _meta is fine.
        var b = server()
        _ = b.start(at: .zero)
        let ok = b.receive(.request(id: .integer(0), method: "initialize",
                                    params: .object(["protocol_version": .string("0.2"), "_meta": .object(["peer_id": .string(Self.clientID.description)])])))
        guard case .invite? = ok.first else { Issue.record("\(ok)"); return }
    }

    @Test("a person is asked: the accepting side says so and by when; the connecting side waits that long (plus slack), not its 5 s")
    func waitingForAPerson() throws {
        var a = client()
        var b = server()
        let request = try #require(sent(a.start(at: .zero)).first)
        _ = b.start(at: .zero)
        _ = b.receive(request, at: .seconds(1))
        // The server's invitation is due at 31 s; asked at 1 s, it announces 30 s.
        let told = b.announceWaiting(reason: "someone there decides", at: .seconds(1))
        let notice = try #require(sent(told).first)
        guard case .notification(Handshake.waitingMethod, let params?) = notice else { Issue.record("\(told)"); return }
        #expect(params["timeout_ms"] == .integer(30_000))
        // Through the wire format, as the connection carries it.
        let arriving = try #require(JSONRPCFrame(parsing: notice.jsonText).messages.first)
        let waiting = a.receive(arriving, at: .seconds(1))
        #expect(waiting == [.waiting(.seconds(30))])
        #expect(a.deadline == .seconds(33))
        // Past its own 5 s the client still waits; the answer at 20 s establishes it.
        #expect(a.advance(to: .seconds(6)).isEmpty)
        let accepted = b.decide(accept: true, at: .seconds(20))
        let answer = try #require(sent(accepted).first)
        guard case .established? = a.receive(answer, at: .seconds(20)).first else { Issue.record("client not established"); return }
        // Nothing to announce once decided, nor before a decision is pending.
        #expect(b.announceWaiting(reason: "x", at: .seconds(21)).isEmpty)
        var fresh = server()
        _ = fresh.start(at: .zero)
        #expect(fresh.announceWaiting(reason: "x", at: .zero).isEmpty)
    }

    @Test("the connecting side's wait has a limit: a peer that announces hours, or announces again and again, gets at most admissionWaitLimit")
    func waitingIsBounded() {
        var a = Handshake(role: .connecting, local: local(Self.clientID, "Laptop"), remotePeerID: Self.serverID, admissionWaitLimit: .seconds(60))
        _ = a.start(at: .zero)
        let hours = JSONRPCMessage.notification(method: Handshake.waitingMethod, params: .object(["timeout_ms": .integer(36_000_000)]))
        #expect(a.receive(hours, at: .seconds(1)) == [.waiting(.seconds(60))])
        #expect(a.deadline == .seconds(63))
        // Again later: the deadline cannot pass start + 5 s + 60 s.
        _ = a.receive(hours, at: .seconds(50))
        #expect(a.deadline == .seconds(65))
        #expect(a.receive(hours, at: .seconds(64)).isEmpty)
        #expect(a.advance(to: .seconds(65)).contains(.close(reason: "no answer to initialize within 65 s")))
        // Nonsense is ignored; the deadline stays.
        var b = client()
        _ = b.start(at: .zero)
        for params: JSONValue? in [nil, .object(["timeout_ms": .integer(-5)]), .object(["timeout_ms": .string("10")]), .array([])] {
            #expect(b.receive(.notification(method: Handshake.waitingMethod, params: params), at: .seconds(1)).isEmpty)
        }
        #expect(b.deadline == .seconds(5))
        // The accepting side does not take it from a connecting peer.
        var c = server()
        _ = c.start(at: .zero)
        #expect(c.receive(hours, at: .zero).isEmpty && c.deadline == .seconds(5))
    }

    @Test("a refusal with a reason reaches the connecting side in its words; a bare decline is not repeated")
    func refusalReason() throws {
        var a = client()
        var b = server()
        let request = try #require(sent(a.start(at: .zero)).first)
        _ = b.start(at: .zero)
        _ = b.receive(request)
        let no = b.decide(accept: false, reason: "pair with it first", at: .seconds(1))
        #expect(closes(a.receive(try #require(sent(no).first))) == "the peer declined the connection: pair with it first (-32003)")

        var c = client()
        var d = server()
        _ = c.start(at: .zero)
        _ = d.start(at: .zero)
        _ = d.receive(request)
        let plain = d.decide(accept: false, at: .seconds(1))
        #expect(closes(c.receive(try #require(sent(plain).first))) == "the peer declined the connection (-32003)")
    }
}
