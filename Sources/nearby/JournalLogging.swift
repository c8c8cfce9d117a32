#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif
import Logging
import NearbyBasics

/// Log lines for the systemd journal, used when stderr is the journal's stream: each event is
/// one line that begins with its syslog priority (`<3>` error … `<7>` debug), which journald
/// takes as the entry's level and removes (systemd.exec(5), `SyslogLevelPrefix=`, on by
/// default). No time stamp (the journal keeps its own) and no colour: `journalctl -p warning`
/// then shows the warnings, and `journalctl -o cat` the lines as they were written.
struct JournalLogHandler: LogHandler {
    let label: String
    var logLevel: Logger.Level = .info
    var metadata: Logger.Metadata = [:]
    var metadataProvider: Logger.MetadataProvider?
    /// Where the lines go (stderr; a test collects them).
    private let write: @Sendable (String) -> Void

    init(label: String, metadataProvider: Logger.MetadataProvider? = nil, write: @escaping @Sendable (String) -> Void = JournalLogHandler.writeLine) {
        self.label = label
        self.metadataProvider = metadataProvider
        self.write = write
    }

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        var merged = metadata
        if let provided = metadataProvider?.get() { merged.merge(provided) { _, new in new } }
        if let given = event.metadata { merged.merge(given) { _, new in new } }
        write(Self.line(level: event.level, label: label, message: event.message.description, metadata: merged))
    }

    /// The syslog priority journald reads from a line's `<N>` prefix (sd-daemon(3)): swift-log
    /// has no emergency or alert, and its trace is syslog's debug.
    static func priority(_ level: Logger.Level) -> Int {
        switch level {
        case .trace, .debug: 7
        case .info: 6
        case .notice: 5
        case .warning: 4
        case .error: 3
        case .critical: 2
        }
    }

    /// One event as one line: `<N>label: message key=value …`, ending in a newline. A line
    /// break inside the message or a value is written as `\n` (two characters), so an event
    /// never spills into a second entry without its level.
    static func line(level: Logger.Level, label: String, message: String, metadata: Logger.Metadata) -> String {
        var text = "<\(priority(level))>\(label): \(oneLine(message))"
        for (key, value) in metadata.sorted(by: { $0.key < $1.key }) {
            text += " \(oneLine(key))=\(oneLine(value.description))"
        }
        return text + "\n"
    }

    private static func oneLine(_ text: String) -> String {
        guard text.contains(where: \.isNewline) else { return text }
        var result = ""
        for character in text {
            if character.isNewline { result += "\\n" } else { result.append(character) }
        }
        return result
    }

    /// One line to stderr, whole: lines from several threads never interleave.
    @Sendable static func writeLine(_ line: String) {
        lock.withLock { writeToStandardError(line) }
    }

    private static let lock = Locked()
}

/// Whether stderr is the journal: systemd sets `$JOURNAL_STREAM` to the device and inode
/// numbers (`DEVICE:INODE`, decimal) of the stream it connects stdout and stderr to, so a
/// process compares them with its own stderr (a stderr redirected elsewhere no longer matches;
/// systemd.exec(5), "Environment variables in spawned processes").
enum JournalStream {
    /// True when `$JOURNAL_STREAM` names the file stderr is open on.
    static var isStandardError: Bool {
        guard let value = getenv("JOURNAL_STREAM").map({ String(cString: $0) }), let wanted = parse(value) else { return false }
        var status = stat()
        guard fstat(STDERR_FILENO, &status) == 0 else { return false }
        return UInt64(status.st_dev) == wanted.device && UInt64(status.st_ino) == wanted.inode
    }

    /// `DEVICE:INODE` read; nil when it is not two decimal numbers.
    static func parse(_ value: String) -> (device: UInt64, inode: UInt64)? {
        let parts = value.split(separator: ":", omittingEmptySubsequences: false)
        guard parts.count == 2, let device = UInt64(parts[0]), let inode = UInt64(parts[1]) else { return nil }
        return (device, inode)
    }
}
