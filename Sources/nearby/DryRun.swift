import ArgumentParser
import DNSWire
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import NearbyDiscovery

/// `--dry-run` for advertise and serve: what would be published, with nothing sent.
enum DryRun {
    /// Prints the plan: one "dryRun" JSON object, or a table of the records.
    static func show(
        _ name: String, type: ServiceType, port: UInt16, info: DiscoveryInfo, subtypes: [String], ttl: UInt32?,
        network: NetworkOptions, hostName: String?, extra: [(String, OutputValue)] = [], note: String? = nil
    ) throws {
        let plan: PlannedAdvertisement
        do {
            plan = try NearbyDiscovery.plan(
                name, type: type, port: port, info: info, subtypes: subtypes, ttl: ttl, hostName: hostName,
                interfaces: network.interfaces.isEmpty ? nil : network.interfaces)
        } catch let error as DiscoveryError {
            throw ValidationError(error.description)
        }
        let daemon: String? = switch network.backend {
        case .system: "with --backend system, avahi-daemon would publish the PTR, SRV and TXT records under its own host name, and the addresses itself"
        case .automatic where hostName == nil && ttl == nil:
            "with --backend auto, avahi-daemon publishes them instead when it runs (under its own host name)"
        default: nil
        }
        if network.json {
            var members: [(String, OutputValue)] = [
                ("event", .string("dryRun")), ("name", .string(name)), ("type", .string(type.description)), ("port", .number(Double(port))),
                ("instance", .string(plan.instance.description)), ("host", .string(plan.hostName.description)),
                ("interfaces", .array(plan.interfaces.map { .string($0) })), ("records", .array(plan.records.map(PacketJSON.record))),
            ]
            members += extra
            if let daemon { members.append(("backendNote", .string(daemon))) }
            printLine(JSONText.object(members))
            return
        }
        printLine("Dry run: nothing is sent. Advertising \"\(name)\" (\(type), port \(port)) would publish, as \(plan.hostName) on "
            + (plan.interfaces.isEmpty ? "no interface that is up" : plan.interfaces.joined(separator: ", ")) + ":")
        let rows = plan.records.map { record in
            [record.name.description, record.type.description, "TTL \(record.ttl)", PacketText.data(record.data)]
        }
        for line in alignedLines(rows) { printLine(line) }
        if let note { printLine(note) }
        if let daemon { printLine("(\(daemon))") }
    }
}
