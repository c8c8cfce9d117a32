import DNSWire
import MulticastDNSCore

/// An in-memory LAN of engines with one manual clock: whole mDNS conversations run in
/// microseconds of real time, deterministically, without sockets or sleeping. Every message
/// crosses the real codec (encoded into packets under 1472 bytes, decoded on arrival).
final class SimulatedLAN {
    final class Host {
        let name: String
        let core: MDNSCore
        let interface: NetworkInterface
        let address: IPv4Address
        /// The host's interfaces on this link, with their addresses. More than one is a second
        /// NIC on the same switch: what the host multicasts on one, the others hear (RFC 6762
        /// §14). Set with ``SimulatedLAN/setInterfaces(of:_:)``.
        var interfaces: [NetworkInterface: [IPAddress]]
        /// Whether the host is connected (false: crashed or unplugged; it hears and says nothing).
        var isUp = true
        var events: [EngineEvent] = []
        var received: [(time: Duration, message: Message, from: String)] = []

        init(name: String, core: MDNSCore, interface: NetworkInterface, address: IPv4Address) {
            self.name = name
            self.core = core
            self.interface = interface
            self.address = address
            self.interfaces = [interface: [.v4(address)]]
        }

        var socketAddress: SocketAddress { SocketAddress(.v4(address), port: SocketAddress.mdnsPort) }
    }

    private(set) var hosts: [Host] = []
    private(set) var now: Duration = .zero
    /// Every message sent, in order: time, sender, destination, message.
    private(set) var wire: [(time: Duration, from: String, destination: Destination, message: Message, interface: String)] = []

    @discardableResult
    func addHost(_ name: String, seed: UInt64? = nil, address: IPv4Address? = nil) -> Host {
        let number = UInt8(hosts.count + 1)
        let core = MDNSCore(hostName: name, seed: seed ?? UInt64(number) * 7919)
        let interface = NetworkInterface(index: 2, name: "lan1")
        let host = Host(name: name, core: core, interface: interface, address: address ?? IPv4Address(198, 18, 1, number))
        core.advance(to: now)
        core.setInterfaces([interface: [.v4(host.address)]])
        hosts.append(host)
        return host
    }

    /// Puts `host` on this link with these interfaces (a second NIC on the same switch, say).
    func setInterfaces(of host: Host, _ interfaces: [NetworkInterface: [IPAddress]]) {
        host.interfaces = interfaces
        host.core.setInterfaces(interfaces)
    }

    /// A LAN where "alpha" has published `instance` (probed and announced) and "beta" is
    /// listening: the start of most querier tests.
    static func publishing(_ instance: String) -> (SimulatedLAN, Host, Host) {
        let lan = SimulatedLAN()
        let alpha = lan.addHost("alpha")
        let beta = lan.addHost("beta")
        _ = alpha.core.register(registration(instance))
        lan.run(for: .seconds(3))
        return (lan, alpha, beta)
    }

    /// Runs the LAN until `now + duration`, delivering every message as it is sent.
    func run(for duration: Duration) {
        let end = now + duration
        deliver()
        while let next = hosts.filter(\.isUp).compactMap({ $0.core.nextDeadline }).min(), next <= end {
            now = max(now, next)
            for host in hosts where host.isUp { host.core.advance(to: now) }
            deliver()
        }
        now = end
        for host in hosts where host.isUp { host.core.advance(to: now) }
        deliver()
    }

    /// Delivers what the hosts want to send, until nobody has anything more to say.
    func deliver() {
        var quiet = false
        while !quiet {
            quiet = true
            for sender in hosts {
                let outgoing = sender.core.takeOutgoing()
                sender.events += sender.core.takeEvents()
                guard sender.isUp else { continue }
                for item in outgoing {
                    quiet = false
                    wire.append((now, sender.name, item.destination, item.message, item.interface.name))
                    let packets = (try? item.message.encodedPackets(maximumPacketSize: item.packetLimit)) ?? []
                    for packet in packets {
                        guard let message = try? Message(decoding: packet) else { continue }
                        for receiver in recipients(of: item.destination, from: sender) {
                            receiver.received.append((now, message, sender.name))
                            receiver.core.receive(
                                ReceivedMessage(
                                    message: message, source: sender.socketAddress, interface: receiver.interface, family: .v4,
                                    destinationIsMulticast: item.destination == .multicast(.v4) || item.destination == .multicast(.v6)),
                                at: now)
                        }
                        echo(message, of: item, from: sender)
                    }
                }
            }
        }
        for host in hosts { host.events += host.core.takeEvents() }
    }

    /// The sender's other interfaces on this link hear what it multicast, from the address it
    /// left by: IPv6 on those with an IPv6 address, IPv4 on those with an IPv4 one.
    private func echo(_ message: Message, of item: OutgoingMessage, from sender: Host) {
        guard case .multicast(let family) = item.destination,
            let source = sender.interfaces[item.interface]?.first(where: { $0.isIPv6 == (family == .v6) })
        else { return }
        for (interface, addresses) in sender.interfaces.sorted(by: { $0.key.index < $1.key.index })
        where interface != item.interface && addresses.contains(where: { $0.isIPv6 == (family == .v6) }) {
            sender.received.append((now, message, sender.name))
            sender.core.receive(
                ReceivedMessage(message: message, source: SocketAddress(source, port: SocketAddress.mdnsPort), interface: interface, family: family),
                at: now)
        }
    }

    private func recipients(of destination: Destination, from sender: Host) -> [Host] {
        switch destination {
        case .multicast: hosts.filter { $0 !== sender && $0.isUp }
        case .unicast(let address): hosts.filter { $0.isUp && $0.socketAddress == address }
        }
    }

    /// Injects a message as if `source` had sent it to `host` (legacy or off-link queriers).
    func inject(_ message: Message, to host: Host, from source: SocketAddress, onLink: Bool = true, on interface: NetworkInterface? = nil) {
        host.core.receive(
            ReceivedMessage(message: message, source: source, interface: interface ?? host.interface, family: .v4, sourceIsOnLink: onLink),
            at: now)
        host.events += host.core.takeEvents()
    }

    /// Messages sent by `host` since `time`.
    func sent(by host: Host, since time: Duration = .zero) -> [(destination: Destination, message: Message)] {
        wire.filter { $0.from == host.name && $0.time >= time }.map { ($0.destination, $0.message) }
    }
}

extension SimulatedLAN.Host {
    /// Names this host's registrations won, in order.
    var registeredNames: [DomainName] {
        events.compactMap { event in
            if case .registered(_, let name) = event { return name }
            return nil
        }
    }

    /// Records currently reported (added and not since removed) for `query`.
    func liveRecords(_ query: QueryID) -> [ResourceRecord] {
        var live: [ResourceRecord] = []
        for event in events {
            switch event {
            case .recordAdded(let id, let record, _) where id == query:
                live.removeAll { $0.name == record.name && $0.data == record.data }
                live.append(record)
            case .recordRemoved(let id, let record, _) where id == query:
                live.removeAll { $0.name == record.name && $0.data == record.data }
            default: break
            }
        }
        return live
    }
}
