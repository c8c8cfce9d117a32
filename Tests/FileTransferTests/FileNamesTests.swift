import Testing

@testable import FileTransfer

@Suite("files: names from a peer")
struct FileNamesTests {
    @Test("names that could leave the folder, hide, or fool a terminal are refused one by one, with the rule")
    func hostileNames() {
        let refused: [(String, String)] = [
            ("", "empty"), (".", "reference to a folder"), ("..", "reference to a folder"), (".bashrc", "starting with a dot"),
            ("../etc", "starting with a dot"), ("a/b", "\"/\""), ("/etc/passwd", "\"/\""), ("a\\b", "\"\\\""), ("a\u{0}b", "NUL"),
            ("a\nb", "control character"), ("\u{1B}[31mred", "control character"), ("a\u{7F}", "control character"),
            ("a\u{85}b", "control character"), (String(repeating: "x", count: 201), "201 bytes (at most 200)"),
        ]
        for (name, rule) in refused {
            let problem = FileNames.problem(with: name)
            #expect(problem?.contains(rule) == true, "\(FileNames.shown(name)): \(problem ?? "accepted")")
        }
        for name in ["build.tar.zst", "Résumé 2026.pdf", "a..b", "x.", "日本語.txt", String(repeating: "x", count: 200), "-rf"] {
            #expect(FileNames.problem(with: name) == nil, "\(name)")
        }
        #expect(FileNames.problem(withPath: ["out", "..", "x"])?.contains("reference to a folder") == true)
        #expect(FileNames.problem(withPath: Array(repeating: "d", count: 34))?.contains("levels deep") == true)
        #expect(FileNames.problem(withPath: ["out", "sub", "x.o"]) == nil)
        #expect(FileNames.shown("a\nb\u{1B}") == "a\\u{a}b\\u{1b}")
    }

    @Test("a taken name gets a number before its last extension")
    func numbering() {
        #expect(FileNames.numbered("report.pdf", 1) == "report.pdf")
        #expect(FileNames.numbered("report.pdf", 2) == "report (2).pdf")
        #expect(FileNames.numbered("build.tar.zst", 3) == "build.tar (3).zst")
        #expect(FileNames.numbered("README", 2) == "README (2)")
    }
}
