import ArgumentParser
import Dispatch
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Logging
import NearbyDiscovery

// MARK: - resolve

struct Resolve: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Resolve one service to its host, port, addresses and TXT.",
        discussion: """
            Exit status: 0 one result; 1 nothing answered in time, or a failure at run time, said on stderr; 2 bad input.

            Examples:
              nearby resolve "Build Box" _openagents._tcp
              nearby resolve "Build Box" _openagents._tcp --json --timeout 2
            """
    )

    @Argument(help: "Instance name, e.g. \"Build Box\".")
    var name: String
    @Argument(help: "Service type, e.g. _openagents._tcp.")
    var type: String
    @Option(help: "Give up after this many seconds.", transform: NumberInput.seconds("--timeout", maximum: 86_400))
    var timeout: Double = 5
    @OptionGroup var network: NetworkOptions

    func validate() throws {
        do {
            _ = try ServiceInstanceName(name, type: try parseType(type))
        } catch let error as ServiceNameError {
            throw ValidationError(error.description)
        }
    }

    func run() async throws {
        let serviceType = try parseType(type)
        let discovery = try await network.start()
        if !network.json { status("Resolving \"\(name)\" (\(serviceType)), for up to \(Browse.seconds(timeout)) s...") }
        let resolved: ResolvedService
        do {
            resolved = try await Self.resolve(name, type: serviceType, in: network.domains, discovery: discovery, timeout: .milliseconds(Int(timeout * 1000)))
        } catch let error as DiscoveryError {
            await discovery.shutdown()
            throw RuntimeFailure(error.description)
        }
        if network.json {
            printLine(JSONText.object([
                ("event", .string("resolved")), ("name", .string(name)), ("type", .string(serviceType.description)),
                ("domain", .string(resolved.service.domain.description)),
            ] + resolvedMembers(resolved)))
        } else {
            let domain = resolved.service.domain == ServiceType.localDomain ? "" : " in \(resolved.service.domain.description.dropLast())"
            printLine("\"\(name)\" (\(serviceType))\(domain)")
            printLine("  host       \(resolved.host.description.dropLast()):\(resolved.port)")
            printLine("  addresses  \(addressesText(resolved).joined(separator: ", "))")
            printLine("  txt        \(resolved.info.isEmpty ? "(none)" : resolved.info.description)")
        }
        await discovery.shutdown()
    }

    /// The first resolution of `name` in any of `domains`, asked in all at once.
    static func resolve(_ name: String, type: ServiceType, in domains: [DomainName], discovery: NearbyDiscovery, timeout: Duration) async throws
        -> ResolvedService
    {
        let outcome = await withTaskGroup(of: Result<ResolvedService, any Error>.self) { group in
            for domain in domains {
                group.addTask {
                    do {
                        return .success(try await discovery.resolve(name, type: type.inDomain(domain), timeout: timeout))
                    } catch {
                        return .failure(error)
                    }
                }
            }
            var last: (any Error)?
            for await result in group {
                switch result {
                case .success(let resolved):
                    group.cancelAll()
                    return Result<ResolvedService, any Error>.success(resolved)
                case .failure(let error): last = error
                }
            }
            return .failure(last ?? DiscoveryError(.timeout, "no domain to look in"))
        }
        return try outcome.get()
    }
}

// MARK: - types

struct Types: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "List the service types advertised on the network.",
        discussion: """
            Asks _services._dns-sd._udp.local. (and _services._dns-sd._udp.DOMAIN for each \
            --domain) and prints each type once, for --timeout seconds.

            Examples:
              nearby types
              nearby types --timeout 10 --json
              nearby types --backend embedded --interface eth0
              nearby types --domain lab.example.test

            Exit status: 0 stopped by --timeout, SIGINT or SIGTERM, whether or not a type was seen; 1 a failure at run time, said on stderr; 2 bad input.
            """
    )

    @Option(help: "How long to listen, in seconds.", transform: NumberInput.seconds("--timeout", maximum: 86_400))
    var timeout: Double = 3
    @OptionGroup var network: NetworkOptions

    func run() async throws {
        let discovery = try await network.start()
        if !network.json { status("Listening for service types for \(Browse.seconds(timeout)) s...") }
        let streams = network.domains.map { discovery.serviceTypes(in: $0) }
        let json = network.json
        _ = await untilTermination(timeout: .milliseconds(Int(timeout * 1000))) {
            await withTaskGroup(of: Void.self) { group in
                for types in streams {
                    group.addTask {
                        for await type in types {
                            if json {
                                printLine(JSONText.object([("event", .string("type")), ("type", .string(type.description)), ("domain", .string(type.domain.description))]))
                            } else {
                                printLine(type.domain == ServiceType.localDomain ? type.description : "\(type)  \(type.domain.description.dropLast())")
                            }
                        }
                    }
                }
            }
        }
        await discovery.shutdown()
    }
}
