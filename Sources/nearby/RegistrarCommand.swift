import ArgumentParser
import DNSWire
import SRPRegistrar
import SRPRegistrarCore

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

// MARK: - registrar

struct RegistrarCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "registrar",
        abstract: "Let devices that multicast cannot reach register their services: an SRP registrar and advertising proxy (RFC 9665).",
        discussion: """
            A program in a container, a VM or on another subnet sends its services to this \
            registrar as one DNS UPDATE signed with its own key (SIG(0), ECDSA P-256), and the \
            registrar publishes them on the link with mDNS: avahi, python-zeroconf and Apple \
            devices see ordinary .local services. `nearby advertise --registrar ADDRESS` is such \
            a program; so is any RFC 9665 client.

            Names are first come, first served: a name belongs to the key that registered it \
            first, for that key's lease (7 days at most); another key is refused (YXDOMAIN). A \
            name already in use on the link is refused too, never renamed or taken over: the \
            reply waits for the link's probing (about a second). Leases are 30 s to 24 h; when \
            one runs out the records are withdrawn from the link (goodbyes), and the name stays \
            held until the key lease runs out. Only addresses the link can use are advertised \
            (not loopback, not link-local); a container behind NAT must register an address the \
            LAN can reach (its host's, with the port published).

            Refusals: FORMERR for a malformed update, NOTAUTH for a signature that does not \
            verify, YXDOMAIN for a name held by another key or in use on the link, REFUSED for \
            a zone not served or a limit (registrations per source and in all, 5 updates per \
            second per source), NOTZONE for a name outside the zone.

            Port 53 needs root (or CAP_NET_BIND_SERVICE). As a systemd service (Type=notify; \
            the Debian package's nearby-registrar.service) it tells systemd it is ready once \
            it takes updates. Runs until SIGINT or SIGTERM; the \
            registrations are kept in --state-file and advertised again at the next start.

            Examples:
              nearby registrar --listen 172.17.0.1 --interface eth0
              nearby registrar --listen 10.0.0.1 --state-file /var/lib/nearby/srp
              (in the container:)
              nearby advertise Boxed _openagents._tcp 9099 --registrar 172.17.0.1

            Exit status: 0 stopped by SIGINT or SIGTERM; 1 could not start (an address that is \
            not this host's, a port in use or not allowed, an interface without multicast), said \
            on stderr; 2 bad input.
            """
    )

    @Option(name: .customLong("listen"), help: ArgumentHelp("Answer updates on this address, UDP and TCP (repeatable): the address devices reach this host at. Never all addresses.", valueName: "address"))
    var listen: [String] = []

    @Option(help: ArgumentHelp("The port to answer on.", valueName: "port"))
    var port: UInt16 = 53

    @Option(name: .customLong("interface"), help: ArgumentHelp("Advertise registrations on this interface (repeatable; default: every multicast-capable one).", valueName: "name"))
    var interfaces: [String] = []

    @Option(help: ArgumentHelp("The zone devices register in (repeatable).", valueName: "zone"))
    var zone: [String] = ["default.service.arpa."]

    @Option(name: .customLong("state-file"), help: ArgumentHelp("Keep names, keys and leases here across restarts, so no other key takes a name whose key lease has not run out.", valueName: "file"))
    var stateFile: String?

    @OptionGroup var output: OutputOptions
    @OptionGroup(title: "METRICS") var metrics: MetricsOptions

    func addresses() throws -> [IPAddress] {
        guard !listen.isEmpty else {
            throw ValidationError("give --listen ADDRESS: the address devices send their updates to (the registrar never answers on every address)")
        }
        return try listen.map { text in
            if let v4 = IPv4Address(text) { return .v4(v4) }
            if let v6 = IPv6Address(text) { return .v6(v6) }
            throw ValidationError("--listen \(text) is not an IP address; give one of this host's addresses, such as 172.17.0.1 or 2001:db8::5")
        }
    }

    func zones() throws -> [DomainName] {
        try zone.map { text in
            guard let name = try? DomainName(parsing: text), !name.isRoot, !name.hasSuffix("local.") else {
                throw ValidationError("--zone \(text) is not a zone devices can register in; give a domain name such as default.service.arpa. (not under local.)")
            }
            return name
        }
    }

    func validate() throws {
        _ = try addresses()
        _ = try zones()
        if let stateFile, stateFile.isEmpty { throw ValidationError("--state-file needs a path") }
    }

    func run() async throws {
        var configuration = Registrar.Configuration(listen: try addresses())
        configuration.port = port
        configuration.interfaces = interfaces.isEmpty ? nil : interfaces
        configuration.zones = try zones()
        configuration.stateFile = stateFile
        let logger = output.logger("nearby.registrar")
        // The metrics first: the registrar and its engine make theirs as they start.
        let endpoint = try await metrics.start(logger: logger)
        let registrar: Registrar
        do {
            registrar = try await Registrar.prepare(configuration, logger: logger)
        } catch {
            await endpoint?.close()
            throw RuntimeFailure(error.message)
        }
        let zones = configuration.zones.map { String($0.description.dropLast()) }
        if output.json {
            printLine(JSONText.object([
                ("event", .string("registrar")), ("zones", .array(zones.map { .string($0) })),
                ("listen", .array(configuration.listen.map { .string($0.description) })), ("port", .number(Double(registrar.port))),
                ("interfaces", .array((configuration.interfaces ?? []).map { .string($0) })),
            ]))
        } else {
            status("Taking SRP registrations for \(zones.joined(separator: ", ")) on \(configuration.listen.map(\.description).joined(separator: ", ")) port \(registrar.port), UDP and TCP; advertising them on \(configuration.interfaces?.joined(separator: ", ") ?? "every interface"); Ctrl-C to stop")
        }
        // systemd (Type=notify): READY=1 once the sockets are bound and the registrar's work has
        // started, STOPPING=1 as soon as a signal comes (see the proxy's).
        let manager = ServiceManager.fromEnvironment
        if let problem = manager.problem { logger.warning("\(problem)") }
        let listening = "taking registrations for \(zones.joined(separator: ", ")) on \(configuration.listen.map(\.description).joined(separator: ", ")) port \(registrar.port)"
        endpoint?.announce(json: output.json)
        _ = await untilTermination(stopping: { manager.stopping(status: "stopping", logger: logger) }) {
            await withDiscardingTaskGroup { group in
                group.addTask { await registrar.run() }
                manager.ready(status: listening, logger: logger)
            }
        }
        await registrar.shutdown()
        await endpoint?.close()
        let counts = await registrar.statistics
        if output.json {
            printLine(JSONText.object([
                ("event", .string("stopped")), ("accepted", .number(Double(counts.accepted))), ("refused", .number(Double(counts.refused))),
                ("badSignature", .number(Double(counts.badSignature))), ("nameHeld", .number(Double(counts.nameHeld))),
                ("linkConflicts", .number(Double(counts.linkConflicts))), ("leasesExpired", .number(Double(counts.leasesExpired))),
            ]))
        } else {
            status("Stopped after \(counts.accepted) accepted updates and \(counts.refused) refused (\(counts.badSignature) bad signatures, \(counts.nameHeld) names held by another key, \(counts.linkConflicts) names in use on the link, \(counts.rateLimited) over a source's rate); \(counts.leasesExpired) leases ran out")
        }
    }
}
