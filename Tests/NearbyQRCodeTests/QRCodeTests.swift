import Foundation
import Testing

@testable import NearbyQRCode

/// An invitation-like link of exactly `length` characters, all in QR's alphanumeric set
/// (upper-case letters, digits and `:/.-`), the same for every run.
func invitationLink(length: Int) -> String {
    let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZ234567")
    var state: UInt64 = 0x9E37_79B9_7F4A_7C15
    var text = "NEARBY://192.168.1.20:9099/INVITE/"
    while text.count < length {
        if text.count % 9 == 8 {
            text.append(text.count % 4 == 0 ? "." : "-")
            continue
        }
        state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
        text.append(alphabet[Int(state >> 59)])
    }
    return String(text.prefix(length))
}

/// A terminal rendering without its escape sequences.
func visibleText(_ line: Substring) -> String {
    var visible = ""
    var inEscape = false
    for scalar in line.unicodeScalars {
        if inEscape {
            if scalar == "m" { inEscape = false }
        } else if scalar == "\u{1B}" {
            inEscape = true
        } else {
            visible.unicodeScalars.append(scalar)
        }
    }
    return visible
}

enum RenderingError: Error, CustomStringConvertible {
    case unexpected(String)
    var description: String {
        switch self { case .unexpected(let text): text }
    }
}

/// Reads a ``QRCode/TerminalStyle/utf8`` rendering back into rows of modules (`true` dark), the
/// way a terminal would show it: each cell's upper and lower half take the colour of the
/// foreground where the glyph covers them and of the background elsewhere.
func decodeHalfBlocks(_ text: String) throws -> [[Bool]] {
    var rows: [[Bool]] = []
    for (number, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
        guard line.hasSuffix("\u{1B}[0m") else { throw RenderingError.unexpected("line \(number) does not end by resetting the colours") }
        var foreground: Bool?  // true: dark
        var background: Bool?
        var top: [Bool] = []
        var bottom: [Bool] = []
        var scalars = line.unicodeScalars.makeIterator()
        while let scalar = scalars.next() {
            if scalar == "\u{1B}" {
                guard scalars.next() == "[" else { throw RenderingError.unexpected("line \(number): an escape that is not CSI") }
                var parameters = ""
                while let next = scalars.next(), next != "m" { parameters.unicodeScalars.append(next) }
                for parameter in parameters.split(separator: ";", omittingEmptySubsequences: false) {
                    switch parameter {
                    case "0", "": foreground = nil; background = nil
                    case "30": foreground = true
                    case "97": foreground = false
                    case "40": background = true
                    case "107": background = false
                    default: throw RenderingError.unexpected("line \(number): unexpected SGR parameter \(parameter)")
                    }
                }
                continue
            }
            guard let foreground, let background else {
                throw RenderingError.unexpected("line \(number): a cell drawn in the terminal's own colours")
            }
            switch scalar {
            case " ": top.append(background); bottom.append(background)
            case "▀": top.append(foreground); bottom.append(background)
            case "▄": top.append(background); bottom.append(foreground)
            case "█": top.append(foreground); bottom.append(foreground)
            default: throw RenderingError.unexpected("line \(number): unexpected character \(scalar)")
            }
        }
        rows += [top, bottom]
    }
    return rows
}

/// Runs `zbarimg --raw -q` on a PNG and returns what it read, without the final newline.
func zbarRead(_ png: [UInt8]) throws -> String? {
    let path = (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin").split(separator: ":")
        .map { "\($0)/zbarimg" }
        .first { FileManager.default.isExecutableFile(atPath: $0) }
    guard let path else {
        Issue.record("zbarimg is not installed: the PNG cannot be read back (apt-get install zbar-tools)")
        return nil
    }
    let file = FileManager.default.temporaryDirectory.appendingPathComponent("nearby-qr-\(UUID().uuidString).png")
    try Data(png).write(to: file)
    defer { try? FileManager.default.removeItem(at: file) }
    let process = Process()
    process.executableURL = URL(fileURLWithPath: path)
    process.arguments = ["--raw", "-q", file.path]
    let output = Pipe()
    let errors = Pipe()  // zbarimg's few lines of complaint (no D-Bus here, no code found)
    process.standardOutput = output
    process.standardError = errors
    try process.run()
    let data = output.fileHandleForReading.readDataToEndOfFile()
    let complaints = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
    process.waitUntilExit()
    #expect(process.terminationStatus == 0, "zbarimg found no code in the PNG (exit \(process.terminationStatus)): \(complaints)")
    var text = String(decoding: data, as: UTF8.self)
    if text.hasSuffix("\n") { text.removeLast() }
    return text
}

@Suite("QR codes")
struct QRCodeTests {
    /// The longest alphanumeric links that still make a version-7 code: 25 lines of 49 columns
    /// with a 2-module quiet zone. A 200-character link needs low correction for that; at medium
    /// it is version 8.
    @Test(
        "an invitation link fits an 80×25 terminal in half blocks",
        arguments: [(175, QRCode.Correction.medium), (178, .medium), (200, .low), (224, .low)])
    func fitsTerminal(length: Int, correction: QRCode.Correction) throws {
        let link = invitationLink(length: length)
        #expect(link.count == length)
        let code = try QRCode(encoding: link, correction: correction)
        #expect(code.version <= 7)
        #expect(code.size == 17 + 4 * code.version)
        let lines = code.terminalText(style: .utf8).split(separator: "\n", omittingEmptySubsequences: false)
        #expect(lines.count <= 25)
        #expect(lines.allSatisfy { visibleText($0).count <= 80 })
    }

    @Test("one character more than version 7 holds at medium correction is version 8: 27 lines")
    func version8() throws {
        let code = try QRCode(encoding: invitationLink(length: 200), correction: .medium)
        #expect(code.version == 8)
        #expect(code.terminalText(style: .utf8).split(separator: "\n").count == 27)
        #expect(try QRCode(encoding: invitationLink(length: 179)).version == 8)
    }

    @Test("the PNG is read back by zbarimg at every correction level", arguments: QRCode.Correction.allCases)
    func pngRoundTrip(correction: QRCode.Correction) throws {
        let link = invitationLink(length: 200)
        let code = try QRCode(encoding: link, correction: correction)
        #expect(try zbarRead(code.png()) == link)
    }

    @Test("a real invitation link (from the demo: two addresses and a .local name) comes back from zbarimg byte for byte")
    func realLink() throws {
        let link =
            "NEARBY:1/DNNZR6W8G9ZPPY4GT7FMG9E2DKPBZDDVDCHY00PCCF6HG05RYFE1G3/K5M6CVDE/S6H57Y6Q5CE3XG15S4TRZ4KWQR/1795550392/198.18.1.1:9200/FD6E:6272:1::1:9200/BUILD-BOX.LOCAL:9200"
        let code = try QRCode(encoding: link, correction: .medium)
        #expect(code.version <= 7)
        #expect(try zbarRead(code.png()) == link)
    }

    @Test("a large PNG, its image data in several stored deflate blocks, is read back too")
    func pngManyBlocks() throws {
        let text = "https://example.org/invite?peer=lower-case+bytes&secret=0123456789abcdef"
        let code = try QRCode(encoding: text)
        let png = code.png(scale: 20, quietZone: 4)
        // Over 65535 bytes of image data: at least two blocks.
        #expect(png.count > 70_000)
        #expect(try zbarRead(png) == text)
    }

    @Test("the PNG's header: signature, IHDR with the size in pixels, 1-bit grey, IEND at the end")
    func pngHeader() throws {
        let code = try QRCode(encoding: "NEARBY")
        let png = code.png(scale: 3, quietZone: 1)
        let side = (code.size + 2) * 3
        #expect(Array(png.prefix(8)) == [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A])
        #expect(Array(png[8..<16]) == [0, 0, 0, 13] + Array("IHDR".utf8))
        #expect(Array(png[16..<29]) == [0, 0, 0, UInt8(side), 0, 0, 0, UInt8(side), 1, 0, 0, 0, 0])
        #expect(Array(png.suffix(12)) == [0, 0, 0, 0] + Array("IEND".utf8) + [0xAE, 0x42, 0x60, 0x82])
    }

    @Test("checksums: CRC-32 and Adler-32 of known inputs")
    func checksums() {
        #expect(PNGWriter.crc32(ArraySlice("123456789".utf8)) == 0xCBF4_3926)
        #expect(PNGWriter.adler32(Array("Wikipedia".utf8)) == 0x11E6_0398)
        #expect(PNGWriter.adler32(Array(repeating: 0xFF, count: 100_000)) == 0x149A_302C)
    }

    @Test("the half-block rendering, read back cell by cell with its colours, is the code and its quiet zone")
    func utf8Decodes() throws {
        for (text, margin) in [(invitationLink(length: 175), 2), ("NEARBY", 0), ("HELLO", 4)] {
            let code = try QRCode(encoding: text)
            let rows = try decodeHalfBlocks(code.terminalText(style: .utf8, quietZone: margin))
            let side = code.size + 2 * margin
            // An odd number of rows: the last line's lower half is light margin.
            #expect(rows.count == side + 1)
            #expect(rows.allSatisfy { $0.count == side })
            #expect(rows.last?.allSatisfy { !$0 } == true)
            var wrong: [(x: Int, y: Int)] = []
            for y in 0..<side {
                for x in 0..<side where rows[y][x] != code.isDark(x: x - margin, y: y - margin) {
                    wrong.append((x - margin, y - margin))
                }
            }
            #expect(wrong.count == 0, "\(text): \(wrong.count) modules drawn wrong, the first at \(wrong.first.map { "(\($0.x), \($0.y))" } ?? "")")
        }
    }

    @Test("the ASCII rendering: one line per module row, `##` dark, two spaces light")
    func ascii() throws {
        let code = try QRCode(encoding: invitationLink(length: 200), correction: .low)
        for margin in [0, 2, 4] {
            let lines = code.terminalText(style: .ascii, quietZone: margin).split(separator: "\n", omittingEmptySubsequences: false)
            let side = code.size + 2 * margin
            #expect(lines.count == side)
            let wrong = lines.indices.filter { y in
                lines[y] != (0..<side).map { x in code.isDark(x: x - margin, y: y - margin) ? "##" : "  " }.joined()
            }
            #expect(wrong.count == 0, "quiet zone \(margin): \(wrong.count) rows drawn wrong, the first row \(wrong.first.map { $0 - margin } ?? 0)")
        }
    }

    @Test("the modules: finder patterns in three corners, light outside the code")
    func finderPatterns() throws {
        let code = try QRCode(encoding: "NEARBY")
        #expect(code.version == 1 && code.size == 21)
        for (cornerX, cornerY) in [(0, 0), (code.size - 7, 0), (0, code.size - 7)] {
            #expect(code.isDark(x: cornerX, y: cornerY) && code.isDark(x: cornerX + 3, y: cornerY + 3))
            #expect(!code.isDark(x: cornerX + 1, y: cornerY + 1))
        }
        #expect(!code.isDark(x: -1, y: 0) && !code.isDark(x: 0, y: code.size) && !code.isDark(x: 1000, y: -1000))
    }

    @Test("bad input throws, and the message says what was wrong and what is allowed")
    func badInput() {
        #expect {
            try QRCode(encoding: "NEARBY:/\u{0}/X")
        } throws: { error in
            guard let error = error as? QRCodeError else { return false }
            return error.code == .invalidText && error.message.contains("NUL") && error.message.contains("byte 8")
        }
        #expect {
            try QRCode(encoding: "")
        } throws: { error in
            (error as? QRCodeError)?.code == .invalidText && "\(error)".contains("empty")
        }
        for length in [5000, 3392, 100_000] {
            #expect {
                try QRCode(encoding: String(repeating: "A", count: length))
            } throws: { error in
                guard let error = error as? QRCodeError else { return false }
                return error.code == .tooLong && error.message.contains("\(length) bytes")
                    && error.message.contains("3391 characters of upper-case letters") && error.message.contains("2331 bytes")
            }
        }
        // The same text fits at low correction, which holds 4296.
        #expect(throws: Never.self) { try QRCode(encoding: String(repeating: "A", count: 3392), correction: .low) }
    }
}
