import Foundation
import PeerConnection
import PeerTrust
import Testing

@testable import nearby

/// What `nearby invite` draws for a real invitation link: the QR code fits a default terminal,
/// and a real decoder (zbar) reads the link back byte for byte from its PNG.
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

    @Test("the PNG of a link is read back by zbarimg exactly")
    func roundTrip() throws {
        let link = try Self.link(["198.18.1.1:9099", "[fd6e:6272:1::1]:9099", "nb-h1.local:9099"])
        let code = try InvitationOptions.qrCode(for: link.text)
        let read = try #require(try zbarReadBack(code.png()))
        #expect(read == link.text)
        #expect(try InvitationLink(parsing: read) == link)
    }

    /// Characters a terminal shows for a line (escape sequences take none).
    func visibleWidth(_ line: Substring) -> Int {
        var count = 0, escape = false
        for scalar in line.unicodeScalars {
            if escape { if scalar == "m" { escape = false } } else if scalar == "\u{1B}" { escape = true } else { count += 1 }
        }
        return count
    }

    func zbarReadBack(_ png: [UInt8]) throws -> String? {
        let path = ["/usr/bin/zbarimg", "/usr/local/bin/zbarimg"].first { FileManager.default.isExecutableFile(atPath: $0) }
        guard let path else {
            Issue.record("zbarimg is not installed: the PNG cannot be read back (apt-get install zbar-tools)")
            return nil
        }
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("nearby-invite-\(UUID().uuidString).png")
        try Data(png).write(to: file)
        defer { try? FileManager.default.removeItem(at: file) }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: path)
        process.arguments = ["--raw", "-q", file.path]
        let output = Pipe()
        process.standardOutput = output
        process.standardError = Pipe()
        try process.run()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        var text = String(decoding: data, as: UTF8.self)
        if text.hasSuffix("\n") { text.removeLast() }
        return text
    }
}
