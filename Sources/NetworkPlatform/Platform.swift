#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The operating system's answers about this machine's name and network interfaces, in one
/// place: the discovery modules above ask here instead of calling C themselves.
package enum NetworkPlatform {
    #if canImport(Glibc)
        private static let descriptorResource = __rlimit_resource_t(RLIMIT_NOFILE.rawValue)
    #else
        private static let descriptorResource = RLIMIT_NOFILE
    #endif

    /// Raises the soft limit on open descriptors to the hard one, as servers do at start (the
    /// usual soft default, 1,024, is what strangers holding connections open run into first).
    /// Returns the limits before and after, or nil when nothing changed.
    @discardableResult
    package static func raiseDescriptorLimit() -> (before: UInt64, after: UInt64)? {
        var limit = rlimit()
        guard getrlimit(descriptorResource, &limit) == 0, limit.rlim_cur < limit.rlim_max else { return nil }
        let before = UInt64(limit.rlim_cur)
        limit.rlim_cur = limit.rlim_max
        guard setrlimit(descriptorResource, &limit) == 0 else { return nil }
        return (before, UInt64(limit.rlim_max))
    }

    /// The soft limit on open descriptors, or nil when it cannot be read or is unlimited.
    package static func descriptorLimit() -> UInt64? {
        var limit = rlimit()
        guard getrlimit(descriptorResource, &limit) == 0, limit.rlim_cur != rlim_t.max else { return nil }
        return UInt64(limit.rlim_cur)
    }

    /// This machine's host name as the kernel has it (`buildbox.example.com`), or nil.
    package static func hostName() -> String? {
        var buffer = [CChar](repeating: 0, count: 256)
        guard gethostname(&buffer, buffer.count) == 0 else { return nil }
        let name = String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        return name.isEmpty ? nil : name
    }

    /// This machine's host name without a domain (`buildbox` for `buildbox.example.com`), or
    /// nil when it has none.
    package static func hostLabel() -> String? {
        guard let name = hostName() else { return nil }
        let label = name.split(separator: ".").first.map(String.init) ?? ""
        return label.isEmpty ? nil : label
    }

    /// The kernel's index of the interface named `name`, or nil when there is none.
    package static func interfaceIndex(named name: String) -> Int? {
        let index = if_nametoindex(name)
        return index == 0 ? nil : Int(index)
    }

    /// The name of the interface with this index, or "" when there is none.
    package static func interfaceName(index: Int) -> String {
        guard index > 0, index <= Int(UInt32.max) else { return "" }
        var buffer = [CChar](repeating: 0, count: Int(IF_NAMESIZE) + 1)
        guard if_indextoname(UInt32(index), &buffer) != nil else { return "" }
        return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// One address of one network interface, as `getifaddrs` reports it.
    package struct InterfaceAddress: Sendable, Hashable {
        /// The interface's name (`eth0`) and the kernel's index for it.
        package var name: String
        package var index: Int
        /// The address in network byte order: 4 bytes for IPv4, 16 for IPv6.
        package var address: [UInt8]
        /// The number of leading one bits in the netmask.
        package var prefixLength: Int
        /// IFF_MULTICAST: the interface can send and receive multicast.
        package var supportsMulticast: Bool
        /// IFF_UP and IFF_RUNNING: the interface is up and its link is.
        package var isRunning: Bool
        /// What the link is for discovery and invitations (see ``LinkKind``).
        package var kind: LinkKind = .lan
        /// Whether this is an IPv6 address.
        package var isIPv6: Bool { address.count == 16 }

        package init(
            name: String, index: Int, address: [UInt8], prefixLength: Int, supportsMulticast: Bool, isRunning: Bool, kind: LinkKind = .lan
        ) {
            self.name = name
            self.index = index
            self.address = address
            self.prefixLength = prefixLength
            self.supportsMulticast = supportsMulticast
            self.isRunning = isRunning
            self.kind = kind
        }

        /// Whether mDNS is sent here unless the user names the interface: a LAN, not a
        /// container bridge or a tunnel (nor loopback).
        package var carriesDiscovery: Bool { supportsMulticast && isRunning && kind == .lan }
        /// Whether its address may go into an invitation link or a DNS registration: another
        /// machine can reach it (a LAN or a tunnel), and it is not loopback or link-local.
        package var reachableFromElsewhere: Bool {
            guard isRunning, kind == .lan || kind == .tunnel else { return false }
            if isIPv6 {
                return !(address[0] == 0xFE && address[1] & 0xC0 == 0x80) && address[0] != 0xFF && address != [UInt8](repeating: 0, count: 15) + [1]
            }
            return address[0] != 127 && !(address[0] == 169 && address[1] == 254)
        }
    }

    /// What a link is, as far as discovery and invitations care.
    package enum LinkKind: Sendable, Hashable {
        case loopback
        /// A LAN (Ethernet, Wi-Fi, a bridge holding them): mDNS goes out, and its addresses
        /// go into invitation links.
        case lan
        /// A link a container runtime or hypervisor made on this host (`docker0`, `br-*`,
        /// `virbr*`, `veth*`, `cni*`, `flannel*`, `podman*`, `lxcbr*`, `lxdbr*`, `vboxnet*`,
        /// `vmnet*`): it reaches this host's containers and guests only. No mDNS is sent there
        /// and no invitation carries its addresses unless ``virtualLinksIncluded`` names it.
        case virtual
        /// A point-to-point tunnel (a tun such as Tailscale's or WireGuard's): other machines
        /// reach us through it, so its addresses go into invitation links, but it carries no
        /// multicast (mDNS goes there only on an interface the user names).
        case tunnel
    }

    /// Name prefixes of the links ``LinkKind/virtual`` stands for.
    package static let virtualLinkPrefixes = ["docker", "br-", "virbr", "veth", "cni", "flannel", "podman", "lxcbr", "lxdbr", "vboxnet", "vmnet"]

    /// The environment variable that turns virtual links back into LANs: interface names,
    /// comma-separated, or `all`.
    package static let virtualLinksVariable = "NEARBY_VIRTUAL_LINKS"

    /// The virtual links the user asked to treat as LANs (``virtualLinksVariable``).
    package static func virtualLinksIncluded() -> Set<String> {
        guard let raw = getenv(virtualLinksVariable) else { return [] }
        return Set(String(cString: raw).split(separator: ",").map { String($0.filter { $0 != " " }) }.filter { !$0.isEmpty })
    }

    /// What the interface `name` is, from its name and flags (`IFF_LOOPBACK`, `IFF_POINTOPOINT`);
    /// `included`: virtual links to treat as LANs (`all` for every one).
    package static func linkKind(name: String, loopback: Bool, pointToPoint: Bool, included: Set<String> = []) -> LinkKind {
        if loopback { return .loopback }
        if pointToPoint { return .tunnel }
        let virtual = virtualLinkPrefixes.contains { name.hasPrefix($0) }
        if virtual, !included.contains(name), !included.contains("all") { return .virtual }
        return .lan
    }

    /// Every IPv4 and IPv6 address of every interface, in the order the kernel lists them.
    package static func interfaceAddresses() -> [InterfaceAddress] {
        var found: [InterfaceAddress] = []
        var list: UnsafeMutablePointer<ifaddrs>?
        guard getifaddrs(&list) == 0 else { return found }
        defer { freeifaddrs(list) }
        let included = virtualLinksIncluded()
        var cursor = list
        while let entry = cursor {
            cursor = entry.pointee.ifa_next
            guard let namePointer = entry.pointee.ifa_name, let address = entry.pointee.ifa_addr else { continue }
            let name = String(cString: namePointer)
            guard let index = interfaceIndex(named: name) else { continue }
            let flags = Int32(bitPattern: UInt32(truncatingIfNeeded: entry.pointee.ifa_flags))
            guard let bytes = addressBytes(address) else { continue }
            let mask = entry.pointee.ifa_netmask.flatMap(addressBytes) ?? []
            found.append(
                InterfaceAddress(
                    name: name, index: index, address: bytes, prefixLength: mask.reduce(0) { $0 + $1.nonzeroBitCount },
                    supportsMulticast: flags & Int32(IFF_MULTICAST) != 0,
                    isRunning: flags & Int32(IFF_UP) != 0 && flags & Int32(IFF_RUNNING) != 0,
                    kind: linkKind(
                        name: name, loopback: flags & Int32(IFF_LOOPBACK) != 0, pointToPoint: flags & Int32(IFF_POINTOPOINT) != 0,
                        included: included)))
        }
        return found
    }

    /// The address bytes of an AF_INET or AF_INET6 socket address; nil for other families.
    private static func addressBytes(_ address: UnsafeMutablePointer<sockaddr>) -> [UInt8]? {
        switch Int32(address.pointee.sa_family) {
        case AF_INET:
            return address.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { pointer in
                withUnsafeBytes(of: pointer.pointee.sin_addr) { Array($0) }
            }
        case AF_INET6:
            return address.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { pointer in
                withUnsafeBytes(of: pointer.pointee.sin6_addr) { Array($0) }
            }
        default:
            return nil
        }
    }
}
