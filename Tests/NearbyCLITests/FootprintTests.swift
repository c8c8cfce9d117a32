import Foundation
import Testing

/// What the `nearby` executable loads: FoundationEssentials, not Foundation with its
/// internationalization and ICU tables, which were most of what an idle advertiser held and
/// several milliseconds of every start. A module that imports Foundation again would bring
/// them back without any other test noticing.
@Suite("nearby's footprint")
struct FootprintTests {
    static let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    @Test("the built nearby links FoundationEssentials, not Foundation, FoundationInternationalization or ICU")
    func essentialsOnly() throws {
        let binary = Self.repository.appendingPathComponent(".build/debug/nearby")
        try #require(FileManager.default.isExecutableFile(atPath: binary.path), "build nearby first (swift build)")
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/ldd")
        process.arguments = [binary.path]
        let out = Pipe()
        process.standardOutput = out
        try process.run()
        let text = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        try #require(process.terminationStatus == 0, "ldd failed:\n\(text)")
        // Lines are "\tNAME => PATH (ADDRESS)" or "\tPATH (ADDRESS)".
        let libraries = text.split(separator: "\n").compactMap { line in
            line.split(whereSeparator: { $0 == " " || $0 == "\t" }).first.map(String.init)
        }
        #expect(libraries.contains("libFoundationEssentials.so"), "\(libraries)")
        for unwanted in ["libFoundation.so", "libFoundationInternationalization.so", "lib_FoundationICU.so"] {
            #expect(!libraries.contains(unwanted), "nearby loads \(unwanted): \(libraries)")
        }
        #expect(!libraries.contains { $0.hasPrefix("libicu") }, "\(libraries)")
    }
}
