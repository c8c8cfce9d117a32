#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import NearbyDiscovery

// What the discovery commands print: lines on stdout, addresses and resolutions as text and JSON.

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
