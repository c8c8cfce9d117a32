extension QRCode {
    /// How ``terminalText(style:quietZone:)`` draws the modules.
    public enum TerminalStyle: Sendable, Hashable {
        /// Half-block characters (`▀ ▄ █` and space), two module rows a line and one module a
        /// column, in black on bright white set with ANSI colour codes, so the code is dark on
        /// light whatever the terminal's own colours are. The compact form: a version-7 code
        /// (45 modules) with a 2-module quiet zone is 25 lines of 49 columns. Needs a terminal
        /// with UTF-8, the block elements and 16 colours (not the Linux console's default font),
        /// and one that draws them one column wide (some do two in East Asian locales).
        case utf8
        /// Plain ASCII for consoles without block characters or colour: one line per module
        /// row, two characters per module, `##` for dark and two spaces for light. Twice as
        /// tall as ``utf8`` (a version-7 code with a 2-module quiet zone is 49 lines of 98
        /// columns), so it needs a larger window or a smaller font. The terminal's own colours
        /// decide how it looks: on light text over a dark background the code is shown inverted,
        /// which some readers do not accept.
        case ascii
    }

    /// The code as text for a terminal, lines separated by `"\n"`, without a newline at the end.
    ///
    /// - Parameters:
    ///   - style: Half blocks with colour, or plain ASCII; see ``TerminalStyle``.
    ///   - quietZone: The light margin around the code, in modules (negative counts as 0).
    ///     The standard asks for 4; 2 is read by phone cameras and keeps a version-7 code within
    ///     25 lines.
    public func terminalText(style: TerminalStyle, quietZone: Int = 2) -> String {
        let margin = max(0, quietZone)
        let range = -margin..<(size + margin)
        var lines: [String] = []
        switch style {
        case .utf8:
            // One colour pair for every cell: dark modules are the foreground (black, 30), light
            // ones the background (bright white, 107). Set at the start of each line and reset
            // at its end, so nothing leaks into the terminal when the text is cut or scrolled.
            let start = "\u{1B}[30;107m"
            let reset = "\u{1B}[0m"
            for top in stride(from: range.lowerBound, to: range.upperBound, by: 2) {
                var line = start
                line.reserveCapacity(start.utf8.count + range.count * 3 + reset.utf8.count)
                // Codes have an odd number of rows, so the last line's lower half is one row
                // past the margin: light, as everything outside the code is.
                for x in range {
                    switch (isDark(x: x, y: top), isDark(x: x, y: top + 1)) {
                    case (true, true): line.append("█")
                    case (true, false): line.append("▀")
                    case (false, true): line.append("▄")
                    case (false, false): line.append(" ")
                    }
                }
                line.append(reset)
                lines.append(line)
            }
        case .ascii:
            for y in range {
                var line = ""
                line.reserveCapacity(range.count * 2)
                for x in range { line.append(isDark(x: x, y: y) ? "##" : "  ") }
                lines.append(line)
            }
        }
        return lines.joined(separator: "\n")
    }
}
