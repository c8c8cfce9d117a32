public import DNSWire

/// An address to dial, parsed once: the family is its case, not a guess from the text. A
/// link-local IPv6 address keeps its zone as written, an interface name (`fe80::1%eth0`) or
/// index (`fe80::1%3`, as discovery writes it), because the connection needs it to know which
/// link to use.
public enum PeerAddress: Hashable, Sendable, CustomStringConvertible {
    case v4(IPv4Address)
    case v6(IPv6Address, zone: String?)

    /// Parses an IP literal, IPv6 with an optional `%zone`; nil for anything else (a host name,
    /// an empty zone, a zone on IPv4).
    public init?(_ text: String) {
        let parts = text.split(separator: "%", maxSplits: 1, omittingEmptySubsequences: false)
        if parts.count == 2 {
            guard let address = IPv6Address(String(parts[0])), !parts[1].isEmpty else { return nil }
            self = .v6(address, zone: String(parts[1]))
        } else if let address = IPv4Address(text) {
            self = .v4(address)
        } else if let address = IPv6Address(text) {
            self = .v6(address, zone: nil)
        } else {
            return nil
        }
    }

    /// An address as discovery reports it; an IPv6 scope becomes a zone naming the interface index.
    public init(_ address: IPAddress) {
        switch address {
        case .v4(let v4): self = .v4(v4)
        case .v6(let v6, let scope): self = .v6(v6, zone: scope.map(String.init))
        }
    }

    var isIPv6: Bool {
        if case .v6 = self { return true }
        return false
    }

    /// The text `PeerConnection.connect(host:)` takes.
    public var description: String {
        switch self {
        case .v4(let address): address.description
        case .v6(let address, let zone): zone.map { "\(address)%\($0)" } ?? address.description
        }
    }
}

/// What discovery shows of each instance, by name and domain: the latest announcement, and the
/// addresses each interface (or zone) showed it at. An update replaces that interface's addresses (they are never
/// accumulated), and the announcement carries every interface's addresses, merged.
struct AnnouncedInstances: Sendable {
    private struct Key: Hashable {
        var name: String
        var domain: String
    }
    private var entries: [Key: (announcement: PeerAnnouncement, interfaces: [String: [PeerAddress]])] = [:]

    /// Every instance announced now.
    var announcements: some Collection<PeerAnnouncement> { entries.values.lazy.map(\.announcement) }

    /// The instances called `name`, in whichever domain (the link's first).
    func named(_ name: String) -> [PeerAnnouncement] {
        let matching: [PeerAnnouncement] = entries.values.map(\.announcement).filter { $0.name == name }
        return matching.sorted { a, b in
            let aOnLink = a.domain == "local.", bOnLink = b.domain == "local."
            return aOnLink != bOnLink ? aOnLink : a.domain < b.domain
        }
    }

    /// The instance `announcement` names was found or updated on `interface` at `addresses`:
    /// the announcement to act on, its addresses those of every interface that shows it.
    mutating func seen(_ announcement: PeerAnnouncement, on interface: String, at addresses: [PeerAddress]) -> PeerAnnouncement {
        let key = Key(name: announcement.name, domain: announcement.domain)
        var interfaces = entries[key]?.interfaces ?? [:]
        interfaces[interface] = addresses
        var merged = announcement
        merged.addresses = Self.merged(interfaces)
        entries[key] = (merged, interfaces)
        return merged
    }

    /// The instance `name` is gone from `interface`: still announced on another interface (with
    /// only those addresses now), withdrawn, or nothing when it was not known there.
    mutating func lost(_ name: String, in domain: String = "local.", on interface: String) -> BrokerStateMachine.Event? {
        let key = Key(name: name, domain: domain)
        guard var entry = entries[key], entry.interfaces.removeValue(forKey: interface) != nil else { return nil }
        guard !entry.interfaces.isEmpty else {
            entries[key] = nil
            return .withdrawn(name: name, domain: domain)
        }
        entry.announcement.addresses = Self.merged(entry.interfaces)
        entries[key] = entry
        return .announced(entry.announcement)
    }

    /// One list from each interface's addresses: interfaces in name order, each address once.
    static func merged(_ interfaces: [String: [PeerAddress]]) -> [PeerAddress] {
        var seen: Set<PeerAddress> = []
        return interfaces.sorted { $0.key < $1.key }.flatMap(\.value).filter { seen.insert($0).inserted }
    }
}
