public import ArgumentParser
import Dispatch
import Foundation
import Logging
import NearbyDiscovery

/// Options every discovery command shares.
struct NetworkOptions: ParsableArguments {
    @Option(name: .customLong("interface"), help: "Use only this interface (repeat for several). Default: all multicast-capable ones but loopback.")
    var interfaces: [String] = []

    @Option(help: ArgumentHelp(
        "embedded: Nearby's own mDNS engine; system: the host's avahi-daemon (dns_sd); auto: system when a daemon answers, else embedded.",
        valueName: "embedded|system|auto"))
    var backend: BackendChoice = .automatic

    @Flag(help: "Print one JSON object per line instead of text.")
    var json = false

    @Flag(name: .shortAndLong, help: "Say on stderr what discovery does: interfaces, drops, and why a service does not resolve yet (--log-level debug).")
    var verbose = false

    @Option(help: ArgumentHelp("How much to log on stderr (default: warning; --verbose: debug).",
                               valueName: "trace|debug|info|notice|warning|error|critical"))
    var logLevel: Logger.Level?

    /// The logger the options ask for, writing to stderr.
    var logger: Logger {
        CommandLogging.bootstrap()
        var logger = Logger(label: "nearby")
        logger.logLevel = logLevel ?? (verbose ? .debug : .warning)
        return logger
    }

    func validate() throws {
        if backend == .system && interfaces.count > 1 {
            throw ValidationError("--backend system works on all interfaces or on one; got \(interfaces.count) --interface options")
        }
    }

    /// Starts discovery. `embeddedOnly` names an option that only the embedded engine has; it
    /// makes `auto` choose the embedded engine.
    func start(hostName: String? = nil, embeddedOnly: String? = nil) async throws -> NearbyDiscovery {
        let choice: BackendChoice = backend == .automatic && embeddedOnly != nil ? .embedded : backend
        do {
            return try await NearbyDiscovery.start(
                backend: choice, hostName: hostName, interfaces: interfaces.isEmpty ? nil : interfaces, logger: logger)
        } catch let error as DiscoveryError {
            throw RuntimeFailure(error.description)
        }
    }
}

extension BackendChoice: ExpressibleByArgument {}
extension Logger.Level: @retroactive ExpressibleByArgument {}

/// swift-log's handler for the command-line tool: lines on stderr. The process sets it once;
/// each command's logger then picks its level.
enum CommandLogging {
    private static let once: Void = LoggingSystem.bootstrap { label in StreamLogHandler.standardError(label: label) }
    static func bootstrap() { once }
}

/// A failure at run time (exit status 1), with a message for stderr.
struct RuntimeFailure: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

func parseType(_ text: String) throws -> ServiceType {
    do {
        return try ServiceType(parsing: text)
    } catch {
        throw ValidationError(error.description)
    }
}

/// Prints a line at once (unbuffered), so a pipe sees each event as it happens.
func printLine(_ text: String) {
    FileHandle.standardOutput.write(Data((text + "\n").utf8))
}

/// Waits for SIGINT or SIGTERM, or until `timeout` has passed.
func waitForTermination(timeout: Duration? = nil) async {
    signal(SIGINT, SIG_IGN)
    signal(SIGTERM, SIG_IGN)
    let queue = DispatchQueue(label: "nearby.signals")
    await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
        let resumed = ResumeOnce(continuation)
        for number in [SIGINT, SIGTERM] {
            let source = DispatchSource.makeSignalSource(signal: number, queue: queue)
            source.setEventHandler { resumed.resume() }
            source.resume()
            Signals.keep(source)
        }
        if let timeout {
            let parts = timeout.components
            let nanoseconds = Int(parts.seconds) * 1_000_000_000 + Int(parts.attoseconds / 1_000_000_000)
            queue.asyncAfter(deadline: .now() + .nanoseconds(nanoseconds)) { resumed.resume() }
        }
    }
}

/// Keeps signal sources alive for the life of the process.
enum Signals {
    nonisolated(unsafe) private static var sources: [any DispatchSourceSignal] = []
    private static let lock = NSLock()
    static func keep(_ source: any DispatchSourceSignal) {
        lock.lock()
        sources.append(source)
        lock.unlock()
    }
}

final class ResumeOnce: @unchecked Sendable {
    private let lock = NSLock()
    private var continuation: CheckedContinuation<Void, Never>?
    init(_ continuation: CheckedContinuation<Void, Never>) { self.continuation = continuation }
    func resume() {
        lock.lock()
        let pending = continuation
        continuation = nil
        lock.unlock()
        pending?.resume()
    }
}

/// Addresses as text; a link-local IPv6 address names its interface (`fe80::1%eth0`).
func addressesText(_ resolved: ResolvedService) -> [String] {
    resolved.addresses.map { address in
        if case .v6(let v6, let scope?) = address {
            return scope == resolved.service.interface.index ? "\(v6)%\(resolved.service.interface.name)" : address.description
        }
        return address.description
    }
}

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

            With --backend system (or auto, when avahi-daemon runs) the daemon publishes the \
            service under its own host name and renames it "NAME #2" on a conflict; --host and \
            --ttl need the embedded engine, and auto picks it when they are given.
            """
    )

    @Argument(help: "Instance name people see (UTF-8, up to 63 bytes).")
    var name: String
    @Argument(help: "Service type, e.g. _openagents._tcp.")
    var type: String
    @Argument(help: "TCP or UDP port, 1-65535.")
    var port: Int
    @Argument(help: "TXT entries: key=value, key= or key.")
    var txt: [String] = []
    @Option(name: .customLong("subtype"), help: "Also list the service under this subtype (repeatable), e.g. _bridge.")
    var subtypes: [String] = []
    @Option(name: .customLong("host"), help: "Host label to publish in .local (default: this machine's name).")
    var host: String?
    @Option(help: "TTL in seconds of the service's records (default: 120 for SRV, 4500 for PTR and TXT). Short TTLs make a crashed advertiser vanish sooner.")
    var ttl: Int?
    @Option(name: .customLong("txt-file"), help: ArgumentHelp(
        "More TXT entries, one per line (blank lines ignored). On SIGHUP the file is read again and the TXT record updated.",
        valueName: "file"))
    var txtFile: String?
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
        guard (1...65535).contains(port) else { throw ValidationError("port \(port) is out of range; use 1-65535") }
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
        if let ttl, !(1...4500).contains(ttl) { throw ValidationError("--ttl \(ttl) is out of range; use 1-4500 seconds") }
        if let host, host.isEmpty || host.utf8.count > 63 || host.contains(".") {
            throw ValidationError("host label \"\(host)\" must be 1-63 bytes without dots")
        }
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
        for warning in info.warnings { FileHandle.standardError.write(Data("nearby: warning: \(warning)\n".utf8)) }
        let discovery = try await network.start(hostName: host, embeddedOnly: embeddedOnlyOption)
        let ad = try await discovery.advertise(
            name, type: serviceType, port: UInt16(port), info: info, subtypes: subtypes, ttl: ttl.map(UInt32.init))
        if network.json {
            var members: [(String, JSONValue)] = [
                ("event", .string("advertising")), ("name", .string(ad.name)), ("type", .string(serviceType.description)),
                ("domain", .string(serviceType.domain.description)), ("port", .number(Double(port))),
            ]
            if ad.name != name { members.append(("requested", .string(name))) }
            printLine(JSONText.object(members))
        } else {
            let renamed = ad.name == name ? "" : " (\"\(name)\" was taken)"
            printLine("Advertising \"\(ad.name)\" (\(serviceType), port \(port))\(renamed)")
        }
        let events = Task {
            for await event in ad.events { printLine(render(event, type: serviceType)) }
        }
        if txtFile != nil {
            onHangUp {
                do {
                    let info = try discoveryInfo()
                    Task { await ad.update(info: info) }
                } catch {
                    FileHandle.standardError.write(Data("nearby: TXT not updated: \(error)\n".utf8))
                }
            }
        }
        await waitForTermination()
        events.cancel()
        await discovery.shutdown()
    }

    func render(_ event: AdvertisementEvent, type: ServiceType) -> String {
        let name = event.name ?? ""
        let error = event.error.map(\.description) ?? ""
        switch event.kind {
        case .renamed:
            return network.json
                ? JSONText.object([("event", .string("renamed")), ("name", .string(name)), ("type", .string(type.description))])
                : "Renamed to \"\(name)\" after a conflict"
        case .interrupted:
            return network.json
                ? JSONText.object([("event", .string("interrupted")), ("error", .string(error))])
                : "Interrupted: \(error) (publishing again when it returns)"
        case .restored:
            return network.json
                ? JSONText.object([("event", .string("restored")), ("name", .string(name)), ("type", .string(type.description))])
                : "Restored: advertising \"\(name)\" again"
        default:
            return network.json ? JSONText.object([("event", .string(event.kind.description))]) : event.description
        }
    }
}

/// Runs `handler` on every SIGHUP.
func onHangUp(_ handler: @escaping @Sendable () -> Void) {
    signal(SIGHUP, SIG_IGN)
    let source = DispatchSource.makeSignalSource(signal: SIGHUP, queue: DispatchQueue(label: "nearby.sighup"))
    source.setEventHandler(handler: handler)
    source.resume()
    Signals.keep(source)
}

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
            """
    )

    @Argument(help: "Service type, e.g. _openagents._tcp (or _sub._sub._type._tcp).")
    var type: String
    @Flag(help: "Resolve each service: host, port, addresses, TXT.")
    var resolve = false
    @Option(help: "Stop after this many seconds (exit 0).")
    var timeout: Double?
    @OptionGroup var network: NetworkOptions

    func validate() throws {
        _ = try parseType(type)
        if let timeout, !(timeout > 0) { throw ValidationError("--timeout must be a positive number of seconds") }
    }

    func run() async throws {
        let serviceType = try parseType(type)
        let discovery = try await network.start()
        let events = discovery.browse(serviceType, resolve: resolve)
        let printer = Task {
            for await event in events { printLine(render(event)) }
        }
        await waitForTermination(timeout: timeout.map { .milliseconds(Int($0 * 1000)) })
        printer.cancel()
        await discovery.shutdown()
    }

    func render(_ event: BrowseEvent) -> String {
        let kind = event.kind.description
        let resolved = event.resolved
        switch event.kind {
        case .interrupted:
            let error = event.error.map(\.description) ?? ""
            return network.json
                ? JSONText.object([("event", .string("interrupted")), ("error", .string(error))])
                : "interrupted  \(error) (browsing again when it returns)"
        case .restored:
            return network.json ? JSONText.object([("event", .string("restored"))]) : "restored  browsing again"
        default:
            break
        }
        guard let service = event.service else {
            return network.json ? JSONText.object([("event", .string(kind))]) : kind
        }
        if network.json {
            var members: [(String, JSONValue)] = [
                ("event", .string(kind)), ("name", .string(service.name)), ("type", .string(service.type.description)),
                ("domain", .string(service.domain.description)), ("interface", .string(service.interface.name)),
            ]
            if let resolved { members += resolvedMembers(resolved) }
            return JSONText.object(members)
        }
        var line = kind.padding(toLength: 8, withPad: " ", startingAt: 0) + "\"\(service.name)\"  \(service.type)  \(service.interface.name)"
        if let resolved {
            line += "  \(resolved.host.description.dropLast()):\(resolved.port)  \(addressesText(resolved).joined(separator: " "))"
            if !resolved.info.isEmpty { line += "  \(resolved.info)" }
        }
        return line
    }
}

func resolvedMembers(_ resolved: ResolvedService) -> [(String, JSONValue)] {
    [
        ("host", .string(resolved.host.description)), ("port", .number(Double(resolved.port))),
        ("addresses", .array(addressesText(resolved).map { .string($0) })), ("txt", txtJSON(resolved.info)),
    ]
}

// MARK: - resolve

struct Resolve: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Resolve one service to its host, port, addresses and TXT.",
        discussion: """
            Exits 0 with one result, or 1 with a message when nothing answers in time.

            Example:
              nearby resolve "Build Box" _openagents._tcp --json
            """
    )

    @Argument(help: "Instance name, e.g. \"Build Box\".")
    var name: String
    @Argument(help: "Service type, e.g. _openagents._tcp.")
    var type: String
    @Option(help: "Give up after this many seconds.")
    var timeout: Double = 5
    @OptionGroup var network: NetworkOptions

    func validate() throws {
        do {
            _ = try ServiceInstanceName(name, type: try parseType(type))
        } catch let error as ServiceNameError {
            throw ValidationError(error.description)
        }
        guard timeout > 0 else { throw ValidationError("--timeout must be a positive number of seconds") }
    }

    func run() async throws {
        let serviceType = try parseType(type)
        let discovery = try await network.start()
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
        discussion: "Asks _services._dns-sd._udp.local. and prints each type once, for --timeout seconds."
    )

    @Option(help: "How long to listen, in seconds.")
    var timeout: Double = 3
    @OptionGroup var network: NetworkOptions

    func validate() throws {
        guard timeout > 0 else { throw ValidationError("--timeout must be a positive number of seconds") }
    }

    func run() async throws {
        let discovery = try await network.start()
        let types = discovery.serviceTypes()
        let printer = Task {
            for await type in types {
                if network.json {
                    printLine(JSONText.object([("event", .string("type")), ("type", .string(type.description)), ("domain", .string(type.domain.description))]))
                } else {
                    printLine(type.description)
                }
            }
        }
        try? await Task.sleep(for: .milliseconds(Int(timeout * 1000)))
        printer.cancel()
        await discovery.shutdown()
    }
}
