import ArgumentParser
import DNSWire
import DiscoveryProxy
import DiscoveryProxyCore
import NearbyDiscovery
import PeerTrust
import SRPRegistrar

// MARK: - proxy

struct ProxyCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "proxy",
        abstract: "Answer unicast DNS for a link's services: a discovery proxy (RFC 8766).",
        discussion: """
            For each LINK, given as INTERFACE=ZONE, answers DNS questions about names under ZONE \
            from what mDNS says on INTERFACE: `_ipp._tcp.ZONE` is `_ipp._tcp.local` on that link, \
            and every .local name in the answers is rewritten into ZONE. Devices on the link need \
            nothing set up; a client on another subnet browses ZONE through ordinary DNS, once \
            the site's DNS server delegates ZONE to this proxy (NS records naming --name-server, \
            with its address) and lists ZONE for browsing (b._dns-sd._udp PTR records in the \
            parent zone).

            What it answers: the SOA and NS of each ZONE; PTR, SRV, TXT, A, AAAA and any other \
            type under it, from a continuous mDNS query it keeps while clients ask (the first \
            question about a name waits up to 1 s for the link; later ones are answered at once \
            from the cache). TTLs are capped at 10 s, because a one-shot client cannot be told \
            of changes (RFC 8766 §5.5.1). Link-local addresses (169.254/16, fe80::/10) are never \
            given. A name the link has nothing for gets NOERROR with no records, never NXDOMAIN.

            What it refuses: names outside every ZONE (REFUSED: it is no resolver and never \
            recurses), zone transfers (REFUSED), updates (NOTIMP); ANY gets one small HINFO \
            record (RFC 8482) instead of everything the link holds. Over UDP an answer \
            fits the client's buffer (512 bytes without EDNS(0), at most 1232) or comes empty \
            with TC set, and each source network (an IPv4 /24, an IPv6 /56) may ask --rate \
            questions per second over UDP (beyond it, silence or an empty truncated answer, so \
            a real client goes on over TCP): forged questions can make the proxy send a \
            victim network about 120 kB/s at most. An address that has asked over TCP cannot \
            be forged, so for ten minutes its UDP questions get a bucket of their own, twenty \
            times --rate: a site's resolver that meets the limit is told TC, asks over TCP, and \
            is then answered at up to twenty times the rate. New mDNS questions are limited to \
            --link-rate per second (RFC 8766 §9.3). Its mDNS stays on the INTERFACEs named, \
            on either backend.

            DNS Push (RFC 8765): on the same addresses, TLS on --push-port (853) carries DNS \
            Stateful Operations sessions; a client subscribes to a name and is told of every \
            change as the link reports it, instead of asking again every 10 s. Each ZONE names \
            the service with `_dns-push-tls._tcp.ZONE` SRV (target: the first --name-server). \
            The certificate is --tls-certificate and --tls-key (PEM) when given, else a \
            self-signed one made at start: clients that check certificates need the former. \
            --no-push offers none, and clients poll.

            Ports 53 and 853 need root (or CAP_NET_BIND_SERVICE). Runs until SIGINT or SIGTERM. \
            As a systemd service (Type=notify; the Debian package's nearby-proxy.service) it \
            tells systemd it is ready once it answers, and logs to the journal with each \
            line's level.

            Examples:
              nearby proxy eth0=lan1.site.test --listen 10.0.0.5 --name-server dp.site.test
              nearby proxy eth1=lan1.site.test eth2=lan2.site.test --listen 10.0.0.5 \\
                --name-server dp.site.test
              nearby proxy eth0=lan1.site.test --listen 10.0.0.5 --port 5300 \\
                --push-port 8530 --name-server dp.site.test
              nearby proxy eth0=lan1.site.test --listen 10.0.0.5 --tls-key dp.key \\
                --tls-certificate dp.pem --name-server dp.site.test
              dig @10.0.0.5 _ipp._tcp.lan1.site.test PTR    (from another subnet)

            Exit status: 0 stopped by SIGINT or SIGTERM; 1 could not start (an address that is \
            not this host's, a port in use or not allowed, an interface without multicast), said \
            on stderr; 2 bad input.
            """
    )

    @Argument(help: ArgumentHelp("A link and its zone: the interface the link is on, '=', the zone's name (repeat for several links).", valueName: "interface=zone"))
    var links: [String]

    @Option(name: .customLong("listen"), help: ArgumentHelp("Answer on this address, UDP and TCP (repeatable): the address the parent zone's NS record points at. Never all addresses.", valueName: "address"))
    var listen: [String] = []

    @Option(help: ArgumentHelp("The port to answer on.", valueName: "port"))
    var port: UInt16 = 53

    @Option(name: .customLong("name-server"), help: ArgumentHelp("The name of this proxy, as the parent zone's NS records give it (repeatable, one per proxy of the link); best outside the zones, e.g. proxy1.example.test.", valueName: "name"))
    var nameServers: [String] = []

    @Option(help: ArgumentHelp("Questions per second each source network (IPv4 /24, IPv6 /56) may ask over UDP (burst: twice that); 0 for no limit. An address that has asked over TCP gets twenty times that for 10 minutes.", valueName: "n"))
    var rate: Int = 100

    @Option(help: ArgumentHelp(
        "Who asks the link: embedded (Nearby's own mDNS engine, on the INTERFACEs only), system (the host's avahi-daemon, through dns_sd), auto (system when a daemon answers, else embedded).",
        valueName: "embedded|system|auto"))
    var backend: BackendChoice = .automatic

    @Option(name: .customLong("link-rate"), help: ArgumentHelp("New mDNS questions per second over all links (burst: twice that).", valueName: "n"))
    var linkRate: Int = 50

    @Option(name: .customLong("push-port"), help: ArgumentHelp("The TLS port of the DNS Push service (0: a free one).", valueName: "port"))
    var pushPort: UInt16 = 853

    @Flag(name: .customLong("no-push"), help: "Offer no DNS Push (clients poll every 10 s).")
    var noPush = false

    @Option(name: .customLong("tls-certificate"), help: ArgumentHelp("The DNS Push server's certificate chain, PEM, leaf first (default: a self-signed one made at start).", valueName: "file"))
    var tlsCertificate: String?

    @Option(name: .customLong("tls-key"), help: ArgumentHelp("The private key of --tls-certificate, PEM (PKCS#8 or SEC1, unencrypted).", valueName: "file"))
    var tlsKey: String?

    @Option(name: .customLong("registrar-port"), help: ArgumentHelp(
        "Also take SRP registrations (RFC 9665) on the --listen addresses at this port, advertise them on the links, and name the registrar in each zone (_dnssd-srp._udp SRV): devices on other subnets register with `nearby advertise --registrar ZONE`.",
        valueName: "port"))
    var registrarPort: UInt16?

    @Option(name: .customLong("registrar-state-file"), help: ArgumentHelp("With --registrar-port: keep the registrations here across restarts.", valueName: "file"))
    var registrarStateFile: String?

    @OptionGroup var output: OutputOptions
    @OptionGroup(title: "METRICS") var metrics: MetricsOptions

    struct Parsed {
        var links: [DiscoveryProxy.Link]
        var listen: [IPAddress]
    }

    /// The command line's links and addresses, checked.
    func parsed() throws -> Parsed {
        guard !nameServers.isEmpty else {
            throw ValidationError("give --name-server NAME: the name the parent zone's NS record for each zone points at (e.g. --name-server proxy1.example.test)")
        }
        var servers: [ProxyZone.NameServer] = []
        for text in nameServers {
            guard let name = try? DomainName(parsing: text), !name.isRoot else {
                throw ValidationError("--name-server \(text) is not a domain name; give one such as proxy1.example.test")
            }
            servers.append(.init(name: name, addresses: []))
        }
        guard !listen.isEmpty else {
            throw ValidationError("give --listen ADDRESS: the address to answer on (the one the parent zone gives for the name server); the proxy never answers on every address")
        }
        var addresses: [IPAddress] = []
        for text in listen {
            if let v4 = IPv4Address(text) {
                addresses.append(.v4(v4))
            } else if let v6 = IPv6Address(text) {
                addresses.append(.v6(v6))
            } else {
                throw ValidationError("--listen \(text) is not an IP address; give one of this host's addresses, such as 192.0.2.5 or 2001:db8::5")
            }
        }
        guard (0...1_000_000).contains(rate), (1...1_000_000).contains(linkRate) else {
            throw ValidationError("--rate must be 0 to 1000000 (0: no limit), --link-rate 1 to 1000000")
        }
        // A name server named inside one of the zones is served with the --listen addresses
        // (its glue); one outside is the parent's to give an address.
        var zoneNames: [DomainName] = []
        for text in links {
            if let zone = text.split(separator: "=", maxSplits: 1).dropFirst().first.flatMap({ try? DomainName(parsing: String($0)) }) {
                zoneNames.append(zone)
            }
        }
        servers = servers.map { server in
            zoneNames.contains(where: { server.name.hasSuffix($0) }) ? .init(name: server.name, addresses: addresses) : server
        }
        var result: [DiscoveryProxy.Link] = []
        let interfaces = links.map { $0.split(separator: "=", maxSplits: 1).first.map(String.init) ?? $0 }
        if let twice = interfaces.first(where: { name in interfaces.filter { $0 == name }.count > 1 }) {
            throw ValidationError("the interface \(twice) is given twice; one zone per link")
        }
        for text in links {
            let parts = text.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            guard parts.count == 2, !parts[0].isEmpty, !parts[1].isEmpty else {
                throw ValidationError("\"\(text)\" is not INTERFACE=ZONE; write it as eth0=lan1.example.test")
            }
            guard let name = try? DomainName(parsing: String(parts[1])) else {
                throw ValidationError("\"\(parts[1])\" in \(text) is not a domain name; give a zone such as lan1.example.test")
            }
            do {
                let zone = try ProxyZone(name, nameServers: servers)
                if let other = result.first(where: { $0.zone.contains(zone.name) || zone.contains($0.zone.name) }) {
                    throw ValidationError("the zones \(other.zone) and \(zone) overlap; give each link a zone of its own")
                }
                result.append(.init(zone: zone, interface: String(parts[0])))
            } catch let error as ProxyError {
                throw ValidationError(error.message)
            }
        }
        return Parsed(links: result, listen: addresses)
    }

    func validate() throws {
        guard !links.isEmpty else { throw ValidationError("give at least one link as INTERFACE=ZONE, e.g. eth0=lan1.example.test") }
        guard (tlsCertificate == nil) == (tlsKey == nil) else {
            throw ValidationError("--tls-certificate and --tls-key go together: the certificate chain and its private key, both PEM")
        }
        if registrarStateFile != nil, registrarPort == nil {
            throw ValidationError("--registrar-state-file goes with --registrar-port: the registrar it keeps registrations for")
        }
        if let registrarPort, registrarPort == port || (!noPush && registrarPort == pushPort) {
            throw ValidationError("--registrar-port \(registrarPort) is the proxy's own port; give the registrar a port of its own (e.g. 8053)")
        }
        if noPush, tlsCertificate != nil {
            throw ValidationError("--tls-certificate is for DNS Push, which --no-push turns off; give one or the other")
        }
        _ = try parsed()
    }

    func run() async throws {
        let parsed = try parsed()
        let logger = output.logger("nearby.proxy")
        var configuration = DiscoveryProxy.Configuration(links: parsed.links, listen: parsed.listen, port: port)
        configuration.answering.rateLimit = rate == 0 ? nil : RateLimit(perSecond: rate, burst: rate * 2)
        configuration.answering.linkQuestionRate = RateLimit(perSecond: linkRate, burst: linkRate * 2)
        if !noPush {
            var service = DiscoveryProxy.PushService(port: pushPort)
            if let tlsCertificate, let tlsKey {
                do {
                    let chain = String(decoding: try readInput(tlsCertificate, what: "certificate chain"), as: UTF8.self)
                    let key = String(decoding: try readInput(tlsKey, what: "private key"), as: UTF8.self)
                    service.identity = try PeerIdentity(certificateChainPEM: chain, privateKeyPEM: key)
                } catch let error as PeerTrustError {
                    throw ValidationError("--tls-certificate/--tls-key: \(error.message)")
                }
            }
            configuration.push = service
        }
        switch backend {
        case .embedded: configuration.backend = .embedded
        case .system: configuration.backend = .system
        case .automatic: configuration.backend = await SystemBackend.daemonAnswers() ? .system : .embedded
        }
        configuration.answering.registrarPort = registrarPort
        // The metrics first: the proxy, the registrar and the engine make theirs as they start.
        let endpoint = try await metrics.start(logger: logger)
        let proxy: DiscoveryProxy
        do {
            proxy = try await DiscoveryProxy.prepare(configuration, logger: logger)
        } catch {
            await endpoint?.close()
            throw RuntimeFailure("\(error)")
        }
        // One daemon on the router: the registrar advertises on the links the proxy answers
        // for, so its registrations are on the links' mDNS and, through the proxy, in the zones.
        var registrar: Registrar?
        if let registrarPort {
            var settings = Registrar.Configuration(listen: parsed.listen)
            settings.port = registrarPort
            settings.interfaces = parsed.links.map(\.interface)
            settings.stateFile = registrarStateFile
            do {
                registrar = try await Registrar.prepare(settings, logger: output.logger("nearby.registrar"))
            } catch {
                await proxy.shutdown()
                await endpoint?.close()
                throw RuntimeFailure(error.message)
            }
        }
        let where_ = parsed.listen.map(\.description).joined(separator: ", ")
        if output.json {
            for link in parsed.links {
                printLine(JSONText.object([
                    ("event", .string("proxying")), ("zone", .string(String(link.zone.name.description.dropLast()))),
                    ("interface", .string(link.interface)), ("listen", .array(parsed.listen.map { .string($0.description) })),
                    ("backend", .string(configuration.backend == .system ? "system" : "embedded")),
                    ("port", .number(Double(proxy.port))),
                    ("pushPort", proxy.pushPort.map { .number(Double($0)) } ?? .null),
                ]))
            }
        } else {
            for link in parsed.links {
                status("Answering for \(link.zone.name.description.dropLast()) (the link on \(link.interface), \(configuration.backend == .system ? "through the system's mDNS daemon" : "with the embedded mDNS engine")) on \(where_) port \(proxy.port), UDP and TCP\(proxy.pushPort.map { ", DNS Push on TLS port \($0)" } ?? ""); Ctrl-C to stop")
            }
        }
        endpoint?.announce(json: output.json)
        let beside = registrar
        if let registrar {
            if output.json {
                printLine(JSONText.object([
                    ("event", .string("registrar")), ("listen", .array(parsed.listen.map { .string($0.description) })),
                    ("port", .number(Double(registrar.port))),
                ]))
            } else {
                status("Taking SRP registrations on \(where_) port \(registrar.port) (named in each zone by _dnssd-srp._udp SRV)")
            }
        }
        // systemd (Type=notify) is told READY=1 once every socket is bound (prepare() above) and
        // the proxy's and the registrar's work has started: from then on a question is answered
        // (what arrived meanwhile waits in the sockets). STOPPING=1 as soon as a signal comes.
        let manager = ServiceManager.fromEnvironment
        if let problem = manager.problem { logger.warning("\(problem)") }
        let zones = parsed.links.map { String($0.zone.name.description.dropLast()) }.joined(separator: ", ")
        _ = await untilTermination(stopping: { manager.stopping(status: "stopping", logger: logger) }) {
            await withDiscardingTaskGroup { group in
                group.addTask { await proxy.run() }
                if let beside { group.addTask { await beside.run() } }
                manager.ready(
                    status: "answering for \(zones) on \(where_) port \(proxy.port)\(beside.map { ", registrar on port \($0.port)" } ?? "")",
                    logger: logger)
            }
        }
        await registrar?.shutdown()
        await proxy.shutdown()
        await endpoint?.close()
        let counts = await proxy.statistics
        if output.json {
            printLine(JSONText.object([
                ("event", .string("stopped")), ("questions", .number(Double(counts.questions))),
                ("answeredFromLink", .number(Double(counts.answeredFromLink))), ("noData", .number(Double(counts.noData))),
                ("refused", .number(Double(counts.refusedOutsideZones))), ("rateLimited", .number(Double(counts.rateLimited))),
            ]))
        } else {
            status("Stopped after \(counts.questions) questions: \(counts.answeredFromLink) answered from the link, \(counts.noData) with no records, \(counts.refusedOutsideZones) refused, \(counts.rateLimited) over a source's rate")
        }
    }
}
