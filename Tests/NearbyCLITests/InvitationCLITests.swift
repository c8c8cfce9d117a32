import Foundation
import PeerConnection
import PeerTrust
import Testing

@testable import nearby

/// What `nearby invite` draws for a real invitation link: the QR code fits a default terminal.
/// (NearbyQRCodeTests reads a real link back from the PNG with zbar.)
@Suite("nearby invite: the QR code of a real link")
struct InvitationCLITests {
    static func link(_ addresses: [String]) throws -> InvitationLink {
        let peer = try PeerIdentity.generate(displayName: "Build Box").peerID
        return try InvitationLink.make(
            peerID: peer, addresses: try addresses.map { try InvitationLink.Address(parsing: $0) }, ttl: .seconds(600))
    }

    @Test("two IPv4 addresses, one IPv6 address and the .local name: at most 25 lines of at most 80 columns")
    func fits() throws {
        let link = try Self.link([
            "192.168.178.20:41234", "10.200.30.40:41234", "[fd7a:115c:a1e0:ab12:4843:cd96:6263:2a4b]:41234", "build-box.local:41234",
        ])
        let code = try InvitationOptions.qrCode(for: link.text)
        #expect(code.version <= 7, "version \(code.version) for \(link.text.count) characters")
        let lines = code.terminalText(style: .utf8).split(separator: "\n", omittingEmptySubsequences: false)
        #expect(lines.count <= 25)
        #expect(lines.allSatisfy { visibleWidth($0) <= 80 })
    }

    /// Characters a terminal shows for a line (escape sequences take none).
    func visibleWidth(_ line: Substring) -> Int {
        var count = 0, escape = false
        for scalar in line.unicodeScalars {
            if escape { if scalar == "m" { escape = false } } else if scalar == "\u{1B}" { escape = true } else { count += 1 }
        }
        return count
    }
}
