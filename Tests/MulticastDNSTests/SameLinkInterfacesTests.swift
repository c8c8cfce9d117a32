import DNSWire
import MulticastDNSCore
import Testing

/// A host with two interfaces on one link (a second NIC on the same switch): it hears on each
/// what it multicast on the other (RFC 6762 §14).
@Suite("Two interfaces on one link: our own packets come back")
struct SameLinkInterfacesTests {
    static let second = NetworkInterface(index: 3, name: "lan1b")
    static let firstLinkLocal = IPv6Address("fe80::1")!
    static let secondLinkLocal = IPv6Address("fe80::2")!

    /// "dual" on lan1 (IPv4 and IPv6 link-local) and on lan1b (IPv6 link-local only), both on
    /// the simulated link, which carries each interface's multicast to the other.
    func dualHomed(_ lan: SimulatedLAN) -> SimulatedLAN.Host {
        let dual = lan.addHost("dual")
        lan.setInterfaces(of: dual, [
            dual.interface: [.v4(dual.address), .v6(Self.firstLinkLocal, scope: dual.interface.index)],
            Self.second: [.v6(Self.secondLinkLocal, scope: Self.second.index)],
        ])
        return dual
    }

    @Test("probes and announcements heard on the other interface are no conflict: the host name is won at the first try and resolved with each interface's addresses")
    func ownPacketsAreNoConflict() throws {
        let lan = SimulatedLAN()
        let browser = lan.addHost("browser")
        let dual = dualHomed(lan)
        let ours = dual.core.register(registration("Dual Box"))
        lan.run(for: .seconds(3))
        #expect(dual.events.contains(.hostNameRegistered("dual.local.")))
        #expect(dual.core.hostName == "dual.local.")
        #expect(dual.core.name(of: ours) == instanceName("Dual Box"))
        #expect(!dual.core.hostNameOwnedElsewhere)
        // One round of three probes, 250 ms apart, not a new start every second (§8.1, §8.2).
        let probeTimes = Set(lan.wire.filter {
            $0.from == "dual" && $0.message.isProbe && $0.message.questions.contains { $0.name == "dual.local." }
        }.map(\.time)).sorted()
        #expect(probeTimes.count == 3)
        #expect(probeTimes.last.map { $0 - probeTimes[0] } == .milliseconds(500))
        // Each interface gives the addresses valid on it (§14).
        func hostRecords(on interface: String) -> [ResourceRecord] {
            lan.wire.filter { $0.from == "dual" && $0.interface == interface && $0.message.header.isResponse }
                .flatMap(\.message.allRecords).filter { $0.name == "dual.local." }
        }
        #expect(!hostRecords(on: "lan1b").isEmpty)
        #expect(hostRecords(on: "lan1b").allSatisfy { $0.data == .aaaa(Self.secondLinkLocal) })
        #expect(hostRecords(on: "lan1").contains { $0.data == .a(dual.address) })
        #expect(!hostRecords(on: "lan1").contains { $0.data == .aaaa(Self.secondLinkLocal) })
        // Another host resolves it.
        let a = browser.core.startQuery(name: "dual.local.", type: .a)
        let aaaa = browser.core.startQuery(name: "dual.local.", type: .aaaa)
        lan.run(for: .milliseconds(500))
        #expect(browser.liveRecords(a).map(\.data) == [.a(dual.address)])
        #expect(Set(browser.liveRecords(aaaa).map(\.data)) == [.aaaa(Self.firstLinkLocal), .aaaa(Self.secondLinkLocal)])
        // A real rival is still refused: it is renamed, we keep the name.
        let rival = lan.addHost("rival")
        let theirs = rival.core.register(registration("Dual Box", port: 2))
        lan.run(for: .seconds(4))
        #expect(rival.core.name(of: theirs) == instanceName("Dual Box (2)"))
        #expect(dual.core.name(of: ours) == instanceName("Dual Box"))
    }

    @Test("our own announcement heard on the other interface hands the host name to no one, and that interface still answers with its address")
    func ownAnnouncementKeepsHostName() throws {
        let lan = SimulatedLAN()
        let dual = lan.addHost("dual")
        // On the core alone: the LAN carries nothing between the two interfaces, so the name is
        // won; the copy of the announcement is then brought by hand.
        dual.core.setInterfaces([dual.interface: [.v4(dual.address)], Self.second: [.v6(Self.secondLinkLocal, scope: Self.second.index)]])
        _ = dual.core.register(registration("Box"))
        lan.run(for: .seconds(4))
        #expect(dual.core.hostName == "dual.local.")
        let announcement = try #require(lan.wire.last {
            $0.from == "dual" && $0.interface == "lan1" && $0.message.allRecords.contains { $0.data == .a(dual.address) }
        }?.message)
        let start = lan.now
        lan.inject(announcement, to: dual, from: dual.socketAddress, on: Self.second)
        lan.run(for: .seconds(2))
        #expect(!dual.core.hostNameOwnedElsewhere)
        #expect(dual.core.hostName == "dual.local.")
        let asker = SocketAddress(.v6(IPv6Address("fe80::50")!, scope: Self.second.index), port: SocketAddress.mdnsPort)
        lan.inject(Message(questions: [Question(name: "dual.local.", type: .aaaa)]), to: dual, from: asker, on: Self.second)
        lan.run(for: .milliseconds(100))
        let answers = lan.sent(by: dual, since: start).filter { $0.message.header.isResponse }.flatMap(\.message.answers)
        #expect(answers.contains { $0.name == "dual.local." && $0.data == .aaaa(Self.secondLinkLocal) })
    }

    @Test("another responder on this machine is still noticed on the interface its packets left by")
    func localResponderStillNoticed() throws {
        let lan = SimulatedLAN()
        let dual = dualHomed(lan)
        _ = dual.core.register(registration("Box"))
        lan.run(for: .seconds(3))
        #expect(!dual.core.hostNameOwnedElsewhere)
        // avahi-daemon here answers for our host name with our address: the multicast loop
        // brings that to us on lan1, from lan1's address (the engine drops only our own bytes).
        let avahi = Message(header: .response, answers: [
            ResourceRecord(name: "dual.local.", data: .a(dual.address), ttl: 120, cacheFlush: true),
        ])
        lan.inject(avahi, to: dual, from: dual.socketAddress, on: dual.interface)
        lan.run(for: .seconds(1))
        #expect(dual.core.hostNameOwnedElsewhere)
    }

    @Test("a packet we multicast is known again in every copy for two seconds: the loop's and one per other interface on the link")
    func sentPacketsKnownInEveryCopy() {
        var sent = SentPackets()
        let packet: [UInt8] = [0, 0, 0x84, 0, 0, 0, 0, 1, 0, 0, 0, 0]
        sent.note(packet, at: .seconds(10))
        sent.forget(before: .milliseconds(10_005))
        #expect(sent.contains(packet))  // the copy the multicast loop brought back
        #expect(sent.contains(packet))  // the copy the second interface heard: still ours
        #expect(!sent.contains(packet + [0]))  // anything else from this machine: another stack
        sent.forget(before: .milliseconds(12_001))
        #expect(!sent.contains(packet))
    }
}
