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

func printRejection(_ json: Bool, address: String, peerID: PeerID?, error: PeerConnectionError) {
    let reasons = error.reasons.isEmpty ? [error.message] : error.reasons.map(\.message)
    printEvent(
        json,
        [("event", .string("rejected")), ("address", .string(address)), ("peerID", peerID.map { .string($0.description) } ?? .null),
         ("reasons", .array(reasons.map { .string($0) }))],
        text: "Rejected \(address)\(peerID.map { " (peer ID \($0.short))" } ?? ""): \(error.message)" + error.reasons.map { "\n  - \($0.message)" }.joined())
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
func printNotConnected(_ json: Bool, to place: String, error: PeerConnectionError) {
    if json {
        printRejection(true, address: place, peerID: nil, error: error)
        return
    }
    let text = error.code == .unreachable ? error.message : "not connected to \(place): \(error.message)"
    status("nearby: " + text + error.reasons.map { "\n  - \($0.message)" }.joined())
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
