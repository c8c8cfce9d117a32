/// The rules a name from a peer must meet before anything is written under it. A name that
/// breaks one is refused with the rule, never rewritten: a person then sees what was sent.
public enum FileNames {
    /// The longest name taken, in bytes of UTF-8: 255 less the partial file's suffix and a number.
    public static let maximumNameBytes = 200
    /// Folders a sent path may go down at most (`--recursive`).
    public static let maximumDepth = 32

    /// Why `component` cannot be a file or folder name here, or nil when it can.
    ///
    /// Refused: the empty name, `.` and `..`, a leading dot (hidden files, and `..` in
    /// disguise), `/` and `\` (a path, not a name), NUL and other control characters (which
    /// terminals interpret), and names over 200 bytes of UTF-8 (the file system's 255, less room
    /// for the partial file's suffix).
    public static func problem(with component: String) -> String? {
        if component.isEmpty { return "an empty name" }
        if component == "." || component == ".." { return "\"\(component)\" (a reference to a folder, not a name)" }
        if component.hasPrefix(".") { return "a name starting with a dot (\(shown(component))): hidden names are not accepted" }
        if component.utf8.count > maximumNameBytes { return "a name of \(component.utf8.count) bytes (at most \(maximumNameBytes))" }
        for scalar in component.unicodeScalars {
            switch scalar.value {
            case 0: return "a name with a NUL byte"
            case 0x2F: return "a name with \"/\" (\(shown(component))): a path, not a name"
            case 0x5C: return "a name with \"\\\" (\(shown(component)))"
            case 0x01...0x1F, 0x7F, 0x80...0x9F: return "a name with a control character (\(shown(component)))"
            default: continue
            }
        }
        return nil
    }

    /// Why the path (folders, then the file name) cannot be written under the receiving folder,
    /// or nil when it can.
    public static func problem(withPath components: [String]) -> String? {
        guard !components.isEmpty else { return "an empty name" }
        guard components.count <= maximumDepth + 1 else { return "a path \(components.count) levels deep (at most \(maximumDepth + 1))" }
        for component in components {
            if let problem = problem(with: component) { return problem }
        }
        return nil
    }

    /// A name as it can be shown safely: control characters escaped, at most 80 characters.
    public static func shown(_ name: String) -> String {
        var text = ""
        for scalar in name.unicodeScalars.prefix(80) {
            switch scalar.value {
            case 0x00...0x1F, 0x7F, 0x80...0x9F: text += "\\u{\(String(scalar.value, radix: 16))}"
            default: text.unicodeScalars.append(scalar)
            }
        }
        return name.unicodeScalars.count > 80 ? text + "…" : text
    }

    /// The name to save under when `name` is taken: "report (2).pdf", "report (3).pdf", …
    /// (the number goes before the last extension, as browsers do).
    public static func numbered(_ name: String, _ number: Int) -> String {
        guard number > 1 else { return name }
        if let dot = name.lastIndex(of: "."), dot != name.startIndex {
            return "\(name[..<dot]) (\(number))\(name[dot...])"
        }
        return "\(name) (\(number))"
    }
}
