import PeerTrust
import Testing

@testable import ConnectionBroker

/// connect(host:port:)'s decisions, by hand: one connection per peer holds for dials by address.
@Suite("connecting by address")
struct ManualConnectTests {
    static func id(_ byte: UInt8) -> PeerID { PeerID(bytes: [UInt8](repeating: byte, count: 32))! }
    let a = Self.id(0x0a), b = Self.id(0x0b)

    func announcement(_ peer: PeerID?, _ addresses: [String], port: Int = 9099) -> PeerAnnouncement {
        PeerAnnouncement(name: "Box", peerID: peer?.description, protocolVersion: "0.1", addresses: addresses.compactMap(PeerAddress.init), port: port)
    }

    @Test("an address and port that a connected peer announces is answered by that connection, without a dial")
    func existingConnection() {
        let announced = [announcement(a, ["198.18.1.1", "fd6e:6272:1::1"]), announcement(b, ["198.18.1.2"])]
        let open: (PeerID) -> UInt64? = { $0 == self.a ? 7 : nil }
        #expect(ManualConnect.existing(host: "fd6e:6272:1::1", port: 9099, announcements: announced, connection: open) == 7)
        #expect(ManualConnect.existing(host: "198.18.1.1", port: 9099, announcements: announced, connection: open) == 7)
        // Another port, a peer not connected, a name rather than an address: dial.
        #expect(ManualConnect.existing(host: "198.18.1.1", port: 9100, announcements: announced, connection: open) == nil)
        #expect(ManualConnect.existing(host: "198.18.1.2", port: 9099, announcements: announced, connection: open) == nil)
        #expect(ManualConnect.existing(host: "box.local", port: 9099, announcements: announced, connection: open) == nil)
        // An announcement without a valid id names nobody.
        #expect(ManualConnect.existing(host: "198.18.1.3", port: 9099, announcements: [announcement(nil, ["198.18.1.3"])], connection: { _ in 1 }) == nil)
    }

    @Test("after the dial: no peer ID is refused with the address in the reason; a peer connected already keeps its connection; else the new one is adopted")
    func settle() {
        #expect(ManualConnect.settle(peer: nil, host: "198.18.1.1", port: 9099, open: nil) == .refuse("the peer at 198.18.1.1 port 9099 proved no peer ID"))
        #expect(ManualConnect.settle(peer: a, host: "198.18.1.1", port: 9099, open: 3) == .keepOpen(3))
        #expect(ManualConnect.settle(peer: a, host: "198.18.1.1", port: 9099, open: nil) == .adopt(a))
    }
}
