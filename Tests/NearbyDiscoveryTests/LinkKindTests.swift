import NetworkPlatform
import Testing

/// Which links carry mDNS and which addresses go into invitations, on the hosts users have:
/// container bridges, hypervisors' links, VPN tunnels.
@Suite("link kinds: container bridges and tunnels")
struct LinkKindTests {
    @Test("container and hypervisor links are virtual unless named; a point-to-point link is a tunnel; the rest are LANs")
    func kinds() {
        for name in ["docker0", "br-4f2a9c1d7e3b", "virbr0", "veth12ab34", "cni0", "flannel.1", "podman0", "lxcbr0", "lxdbr0", "vboxnet0", "vmnet8"] {
            #expect(NetworkPlatform.linkKind(name: name, loopback: false, pointToPoint: false) == .virtual, "\(name)")
        }
        for name in ["eth0", "enp3s0", "wlan0", "wlp2s0", "br0", "bridge0", "lan1", "lan1b"] {
            #expect(NetworkPlatform.linkKind(name: name, loopback: false, pointToPoint: false) == .lan, "\(name)")
        }
        #expect(NetworkPlatform.linkKind(name: "tailscale0", loopback: false, pointToPoint: true) == .tunnel)
        #expect(NetworkPlatform.linkKind(name: "wg0", loopback: false, pointToPoint: true) == .tunnel)
        #expect(NetworkPlatform.linkKind(name: "lo", loopback: true, pointToPoint: false) == .loopback)
        // Named by NEARBY_VIRTUAL_LINKS: a LAN again.
        #expect(NetworkPlatform.linkKind(name: "docker0", loopback: false, pointToPoint: false, included: ["docker0"]) == .lan)
        #expect(NetworkPlatform.linkKind(name: "virbr0", loopback: false, pointToPoint: false, included: ["docker0"]) == .virtual)
        #expect(NetworkPlatform.linkKind(name: "virbr0", loopback: false, pointToPoint: false, included: ["all"]) == .lan)
    }

    func entry(_ address: [UInt8], kind: NetworkPlatform.LinkKind, multicast: Bool = true, running: Bool = true) -> NetworkPlatform.InterfaceAddress {
        NetworkPlatform.InterfaceAddress(
            name: "x", index: 2, address: address, prefixLength: 24, supportsMulticast: multicast, isRunning: running, kind: kind)
    }

    @Test("mDNS goes out on running multicast LANs only; tunnels and container bridges are left alone")
    func discovery() {
        #expect(entry([198, 18, 1, 1], kind: .lan).carriesDiscovery)
        #expect(!entry([198, 18, 1, 1], kind: .lan, multicast: false).carriesDiscovery)
        #expect(!entry([198, 18, 1, 1], kind: .lan, running: false).carriesDiscovery)
        #expect(!entry([172, 17, 0, 1], kind: .virtual).carriesDiscovery)
        #expect(!entry([100, 100, 1, 2], kind: .tunnel).carriesDiscovery, "a tun says MULTICAST but reaches no link")
        #expect(!entry([127, 0, 0, 1], kind: .loopback).carriesDiscovery)
    }

    @Test("invitations carry LAN and tunnel addresses, never a container bridge's, loopback or link-local")
    func invitations() {
        let tailscale6: [UInt8] = [0xFD, 0x7A, 0x11, 0x5C, 0xA1, 0xE0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 7]
        let linkLocal: [UInt8] = [0xFE, 0x80] + [UInt8](repeating: 0, count: 13) + [1]
        #expect(entry([198, 18, 1, 1], kind: .lan).reachableFromElsewhere)
        #expect(entry([100, 100, 1, 2], kind: .tunnel).reachableFromElsewhere)
        #expect(entry(tailscale6, kind: .tunnel).reachableFromElsewhere)
        #expect(!entry([172, 17, 0, 1], kind: .virtual).reachableFromElsewhere)
        #expect(!entry(linkLocal, kind: .lan).reachableFromElsewhere)
        #expect(!entry([169, 254, 3, 4], kind: .lan).reachableFromElsewhere)
        #expect(!entry([127, 0, 0, 1], kind: .loopback).reachableFromElsewhere)
        #expect(!entry([198, 18, 1, 1], kind: .lan, running: false).reachableFromElsewhere)
    }
}
