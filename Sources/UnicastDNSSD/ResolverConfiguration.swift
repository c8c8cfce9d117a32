public import DNSWire

/// What `/etc/resolv.conf` says (resolv.conf(5)): the servers to ask, the search list, and the
/// timeout and attempts. Only what a stub resolver needs for DNS-SD is read; other lines are skipped.
public struct ResolverConfiguration: Hashable, Sendable {
    /// The servers, in order (at most three count, as in glibc).
    public var servers: [DNSServer]
    /// The search list (`search`, or `domain` when there is no `search`): the domains DNS-SD
    /// looks in for browsing domains (RFC 6763 §11).
    public var searchDomains: [DomainName]
    /// Seconds to wait for one server before asking the next (`options timeout:N`).
    public var timeout: Duration
    /// Rounds over the servers (`options attempts:N`).
    public var attempts: Int

    /// The defaults glibc uses: the local server, no search list, 5 s, 2 rounds.
    public init(
        servers: [DNSServer] = [DNSServer(.v4(IPv4Address(127, 0, 0, 1)))], searchDomains: [DomainName] = [],
        timeout: Duration = .seconds(5), attempts: Int = 2
    ) {
        self.servers = servers
        self.searchDomains = searchDomains
        self.timeout = timeout
        self.attempts = attempts
    }

    /// Reads the text of a resolv.conf file. Never fails: what cannot be read is skipped, as
    /// the C library does, and with no `nameserver` line the local server is used.
    public init(parsing text: String) {
        var servers: [DNSServer] = []
        var search: [DomainName]?
        var domain: [DomainName] = []
        var timeout = 5
        var attempts = 2
        for rawLine in text.split(whereSeparator: \.isNewline) {
            let line = rawLine.prefix { $0 != "#" && $0 != ";" }
            let words = line.split(whereSeparator: { $0 == " " || $0 == "\t" }).map(String.init)
            guard let keyword = words.first else { continue }
            let values = words.dropFirst()
            switch keyword {
            case "nameserver":
                // A zone ("fe80::1%eth0") is dropped: link-local DNS servers are rare and the
                // address type keeps scopes as interface indexes.
                if let text = values.first, servers.count < 3,
                    let server = try? DNSServer(parsing: String(text.split(separator: "%").first ?? ""))
                {
                    servers.append(server)
                }
            case "search":
                search = values.compactMap { try? DomainName(parsing: $0) }.filter { !$0.isRoot }
            case "domain":
                domain = values.prefix(1).compactMap { try? DomainName(parsing: $0) }.filter { !$0.isRoot }
            case "options":
                for option in values {
                    let parts = option.split(separator: ":", maxSplits: 1)
                    guard parts.count == 2, let number = Int(parts[1]) else { continue }
                    if parts[0] == "timeout" { timeout = min(max(number, 1), 30) }
                    if parts[0] == "attempts" { attempts = min(max(number, 1), 5) }
                }
            default:
                continue
            }
        }
        self.init(
            servers: servers.isEmpty ? [DNSServer(.v4(IPv4Address(127, 0, 0, 1)))] : servers,
            searchDomains: search ?? domain, timeout: .seconds(timeout), attempts: attempts)
    }

    /// The system's configuration, from `/etc/resolv.conf` (the defaults when it cannot be read).
    public static func system(path: String = "/etc/resolv.conf") -> ResolverConfiguration {
        guard let text = readTextFile(path) else { return ResolverConfiguration() }
        return ResolverConfiguration(parsing: text)
    }
}
