import ArgumentParser
import Dispatch
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import NearbyBasics
import Logging
import NearbyDiscovery

// MARK: - browse

struct Browse: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Watch services of a type appear, change and go.",
        discussion: """
            Prints found, updated and lost events; with --resolve, found and updated carry the \
            host, port, addresses and TXT. Runs until interrupted, or for --timeout seconds.

            Examples:
              nearby browse _openagents._tcp --resolve
              nearby browse _openagents._tcp --json --timeout 5
              nearby browse _openagents._tcp --resolve --verbose
                  (on stderr: why a service does not resolve yet)

            Exit status: 0 stopped by --timeout, SIGINT or SIGTERM, whether or not anything was found; 1 a failure at run time, said on stderr; 2 bad input.
            """
    )

    @Argument(help: "Service type, e.g. _openagents._tcp (or _sub._sub._type._tcp).")
    var type: String
    @Flag(help: "Resolve each service: host, port, addresses, TXT.")
    var resolve = false
    @Option(help: "Stop after this many seconds (exit 0).", transform: NumberInput.seconds("--timeout", maximum: 86_400))
    var timeout: Double?
    @OptionGroup var network: NetworkOptions

    func validate() throws {
        _ = try parseType(type)
    }

    func run() async throws {
        let serviceType = try parseType(type)
        let discovery = try await network.start()
        let domains = network.domains
        if !network.json {
            // A browse can be quiet for a long time: say what it is doing, on stderr.
            var places: [String] = []
            if network.wideArea.usesLink {
                let where_ = network.interfaces.isEmpty ? "all interfaces" : network.interfaces.joined(separator: ", ")
                let how = discovery.backendInUse == .system ? "through the system's DNS-SD daemon" : "with the embedded mDNS engine"
                places.append("on \(where_) \(how)")
            }
            let dns = domains.filter { $0 != ServiceType.localDomain }.map { String($0.description.dropLast()) }
            if !dns.isEmpty { places.append("in \(dns.joined(separator: ", ")) over unicast DNS") }
            let until = timeout.map { "for \(Self.seconds($0)) s" } ?? "until Ctrl-C"
            status("Browsing \(serviceType) \(places.joined(separator: " and ")), \(until)...")
        }
        let events = discovery.browse(serviceType, resolve: resolve, domains: domains)
        let started = ContinuousClock.now
        let found = await untilTermination(timeout: timeout.map { .milliseconds(Int($0 * 1000)) }) {
            var found = 0
            for await event in events {
                if case .found = event { found += 1 }
                await StandardOutput.events.emit(render(event))
            }
            return found
        } ?? 0
        await discovery.shutdown()
        if found == 0, !network.json {
            // Silence would look like success with nothing to say; it may be a wrong type or a
            // network that carries no multicast.
            let elapsed = Self.seconds((milliseconds(ContinuousClock.now - started) / 100).rounded() / 10)
            let hint = network.wideArea.usesDNS
                ? "check the type with `nearby types --domain DOMAIN` and the domain with `nearby domains`"
                : "check the type with `nearby types`; mDNS does not cross routers or VPNs: see --domain"
            status("nearby: found no \(serviceType) service in \(elapsed) s (\(hint))")
        }
    }

    /// 3 for 3.0, 1.5 for 1.5.
    static func seconds(_ value: Double) -> String {
        value == value.rounded() ? String(Int(value)) : String(value)
    }

    func render(_ event: BrowseEvent) -> String {
        let kind = event.caseName
        let resolved = event.resolved
        let service: DiscoveredService
        switch event {
        case .found(let found, _), .updated(let found, _), .lost(let found):
            service = found
        case .interrupted(let failure):
            let error = failure.description
            return network.json
                ? JSONText.object([("event", .string("interrupted")), ("error", .string(error))])
                : "interrupted  \(error) (browsing again when it returns)"
        case .restored:
            return network.json ? JSONText.object([("event", .string("restored"))]) : "restored  browsing again"
        }
        if network.json {
            var members: [(String, OutputValue)] = [
                ("event", .string(kind)), ("name", .string(service.name)), ("type", .string(service.type.description)),
                ("domain", .string(service.domain.description)), ("interface", .string(service.interface.name)),
            ]
            if let resolved { members += resolvedMembers(resolved) }
            return JSONText.object(members)
        }
        let place = service.domain == ServiceType.localDomain ? service.interface.name : String(service.domain.description.dropLast())
        var line = kind.padded(toUTF16Length: 8) + "\"\(service.name)\"  \(service.type)  \(place)"
        if let resolved {
            line += "  \(resolved.host.description.dropLast()):\(resolved.port)  \(addressesText(resolved).joined(separator: " "))"
            if !resolved.info.isEmpty { line += "  \(resolved.info)" }
        }
        return line
    }
}
