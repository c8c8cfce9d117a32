import ArgumentParser
import Dispatch
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import DNSWire
import Logging
import NearbyDiscovery
import NetworkPlatform
import PeerTrust
import UnicastDNSSD

// MARK: - advertise

struct Advertise: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Publish a service until interrupted, then say goodbye.",
        discussion: """
            TXT entries are key=value, key= (an empty value) or key (a boolean attribute); each \
            entry is at most 255 bytes. Prints one line once the name is won — renamed to \
            "NAME (2)" and so on if another host holds it — and runs until SIGINT or SIGTERM.

            Examples:
              nearby advertise "Build Box" _openagents._tcp 9099 version=0.2.2 tls
              nearby advertise --json --subtype _bridge "Build Box" _openagents._tcp 9099
              nearby advertise --txt-file info.txt "Build Box" _openagents._tcp 9099
                  (then `kill -HUP PID` republishes the TXT after info.txt changed)
              nearby advertise --dry-run "Build Box" _openagents._tcp 9099 version=0.2.2
                  (check the input and show the records; nothing is sent)

            With --domain DOMAIN the service is registered in a DNS zone instead (or as well, \
            with --domain local too) by DNS UPDATE signed with --tsig KEYFILE, refreshed while \
            it runs and removed on SIGINT/SIGTERM; a SIGKILL leaves the records behind until \
            someone removes them (their TTL, 30 s by default or --ttl, keeps caches short):
              nearby advertise Box _ssh._tcp 22 --domain example.com --tsig nearby.key

            With --registrar ADDRESS the service is registered with an SRP registrar (RFC 9665, \
            e.g. `nearby registrar` on the container's host or the router) instead: one DNS \
            UPDATE signed with this peer's identity key (SIG(0)), which the registrar advertises \
            on its link. The name belongs to that key first come, first served; the registration \
            is refreshed while it runs and removed on SIGINT/SIGTERM (the name stays held for \
            the key lease). This is the way out of a container or VM whose network carries no \
            multicast to the LAN:
              nearby advertise Boxed _openagents._tcp 9099 --registrar 172.17.0.1

            With --backend system (or auto, when avahi-daemon runs) the daemon publishes the \
            service under its own host name and renames it "NAME #2" on a conflict; --host and \
            --ttl need the embedded engine, and auto picks it when they are given.

            Exit status: 0 stopped by SIGINT or SIGTERM (goodbyes sent); 1 a failure at run time, said on stderr; 2 bad input.
            """
    )

    @Argument(help: "Instance name people see (UTF-8, up to 63 bytes).")
    var name: String
    @Argument(help: "Service type, e.g. _openagents._tcp.")
    var type: String
    @Argument(help: "TCP or UDP port, 1-65535.", transform: NumberInput.integer("port", 1...65535, use: "1-65535"))
    var port: Int
    @Argument(help: "TXT entries: key=value, key= or key.")
    var txt: [String] = []
    @Option(name: .customLong("subtype"), help: "Also list the service under this subtype (repeatable), e.g. _bridge.")
    var subtypes: [String] = []
    @Option(name: .customLong("host"), help: "Host label to publish in .local (default: this machine's name).")
    var host: String?
    @Option(help: "TTL in seconds of the service's records (default: 120 for SRV, 4500 for PTR and TXT). Short TTLs make a crashed advertiser vanish sooner.",
            transform: NumberInput.integer("--ttl", 1...4500, use: "1-4500 seconds"))
    var ttl: Int?
    @Option(name: .customLong("txt-file"), help: ArgumentHelp(
        "More TXT entries, one per line (blank lines ignored). On SIGHUP the file is read again and the TXT record updated.",
        valueName: "file"))
    var txtFile: String?
    @Flag(name: .customLong("dry-run"), help: "Check everything and print the records that would be published; send nothing.")
    var dryRun = false
    @OptionGroup(title: "SRP REGISTRATION (where multicast does not reach the LAN)") var srp: RegistrarOptions
    @OptionGroup var state: StateDirectory
    @OptionGroup var network: NetworkOptions

    /// The TXT entries: the arguments, then the lines of --txt-file.
    func discoveryInfo() throws -> DiscoveryInfo {
        var entries = txt
        if let txtFile {
            guard let data = FileManager.default.contents(atPath: txtFile) else {
                throw ValidationError("cannot read --txt-file \(txtFile)")
            }
            entries += String(decoding: data, as: UTF8.self).split(whereSeparator: \.isNewline).map(String.init).filter { !$0.isEmpty }
        }
        do {
            return try DiscoveryInfo(entries)
        } catch {
            throw ValidationError(txtFile.map { "\(error.description) (TXT arguments and \($0))" } ?? error.description)
        }
    }

    func validate() throws {
        _ = try parseType(type)
        do {
            let serviceType = try parseType(type)
            _ = try ServiceInstanceName(name, type: serviceType)
            for subtype in subtypes { _ = try serviceType.withSubtype(subtype) }
            _ = try discoveryInfo()
        } catch let error as ServiceNameError {
            throw ValidationError(error.description)
        } catch let error as DiscoveryInfoError {
            throw ValidationError(error.description)
        }
        if let host { try checkHostLabel(host) }

        if network.backend == .system, let option = embeddedOnlyOption {
            throw ValidationError("\(option) needs --backend embedded: with the system backend avahi-daemon chooses host name and TTLs")
        }
    }

    /// The first option given that only the embedded engine supports.
    var embeddedOnlyOption: String? {
        host != nil ? "--host" : ttl != nil ? "--ttl" : nil
    }

    func run() async throws {
        let serviceType = try parseType(type)
        let info = try discoveryInfo()
        for warning in info.warnings { writeToStandardError("nearby: warning: \(warning)\n") }
        if dryRun {
            try DryRun.show(name, type: serviceType, port: UInt16(port), info: info, subtypes: subtypes, ttl: ttl.map(UInt32.init),
                            network: network, hostName: host)
            return
        }
        if srp.registrar != nil {
            try await registerWithSRP(type: serviceType, info: info)
            return
        }
        // Prepared, and run as a child of this command: the engine's work lives in this task group.
        let discovery = try await network.start(
            hostName: host, embeddedOnly: network.wideArea.usesLink ? embeddedOnlyOption : nil, ttl: ttl.map(UInt32.init), running: false)
        try await withThrowingDiscardingTaskGroup { group in
            group.addTask { try await discovery.run() }
            try await advertise(on: discovery, type: serviceType, info: info)
            group.cancelAll()
        }
    }

    /// Publishes in every domain asked for, says so, and keeps the advertisements (and the
    /// SIGHUP reloads) until SIGINT or SIGTERM; then the goodbyes.
    private func advertise(on discovery: NearbyDiscovery, type serviceType: ServiceType, info: DiscoveryInfo) async throws {
        var ads: [Advertisement] = []
        for domain in network.domains {
            let typed = serviceType.inDomain(domain)
            do {
                ads.append(try await discovery.advertise(
                    name, type: typed, port: UInt16(port), info: info, subtypes: subtypes, ttl: ttl.map(UInt32.init)))
            } catch let error as DiscoveryError {
                // What was already published is withdrawn: nothing half-done stays behind.
                await discovery.shutdown()
                throw RuntimeFailure(error.description)
            }
        }
        for ad in ads {
            let inDNS = ad.type.domain != ServiceType.localDomain
            if network.json {
                var members: [(String, OutputValue)] = [
                    ("event", .string("advertising")), ("name", .string(ad.name)), ("type", .string(serviceType.description)),
                    ("domain", .string(ad.type.domain.description)), ("port", .number(Double(port))),
                ]
                if ad.name != name { members.append(("requested", .string(name))) }
                printLine(JSONText.object(members))
            } else {
                let renamed = ad.name == name ? "" : " (\"\(name)\" was taken)"
                let place = inDNS ? " in \(ad.type.domain.description.dropLast())" : ""
                printLine("Advertising \"\(ad.name)\" (\(serviceType), port \(port))\(place)\(renamed)")
            }
        }
        let reloads = txtFile != nil ? hangUps() : nil
        let command = self
        let published = ads
        let idle = QuietRelease(logger: network.logger)
        idle.activity()
        _ = await untilTermination {
            await withDiscardingTaskGroup { group in
                group.addTask { await idle.run() }
                for ad in published {
                    group.addTask {
                        for await event in ad.events {
                            idle.activity()
                            printLine(command.render(event, type: ad.type))
                        }
                    }
                }
                guard let reloads else { return }
                // SIGHUP reads the TXT file again.
                group.addTask {
                    for await _ in reloads {
                        do {
                            let info = try command.discoveryInfo()
                            for ad in published { await ad.update(info: info) }
                        } catch {
                            writeToStandardError("nearby: TXT not updated: \(error)\n")
                        }
                    }
                }
            }
        }
        await discovery.shutdown()
    }

    /// Registers with an SRP registrar, keeps the registration refreshed until SIGINT or
    /// SIGTERM, then removes it.
    private func registerWithSRP(type serviceType: ServiceType, info: DiscoveryInfo) async throws {
        let identity = try state.identityMadeIfMissing()
        let service = SRPRequest.Service(instance: name, type: serviceType, port: UInt16(port), info: info, subtypes: subtypes)
        let (registration, label, addresses) = try await srp.register(service, hostLabel: host, identity: identity, logger: network.logger)
        let granted = registration.granted
        let server = registration.registrar
        if network.json {
            printLine(JSONText.object([
                ("event", .string("registered")), ("name", .string(name)), ("type", .string(serviceType.description)),
                ("registrar", .string(server.description)), ("host", .string(label)),
                ("addresses", .array(addresses.map { .string($0.description) })), ("lease", .number(Double(granted.lease))),
                ("keyLease", granted.keyLease.map { .number(Double($0)) } ?? .null), ("peerID", .string(identity.peerID.description)),
            ]))
        } else {
            printLine("Registered \"\(name)\" (\(serviceType), port \(port)) with the registrar at \(server): host \(label) at \(addresses.map(\.description).joined(separator: ", ")), lease \(granted.lease) s")
        }
        let logger = network.logger
        _ = await untilTermination {
            await registration.keepRefreshed { logger.warning("\($0)") }
        }
        do {
            try await registration.remove()
            if network.json {
                printLine(JSONText.object([("event", .string("removed")), ("name", .string(name)), ("registrar", .string(server.description))]))
            }
        } catch {
            writeToStandardError("nearby: the registration could not be removed: \(error.message) (it lasts until its lease runs out)\n")
        }
    }

    func render(_ event: AdvertisementEvent, type: ServiceType) -> String {
        switch event {
        case .renamed(let name):
            return network.json
                ? JSONText.object([("event", .string("renamed")), ("name", .string(name)), ("type", .string(type.description)), ("domain", .string(type.domain.description))])
                : "Renamed to \"\(name)\" after a conflict"
        case .interrupted(let failure):
            let error = failure.description
            return network.json
                ? JSONText.object([("event", .string("interrupted")), ("domain", .string(type.domain.description)), ("error", .string(error))])
                : "Interrupted: \(error) (publishing again when it returns)"
        case .restored(let name):
            return network.json
                ? JSONText.object([("event", .string("restored")), ("name", .string(name)), ("type", .string(type.description))])
                : "Restored: advertising \"\(name)\" again"
        }
    }
}
