public import ArgumentParser
import DNSWire
import Logging
import ConnectionBroker
import NearbyBasics
import NearbyDiscovery
import PeerConnection

/// How a command reports: the same three options on every command that uses the network.
struct OutputOptions: ParsableArguments {
    @Flag(help: "Print one JSON object per line instead of text.")
    var json = false

    @Flag(name: .shortAndLong, help: "Say on stderr what the command does: interfaces, drops, connections, and why a service does not resolve yet (--log-level debug).")
    var verbose = false

    @Option(help: ArgumentHelp("How much to log on stderr (default: warning; --verbose: debug).",
                               valueName: "trace|debug|info|notice|warning|error|critical"))
    var logLevel: Logger.Level?

    /// The logger the options ask for, writing to stderr.
    func logger(_ label: String = "nearby") -> Logger {
        CommandLogging.bootstrap()
        var logger = Logger(label: label)
        logger.logLevel = logLevel ?? (verbose ? .debug : .warning)
        return logger
    }
}

/// Options every discovery command shares.
struct NetworkOptions: ParsableArguments {
    @Option(name: .customLong("interface"), help: "Use only this interface (repeat for several). Default: all multicast-capable ones but loopback.")
    var interfaces: [String] = []

    @Option(help: ArgumentHelp(
        "embedded: Nearby's own mDNS engine; system: the host's avahi-daemon (dns_sd); auto: system when a daemon answers, else embedded.",
        valueName: "embedded|system|auto"))
    var backend: BackendChoice = .automatic

    @OptionGroup(title: "DOMAINS") var wideArea: WideAreaOptions

    @OptionGroup var output: OutputOptions

    var json: Bool { output.json }
    /// The domains to work in (`local.` unless --domain says otherwise).
    var domains: [DomainName] { (try? wideArea.domains) ?? [ServiceType.localDomain] }
    var logger: Logger { output.logger() }

    func validate() throws {
        if backend == .system && interfaces.count > 1 {
            throw ValidationError("--backend system works on all interfaces or on one; got \(interfaces.count) --interface options")
        }
    }

    /// Starts discovery (with `running: false`, prepares it: its work is then its `run()`, in
    /// the command's task group). `embeddedOnly` names an option that only the embedded engine
    /// has; it makes `auto` choose the embedded engine.
    func start(hostName: String? = nil, embeddedOnly: String? = nil, ttl: UInt32? = nil, running: Bool = true) async throws -> NearbyDiscovery {
        let choice: BackendChoice = backend == .automatic && embeddedOnly != nil ? .embedded : backend
        let settings = try wideArea.settings(hostLabel: hostName, ttl: ttl)
        let make = running ? NearbyDiscovery.start : NearbyDiscovery.prepare
        do {
            return try await make(
                choice, wideArea.usesLink ? hostName : nil, interfaces.isEmpty ? nil : interfaces, logger,
                settings, wideArea.usesLink)
        } catch let error as DiscoveryError where error.code == .invalidInput {
            throw ValidationError(error.description)  // an interface that is not there: bad input, exit 2
        } catch let error as DiscoveryError {
            throw RuntimeFailure(error.description)
        }
    }
}

extension BackendChoice: ExpressibleByArgument {}
extension Logger.Level: @retroactive ExpressibleByArgument {}

/// swift-log's handler for the command-line tool: lines on stderr, with a time stamp on a
/// terminal or in a file, or with the syslog priority when stderr is the systemd journal (a
/// service's), which keeps each line's level. The process sets it once; each command's logger
/// then picks its level.
enum CommandLogging {
    private static let once: Void = {
        if JournalStream.isStandardError {
            LoggingSystem.bootstrap { label in JournalLogHandler(label: label) }
        } else {
            LoggingSystem.bootstrap { label in StreamLogHandler.standardError(label: label) }
        }
    }()
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

/// `--host` as `connect` and `pair` take it: a `.local` name is looked up over mDNS (the
/// system daemon when one answers, else the embedded engine); anything else is passed on.
enum HostLookup {
    static func isLocal(_ host: String) -> Bool {
        let name = host.lowercased()
        return name.hasSuffix(".local") || name.hasSuffix(".local.")
    }

    /// The address to dial for `host`: IPv4 first, then IPv6 (link-local ones with `%index`).
    static func address(of host: String, logger: Logger) async throws -> String {
        guard isLocal(host) else { return host }
        let discovery: NearbyDiscovery
        do { discovery = try await NearbyDiscovery.start(logger: logger) } catch {
            throw RuntimeFailure("cannot look up \(host) over mDNS: \(error)")
        }
        let found: [IPAddress]
        do {
            found = try await discovery.addresses(ofHost: host)
            await discovery.shutdown()
        } catch {
            await discovery.shutdown()
            if error.code == .invalidInput { throw ValidationError("--host: \(error.message)") }
            throw RuntimeFailure("cannot connect to \(host): \(error)")
        }
        logger.debug("\(host) is at \(found.map(\.description).joined(separator: ", "))")
        guard let first = found.first else { throw RuntimeFailure("no address for \(host)") }
        return first.description
    }
}

/// `connect TYPE …` and `peers`: a broker that browses (and does not advertise), on a discovery
/// of its own.
enum BrowsingBroker {
    /// Discovery started, and the link already browsed for `type`, before the broker exists:
    /// the command reads its identity and trust store while the link answers, and the broker's
    /// own browse then gets what came at once (the answer window counts from this browse).
    struct Early: Sendable {
        let discovery: NearbyDiscovery
        let began: ContinuousClock.Instant
        /// Kept until the broker browses, then dropped (which stops it).
        let browse: EventStream<BrowseEvent>?
    }

    static func begin(type: ServiceType, backend: BackendChoice, wideArea: WideAreaOptions, logger: Logger) async throws -> Early {
        let discovery: NearbyDiscovery
        do {
            discovery = try await NearbyDiscovery.start(
                backend: backend, logger: logger, wideArea: try wideArea.settings(), multicast: wideArea.usesLink)
        } catch let error as ValidationError {
            throw error
        } catch {
            throw RuntimeFailure("cannot start discovery: \(error)")
        }
        let began = ContinuousClock.now
        let browse = wideArea.usesLink ? discovery.browse(type, resolve: true, domains: [ServiceType.localDomain]) : nil
        return Early(discovery: discovery, began: began, browse: browse)
    }

    static func start(
        type: ServiceType, configuration: PeerConnectionConfiguration, backend: BackendChoice, wideArea: WideAreaOptions, logger: Logger
    ) async throws -> (NearbyDiscovery, ConnectionBroker) {
        try await start(type: type, configuration: configuration, early: begin(type: type, backend: backend, wideArea: wideArea, logger: logger),
                        wideArea: wideArea, logger: logger)
    }

    static func start(
        type: ServiceType, configuration: PeerConnectionConfiguration, early: Early, wideArea: WideAreaOptions, logger: Logger
    ) async throws -> (NearbyDiscovery, ConnectionBroker) {
        let discovery = early.discovery
        var settings = BrokerConfiguration(connection: configuration, serviceType: type)
        settings.advertises = false
        settings.logger = logger
        if early.browse != nil { settings.browsingSince = early.began }
        do {
            settings.domains = try wideArea.domains
            let broker = try await ConnectionBroker.start(settings, discovery: discovery)
            withExtendedLifetime(early.browse) {}
            return (discovery, broker)
        } catch {
            await discovery.shutdown()
            if let error = error as? BrokerError { throw RuntimeFailure(error.message) }
            throw error
        }
    }
}

/// `--host LABEL` for advertise and serve: the host name published in `.local` must be one
/// DNS label of letters, digits and hyphens (RFC 952/1123), as avahi and mDNSResponder want.
func checkHostLabel(_ host: String) throws {
    func allowed(_ character: Character) -> Bool { character.isASCII && (character.isLetter || character.isNumber || character == "-") }
    guard !host.isEmpty, host.utf8.count <= 63, host.allSatisfy(allowed), !host.hasPrefix("-"), !host.hasSuffix("-") else {
        let bad = Set(host.filter { !allowed($0) }.map { $0 == " " ? "a space" : "\"\($0)\"" }).sorted()
        let detail =
            host.isEmpty ? "it is empty"
            : host.utf8.count > 63 ? "it has \(host.utf8.count) bytes"
            : !bad.isEmpty ? "it has \(bad.joined(separator: ", "))"
            : "it begins or ends with a hyphen"
        throw ValidationError(
            "--host \"\(host)\" is not a usable host name: \(detail); use 1-63 letters, digits and hyphens, not beginning or ending with a hyphen (for example build-box)")
    }
}
