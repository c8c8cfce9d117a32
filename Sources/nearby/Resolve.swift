import ArgumentParser
import Dispatch
import Foundation
import Logging
import NearbyDiscovery

// MARK: - resolve

struct Resolve: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Resolve one service to its host, port, addresses and TXT.",
        discussion: """
            Exits 0 with one result, or 1 with a message when nothing answers in time.

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
            resolved = try await discovery.resolve(name, type: serviceType, timeout: .milliseconds(Int(timeout * 1000)))
        } catch let error as DiscoveryError {
            await discovery.shutdown()
            throw RuntimeFailure(error.description)
        }
        if network.json {
            printLine(JSONText.object([
                ("event", .string("resolved")), ("name", .string(name)), ("type", .string(serviceType.description)),
                ("domain", .string(serviceType.domain.description)),
            ] + resolvedMembers(resolved)))
        } else {
            printLine("\"\(name)\" (\(serviceType))")
            printLine("  host       \(resolved.host.description.dropLast()):\(resolved.port)")
            printLine("  addresses  \(addressesText(resolved).joined(separator: ", "))")
            printLine("  txt        \(resolved.info.isEmpty ? "(none)" : resolved.info.description)")
        }
        await discovery.shutdown()
    }
}

// MARK: - types

struct Types: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "List the service types advertised on the network.",
        discussion: """
            Asks _services._dns-sd._udp.local. and prints each type once, for --timeout seconds.

            Examples:
              nearby types
              nearby types --timeout 10 --json
              nearby types --backend embedded --interface eth0
            """
    )

    @Option(help: "How long to listen, in seconds.", transform: NumberInput.seconds("--timeout", maximum: 86_400))
    var timeout: Double = 3
    @OptionGroup var network: NetworkOptions

    func run() async throws {
        let discovery = try await network.start()
        if !network.json { status("Listening for service types for \(Browse.seconds(timeout)) s...") }
        let types = discovery.serviceTypes()
        let json = network.json
        _ = await untilTermination(timeout: .milliseconds(Int(timeout * 1000))) {
            for await type in types {
                if json {
                    printLine(JSONText.object([("event", .string("type")), ("type", .string(type.description)), ("domain", .string(type.domain.description))]))
                } else {
                    printLine(type.description)
                }
            }
        }
        await discovery.shutdown()
    }
}
