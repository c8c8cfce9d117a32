#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import NearbyDiscovery
import PeerConnection
import PeerTrust
import NearbyBasics

// What the commands print: lines on stdout, addresses and resolutions as text and JSON, and
// the lines about peers and connections.

/// Prints a line now (no stdio buffering), so a pipe sees each event as it happens. It is
/// written by stdout's own thread (``StandardOutput``): this never blocks.
func printLine(_ text: String) {
    StandardOutput.events.enqueue(text + "\n")
}

/// Rows as indented text lines: every column but the last padded to its widest cell, two
/// spaces apart, the last left ragged (no trailing spaces).
func alignedLines(_ rows: [[String]]) -> [String] {
    let columns = (rows.map(\.count).max() ?? 1) - 1
    var widths = [Int](repeating: 0, count: max(columns, 0))
    for row in rows { for column in 0..<min(columns, row.count) { widths[column] = max(widths[column], row[column].count) } }
    return rows.map { row in
        let cells = row.enumerated().map { index, cell in
            index < widths.count && index < row.count - 1 ? cell.padded(toUTF16Length: widths[index]) : cell
        }
        let line = "  " + cells.joined(separator: "  ")
        return String(line.reversed().drop(while: { $0 == " " }).reversed())
    }
}

/// What a command is waiting for, on stderr (text mode only), so that a silent wait is never a
/// mystery and stdout keeps only results.
func status(_ text: String) {
    writeToStandardError((text + "\n"))
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

func resolvedMembers(_ resolved: ResolvedService) -> [(String, OutputValue)] {
    [
        ("host", .string(resolved.host.description)), ("port", .number(Double(resolved.port))),
        ("addresses", .array(addressesText(resolved).map { .string($0) })), ("txt", txtJSON(resolved.info)),
    ]
}

// The lines that serving, connecting and inviting commands print about peers and connections.

func printConnected(_ json: Bool, _ connection: PeerConnection, extra: [(String, OutputValue)] = []) {
    let peer = connection.peer
    let infoKey = connection.role == .connecting ? "agentInfo" : "clientInfo"
    let ms = milliseconds(connection.setupDuration)
    printEvent(
        json,
        [
            ("event", .string("connected")), ("connection", .number(Double(connection.id.value))),
            ("peerID", peer.peerID.map { .string($0.description) } ?? .null),
            ("name", peer.displayName.map { .string($0) } ?? .null), ("role", .string(connection.role.rawValue)),
            ("address", .string(connection.remoteAddress)), ("port", .number(Double(connection.remotePort))),
            ("protocolVersion", .string(peer.protocolVersion.description)), (infoKey, output(peer.info)),
            ("ms", .number(ms)),
        ] + extra,
        text: "Connected to \"\(peer.displayName ?? "?")\" (peer ID \(peer.peerID?.description ?? "none: insecure"), \(connection.remoteAddress) port \(connection.remotePort), protocol \(peer.protocolVersion), \(connection.role.rawValue), \(fixedPoint(ms, digits: 1)) ms, connection \(connection.id))"
    )
}

/// A connection turned away: who (the whole peer ID, which a person may want to pin), why (every
/// reason), and in text what would let it in (``trustAdvice(_:peerID:side:)``).
func printRejection(_ json: Bool, address: String, peerID: PeerID?, error: PeerConnectionError, advice side: TrustAdviceSide? = nil) {
    let reasons = error.reasons.isEmpty ? [error.message] : error.reasons.map(\.message)
    let advice = side.flatMap { trustAdvice(error, peerID: peerID, side: $0) }
    printEvent(
        json,
        [("event", .string("rejected")), ("address", .string(address)), ("peerID", peerID.map { .string($0.description) } ?? .null),
         ("reasons", .array(reasons.map { .string($0) }))],
        text: "Rejected \(address)\(peerID.map { " (peer ID \($0))" } ?? ""): \(error.message)" + error.reasons.map { "\n  - \($0.message)" }.joined()
            + (advice.map { "\n" + $0 } ?? ""))
}

/// Where a trust refusal happened, for ``trustAdvice(_:peerID:side:)``.
enum TrustAdviceSide {
    /// This command connected to the peer (connect, send, pipe): the peer's address when known
    /// (for `nearby pair`), whether --trust-on-first-use was given already, and this side's
    /// own peer ID (for a peer that refused it).
    case connecting(host: String?, port: Int?, trustOnFirstUse: Bool, ownID: PeerID? = nil)
    /// The peer connected to this command (serve, receive): whether pairing is offered,
    /// whether the command takes --trust-on-first-use (nil: it has no such option), and the
    /// port it listens on, when known (for `nearby pair`).
    case accepting(pairing: Bool, trustOnFirstUse: Bool?, port: Int? = nil)
}

/// What lets a peer that trust turned away in, for a person: the commands, with the peer's
/// whole ID to copy. Nil unless the only trouble is that the peer is not pinned: a certificate
/// that expired, was revoked or does not chain to an anchor, and a key other than the peer ID
/// announced, are not fixed by pinning; and with --trust-on-first-use on, a refusal is a key
/// that changed under a pinned name, whose reason says what to do. On the connecting side, a
/// peer that refused our certificate in TLS (it may not have pinned us) gets the command that
/// pins this side, to run there.
func trustAdvice(_ error: PeerConnectionError, peerID: PeerID?, side: TrustAdviceSide) -> String? {
    if case .connecting(let host, let port, _, let ownID?) = side, error.code == .tls, error.message.contains("may not trust our certificate") {
        let address = "--host \(host ?? "ADDRESS") --port \(port.map(String.init) ?? "PORT")"
        return "  If it does not trust this side, on it: nearby trust pin \(ownID)\n"
            + "  Or pair with it (while it serves with --pairing): nearby pair \(address)"
    }
    guard error.code == .untrusted, let peerID, !error.reasons.isEmpty,
        error.reasons.allSatisfy({ $0.code == .notPinned || $0.code == .nothingTrusted || $0.code == .noAnchors || $0.code == .unknownIssuer || $0.code == .selfSignedNotTrusted }),
        error.reasons.contains(where: { $0.code == .notPinned || $0.code == .nothingTrusted })
    else { return nil }
    let confirm = "once its owner confirms that this is its peer ID (nearby identity show --id, there)"
    switch side {
    case .connecting(let host, let port, let trustOnFirstUse, _):
        if trustOnFirstUse { return nil }
        let address = host.map { "--host \($0) --port \(port.map(String.init) ?? "PORT")" } ?? "--host ADDRESS --port PORT (nearby peers TYPE lists them)"
        return "  To trust it, \(confirm): nearby trust pin \(peerID)\n"
            + "  Or pair with it (while it serves with --pairing): nearby pair \(address); "
            + "or connect with --trust-on-first-use, which pins a peer never seen before"
    case .accepting(let pairing, let trustOnFirstUse, let port):
        if trustOnFirstUse == true { return nil }
        let command = "nearby pair --host THIS-HOST --port \(port.map(String.init) ?? "PORT")"
        let pair =
            pairing
            ? "  Or let it pair: \(command), there"
            : "  Or let it pair: serve with --pairing, and run \(command) there"
        return "  To let it in, \(confirm): nearby trust pin \(peerID)\n" + pair
            + (trustOnFirstUse == false ? "; or serve with --trust-on-first-use, which pins a peer never seen before" : "")
    }
}

/// Connections turned away before they proved anything, summed up over an interval.
func printStrangers(_ json: Bool, _ summary: StrangerSummary) {
    printEvent(
        json,
        [("event", .string("strangers")), ("seconds", .number((summary.interval / .milliseconds(1)).rounded() / 1000)),
         ("turnedAway", .number(Double(summary.total))), ("sources", .number(Double(summary.sources))),
         ("madeRoom", .number(Double(summary.madeRoom))), ("overSourceShare", .number(Double(summary.overSourceShare))),
         ("refused", .number(Double(summary.refused))), ("noHello", .number(Double(summary.noHello))),
         ("failed", .number(Double(summary.failedUnreported + summary.reported))), ("reportedOneByOne", .number(Double(summary.reported))),
         ("waitedTurn", .number(Double(summary.waitedTurn))), ("penalized", .number(Double(summary.penalized))),
         ("peakSettingUp", .number(Double(summary.peakSettingUp)))],
        text: summary.text.prefix(1).uppercased() + summary.text.dropFirst())
}

/// The connecting side's failure: the JSON "rejected" event, or in text a line on stderr that
/// says where it tried and why (an unreachable peer's message already names its address).
/// With `advice`, a refusal because the peer is not pinned also says how to trust it.
func printNotConnected(_ json: Bool, to place: String, error: PeerConnectionError, advice side: TrustAdviceSide? = nil) {
    if json {
        printRejection(true, address: place, peerID: error.peerID, error: error)
        return
    }
    let text = error.code == .unreachable ? error.message : "not connected to \(place): \(error.message)"
    let advice = side.flatMap { trustAdvice(error, peerID: error.peerID, side: $0) }
    status("nearby: " + text + error.reasons.map { "\n  - \($0.message)" }.joined() + (advice.map { "\n" + $0 } ?? ""))
}

/// A message from a peer, printed at the pace stdout takes (see ``StandardOutput/emit(_:)``).
func printMessage(_ json: Bool, peerID: String?, _ message: JSONRPCMessage) async {
    let text = message.jsonText
    await StandardOutput.events.emit(
        json ? JSONText.object([("event", .string("message")), ("peerID", peerID.map { .string($0) } ?? .null), ("message", .raw(text))]) : text)
}

func printPinned(_ json: Bool, _ result: PairingResult) {
    printEvent(
        json, [("event", .string("pinned")), ("peerID", .string(result.peerID.description)), ("name", .string(result.name))],
        text: "Paired: pinned \"\(result.name)\" (peer ID \(result.peerID))")
}

/// A duration in whole seconds, rounded (for "up to 30 s" in text).
func wholeSeconds(_ duration: Duration) -> Int {
    Int((Double(nanoseconds(duration)) / 1e9).rounded())
}

/// A duration in milliseconds, to a tenth (for output).
func milliseconds(_ duration: Duration) -> Double {
    (Double(nanoseconds(duration)) / 1e5).rounded() / 10
}
