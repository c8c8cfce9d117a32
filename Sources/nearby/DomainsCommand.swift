import ArgumentParser
import DNSWire
import NearbyDiscovery
import UnicastDNSSD

// MARK: - domains

struct DomainsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "domains",
        abstract: "List the DNS domains to browse and register in (DNS-SD domain enumeration).",
        discussion: """
            Asks the DNS (RFC 6763 §11) which domains to use: for each starting domain (the \
            search list of /etc/resolv.conf, each --domain, and the reverse-mapping name of \
            each of this host's IPv4 subnets) it asks for PTR records at b (browse), db \
            (default browse), lb (legacy browse), r (register) and dr (default register) \
            ._dns-sd._udp.DOMAIN. local (the link) is always there and is listed first. Exits 0 \
            even when the DNS recommends nothing; the list then holds local alone.

            Examples:
              nearby domains
              nearby domains --domain example.com --json
              nearby domains --server 192.0.2.53

            Exit status: 0 the list was printed (local alone when the DNS recommends nothing); 1 a failure at run time, said on stderr; 2 bad input.
            """
    )

    @Option(name: .customLong("domain"), help: ArgumentHelp("Also start from this domain (repeatable).", valueName: "domain"))
    var domainTexts: [String] = []
    @Option(name: .customLong("server"), help: ArgumentHelp("Ask this DNS server, ADDR[:PORT] (default: those of /etc/resolv.conf).", valueName: "addr[:port]"))
    var server: String?
    @OptionGroup var output: OutputOptions

    func validate() throws {
        _ = try WideAreaOptions.domains(domainTexts)
        _ = try WideAreaOptions.settings(server: server, tsig: nil)
    }

    func run() async throws {
        var settings = try WideAreaOptions.settings(server: server, tsig: nil)
        let resolver = ResolverConfiguration.system()
        settings.resolver = resolver
        let backend = UnicastBackend(settings: settings, logger: output.logger())
        let given = try WideAreaOptions.domains(domainTexts).filter { $0 != ServiceType.localDomain }
        let starting = DomainEnumeration.startingDomains(
            searchList: resolver.searchDomains, domains: given, subnets: DomainEnumeration.localSubnets())
        if !output.json {
            let servers = (settings.servers ?? resolver.servers).map(\.description).joined(separator: ", ")
            status("Asking \(servers) about \(starting.isEmpty ? "no starting domain (the search list is empty; add --domain)" : starting.map { String($0.description.dropLast()) }.joined(separator: ", "))...")
        }
        let found = await backend.recommendedDomains(adding: given)
        var rows: [(domain: String, roles: [String], source: String)] = [("local", ["browse", "register"], "the link (mDNS)")]
        for recommendation in found {
            let domain = String(recommendation.domain.description.dropLast())
            let source = String(recommendation.source.description.dropLast())
            if let index = rows.firstIndex(where: { $0.domain == domain }) {
                if !rows[index].roles.contains(recommendation.role.description) { rows[index].roles.append(recommendation.role.description) }
            } else {
                rows.append((domain, [recommendation.role.description], source))
            }
        }
        for row in rows {
            if output.json {
                printLine(JSONText.object([
                    ("event", .string("domain")), ("domain", .string(row.domain)), ("roles", .array(row.roles.map { .string($0) })),
                    ("source", .string(row.source)),
                ]))
            } else {
                printLine("\(row.domain.padded(toUTF16Length: max(24, row.domain.count + 2)))\(row.roles.joined(separator: ", "))  (from \(row.source))")
            }
        }
    }
}
