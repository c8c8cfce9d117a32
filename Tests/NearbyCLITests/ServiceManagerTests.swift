import Foundation
import Logging
import Testing

@testable import nearby

/// What the long-running commands tell systemd (sd_notify's protocol, spoken without
/// libsystemd) and how their log lines look in the journal. The addresses and messages are
/// checked as values; one test sends a notification to a real Unix datagram socket in a
/// temporary directory, as systemd's would receive it. (That a unit reaches "active" only once
/// the proxy answers is a lab test: ServiceLabTests.)
@Suite("service manager: sd_notify and the journal")
struct ServiceManagerTests {
    @Test("NOTIFY_SOCKET: an absolute path or @abstract is used; unset, empty, relative, vsock: and too long are not (and the last three are said)")
    func addresses() {
        #expect(ServiceManager.parse(nil) == (nil, nil))
        #expect(ServiceManager.parse("") == (nil, nil))
        #expect(ServiceManager.parse("/run/systemd/notify").0 == .path("/run/systemd/notify"))
        #expect(ServiceManager.parse("@/org/freedesktop/systemd1/notify/123").0 == .abstract("/org/freedesktop/systemd1/notify/123"))
        for unusable in ["run/notify", "@", "vsock:2:1234", "/" + String(repeating: "a", count: 107)] {
            let (address, problem) = ServiceManager.parse(unusable)
            #expect(address == nil, "\(unusable)")
            #expect(problem?.contains("the service manager is told nothing") == true, "\(unusable): \(problem ?? "no problem said")")
        }
        // 107 bytes and the terminating zero fill sun_path exactly; so do @ and 107 bytes.
        #expect(ServiceManager.parse("/" + String(repeating: "a", count: 106)).0 != nil)
        #expect(ServiceManager.parse("@" + String(repeating: "a", count: 107)).0 != nil)
        #expect(ServiceManager.parse("@" + String(repeating: "a", count: 108)).0 == nil)
    }

    @Test("sun_path: a path ends with its zero; an abstract name begins with one and has none after it")
    func socketPaths() {
        #expect(ServiceManager.socketPath(.path("/run/n")) == Array("/run/n".utf8) + [0])
        #expect(ServiceManager.socketPath(.abstract("n/1")) == [0] + Array("n/1".utf8))
        #expect(ServiceManager.socketPath(.path("/run/\u{0}n")) == nil)
    }

    @Test("a notification is KEY=VALUE lines, each ended by a newline; a line break in a value becomes a space")
    func messages() {
        #expect(ServiceManager.message([("READY", "1"), ("STATUS", "answering for lan1.example.test")]) == "READY=1\nSTATUS=answering for lan1.example.test\n")
        #expect(ServiceManager.message([("STATUS", "cannot bind:\naddress in use\r\n")]) == "STATUS=cannot bind: address in use \n")
        #expect(ServiceManager.message([("STOPPING", "1")]) == "STOPPING=1\n")
    }

    @Test("without NOTIFY_SOCKET nothing is sent and nothing fails")
    func unset() {
        let manager = ServiceManager(notifySocket: nil)
        #expect(manager.address == nil && manager.problem == nil)
        #expect(manager.ready(status: "up", logger: Logger(label: "test") { _ in SwiftLogNoOpLogHandler() }))
    }

    @Test("READY=1 and STOPPING=1 arrive as one datagram each on a Unix datagram socket, as systemd's receives them; a socket nobody listens on is a failure, not a hang")
    func sendsDatagrams() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("nearby-notify-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("notify").path
        let receiver = try NotifyReceiver(path: path)
        defer { receiver.close() }
        let manager = ServiceManager(notifySocket: path)
        let quiet = Logger(label: "test") { _ in SwiftLogNoOpLogHandler() }
        #expect(manager.ready(status: "answering", logger: quiet))
        #expect(manager.stopping(status: "stopping", logger: quiet))
        #expect(receiver.receive() == "READY=1\nSTATUS=answering\n")
        #expect(receiver.receive() == "STOPPING=1\nSTATUS=stopping\n")
        #expect(receiver.receive() == nil)
        let nobody = ServiceManager(notifySocket: directory.appendingPathComponent("nobody").path)
        let lines = LinesSeen()
        let logger = Logger(label: "nearby.proxy") { label in JournalLogHandler(label: label, write: { lines.append($0) }) }
        #expect(!nobody.ready(status: "up", logger: logger))
        #expect(lines.all.count == 1 && lines.all[0].hasPrefix("<4>nearby.proxy: cannot tell the service manager READY=1, STATUS=up: sendto: "), "\(lines.all)")
    }

    @Test("JOURNAL_STREAM is DEVICE:INODE in decimal; anything else is not the journal")
    func journalStream() {
        #expect(JournalStream.parse("8:12345")! == (8, 12345))
        for bad in ["", "8", "8:", ":5", "8:5:1", "x:5", "8:-5"] { #expect(JournalStream.parse(bad) == nil, "\(bad)") }
    }

    @Test("in the journal a log event is one line: <priority>label: message key=value, no time stamp, no colour, line breaks written as \\n")
    func journalLines() {
        #expect(JournalLogHandler.line(level: .warning, label: "nearby.proxy", message: "link eth1 went away", metadata: [:])
                == "<4>nearby.proxy: link eth1 went away\n")
        #expect(JournalLogHandler.line(level: .info, label: "nearby.registrar", message: "accepted", metadata: ["source": "10.0.0.7", "name": "Boxed"])
                == "<6>nearby.registrar: accepted name=Boxed source=10.0.0.7\n")
        #expect(JournalLogHandler.line(level: .error, label: "nearby", message: "first\nsecond", metadata: ["why": "a\nb"]) == "<3>nearby: first\\nsecond why=a\\nb\n")
        let priorities = Logger.Level.allCases.map(JournalLogHandler.priority)
        #expect(priorities == [7, 7, 6, 5, 4, 3, 2])
    }

    @Test("the journal handler writes what the logger lets through, with the handler's and the event's metadata")
    func journalHandler() {
        let lines = LinesSeen()
        var logger = Logger(label: "nearby.proxy") { label in JournalLogHandler(label: label, write: { lines.append($0) }) }
        logger.logLevel = .notice
        logger[metadataKey: "zone"] = "lan1.example.test"
        logger.info("not shown at notice")
        logger.notice("answering", metadata: ["port": "53"])
        logger.critical("stopped")
        #expect(lines.all == ["<5>nearby.proxy: answering port=53 zone=lan1.example.test\n", "<2>nearby.proxy: stopped zone=lan1.example.test\n"])
    }
}

/// Lines a handler wrote, kept for a test.
private final class LinesSeen: @unchecked Sendable {
    private let lock = NSLock()
    private var lines: [String] = []
    func append(_ line: String) { lock.withLock { lines.append(line) } }
    var all: [String] { lock.withLock { lines } }
}

/// The service manager's end of the notification socket: a Unix datagram socket bound to a
/// path, read without waiting.
struct NotifyReceiver {
    let descriptor: Int32

    init(path: String) throws {
        descriptor = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard descriptor >= 0 else { throw POSIXError(.EIO) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in for (index, byte) in bytes.enumerated() { raw[index] = byte } }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard bound == 0 else {
            Glibc.close(descriptor)
            throw POSIXError(.EADDRINUSE)
        }
    }

    /// The next datagram, or nil when none waits.
    func receive() -> String? {
        var buffer = [UInt8](repeating: 0, count: 4096)
        let count = buffer.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }
        guard count >= 0 else { return nil }
        return String(decoding: buffer[..<count], as: UTF8.self)
    }

    func close() { Glibc.close(descriptor) }
}
