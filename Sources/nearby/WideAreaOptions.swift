import ArgumentParser
import DNSPushTLS
import DNSWire
import NearbyDiscovery
import UnicastDNSSD

/// `--domain`, `--server`, `--tsig`: where discovery looks and registers beyond the link.
struct WideAreaOptions: ParsableArguments {
    @Option(name: .customLong("domain"), help: ArgumentHelp(
        "Domain to advertise and browse in (repeat for several): local, the link over mDNS (the default), or a DNS domain such as lab.example.test, over unicast DNS (DNS-SD, RFC 6763 §11).",
        valueName: "domain"))
    var domainTexts: [String] = []

    @Option(name: .customLong("server"), help: ArgumentHelp(
        "DNS server for DNS domains, ADDR or ADDR:PORT ([IPV6]:PORT); registrations are sent there too. Default: the nameservers of /etc/resolv.conf, and the zone's primary for registrations.",
        valueName: "addr[:port]"))
    var server: String?

    @Option(name: .customLong("tsig"), help: ArgumentHelp(
        "TSIG key file that signs registrations in DNS domains, as `tsig-keygen -a hmac-sha256 NAME` writes it (or NAME:BASE64SECRET).",
        valueName: "keyfile"))
    var tsig: String?

    @Option(name: .customLong("push"), help: ArgumentHelp(
        "DNS Push (RFC 8765) when a DNS domain's zone offers it, so that changes arrive as they happen instead of at the next question: opportunistic (the default: TLS without checking the server's certificate), authenticated (the certificate must be valid for the server's name), off (always ask again).",
        valueName: "opportunistic|authenticated|off"))
    var push: PushMode?

    enum PushMode: String, ExpressibleByArgument, CaseIterable {
        case opportunistic, authenticated, off
        var policy: DNSPushPolicy {
            switch self {
            case .opportunistic: .opportunistic
            case .authenticated: .authenticated
            case .off: .off
            }
        }
    }

    /// The domains given, `local.` when none.
    var domains: [DomainName] {
        get throws { try Self.domains(domainTexts) }
    }

    /// `--domain` values as domain names, `local.` when there are none.
    static func domains(_ texts: [String]) throws -> [DomainName] {
        var result: [DomainName] = []
        for text in texts {
            let trimmed = text.hasSuffix(".") ? String(text.dropLast()) : text
            guard !trimmed.isEmpty, let name = try? DomainName(parsing: trimmed), !name.isRoot else {
                throw ValidationError("--domain \"\(text)\" is not a domain name; write local or a DNS domain such as lab.example.test")
            }
            if name.labels.contains(where: { $0.first == UInt8(ascii: "_") }) {
                throw ValidationError("--domain \"\(text)\" looks like a service type; the type is its own argument, the domain is where it lives (e.g. lab.example.test)")
            }
            if !result.contains(name) { result.append(name) }
        }
        return result.isEmpty ? [ServiceType.localDomain] : result
    }

    /// True when the link (local.) is among the domains.
    var usesLink: Bool { (try? domains.contains(ServiceType.localDomain)) ?? true }

    /// True when a DNS domain is among them.
    var usesDNS: Bool { (try? domains.contains { $0 != ServiceType.localDomain }) ?? false }

    func validate() throws {
        _ = try domains
        if let server {
            do { _ = try DNSServer(parsing: server) } catch { throw ValidationError("--server: \(error.message)") }
        }
        if let tsig {
            do { _ = try TSIGKey(file: tsig) } catch { throw ValidationError("--tsig: \(error.message)") }
        }
        if !usesDNS, server != nil || tsig != nil || push != nil {
            throw ValidationError("--\(server != nil ? "server" : tsig != nil ? "tsig" : "push") applies to DNS domains; add --domain DOMAIN (e.g. --domain lab.example.test)")
        }
    }

    /// The settings for ``NearbyDiscovery``.
    func settings(hostLabel: String? = nil, ttl: UInt32? = nil) throws -> WideAreaSettings {
        var settings = try Self.settings(server: server, tsig: tsig, hostLabel: hostLabel, ttl: ttl)
        settings.push = (push ?? .opportunistic).policy
        if settings.push != .off { settings.pushTransport = TLSPushTransport() }
        return settings
    }

    static func settings(server: String?, tsig: String?, hostLabel: String? = nil, ttl: UInt32? = nil) throws -> WideAreaSettings {
        let parsedServer: DNSServer?
        do { parsedServer = try server.map { text throws(UnicastDNSError) in try DNSServer(parsing: text) } } catch { throw ValidationError("--server: \(error.message)") }
        let key: TSIGKey?
        do { key = try tsig.map { path throws(UnicastDNSError) in try TSIGKey(file: path) } } catch { throw ValidationError("--tsig: \(error.message)") }
        return WideAreaSettings(
            servers: parsedServer.map { [$0] }, key: key, hostLabel: hostLabel, ttl: ttl ?? 30)
    }
}
