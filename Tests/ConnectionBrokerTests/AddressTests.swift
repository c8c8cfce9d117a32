import PeerTrust
import Testing

@testable import ConnectionBroker

/// Addresses as the broker holds them: parsed once, the family a case, the zone kept.
@Suite("broker: addresses, typed and merged")
struct AddressTests {
    func addresses(_ texts: [String]) -> [PeerAddress] { texts.compactMap(PeerAddress.init) }

    @Test("IP literals parse to their family; a zone stays with link-local IPv6, written as it was")
    func parsing() {
        guard case .v4? = PeerAddress("198.18.1.2") else { Issue.record("not IPv4"); return }
        guard case .v6(_, let zone)? = PeerAddress("fe80::1%eth0") else { Issue.record("not IPv6"); return }
        #expect(zone == "eth0")
        guard case .v6(_, let index)? = PeerAddress("fe80::1%3") else { Issue.record("not IPv6"); return }
        #expect(index == "3")
        guard case .v6(_, nil)? = PeerAddress("fd00::2") else { Issue.record("not IPv6 without a zone"); return }
        // Written back as connect(host:) takes it, IPv6 in its canonical form.
        #expect(PeerAddress("fe80:0:0::1%eth0")?.description == "fe80::1%eth0")
        #expect(PeerAddress("198.18.1.2")?.description == "198.18.1.2")
        // Not literals, or a zone where none belongs: not dialed.
        for text in ["buildbox.local", "", "198.18.1.2%eth0", "fe80::1%", "%eth0", "198.18.1", "fe80::1::2", "[fe80::1]"] {
            #expect(PeerAddress(text) == nil, "\(text)")
        }
    }

    @Test("what is no literal never becomes an address to dial, and the dial carries the announcement's addresses")
    func dialAddresses() {
        let parsed = ["fe80::1%lan0", "box.local", "198.18.1.2"].compactMap(PeerAddress.init)
        #expect(parsed.map(\.description) == ["fe80::1%lan0", "198.18.1.2"])
        let announcement = PeerAnnouncement(
            name: "Box", peerID: BrokerStateMachineTests.large.description, protocolVersion: "0.2.2", addresses: parsed, port: 9099)
        var local = BrokerStateMachineTests().broker(BrokerStateMachineTests.small)
        #expect(local.handle(.announced(announcement), at: .zero) == [.dial(BrokerStateMachineTests.large, addresses: parsed, port: 9099)])
    }

    @Test("merged: interfaces in name order, each address once")
    func merge() {
        let merged = AnnouncedInstances.merged([
            "wlan0": addresses(["198.18.2.2", "fe80::2%4"]),
            "eth0": addresses(["198.18.1.2", "fe80::1%2", "198.18.2.2"]),
        ])
        #expect(merged.map(\.description) == ["198.18.1.2", "fe80::1%2", "198.18.2.2", "fe80::2%4"])
        #expect(AnnouncedInstances.merged([:]).isEmpty)
    }

    @Test("an update replaces that interface's addresses; a loss on one interface keeps the others; the last loss withdraws")
    func instances() {
        var table = AnnouncedInstances()
        let box = PeerAnnouncement(name: "Box", peerID: nil, protocolVersion: "0.2.2", addresses: [], port: 9099)
        #expect(table.seen(box, on: "eth0", at: addresses(["198.18.1.2"])).addresses == addresses(["198.18.1.2"]))
        #expect(table.seen(box, on: "wlan0", at: addresses(["198.18.2.2"])).addresses == addresses(["198.18.1.2", "198.18.2.2"]))
        // Moved to a new address on eth0: the old one is gone, not accumulated.
        #expect(table.seen(box, on: "eth0", at: addresses(["198.18.1.9"])).addresses == addresses(["198.18.1.9", "198.18.2.2"]))
        #expect(table.named("Box").first?.addresses == addresses(["198.18.1.9", "198.18.2.2"]))
        // Lost where it was never seen: nothing to tell.
        #expect(table.lost("Box", on: "lan7") == nil)
        #expect(table.lost("Other", on: "eth0") == nil)
        var left = box
        left.addresses = addresses(["198.18.2.2"])
        #expect(table.lost("Box", on: "eth0") == .announced(left))
        #expect(table.lost("Box", on: "wlan0") == .withdrawn(name: "Box"))
        #expect(table.named("Box").isEmpty && table.announcements.isEmpty)
    }

    @Test("two instances with one name in two domains (the link and a DNS zone) are two announcements; losing one keeps the other")
    func sameNameTwoDomains() {
        var table = AnnouncedInstances()
        let onLink = PeerAnnouncement(name: "Box", peerID: "a", protocolVersion: "0.2.2", addresses: [], port: 9099)
        let inZone = PeerAnnouncement(name: "Box", domain: "lab.example.test.", peerID: "b", protocolVersion: "0.2.2", addresses: [], port: 9100)
        _ = table.seen(inZone, on: "lab.example.test.", at: addresses(["198.18.2.7"]))
        _ = table.seen(onLink, on: "eth0", at: addresses(["198.18.1.2"]))
        #expect(table.announcements.count == 2)
        // The link's first, then the zones.
        #expect(table.named("Box").map(\.peerID) == ["a", "b"])
        #expect(table.named("Box").map(\.addresses) == [addresses(["198.18.1.2"]), addresses(["198.18.2.7"])])
        #expect(table.lost("Box", in: "lab.example.test.", on: "lab.example.test.") == .withdrawn(name: "Box", domain: "lab.example.test."))
        #expect(table.named("Box").map(\.peerID) == ["a"])
        // The machine withdraws only the peer announced in that domain.
        #expect(table.lost("Box", on: "eth0") == .withdrawn(name: "Box"))
    }
}
