#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif
import Logging

/// Tells the service manager (systemd) how this process is doing: sd_notify(3)'s protocol,
/// spoken here without libsystemd. `$NOTIFY_SOCKET` names a Unix datagram socket, a file
/// system path or, with a leading `@`, an abstract name; each notification is one datagram of
/// `KEY=VALUE` lines (`READY=1`, `STOPPING=1`, `STATUS=…`). Without `$NOTIFY_SOCKET` (not run by
/// systemd, or by a unit that is not `Type=notify`) every call does nothing.
///
/// The executable's, not a library's: readiness is a decision about the whole process (the
/// proxy and the registrar beside it are ready together), and one process has one socket to
/// tell it on. Sending never blocks: a full socket is a failed notification, logged.
struct ServiceManager: Sendable {
    /// Where notifications go.
    enum Address: Equatable, Sendable {
        /// A socket in the file system (an absolute path).
        case path(String)
        /// A socket in the abstract namespace (`@name`), given without the `@`.
        case abstract(String)
    }

    /// Where notifications go; nil when `$NOTIFY_SOCKET` was unset or not usable.
    let address: Address?
    /// Why `$NOTIFY_SOCKET` was set but cannot be used, to log once (nil when it is fine or unset).
    let problem: String?

    /// The notifier `$NOTIFY_SOCKET` asks for, read once at start. The variable is then removed
    /// from the environment, as sd_notify's `unset_environment` does, so that no child process
    /// speaks to the service manager in this one's name.
    static let fromEnvironment: ServiceManager = {
        let value = getenv("NOTIFY_SOCKET").map { String(cString: $0) }
        unsetenv("NOTIFY_SOCKET")
        return ServiceManager(notifySocket: value)
    }()

    init(notifySocket value: String?) {
        (address, problem) = Self.parse(value)
    }

    /// `$NOTIFY_SOCKET` read: an absolute path, or `@` and an abstract name, that fits a
    /// `sockaddr_un` (107 bytes and its terminating zero; an abstract name 107 bytes after the
    /// leading zero). Anything else (systemd's `vsock:` addresses among them) cannot be used.
    static func parse(_ value: String?) -> (Address?, String?) {
        guard let value, !value.isEmpty else { return (nil, nil) }
        let address: Address
        if value.hasPrefix("/") {
            address = .path(value)
        } else if value.hasPrefix("@"), value.utf8.count > 1 {
            address = .abstract(String(value.dropFirst()))
        } else {
            return (nil, "NOTIFY_SOCKET=\(value) is neither an absolute path nor @name; the service manager is told nothing")
        }
        guard socketPath(address) != nil else {
            return (nil, "NOTIFY_SOCKET=\(value) is longer than a Unix socket address holds; the service manager is told nothing")
        }
        return (address, nil)
    }

    /// The bytes of `sun_path` for `address`, or nil when they do not fit: a path with its
    /// terminating zero; an abstract name after a leading zero, with none after it (the name is
    /// exactly as long as the address says).
    static func socketPath(_ address: Address) -> [UInt8]? {
        let bytes: [UInt8]
        switch address {
        case .path(let path):
            guard !path.utf8.contains(0) else { return nil }
            bytes = Array(path.utf8) + [0]
        case .abstract(let name):
            bytes = [0] + Array(name.utf8)
        }
        guard bytes.count <= MemoryLayout.size(ofValue: sockaddr_un().sun_path) else { return nil }
        return bytes
    }

    /// One notification: `KEY=VALUE` lines, each ended by a newline. A value is one line: a
    /// line break in it (a status that quotes an error, say) becomes a space.
    static func message(_ assignments: [(key: String, value: String)]) -> String {
        assignments.map { "\($0.key)=\(String($0.value.map { $0.isNewline ? " " : $0 }))\n" }.joined()
    }

    /// Sends `assignments` as one datagram. True when there is no socket to tell, or the
    /// datagram was sent; false (and `logger` says why, as a warning) when sending failed.
    @discardableResult
    func notify(_ assignments: [(key: String, value: String)], logger: Logger) -> Bool {
        guard let address, let path = Self.socketPath(address) else { return true }
        let text = Self.message(assignments)
        let error = Self.send(Array(text.utf8), to: path)
        if let error {
            logger.warning("cannot tell the service manager \(text.split(separator: "\n").joined(separator: ", ")): \(error)")
            return false
        }
        logger.debug("told the service manager \(text.split(separator: "\n").joined(separator: ", "))")
        return true
    }

    /// `READY=1`: the service is up (with a status line for `systemctl status`).
    @discardableResult
    func ready(status: String, logger: Logger) -> Bool {
        notify([("READY", "1"), ("STATUS", status)], logger: logger)
    }

    /// `STOPPING=1`: the service is on its way out.
    @discardableResult
    func stopping(status: String, logger: Logger) -> Bool {
        notify([("STOPPING", "1"), ("STATUS", status)], logger: logger)
    }

    /// Sends `datagram` to the Unix datagram socket at `path` (`sun_path`'s bytes) without
    /// waiting; the error's text when it cannot.
    private static func send(_ datagram: [UInt8], to path: [UInt8]) -> String? {
        #if canImport(Glibc) || canImport(Musl)
            let kind = Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue)
        #else
            let kind = SOCK_DGRAM
        #endif
        let descriptor = socket(AF_UNIX, kind, 0)
        guard descriptor >= 0 else { return "socket: \(String(cString: strerror(errno)))" }
        defer { close(descriptor) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (index, byte) in path.enumerated() { raw[index] = byte }
        }
        let length = socklen_t(MemoryLayout<sockaddr_un>.offset(of: \.sun_path) ?? 2) + socklen_t(path.count)
        #if canImport(Glibc) || canImport(Musl)
            let flags = Int32(MSG_DONTWAIT) | Int32(MSG_NOSIGNAL)
        #else
            let flags = Int32(MSG_DONTWAIT)
        #endif
        while true {
            let sent = datagram.withUnsafeBytes { bytes in
                withUnsafePointer(to: &address) { pointer in
                    pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                        sendto(descriptor, bytes.baseAddress, bytes.count, flags, $0, length)
                    }
                }
            }
            if sent >= 0 { return sent == datagram.count ? nil : "sent \(sent) of \(datagram.count) bytes" }
            if errno == EINTR { continue }
            return "sendto: \(String(cString: strerror(errno)))"
        }
    }
}
