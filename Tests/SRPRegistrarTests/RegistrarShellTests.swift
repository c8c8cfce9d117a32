import DNSWire
import Testing

@testable import MulticastDNSCore
@testable import SRPRegistrar

/// The registrar shell's own decisions, as values: which replies wait for the link, which
/// addresses the link is told.
@Suite("SRP registrar shell: held replies, advertisable addresses")
struct RegistrarShellTests {
    static let host: DomainName = "boxed.default.service.arpa."
    static let other: DomainName = "other.default.service.arpa."

    func key(_ name: DomainName, _ serial: Int) -> RegistrationKey { RegistrationKey(name: name, serial: serial) }

    /// A reply that goes nowhere (the path is only carried).
    func reply(_ id: UInt16) -> Message { Message(header: Header(id: id)) }

    @Test("a reply waits for every name it acknowledges; a conflict on one of its host's names takes it for a refusal; a deadline lets it go")
    func heldReplies() {
        var held = HeldReplies<String>()
        let path = "nowhere"
        held.hold(reply(1), path: path, host: Self.host, arrived: .zero, waiting: [key(Self.host, 1), key("Boxed._openagents._tcp.default.service.arpa.", 2)], until: .seconds(3))
        held.hold(reply(2), path: path, host: Self.other, arrived: .zero, waiting: [key(Self.other, 3)], until: .seconds(5))
        #expect(held.nextDeadline == .seconds(3))
        #expect(held.accepted(key(Self.host, 1)).isEmpty)
        #expect(held.accepted(key("Boxed._openagents._tcp.default.service.arpa.", 2)).map(\.message.header.id) == [1])
        #expect(held.refused(Self.host).isEmpty)
        #expect(held.due(at: .seconds(4)).isEmpty)
        #expect(held.refused(Self.other).map(\.message.header.id) == [2])
        held.hold(reply(3), path: path, host: Self.host, arrived: .zero, waiting: [key(Self.host, 4)], until: .seconds(9))
        #expect(held.due(at: .seconds(9)).map(\.message.header.id) == [3])
        #expect(held.nextDeadline == nil)
    }

    @Test("only addresses the link can use are advertised: not loopback, unspecified or link-local")
    func advertisable() throws {
        let addresses: [IPAddress] = [
            .v4(IPv4Address(198, 18, 2, 6)), .v4(IPv4Address(127, 0, 0, 1)), .v4(IPv4Address(169, 254, 3, 4)), .v4(IPv4Address(0, 0, 0, 0)),
            .v6(try #require(IPv6Address("fd6e:6272:2::6"))), .v6(try #require(IPv6Address("fe80::1"))), .v6(try #require(IPv6Address("::1"))),
            .v6(try #require(IPv6Address("::"))),
        ]
        #expect(LinkPublications.advertisable(addresses) == [.v4(IPv4Address(198, 18, 2, 6)), .v6(try #require(IPv6Address("fd6e:6272:2::6")))])
    }

    @Test("a name published again is a new registration; the old one's conflict forgets nothing of the new; the engine's IDs lead back to the name and its host")
    func publications() {
        var link = LinkPublications()
        let first = link.published(Self.host, id: RegistrationID(rawValue: 1), host: Self.host)
        let second = link.published(Self.host, id: RegistrationID(rawValue: 2), host: Self.host)
        #expect(first != second)
        #expect(link.registration(RegistrationID(rawValue: 2))?.key == second)
        link.forget(RegistrationID(rawValue: 1))
        #expect(link.registration(RegistrationID(rawValue: 2))?.host == Self.host)
        #expect(link.withdrawn(Self.host) == RegistrationID(rawValue: 2))
        #expect(link.withdrawn(Self.host) == nil)
        #expect(link.registration(RegistrationID(rawValue: 2)) == nil)
    }
}
