import ArgumentParser
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif
import Logging
import NearbyBasics
import NearbyQRCode
import PeerConnection
import PeerTrust

enum QRStyleChoice: String, ExpressibleByArgument, CaseIterable {
    case utf8, ascii, off
}

/// INVITATION: what `nearby invite` and `serve --invite` make, and how they show it.
struct InvitationOptions: ParsableArguments {
    @Option(help: ArgumentHelp("Seconds the invitation may be used (default 600: 10 minutes).", valueName: "seconds"),
            transform: NumberInput.seconds("--ttl", maximum: 30 * 86400))
    var ttl: Double = 600
    @Option(help: ArgumentHelp("How many peers the invitation admits (default 1).", valueName: "n"),
            transform: NumberInput.integer("--uses", 1...1000, use: "1-1000"))
    var uses: Int = 1
    @Option(name: .customLong("address"), help: ArgumentHelp(
        "Another address to put in the link, e.g. a VPN address or a DNS name (repeatable; [IPv6]:PORT for another port). The listener's own addresses and .local name are always in it.",
        valueName: "host[:port]"))
    var addresses: [String] = []
    @Option(help: ArgumentHelp("How to draw the QR code: utf8 (half blocks, fits 80x25), ascii (for consoles without block characters; taller), off.",
                               valueName: "utf8|ascii|off"))
    var qr: QRStyleChoice = .utf8
    @Option(name: .customLong("qr-file"), help: ArgumentHelp("Also write the QR code as a PNG image to this file.", valueName: "file.png"))
    var qrFile: String?

    /// The extra addresses, checked.
    func extraAddresses(port: Int) throws -> [InvitationLink.Address] {
        var parsed: [InvitationLink.Address] = []
        for text in addresses {
            do { parsed.append(try InvitationLink.Address(parsing: text, defaultPort: port)) } catch {
                throw ValidationError("--address \(text): \(error.message)")
            }
        }
        return parsed
    }

    func validateAddresses() throws {
        _ = try extraAddresses(port: 1)
    }

    var ttlDuration: Duration { .milliseconds(Int64(ttl * 1000)) }

    /// Prints a new invitation: the link, the QR code, and a PNG when asked.
    func show(_ link: InvitationLink, name: String, json: Bool) throws {
        let code = try Self.qrCode(for: link.text)
        if let qrFile {
            do {
                try Data(code.png()).write(to: URL(fileURLWithPath: qrFile), options: .atomic)
            } catch {
                throw RuntimeFailure("cannot write the QR code to \(qrFile): \(writeFailureDescription(error))")
            }
        }
        if json {
            printLine(JSONText.object([
                ("event", .string("invitationLink")), ("link", .string(link.text)), ("peerID", .string(link.peerID.description)),
                ("name", .string(name)), ("expires", .string(iso8601(link.expires))), ("uses", .number(Double(uses))),
                ("addresses", .array(link.addresses.map { .string($0.description) })), ("qrVersion", .number(Double(code.version))),
                ("qrFile", qrFile.map { .string($0) } ?? .null),
            ]))
            return
        }
        let valid = ttl >= 120 && ttl.truncatingRemainder(dividingBy: 60) == 0 ? "\(Int(ttl / 60)) minutes" : "\(Int(ttl.rounded())) seconds"
        let times = uses == 1 ? "once" : "\(uses) times"
        var lines = ["Invitation for \"\(name)\" (peer ID \(link.peerID)), valid for \(valid), \(times):", link.text]
        switch qr {
        case .utf8: lines += ["", code.terminalText(style: .utf8), ""]
        case .ascii: lines += ["", code.terminalText(style: .ascii), ""]
        case .off: break
        }
        if let qrFile { lines.append("QR code written to \(qrFile)") }
        lines.append("On the other device: nearby accept '\(link.text)'")
        printLine(lines.joined(separator: "\n"))
    }

    /// The QR code for a link: medium error correction when it fits a 25-line terminal
    /// (version 7 or less), else low.
    static func qrCode(for text: String) throws -> QRCode {
        do {
            let medium = try QRCode(encoding: text, correction: .medium)
            if medium.version <= 7 { return medium }
            return try QRCode(encoding: text, correction: .low)
        } catch {
            throw RuntimeFailure("cannot draw the QR code: \(error.message)")
        }
    }
}

/// Prints what happened to one attempt at an invitation.
func printInvitationAttempt(_ json: Bool, _ attempt: InvitationAttempt) {
    // The whole peer ID: a refused invitee may be one to pin by hand.
    let who = "\"\(attempt.name)\" (peer ID \(attempt.peerID), \(attempt.address))"
    var members: [(String, OutputValue)] = [
        ("peerID", .string(attempt.peerID.description)), ("name", .string(attempt.name)), ("address", .string(attempt.address)),
    ]
    switch attempt.outcome {
    case .accepted(let usesLeft, let again):
        if again { return }  // a second address of the same acceptance: said once already
        members = [("event", .string("invitationAccepted"))] + members + [("usesLeft", .number(Double(usesLeft)))]
        printEvent(json, members, text: "Accepted by \(who): pinned each other.\(usesLeft > 0 ? " \(usesLeft) use\(usesLeft == 1 ? "" : "s") left." : "")")
    case .alreadyTrusted:
        members = [("event", .string("invitationNotNeeded"))] + members
        printEvent(json, members, text: "\(who) came with the invitation, but is trusted here already: it connects without using it.")
    case .refused(let refusal):
        members = [("event", .string("invitationRefused"))] + members + [("reason", .string(refusal.kind.description)), ("message", .string(refusal.message))]
        printEvent(json, members, text: "Refused \(who): \(refusal.message)")
    }
}

struct InviteCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "invite",
        abstract: "Invite a peer with a link or QR code: it connects, and each side pins the other (also where multicast does not reach).",
        discussion: """
            Listens (on --port, else a free port), prints a link and a QR code, and waits until \
            the invitation is used up or expires; connections it admitted are served (ping, \
            echo) until they close. The link carries this peer's ID (the invitee accepts only \
            that key), a one-time secret (the invitee proves it holds it, bound to this TLS \
            session, without sending it) and the addresses to try: this machine's IPv4 and IPv6 \
            addresses, its .local name, and each --address (a VPN address, a DNS name). Each \
            attempt is reported: accepted (both sides pinned), or refused with the reason.

            Limits: --uses (default 1) peers, within --ttl (default 10 minutes); 3 wrong proofs \
            make it void. It lives in this process only: stopping it (Ctrl-C) revokes it. A peer \
            pinned here already connects without using it up. To keep serving afterwards, use \
            `nearby serve NAME TYPE PORT --invite` instead.

            Exit status: 0 used (at least once); 1 expired, void or revoked unused; 2 bad input.

            Examples:
              nearby invite
              nearby invite --address 100.101.102.103 --address buildbox.tailnet.example
              nearby invite --uses 3 --ttl 3600 --qr-file invite.png
              nearby invite --json --qr off
            """)

    @Option(help: "TCP port to listen on (default 0: a free one).", transform: NumberInput.integer("--port", 0...65535, use: "0-65535"))
    var port: Int = 0
    @OptionGroup(title: "INVITATION") var invitation: InvitationOptions
    @OptionGroup(title: "TRUST") var trust: TrustOptions
    @OptionGroup(title: "STRANGERS (connections that have not proven who they are)") var strangers: AdmissionOptions
    @OptionGroup var channel: ChannelOptions
    @OptionGroup var output: OutputOptions
    @OptionGroup var state: StateDirectory

    func validate() throws {
        guard !channel.insecure else { throw ValidationError("invitations need TLS: each side proves its key") }
        try invitation.validateAddresses()
    }

    func run() async throws {
        let json = output.json
        var configuration = try channel.configuration(state: state, trust: trust, json: json, logger: output.logger("nearby.invite"))
        configuration.admission = try strangers.settings()
        configuration.methods["echo"] = { params in .success(params ?? .null) }
        let listener: PeerListener
        do {
            listener = try await PeerListener.listen(
                port: port, configuration: configuration, accept: .trusted, invitations: PeerListener.InvitationOffer(store: state.trust))
        } catch {
            throw RuntimeFailure(error.description)
        }
        let name = configuration.identity?.displayName ?? ""
        let link: InvitationLink
        do {
            let addresses = PeerListener.localAddresses(port: listener.port) + (try invitation.extraAddresses(port: listener.port))
            link = try listener.invite(ttl: invitation.ttlDuration, uses: invitation.uses, addresses: addresses)
        } catch let error as PeerConnectionError {
            await listener.close()
            throw ValidationError(error.message)
        }
        try invitation.show(link, name: name, json: json)
        if !json { status("Waiting for it to be used (Ctrl-C revokes it)...") }
        let accepted = Locked(0)
        // SIGINT or SIGTERM: the invitation is revoked (it lives in this process only).
        let over = await Self.serveUntilOver(listener, accepted: accepted, json: json, logger: configuration.logger)
        await listener.close()
        let used = accepted.withLockedValue { $0 }
        let reason = !over ? "revoked" : used >= invitation.uses ? "usedUp" : link.hasExpired() ? "expired" : "void"
        let text =
            switch reason {
            case "revoked": "The invitation is revoked (stopped)\(used > 0 ? " after \(used) use\(used == 1 ? "" : "s")" : ", unused")."
            case "usedUp": "The invitation is used up."
            case "expired": used > 0 ? "The invitation expired after \(used) of \(invitation.uses) uses." : "The invitation expired unused."
            default: "The invitation is void: too many wrong proofs."
            }
        printEvent(json, [("event", .string("invitationOver")), ("reason", .string(reason)), ("uses", .number(Double(used)))], text: text)
        if used == 0 { throw ExitCode(1) }
    }

    /// Reports attempts and serves admitted connections until every invitation is over and
    /// no connection is open (true), or until SIGINT or SIGTERM (false), counting the invitees
    /// that got in.
    static func serveUntilOver(_ listener: PeerListener, accepted: Locked<Int>, json: Bool, logger: Logger) async -> Bool {
        let signals = terminations()
        return await withTaskGroup(of: Bool.self) { group in
            group.addTask {
                await serveAll(
                    events: listener.events, logger: logger,
                    handle: { event in
                        if case .invitation(let attempt) = event, case .accepted(_, false) = attempt.outcome { accepted.withLockedValue { $0 += 1 } }
                        // nearby invite has no --pairing nor --trust-on-first-use of its own.
                        return printListenerEvent(json, event, advice: .accepting(pairing: false, trustOnFirstUse: nil, port: listener.port))
                    },
                    serve: { await Serve.serve($0, json: json) })
                return true
            }
            group.addTask {
                for await _ in signals {
                    // Revoked: the listener closes its connections, so every serving child ends.
                    await listener.close()
                    return false
                }
                return true
            }
            // The end: nothing left to use and nobody connected (checked a few times a second).
            group.addTask {
                while !Task.isCancelled {
                    try? await Task.sleep(for: .milliseconds(200))
                    if listener.invitationsAreOver, listener.isIdle { return true }
                }
                return true
            }
            let over = await group.next() ?? true
            group.cancelAll()
            return over
        }
    }
}

struct AcceptCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "accept",
        abstract: "Accept an invitation link (from nearby invite or a QR code): connect, check, pin each other, initialize.",
        discussion: """
            Dials the link's addresses (happy-eyeballs style), accepts only the peer whose key \
            hashes to the link's peer ID (any other is refused before a byte of the application \
            is sent), proves the invitation's secret without sending it, and pins the inviter \
            in the trust store; the inviter pins this side before it answers. Then initialize \
            runs as on any connection. Afterwards `nearby connect --peer ID` (or --host/--port) \
            works with the default trust (--pinned), both ways.

            The link may be quoted or not, and may sit inside other text (an app's own URL). \
            With --stay, the connection stays open and relays JSON-RPC lines as `nearby connect` \
            does; without it, it closes once everything is done.

            Exit status: 0 accepted (or trusted already); 1 refused (expired, used, revoked, void, \
            a wrong secret), unreachable, or a different peer at the link's addresses; 2 a link \
            that does not parse.

            Examples:
              nearby accept 'NEARBY:1/…'
              nearby accept "$(cat invite.txt)" --stay --json
            """)

    @Argument(help: "The invitation link (NEARBY:1/…).")
    var link: String
    @Flag(help: "Stay connected and relay JSON-RPC lines between stdin/stdout and the peer (as nearby connect).")
    var stay = false
    @Option(help: ArgumentHelp("Seconds to wait for the connection, and with --stay at the end for replies still due.", valueName: "seconds"),
            transform: NumberInput.seconds("--timeout", maximum: 3600))
    var timeout: Double = 10
    @OptionGroup var channel: ChannelOptions
    @OptionGroup var output: OutputOptions
    @OptionGroup var state: StateDirectory

    func validate() throws {
        guard !channel.insecure else { throw ValidationError("invitations need TLS: each side proves its key") }
        do { _ = try InvitationLink(parsing: link) } catch { throw ValidationError(error.message) }
    }

    func run() async throws {
        let json = output.json
        let invitation: InvitationLink
        do { invitation = try InvitationLink(parsing: link) } catch { throw ValidationError(error.message) }
        var configuration = try channel.configuration(state: state, trust: try TrustOptions.parse([]), json: json, logger: output.logger("nearby.invite"))
        configuration.setupTimeout = .milliseconds(Int64(timeout * 1000))
        if !json, !invitation.hasExpired() { status("Accepting the invitation of \(invitation.peerID.short) (trying \(invitation.addresses.map(\.description).joined(separator: ", ")))...") }
        let connection: PeerConnection
        do {
            connection = try await PeerConnection.accept(invitation, configuration: configuration, store: state.trust)
        } catch {
            if error.code == .invalidInput { throw ValidationError(error.message) }
            if json {
                printLine(JSONText.object([
                    ("event", .string("invitationRefused")), ("reason", .string(Self.reason(error))), ("message", .string(error.description)),
                ]))
            } else {
                status("nearby: the invitation did not work: \(error.description)")
            }
            throw ExitCode(1)
        }
        let name = connection.presentedChain.first.map { $0.commonName.isEmpty ? $0.subject : $0.commonName } ?? invitation.peerID.short
        printEvent(
            json, [("event", .string("pinned")), ("peerID", .string(invitation.peerID.description)), ("name", .string(name))],
            text: "Accepted the invitation of \"\(name)\" (peer ID \(invitation.peerID)): pinned each other.")
        printConnected(json, connection)
        if stay {
            try await ConnectCommand.relay(connection, json: json, timeout: timeout)
        } else {
            _ = await connection.close(code: .normal, reason: "done")
        }
    }

    /// The refusal's kind for programs: the inviter's (`expired`, `usedUp`, `void`, `wrongProof`,
    /// `unknown`, `notOffered`), else `expired` (checked here), `unreachable` or `notTheInviter`.
    static func reason(_ error: PeerConnectionError) -> String {
        if let kind = error.remoteError?.data?["reason"]?.stringValue { return kind }
        if error.code == .untrusted { return "notTheInviter" }
        if error.code == .invitation, error.message.hasPrefix("this invitation expired") { return "expired" }
        if error.code == .invitation, error.message.hasPrefix("no address of the invitation answered") { return "unreachable" }
        return error.code.description
    }
}

/// What Foundation's `localizedDescription` said for a failure to write a file (a
/// `CocoaError`: "The operation could not be completed. You don’t have permission.").
func writeFailureDescription(_ error: any Error) -> String {
    if let error = error as? CocoaError { return foundationDescription(domain: "NSCocoaErrorDomain", code: error.code.rawValue) }
    if let error = error as? POSIXError {
        return "The operation could not be completed. \(String(cString: strerror(error.code.rawValue)))"
    }
    return foundationDescription(of: error)
}
