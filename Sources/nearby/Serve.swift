import ArgumentParser
import CNearbySocket
import ConnectionBroker
import DNSWire
import FileTransfer
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import NearbyBasics
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif
import NearbyDiscovery
import Logging
import PeerConnection
import PeerTrust
import ServiceLifecycle

enum AcceptChoice: String, ExpressibleByArgument, CaseIterable {
    case trusted, all, ask
}

struct Serve: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Advertise a service and accept authenticated peers on it (JSON-RPC 2.0 over TLS 1.3 WebSockets).",
        discussion: """
            Listens on PORT, advertises NAME with TXT id=<peer ID> and pv=<protocol version> added \
            to the entries given, and answers `ping` (with {}) and `echo` (with its params). Runs \
            until SIGINT or SIGTERM, then closes every connection (1001) and withdraws the service.

            --accept trusted (default): peers that pass TRUST; others are refused in the TLS \
            handshake. all: any peer that proves its key. ask: peers that pass TRUST get in; \
            for any other, a numbered question names the peer (with --json an "invitation" \
            event with "question"), answered by a line on stdin: y or n (accept or decline), \
            optionally followed by the question's number or the start of its peer ID. One \
            question is open at a time. Only a line that arrives while its question is shown \
            counts: lines typed before it are ignored (and said so), and so is an answer after \
            the question's time ran out (--answer-within, 30 s; it is then declined). The connecting side is told \
            that someone is asked and waits that long. A peer accepted once gets in again \
            without a question until serve stops; pair or pin it to let it in for good.

            Pairing (`nearby pair --host H --port P` on the other device): both sides show the \
            same 6-digit code, and the peer is pinned once both people answer yes. It is offered \
            with --accept ask, and with --pairing under --accept trusted or all: a newly paired \
            peer then gets in on its next connection, with no restart.

            --auto-invite also browses TYPE and connects to every compatible peer (TXT id, and a \
            pv compatible with ours) by the broker's rules: the smaller peer ID invites, the other \
            dials only if nothing came within 3 s, crossing connections collapse to the one the \
            smaller ID initiated, and dropped connections are redialed (backoff 1-60 s, at most 3 \
            in 2 minutes). Its "connected" events carry "initiator", the peer ID that dialed.

            TRUST: --anchor FILE..., --system-roots, --pinned, --trust-on-first-use (default: --pinned).

            Examples:
              nearby serve "Build Box" _openagents._tcp 9099
              nearby serve "Build Box" _openagents._tcp 9099 --auto-invite --json
              nearby serve "Build Box" _openagents._tcp 9099 --accept ask --json
              nearby serve "Build Box" _openagents._tcp 9099 --pairing
                  (trusted peers get in; others may pair first)
              nearby serve Bridge _openagents._tcp 9099 --no-advertise
              nearby serve Bridge _openagents._tcp 9099 --trust-on-first-use
              nearby serve "Build Box" _openagents._tcp 9099 --dry-run
                  (what would be published; nothing is sent)

            Exit status: 0 stopped by SIGINT or SIGTERM; 1 a failure at run time, such as a port in use, said on stderr; 2 bad input.
            """)

    @Argument(help: "Instance name people see (UTF-8, up to 63 bytes).")
    var name: String
    @Argument(help: "Service type, e.g. _openagents._tcp.")
    var type: String
    @Argument(help: "TCP port to listen on, 1-65535 (0: any free port, printed when listening).",
              transform: NumberInput.integer("port", 0...65535, use: "1-65535, or 0 for any free port"))
    var port: Int
    @Argument(help: "More TXT entries: key=value, key= or key.")
    var txt: [String] = []
    @Option(help: ArgumentHelp("Which peers get in: trusted, all, ask.", valueName: "trusted|all|ask"))
    var accept: AcceptChoice = .trusted
    @Option(name: .customLong("answer-within"), help: ArgumentHelp(
        "With --accept ask: seconds a person has to answer a question, after which the peer is declined (the peer is told, and waits that long).",
        valueName: "seconds"), transform: NumberInput.seconds("--answer-within", maximum: 600))
    var answerWithin: Double = 30
    @Flag(help: "Let peers that are not trusted pair (both people compare a 6-digit code); once paired they get in. Implied by --accept ask.")
    var pairing = false
    @Flag(help: "Print an invitation (a link and a QR code; see nearby invite --help) and keep serving: an invitee is pinned and gets in, now and later.")
    var invite = false
    @OptionGroup(title: "INVITATION (with --invite)") var invitation: InvitationOptions
    @Option(name: .customLong("receive"), help: ArgumentHelp(
        "Take files that peers send (nearby send) into this folder: NAME.SENDER.part until verified, then NAME.", valueName: "folder"))
    var receiveInto: String?
    @Flag(help: "Connect the first pipe a peer opens (nearby pipe) to this command's stdin and stdout, and end with it; events go to stderr.")
    var pipe = false
    @Option(name: .customLong("max-size"), help: ArgumentHelp("With --receive: the largest file taken, in bytes (default: what fits in the free space).", valueName: "bytes"),
            transform: NumberInput.integer("--max-size", 0...Int(Int64.max), use: "a number of bytes"))
    var maximumSize: Int?
    @Flag(name: .customLong("no-advertise"), help: "Do not advertise; peers connect with `nearby connect --host H --port P`.")
    var noAdvertise = false
    @Flag(name: .customLong("auto-invite"), help: "Also browse TYPE and connect to every compatible peer, one connection each (the broker's rules).")
    var autoInvite = false
    @Option(name: .customLong("host"), help: "Host label to publish in .local (embedded backend; default: this machine's name).")
    var host: String?
    @Flag(name: .customLong("dry-run"), help: "Check everything and print the records that would be published; listen on nothing, send nothing.")
    var dryRun = false
    @OptionGroup(title: "TRUST") var trust: TrustOptions
    @OptionGroup(title: "STRANGERS (connections that have not proven who they are)") var strangers: AdmissionOptions
    @OptionGroup var channel: ChannelOptions
    @OptionGroup(title: "SRP REGISTRATION (where multicast does not reach the LAN)") var srp: RegistrarOptions
    @OptionGroup var state: StateDirectory
    @OptionGroup var network: NetworkOptions
    @OptionGroup(title: "METRICS") var metrics: MetricsOptions

    /// What a refusal of a peer that is not pinned tells the person serving on `port`: pin it,
    /// let it pair, or trust on first use (only where --accept trusted refuses such peers).
    func advice(port: Int?) -> TrustAdviceSide {
        .accepting(pairing: pairing || accept == .ask, trustOnFirstUse: accept == .trusted ? trust.trustOnFirstUse : nil, port: port)
    }

    func validate() throws {
        _ = try channel.version()
        if !noAdvertise {
            let serviceType = try parseType(type)
            do { _ = try ServiceInstanceName(name, type: serviceType) } catch { throw ValidationError(error.description) }
            do { _ = try DiscoveryInfo(txt) } catch { throw ValidationError(error.description) }
            for entry in txt {
                let key = entry.prefix { $0 != "=" }.lowercased()
                if key == "id" || key == "pv" {
                    throw ValidationError("TXT \(key) is serve's own (\(key == "id" ? "the peer ID" : "the protocol version")); use another key than \"\(entry.prefix { $0 != "=" })\"")
                }
            }
        }
        if let host {
            try checkHostLabel(host)
            guard network.backend != .system else {
                throw ValidationError("--host needs --backend embedded: with the system backend avahi-daemon chooses the host name")
            }
        }
        if srp.registrar != nil {
            guard !autoInvite else { throw ValidationError("--registrar does not go with --auto-invite yet: register a plain serve, or let the broker advertise with mDNS") }
            guard !channel.insecure else { throw ValidationError("--registrar needs TLS: the registration is signed with this peer's identity key") }
        }
        if autoInvite {
            guard !noAdvertise else { throw ValidationError("--auto-invite advertises and browses; it does not go with --no-advertise") }
            guard !channel.insecure else { throw ValidationError("--auto-invite needs TLS: peers are told apart by their peer IDs") }
            guard accept != .ask else { throw ValidationError("--auto-invite admits by TRUST: use --accept trusted (the default) or all") }
        }
        if pairing {
            guard !channel.insecure else { throw ValidationError("--pairing needs TLS: pairing proves both peers' keys") }
            guard !autoInvite else { throw ValidationError("--pairing does not go with --auto-invite: the broker admits by TRUST only; pair first with a plain serve") }
        }
        if invite {
            guard !channel.insecure else { throw ValidationError("--invite needs TLS: each side proves its key") }
            try invitation.validateAddresses()
        }
        if let receiveInto {
            guard fileStatus(receiveInto).isDirectory else {
                throw ValidationError("--receive \(receiveInto): no such folder (make it first)")
            }
            guard !channel.insecure else { throw ValidationError("--receive needs TLS: files are taken only from peers whose keys are proven") }
        }
        if maximumSize != nil, receiveInto == nil { throw ValidationError("--max-size goes with --receive") }
        if pipe {
            guard !channel.insecure else { throw ValidationError("--pipe needs TLS: each side proves its key") }
            guard accept != .ask, !pairing else { throw ValidationError("--pipe uses stdin for the pipe's bytes: it cannot answer questions (--accept ask, --pairing)") }
        }
        if accept != .trusted, trust.trustOnFirstUse {
            throw ValidationError("--trust-on-first-use goes with --accept trusted (with all or ask, untrusted peers are not refused anyway)")
        }
    }

    func run() async throws {
        let json = network.json
        if pipe { StandardOutput.sendEventsToStandardError() }
        if dryRun {
            try showPlan()
            return
        }
        var configuration = try channel.configuration(state: state, trust: trust, json: json, logger: network.logger)
        configuration.admission = try strangers.settings()
        // The metrics first: the listener, the broker and the engine make theirs as they start.
        let endpoint = try await metrics.start(logger: network.logger)
        endpoint?.announce(json: json)
        // First in the service group, so the last to shut down.
        let exposition: [any Service] = endpoint.map { [$0] } ?? []
        configuration.invitationTimeout = .milliseconds(Int64(answerWithin * 1000))
        // ping ({}) is built in; echo answers with its params. Both are answered on the event loop.
        configuration.methods["echo"] = { params in .success(params ?? .null) }
        // Streams are offered: files (with --receive) and a pipe (with --pipe) are taken, any
        // other stream is refused with the reason. A file stream gets a 1 MiB window: one fast stream, and the window is what a
        // round trip carries (100 MB/s at 10 ms).
        // Bulk bytes (files, a pipe): keep buffers on the heap (see nearby_tune_malloc_for_bulk).
        if receiveInto != nil || pipe { _ = nearby_tune_malloc_for_bulk() }
        let receiver = receiveInto.map { FileReceiver(directory: $0, maximumSize: maximumSize.map { Int64($0) }) }
        configuration.streams = receiver == nil ? StreamSettings() : StreamSettings(window: 1 << 20)
        let policy: PeerListener.AcceptPolicy
        var pairingOffer: PeerListener.PairingOffer?
        // Questions go to the terminal (or a program on stdin); stdin is read from now on, so
        // that anything typed before a question is known to be no answer to it.
        let desk = accept == .ask || pairing ? AdmissionDesk(json: json) : nil
        desk?.start()
        switch accept {
        case .trusted: policy = .trusted
        case .all: policy = .all
        case .ask: policy = .ask { invitation in await desk?.ask(invitation) ?? false }
        }
        if let desk, !channel.insecure {
            pairingOffer = PeerListener.PairingOffer(store: state.trust) { request in await desk.confirm(request) }
        }
        if autoInvite {
            try await serveWithBroker(configuration: configuration, policy: policy, receiver: receiver, exposition: exposition)
            return
        }
        let listener: PeerListener
        do {
            listener = try await PeerListener.listen(
                port: port, configuration: configuration, accept: policy, pairing: pairingOffer,
                invitations: invite ? PeerListener.InvitationOffer(store: state.trust) : nil)
        } catch {
            throw RuntimeFailure(error.description)
        }
        let peerID = configuration.identity?.peerID.description ?? ""
        var discovery: NearbyDiscovery?
        var advertisedName = name
        if !noAdvertise {
            let serviceType = try parseType(type)
            let info = try announcedInfo(peerID: peerID.isEmpty ? nil : peerID, version: configuration.protocolVersion)
            let started = try await network.start(hostName: host, embeddedOnly: host == nil || !network.wideArea.usesLink ? nil : "--host")
            discovery = started
            do {
                var names: [String] = []
                for domain in network.domains {
                    let typed = serviceType.inDomain(domain)
                    names.append(try await started.advertise(name, type: typed, port: UInt16(listener.port), info: info).name)
                }
                advertisedName = names.first ?? name
            } catch {
                await listener.close()
                await started.shutdown()
                throw RuntimeFailure("cannot advertise: \(error)")
            }
        }
        printEvent(
            json,
            [("event", .string("listening")), ("name", .string(advertisedName)), ("type", .string(type)), ("port", .number(Double(listener.port))),
             ("peerID", peerID.isEmpty ? .null : .string(peerID))],
            text: "Listening on port \(listener.port) as \"\(advertisedName)\" (\(type))\(peerID.isEmpty ? ", insecure" : ", peer ID \(peerID)")")
        if invite {
            do {
                let addresses = PeerListener.localAddresses(port: listener.port, hostLabel: host) + (try invitation.extraAddresses(port: listener.port))
                let link = try listener.invite(ttl: invitation.ttlDuration, uses: invitation.uses, addresses: addresses)
                try invitation.show(link, name: configuration.identity?.displayName ?? advertisedName, json: json)
            } catch {
                await listener.close()
                await discovery?.shutdown()
                throw error
            }
        }
        // Registered with an SRP registrar too (--registrar): the same TXT, id and pv included, so
        // the registrar holds the name for this peer's key and checks the id is that key's.
        var registered: [any Service] = []
        if srp.registrar != nil, let identity = configuration.identity {
            let serviceType = try parseType(type)
            let info = try announcedInfo(peerID: peerID, version: configuration.protocolVersion)
            do {
                let (registration, label, addresses) = try await srp.register(
                    SRPRequest.Service(instance: name, type: serviceType, port: UInt16(listener.port), info: info), hostLabel: host,
                    identity: identity, logger: network.logger)
                printEvent(
                    json,
                    [("event", .string("registered")), ("name", .string(name)), ("registrar", .string(registration.registrar.description)),
                     ("host", .string(label)), ("addresses", .array(addresses.map { .string($0.description) })),
                     ("lease", .number(Double(registration.granted.lease)))],
                    text: "Registered \"\(name)\" with the registrar at \(registration.registrar) (host \(label) at \(addresses.map(\.description).joined(separator: ", ")), lease \(registration.granted.lease) s)")
                registered.append(RegistrationService(registration: registration, logger: network.logger))
            } catch {
                await listener.close()
                await discovery?.shutdown()
                throw error
            }
        }
        let advice = advice(port: listener.port)
        let serving = ServingLoop(
            events: listener.events, logger: network.logger, handle: { printListenerEvent(json, $0, advice: advice) },
            serve: { await Self.serve($0, json: json, receiver: receiver, pipe: pipe) })
        // Discovery first: a group shuts down in reverse order, so the listener closes its
        // connections (1001) before the loop serving them ends and the goodbyes go out.
        // Last in the group, so first to hear of the shutdown: systemd is told STOPPING=1 at once.
        let readiness = ReadinessReport(status: "listening on port \(listener.port) as \"\(advertisedName)\"", logger: network.logger)
        try await Self.runUntilSignalled(exposition + (discovery.map { [$0] } ?? []) + registered + [serving, listener, readiness], logger: network.logger)
    }

    /// The TXT record serve advertises: the entries given, then `id=<peer ID>` (with TLS) and
    /// `pv=<protocol version>`.
    private func announcedInfo(peerID: String?, version: ProtocolVersion) throws -> DiscoveryInfo {
        var entries = txt
        if let peerID { entries.append("id=\(peerID)") }
        entries.append("pv=\(version)")
        do { return try DiscoveryInfo(entries) } catch { throw ValidationError(error.description) }
    }

    /// `--dry-run`: the identity (never created here), the TXT entries with `id` and `pv`, and
    /// the records the advertisement would publish.
    private func showPlan() throws {
        let identity: PeerIdentity?
        do { identity = channel.insecure ? nil : try state.identities.load() } catch { throw ValidationError(error.message) }
        let version = try channel.version()
        let info = try announcedInfo(peerID: identity.map { $0.peerID.description }, version: version)
        var notes: [String] = []
        if identity == nil && !channel.insecure {
            notes.append("There is no identity in \(state.directory.path) yet: serve would create one and add its peer ID as TXT id.")
        }
        if port == 0 { notes.append("Port 0: serve listens on a free port chosen at start, and advertises that one.") }
        if autoInvite { notes.append("With --auto-invite it also browses \(type) and connects to every compatible peer it trusts.") }
        let listening: [(String, OutputValue)] = [
            ("peerID", identity.map { .string($0.peerID.description) } ?? .null), ("protocolVersion", .string(version.description)),
            ("accept", .string(accept.rawValue)), ("autoInvite", .bool(autoInvite)),
        ]
        if noAdvertise {
            printEvent(network.json, [("event", .string("dryRun")), ("name", .string(name)), ("port", .number(Double(port)))] + listening + [("records", .array([]))],
                       text: "Dry run: nothing is sent. serve would listen on port \(port) and advertise nothing (--no-advertise).")
            return
        }
        try DryRun.show(name, type: try parseType(type), port: UInt16(port), info: info, subtypes: [], ttl: nil, network: network, hostName: host,
                        extra: listening, note: notes.isEmpty ? nil : notes.joined(separator: "\n"))
    }

    /// Runs `services` as a swift-service-lifecycle `ServiceGroup` until SIGINT or SIGTERM; then
    /// each shuts down gracefully, last listed first.
    static func runUntilSignalled(_ services: [any Service], logger: Logger) async throws {
        let group = ServiceGroup(configuration: ServiceGroupConfiguration(
            services: services.map { ServiceGroupConfiguration.ServiceConfiguration(service: $0) },
            gracefulShutdownSignals: [.sigterm, .sigint], logger: logger))
        try await group.run()
    }

    /// `--auto-invite`: a broker listens, advertises, browses and connects.
    private func serveWithBroker(
        configuration: PeerConnectionConfiguration, policy: PeerListener.AcceptPolicy, receiver: FileReceiver?, exposition: [any Service]
    ) async throws {
        let json = network.json
        let discovery = try await network.start(hostName: host, embeddedOnly: host == nil || !network.wideArea.usesLink ? nil : "--host")
        var settings = BrokerConfiguration(connection: configuration, serviceType: try parseType(type))
        settings.domains = network.domains
        settings.name = name
        do { settings.info = try DiscoveryInfo(txt) } catch { throw ValidationError(error.description) }
        settings.port = port
        settings.accept = policy
        settings.autoInvite = true
        settings.logger = network.logger
        if invite { settings.invitations = PeerListener.InvitationOffer(store: state.trust) }
        let broker: ConnectionBroker
        // Prepared here, run by the service group below (its run() is the broker's work).
        do { broker = try await ConnectionBroker.prepare(settings, discovery: discovery) } catch {
            await discovery.shutdown()
            throw RuntimeFailure(error.message)
        }
        let peerID = broker.peerID?.description ?? ""
        let advertised = broker.advertisedName ?? name
        printEvent(
            json,
            [("event", .string("listening")), ("name", .string(advertised)), ("type", .string(type)), ("port", .number(Double(broker.port ?? 0))),
             ("peerID", .string(peerID))],
            text: "Listening on port \(broker.port ?? 0) as \"\(advertised)\" (\(type)), peer ID \(peerID); inviting peers")
        if invite, let port = broker.port {
            do {
                let addresses = PeerListener.localAddresses(port: port, hostLabel: host) + (try invitation.extraAddresses(port: port))
                let link = try await broker.invite(ttl: invitation.ttlDuration, uses: invitation.uses, addresses: addresses)
                try invitation.show(link, name: configuration.identity?.displayName ?? advertised, json: json)
            } catch {
                await broker.shutdown()
                await discovery.shutdown()
                throw error
            }
        }
        let advice = advice(port: broker.port)
        let serving = ServingLoop(
            events: broker.events, logger: network.logger, handle: { printBrokerEvent(json, $0, advice: advice) },
            serve: { await Self.serve($0, json: json, receiver: receiver, pipe: pipe) })
        // Shut down in reverse order: the statistics are printed, then the broker closes its
        // connections and withdraws its service, then discovery says its goodbyes.
        let readiness = ReadinessReport(status: "listening on port \(broker.port ?? 0) as \"\(advertised)\"; inviting peers", logger: network.logger)
        try await Self.runUntilSignalled(exposition + [discovery, serving, broker, StatisticsReport(broker: broker, json: json), readiness], logger: network.logger)
    }

    /// The one loop that serves connections as they come (serve, serve --auto-invite): each
    /// event is handled at stdout's pace (while nobody reads stdout, events wait in their
    /// bounded stream, not here), and each connection to serve runs in a child that is freed
    /// when it ends. As a service of the command's group: shut down after the listener or broker
    /// later in the group has closed the connections, it is cancelled, with every child.
    struct ServingLoop<Events: AsyncSequence & Sendable>: Service where Events.Element: Sendable {
        let events: Events
        let logger: Logger
        /// Prints an event; returns the connection it brought, to serve.
        let handle: @Sendable (Events.Element) -> PeerConnection?
        let serve: @Sendable (PeerConnection) async -> Void

        func run() async throws {
            let (events, logger, handle, serve) = (events, logger, handle, serve)
            await cancelWhenGracefulShutdown { await serveAll(events: events, logger: logger, handle: handle, serve: serve) }
            // The loop also ends by itself when the listener or broker after it in the group
            // has shut down (their events end): a service still waits for its own turn, or
            // the group takes its return for a failure (exit status 1).
            try? await gracefulShutdown()
        }
    }

    /// Tells systemd (Type=notify) READY=1 when the group runs: the command listens by then,
    /// and a plain serve has won its name on the link (and registered, with --registrar); with
    /// --auto-invite the broker advertises as it starts, in the same group. STOPPING=1 when
    /// the group shuts down. Without `$NOTIFY_SOCKET` it only waits.
    struct ReadinessReport: Service {
        let status: String
        let logger: Logger

        func run() async throws {
            let manager = ServiceManager.fromEnvironment
            if let problem = manager.problem { logger.warning("\(problem)") }
            manager.ready(status: status, logger: logger)
            try? await gracefulShutdown()
            manager.stopping(status: "stopping", logger: logger)
        }
    }

    /// Prints what the broker counted when the group shuts down (before the broker stops).
    struct StatisticsReport: Service {
        let broker: ConnectionBroker
        let json: Bool

        func run() async throws {
            try? await gracefulShutdown()
            let counted = await broker.statistics()
            printEvent(
                json,
                [
                    ("event", .string("statistics")), ("dials", .number(Double(counted.dials))), ("dialsSucceeded", .number(Double(counted.dialsSucceeded))),
                    ("dialsFailed", .number(Double(counted.dialsFailed))), ("accepted", .number(Double(counted.accepted))),
                    ("duplicatesClosed", .number(Double(counted.duplicatesClosed))), ("replaced", .number(Double(counted.replaced))),
                    ("skipped", .number(Double(counted.skipped))),
                ],
                text: "Broker: \(counted.dials) dials (\(counted.dialsSucceeded) connected, \(counted.dialsFailed) failed), \(counted.accepted) accepted, "
                    + "\(counted.duplicatesClosed) duplicates closed, \(counted.replaced) replaced, \(counted.skipped) skipped")
        }
    }

    /// Prints what the peer sends (ping and echo are answered before this); a request gets
    /// -32601. With a receiver, the files the peer sends go into its folder, one at a time.
    static func serve(_ connection: PeerConnection, json: Bool, receiver: FileReceiver? = nil, pipe: Bool = false) async {
        let who = connection.peerID?.description
        await withDiscardingTaskGroup { group in
            group.addTask { await Self.takeStreams(connection, json: json, receiver: receiver, pipe: pipe) }
            // ping and echo never get here: they are built-in methods of the configuration.
            // Printing waits while stdout is behind; this loop then stops taking messages, the
            // connection stops reading, and TCP holds the peer back.
            for await message in connection.incoming {
                await printMessage(json, peerID: who, message.message)
                if case .request(_, let method, _) = message.message {
                    message.respond(withError: JSONRPCError(JSONRPCError.methodNotFound, "no method \"\(method)\" here (this server answers ping and echo)"))
                }
            }
        }
        let reason = await connection.closed()
        printEvent(
            json,
            [("event", .string("disconnected")), ("connection", .number(Double(connection.id.value))), ("peerID", who.map { .string($0) } ?? .null),
             ("reason", .string(reason.message))] + endMembers(reason),
            text: "Disconnected \(connection.peer.displayName ?? who ?? connection.remoteAddress) (connection \(connection.id)): \(reason)")
    }
}

extension Serve {
    /// The streams a peer opens: files into the receiver's folder (one after another, as a
    /// sender sends them), anything else refused with the reason.
    static func takeStreams(_ connection: PeerConnection, json: Bool, receiver: FileReceiver?, pipe: Bool) async {
        let show = TransferOutput(json: json, verb: "received", peer: connection.peerID?.description)
        for await stream in connection.incomingStreams {
            if stream.label == PipeSlot.label {
                guard pipe else {
                    stream.reset("this peer takes no pipes (it runs without --pipe)", code: .refused)
                    continue
                }
                guard PipeSlot.shared.take() else {
                    stream.reset("this peer's stdin and stdout carry another pipe already", code: .refused)
                    continue
                }
                let ending = await PipeSlot.run(stream)
                PipeSlot.shared.finished(ending)
                if case .failed(let reason) = ending { status("nearby: the pipe failed: \(reason)") }
                // The pipe was this command's job: end as on SIGTERM (the connection closes with 1001).
                kill(getpid(), SIGTERM)
                continue
            }
            guard FileReceiver.carriesFile(stream) else {
                stream.reset("this peer takes no streams labelled \"\(stream.label)\"", code: .refused)
                continue
            }
            guard let receiver else {
                stream.reset("this peer takes no files (it runs without --receive)", code: .refused)
                continue
            }
            do throws(FileTransferError) {
                for try await update in receiver.receive(stream, from: connection.peerID) { show.show(update) }
            } catch {
                show.show(.failed(name: "a file from \(connection.peer.displayName ?? connection.peerID?.short ?? connection.remoteAddress)", error))
            }
        }
    }
}
