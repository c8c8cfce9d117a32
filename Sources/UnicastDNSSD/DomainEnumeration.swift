public import DNSWire
import NearbyBasics
import NetworkPlatform

/// Domain enumeration (RFC 6763 §11): which domains to browse and register in, as the network's
/// DNS says. Each *starting domain* (the search list, the domains given, and the reverse-mapping
/// name of each of this host's IPv4 subnets) is asked for PTR records at `b`, `db`, `lb`, `r`
/// and `dr` `._dns-sd._udp.<domain>`.
public enum DomainEnumeration {
    /// What a domain is recommended for.
    public struct Role: RawRepresentable, Hashable, Sendable, CustomStringConvertible, CaseIterable {
        public var rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }

        /// `b`: a domain to browse.
        public static let browse = Role(rawValue: "b")
        /// `db`: the default domain to browse.
        public static let defaultBrowse = Role(rawValue: "db")
        /// `lb`: a domain legacy (unaware) clients browse automatically.
        public static let legacyBrowse = Role(rawValue: "lb")
        /// `r`: a domain to register in.
        public static let register = Role(rawValue: "r")
        /// `dr`: the default domain to register in.
        public static let defaultRegister = Role(rawValue: "dr")

        public static let allCases: [Role] = [.browse, .defaultBrowse, .legacyBrowse, .register, .defaultRegister]

        public var description: String {
            switch self {
            case .browse: "browse"
            case .defaultBrowse: "default browse"
            case .legacyBrowse: "legacy browse"
            case .register: "register"
            case .defaultRegister: "default register"
            default: rawValue
            }
        }
    }

    /// One domain the DNS recommends, for one role, and the starting domain that said so.
    public struct Recommendation: Hashable, Sendable {
        public var domain: DomainName
        public var role: Role
        public var source: DomainName
    }

    /// The reverse-mapping name of an IPv4 subnet: the address with its host bits zeroed, in
    /// `in-addr.arpa` (`0.1.18.198.in-addr.arpa.` for 198.18.1.x/24, `0.0.16.172.in-addr.arpa.`
    /// for 172.16.x.y/16), a starting domain by RFC 6763 §11.
    public static func reverseSubnetDomain(_ address: IPv4Address, prefixLength: Int = 24) -> DomainName? {
        let bits = min(max(prefixLength, 0), 32)
        let mask: UInt32 = bits == 0 ? 0 : ~UInt32(0) << UInt32(32 - bits)
        let value = address.value & mask
        let labels = ["\(value & 0xFF)", "\(value >> 8 & 0xFF)", "\(value >> 16 & 0xFF)", "\(value >> 24)", "in-addr", "arpa"]
        return try? DomainName(labels: labels)
    }

    /// The starting domains: the search list and `domains` (in that order, each once), then
    /// the reverse-mapping names of the IPv4 `subnets` (an address and its prefix length).
    public static func startingDomains(searchList: [DomainName], domains: [DomainName], subnets: [(IPv4Address, Int)]) -> [DomainName] {
        var result: [DomainName] = []
        for domain in searchList + domains where !result.contains(domain) && domain != ServiceType.localDomain { result.append(domain) }
        for (address, prefix) in subnets {
            if let reverse = reverseSubnetDomain(address, prefixLength: prefix), !result.contains(reverse) { result.append(reverse) }
        }
        return result
    }

    /// This host's IPv4 subnets: every running interface's address and prefix, loopback and
    /// link-local left out.
    public static func localSubnets() -> [(IPv4Address, Int)] {
        NetworkPlatform.interfaceAddresses().compactMap { entry in
            guard entry.isRunning, entry.address.count == 4 else { return nil }
            let address = IPv4Address(entry.address[0], entry.address[1], entry.address[2], entry.address[3])
            guard address.value >> 24 != 127, address.value >> 16 != 0xA9FE else { return nil }
            return (address, entry.prefixLength)
        }
    }

    /// Asks every starting domain for every role, all at once; returns what the DNS
    /// recommends, in the order of the starting domains and roles.
    public static func recommendations(from starting: [DomainName], client: DNSClient) async -> [Recommendation] {
        let questions = starting.flatMap { domain in Role.allCases.map { (domain, $0) } }
        let answers = await withTaskGroup(of: (Int, [DomainName]).self) { group in
            for (index, (domain, role)) in questions.enumerated() {
                group.addTask {
                    guard let name = try? DomainName(labels: [role.rawValue, "_dns-sd", "_udp"]).appending(domain),
                        let message = try? await client.query(name, .ptr), message.responseCode == .noError
                    else { return (index, []) }
                    return (index, message.answers.compactMap { if case .ptr(let target) = $0.data, $0.name == name { target } else { nil } })
                }
            }
            var answers = [[DomainName]](repeating: [], count: questions.count)
            for await (index, found) in group { answers[index] = found }
            return answers
        }
        var result: [Recommendation] = []
        for (index, found) in answers.enumerated() {
            for domain in found {
                let recommendation = Recommendation(domain: domain, role: questions[index].1, source: questions[index].0)
                if !result.contains(recommendation) { result.append(recommendation) }
            }
        }
        return result
    }
}
