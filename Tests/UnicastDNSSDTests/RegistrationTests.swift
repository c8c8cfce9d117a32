import DNSWire
import Testing

@testable import UnicastDNSSD

/// Registration by DNS UPDATE, driven by hand: each request's answer is made up by the test.
@Suite("unicast DNS: registration")
struct RegistrationTests {
    static let type = try! ServiceType(parsing: "_openagents._tcp.lab.example.test")
    static let registration = ServiceRegistration(instance: "Box", type: type, port: 9099, txt: try! DiscoveryInfo(["v=1"]))
    static let addresses: [IPAddress] = [.v4(IPv4Address(198, 18, 1, 1)), .v6(IPv6Address("fd6e:6272:1::1")!)]

    static func machine(server: DNSServer? = nil) -> RegistrationStateMachine {
        RegistrationStateMachine(registration: registration, hostLabel: "box", addresses: addresses, ownerToken: "0123456789abcdef", server: server)
    }

    static func reply(code: ResponseCode = .noError, answers: [ResourceRecord] = [], authorities: [ResourceRecord] = []) -> Result<Message, UnicastDNSError> {
        var header = Header(id: 1)
        header.isResponse = true
        header.responseCode = UInt8(code.rawValue)
        return .success(Message(header: header, answers: answers, authorities: authorities))
    }

    static let soa = ResourceRecord(
        name: "lab.example.test.",
        data: .soa(SOAData(primary: "ns.lab.example.test.", mailbox: "hostmaster.lab.example.test.", serial: 1, refresh: 3600, retry: 600, expire: 86400, minimum: 5)),
        ttl: 30)

    static func update(_ actions: [RegistrationStateMachine.Action]) -> DNSUpdate? {
        guard actions.count == 1, case .send(.update(let update)) = actions[0] else { return nil }
        return update
    }

    /// Runs the machine from the start to its first host update, answering zone and server questions.
    static func toHostUpdate(_ machine: inout RegistrationStateMachine) throws -> DNSUpdate {
        #expect(machine.start(at: .zero) == [.send(.query("lab.example.test.", .soa))])
        #expect(machine.handle(reply(answers: [soa]), at: .zero) == [.send(.query("_dns-update._udp.lab.example.test.", .srv))])
        let srv = ResourceRecord(name: "_dns-update._udp.lab.example.test.", data: .srv(SRVData(port: 5353, target: "ns.lab.example.test.")), ttl: 30)
        #expect(machine.handle(reply(answers: [srv]), at: .zero) == [.send(.query("ns.lab.example.test.", .a))])
        let address = ResourceRecord(name: "ns.lab.example.test.", data: .a(IPv4Address(198, 18, 1, 4)), ttl: 30)
        let host = try #require(update(machine.handle(reply(answers: [address]), at: .zero)))
        #expect(machine.server == DNSServer(.v4(IPv4Address(198, 18, 1, 4)), port: 5353))
        return host
    }

    /// A machine whose host and service updates both succeeded at time zero.
    static func registered() throws -> RegistrationStateMachine {
        var machine = machine()
        _ = try toHostUpdate(&machine)
        _ = machine.handle(reply(), at: .zero)
        _ = machine.handle(reply(), at: .zero)
        return machine
    }

    @Test("zone from the SOA, server from _dns-update._udp, then the host and the service, each only if its name is free")
    func happyPath() throws {
        var machine = Self.machine()
        let host = try Self.toHostUpdate(&machine)
        #expect(host.zone == "lab.example.test.")
        #expect(host.prerequisites == [ResourceRecord(name: "box.lab.example.test.", data: .unknown(.any, []), ttl: 0, class: .none)])
        #expect(host.changes.map(\.type) == [.txt, .a, .aaaa])
        let service = try #require(Self.update(machine.handle(Self.reply(), at: .zero)))
        #expect(service.prerequisites == [ResourceRecord(name: "Box._openagents._tcp.lab.example.test.", data: .unknown(.any, []), ttl: 0, class: .none)])
        #expect(service.changes.map(\.type) == [.srv, .txt, .ptr, .ptr])
        #expect(service.changes.contains { $0.name == ServiceType.enumerationName(in: "lab.example.test.") && $0.data == .ptr(Self.type.domainName) })
        #expect(service.changes.allSatisfy { $0.ttl == 30 })
        #expect(machine.handle(Self.reply(), at: .seconds(1)) == [.report(RegistrationEvent.registered("Box"))])
        #expect(machine.deadline == .seconds(25))
    }

    @Test("without _dns-update._udp the SOA's MNAME is the server; an AAAA is asked when there is no A")
    func primaryFromSOA() {
        var machine = Self.machine()
        _ = machine.start(at: .zero)
        _ = machine.handle(Self.reply(answers: [Self.soa]), at: .zero)
        #expect(machine.handle(Self.reply(code: .nameError), at: .zero) == [.send(.query("ns.lab.example.test.", .a))])
        #expect(machine.handle(Self.reply(), at: .zero) == [.send(.query("ns.lab.example.test.", .aaaa))])
        let v6 = ResourceRecord(name: "ns.lab.example.test.", data: .aaaa(IPv6Address("fd6e:6272:1::4")!), ttl: 30)
        #expect(Self.update(machine.handle(Self.reply(answers: [v6]), at: .zero)) != nil)
        #expect(machine.server?.description == "fd6e:6272:1::4")
    }

    @Test("a server given by the caller skips the look-up, but the zone still comes from the SOA (in the authority section too)")
    func givenServer() {
        var machine = Self.machine(server: DNSServer(.v4(IPv4Address(192, 0, 2, 1))))
        _ = machine.start(at: .zero)
        let update = Self.update(machine.handle(Self.reply(code: .nameError, authorities: [Self.soa]), at: .zero))
        #expect(update?.zone == "lab.example.test.")
    }

    @Test("no SOA anywhere: no such zone, said once, nothing else sent")
    func noZone() {
        var machine = Self.machine()
        _ = machine.start(at: .zero)
        let actions = machine.handle(Self.reply(code: .refused), at: .zero)
        guard case .report(.failed(let error)) = actions.first else {
            Issue.record("\(actions)")
            return
        }
        #expect(error.code == .noSuchZone)
        #expect(error.message.contains("lab.example.test"))
        #expect(actions.last == .finish)
    }

    @Test("a name held by someone else (YXDOMAIN, and its SRV is not ours) is renamed \"Box (2)\", never overwritten")
    func renamed() throws {
        var machine = Self.machine()
        _ = try Self.toHostUpdate(&machine)
        _ = machine.handle(Self.reply(), at: .zero)
        let reclaim = try #require(Self.update(machine.handle(Self.reply(code: .nameExists), at: .zero)))
        // Only if the SRV there is exactly ours (a run of ours that died) may we take it back.
        #expect(reclaim.prerequisites.count == 1 && reclaim.prerequisites[0].type == .srv && reclaim.prerequisites[0].class == .internet)
        let second = try #require(Self.update(machine.handle(Self.reply(code: .recordSetMissing), at: .zero)))
        #expect(second.prerequisites.first?.name == "Box\\ \\(2\\)._openagents._tcp.lab.example.test.")
        #expect(machine.handle(Self.reply(), at: .zero) == [.report(RegistrationEvent.registered("Box (2)"))])
    }

    @Test("our own records from a run that was killed are taken back under the same name")
    func reclaimed() throws {
        var machine = Self.machine()
        _ = try Self.toHostUpdate(&machine)
        _ = machine.handle(Self.reply(), at: .zero)
        let reclaim = try #require(Self.update(machine.handle(Self.reply(code: .nameExists), at: .zero)))
        #expect(reclaim.changes.first == ResourceRecord(name: "Box._openagents._tcp.lab.example.test.", data: .unknown(.txt, []), ttl: 0, class: .any))
        #expect(machine.handle(Self.reply(), at: .zero) == [.report(RegistrationEvent.registered("Box"))])
    }

    @Test("a host name with another owner's TXT is left alone: the next label is tried")
    func hostTaken() throws {
        var machine = Self.machine()
        _ = try Self.toHostUpdate(&machine)
        let owner = try #require(Self.update(machine.handle(Self.reply(code: .nameExists), at: .zero)))
        #expect(owner.prerequisites.first?.type == .txt)
        let next = try #require(Self.update(machine.handle(Self.reply(code: .recordSetMissing), at: .zero)))
        #expect(next.prerequisites.first?.name == "box-2.lab.example.test.")
        #expect(machine.hostName == "box-2.lab.example.test.")
    }

    @Test("each refusal of the first update fails the registration with its own line", arguments: [
        (ResponseCode.refused, "REFUSED"), (.notAuthoritative, "NOTAUTH"), (.notZone, "NOTZONE"), (.serverFailure, "SERVFAIL"),
    ])
    func refusals(code: ResponseCode, word: String) throws {
        var machine = Self.machine()
        _ = try Self.toHostUpdate(&machine)
        let actions = machine.handle(Self.reply(code: code), at: .zero)
        guard case .report(.failed(let error)) = actions.first else {
            Issue.record("\(actions)")
            return
        }
        #expect(error.message.contains(word), "\(error)")
        #expect(actions.last == .finish)
    }

    @Test("refreshed at 80 % of the TTL; a failed refresh says interrupted once, retries with backoff, then restored")
    func refresh() throws {
        var machine = try Self.registered()
        let host = try #require(Self.update(machine.advance(to: .seconds(24))))
        #expect(host.prerequisites.first?.type == .txt)
        let service = try #require(Self.update(machine.handle(Self.reply(), at: .seconds(24))))
        #expect(service.prerequisites.first?.type == .srv)
        #expect(machine.handle(Self.reply(), at: .seconds(24)).isEmpty)
        _ = machine.advance(to: .seconds(48))
        let failure = UnicastDNSError(.unreachable, "no answer from 198.18.1.4")
        let interrupted = machine.handle(.failure(failure), at: .seconds(48))
        #expect(interrupted == [.report(RegistrationEvent.interrupted("Box", failure))])
        #expect(machine.deadline == .seconds(50))
        _ = machine.advance(to: .seconds(50))
        #expect(machine.handle(.failure(failure), at: .seconds(50)).isEmpty)
        #expect(machine.deadline == .seconds(54))
        _ = machine.advance(to: .seconds(54))
        _ = machine.handle(Self.reply(), at: .seconds(54))
        #expect(machine.handle(Self.reply(), at: .seconds(54)) == [.report(RegistrationEvent.restored("Box"))])
    }

    @Test("new addresses or TXT are sent at once when registered")
    func changes() throws {
        var machine = try Self.registered()
        #expect(machine.update(addresses: Self.addresses, at: .seconds(1)).isEmpty)
        let host = try #require(Self.update(machine.update(addresses: [.v4(IPv4Address(198, 18, 1, 7))], at: .seconds(1))))
        #expect(host.changes.contains { $0.data == .a(IPv4Address(198, 18, 1, 7)) })
        let service = try #require(Self.update(machine.handle(Self.reply(), at: .seconds(1))))
        _ = service
        _ = machine.handle(Self.reply(), at: .seconds(1))
        _ = machine.update(info: try DiscoveryInfo(["v=2"]), at: .seconds(2))
        let next = try #require(Self.update(machine.handle(Self.reply(), at: .seconds(2))))
        #expect(next.changes.contains { $0.data == .txt(try! DiscoveryInfo(["v=2"]).txt) })
    }

    @Test("withdrawal: the service (if its SRV is ours), the type's enumeration PTR if no instance is left, the host if it is ours")
    func withdraw() throws {
        var machine = try Self.registered()
        let service = try #require(Self.update(machine.withdraw(at: .seconds(3))))
        #expect(service.prerequisites.first?.type == .srv)
        #expect(service.changes.first == ResourceRecord(name: "Box._openagents._tcp.lab.example.test.", data: .unknown(.any, []), ttl: 0, class: .any))
        let enumeration = try #require(Self.update(machine.handle(Self.reply(), at: .seconds(3))))
        #expect(enumeration.prerequisites == [ResourceRecord(name: Self.type.domainName, data: .unknown(.ptr, []), ttl: 0, class: .none)])
        // Another instance of the type remains: YXRRSET, and the PTR stays; the host goes next.
        let host = try #require(Self.update(machine.handle(Self.reply(code: .recordSetExists), at: .seconds(3))))
        #expect(host.changes == [ResourceRecord(name: "box.lab.example.test.", data: .unknown(.any, []), ttl: 0, class: .any)])
        #expect(machine.handle(Self.reply(), at: .seconds(3)) == [.report(RegistrationEvent.withdrawn("Box")), .finish])
        #expect(machine.deadline == nil)
    }

    @Test("a withdrawal asked for while a refresh is out waits for its answer, then withdraws")
    func withdrawDuringRefresh() throws {
        var machine = try Self.registered()
        _ = machine.advance(to: .seconds(24))
        #expect(machine.withdraw(at: .seconds(24)).isEmpty)
        let service = try #require(Self.update(machine.handle(Self.reply(), at: .seconds(24))))
        #expect(service.changes.first?.class == .any)
    }
}
