// Addresses and interfaces as discovery reports them: plain values, no system calls.

/// A network interface the engine runs on.
public struct NetworkInterface: Hashable, Sendable, CustomStringConvertible {
    /// The kernel's interface index (scope of IPv6 link-local addresses).
    public var index: Int
    /// The interface name, e.g. `eth0`.
    public var name: String

    public init(index: Int, name: String) {
        self.index = index
        self.name = name
    }

    public var description: String { name }

    /// Hashes the index alone: the engine looks interfaces up for every datagram, and equal
    /// interfaces have equal indexes anyway (equality still compares both).
    public func hash(into hasher: inout Hasher) { hasher.combine(index) }
}

/// An IPv4 or IPv6 address; link-local IPv6 addresses carry their interface index.
public enum IPAddress: Hashable, Sendable, CustomStringConvertible {
    case v4(IPv4Address)
    case v6(IPv6Address, scope: Int? = nil)

    public var description: String {
        switch self {
        case .v4(let address): address.description
        case .v6(let address, let scope): scope.map { "\(address)%\($0)" } ?? address.description
        }
    }

    /// An address from its bytes in network order: 4 for IPv4, 16 for IPv6 (nil for any other
    /// count). An IPv6 link-local address gets `linkScope`, the interface it belongs to; other
    /// addresses need none.
    public init?(bytes: some Collection<UInt8>, linkScope: Int?) {
        switch bytes.count {
        case 4:
            self = .v4(IPv4Address(bytes.reduce(UInt32(0)) { $0 << 8 | UInt32($1) }))
        case 16:
            guard let v6 = IPv6Address(bytes: bytes) else { return nil }
            self = .v6(v6, scope: v6.isLinkLocal ? linkScope : nil)
        default:
            return nil
        }
    }

    /// The address without an IPv6 scope, as records carry it.
    public var withoutScope: IPAddress {
        if case .v6(let address, _) = self { return .v6(address, scope: nil) }
        return self
    }

    /// True for IPv6.
    public var isIPv6: Bool {
        if case .v6 = self { return true }
        return false
    }
}

/// An address and a UDP port.
public struct SocketAddress: Hashable, Sendable, CustomStringConvertible {
    public var address: IPAddress
    public var port: UInt16

    public init(_ address: IPAddress, port: UInt16) {
        self.address = address
        self.port = port
    }

    public var description: String {
        address.isIPv6 ? "[\(address)]:\(port)" : "\(address):\(port)"
    }

    /// The mDNS port.
    public static let mdnsPort: UInt16 = 5353
}

/// The IP family of a multicast group.
public enum IPFamily: Hashable, Sendable {
    case v4, v6
}

