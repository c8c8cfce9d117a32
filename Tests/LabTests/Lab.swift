import Foundation
import Testing

/// Every lab test shares one virtual LAN (the same hosts, the same avahi-daemons), so they
/// all live under this suite and run one at a time.
@Suite("Lab", .serialized, .enabled(if: Lab.shouldRun, "needs the lab: run Tools/test"))
struct LabTestSuite {}

/// The virtual LAN that `Tools/lab run` built around this test process.
///
/// Lab tests run only inside a lab (Tools/test makes one). Outside one they are reported as
/// skipped with the reason; under `CI=true` they run anyway and fail, so a CI run can never
/// pass without them.
struct Lab: Sendable {
    /// Path of the `Tools/lab` script.
    let script: String
    let name: String
    let hosts: Int

    static var current: Lab? {
        let environment = ProcessInfo.processInfo.environment
        guard let script = environment["NEARBY_LAB"], let name = environment["NEARBY_LAB_NAME"] else {
            return nil
        }
        return Lab(script: script, name: name, hosts: Int(environment["NEARBY_LAB_HOSTS"] ?? "") ?? 0)
    }

    /// True inside a lab, and under CI (where a missing lab must fail, not skip).
    static var shouldRun: Bool {
        current != nil || ProcessInfo.processInfo.environment["CI"] == "true"
    }

    static func require(hosts: Int) throws -> Lab {
        guard let lab = current else {
            throw LabError("no lab: run the lab tests through Tools/test (or Tools/lab run -- swift test --filter LabTests)")
        }
        guard lab.hosts >= hosts else {
            throw LabError("this test needs \(hosts) lab hosts, the lab has \(lab.hosts)")
        }
        return lab
    }

    /// Runs `Tools/lab ARGS` to completion and returns its output; throws on a non-zero exit.
    @discardableResult
    func run(_ arguments: [String], timeout: Duration = .seconds(60)) async throws -> String {
        let process = try LabProcess(script: script, arguments: arguments)
        let status = try await process.wait(timeout: timeout)
        let output = process.output
        guard status == 0 else {
            throw LabError("Tools/lab \(arguments.joined(separator: " ")) exited \(status): \(output)\n\(process.errorOutput)")
        }
        return output
    }

    /// Puts back the routes a LAN 1 host loses when its link or addresses are reset: multicast
    /// on lan1 and, in a lab with a router (Tools/test's), the way to LAN 2 through it.
    func restoreRoutes(_ host: String) async throws {
        try await run(["exec", host, "--", "ip", "route", "replace", "224.0.0.0/4", "dev", "lan1"])
        let router = ProcessInfo.processInfo.environment["NEARBY_LAB_ROUTER"] ?? ""
        guard let number = Int(router.dropFirst()), router.hasPrefix("h"), router != host, let own = Int(host.dropFirst()) else { return }
        // A link taken down loses its IPv6 addresses too; the route needs ours back first.
        try await run(["exec", host, "--", "ip", "-6", "addr", "replace", "fd6e:6272:1::\(own)/64", "dev", "lan1", "nodad"])
        try await run(["exec", host, "--", "ip", "route", "replace", "198.18.2.0/24", "via", "198.18.1.\(number)"])
        try await run(["exec", host, "--", "ip", "-6", "route", "replace", "fd6e:6272:2::/64", "via", "fd6e:6272:1::\(number)"])
    }

    /// Runs `body` with avahi-daemon running in `hosts`, and stops the daemons afterwards
    /// (also when `body` throws), so the next test finds the hosts clean.
    func withAvahi(in hosts: [String], _ body: () async throws -> Void) async throws {
        for host in hosts { try await run(["avahi", "start", host]) }
        do {
            try await body()
        } catch {
            for host in hosts { _ = try? await run(["avahi", "stop", host]) }
            throw error
        }
        for host in hosts { try await run(["avahi", "stop", host]) }
    }

    /// Runs `body` with the given background processes, stopping them afterwards in any case.
    func withProcesses(_ processes: [LabProcess], _ body: () async throws -> Void) async throws {
        do {
            try await body()
        } catch {
            for process in processes { await process.stop() }
            throw error
        }
        for process in processes { await process.stop() }
    }

    /// Starts `Tools/lab ARGS` in the background.
    func start(_ arguments: [String]) throws -> LabProcess {
        try LabProcess(script: script, arguments: arguments)
    }

    /// A fresh directory for files a test writes.
    static func temporaryDirectory() throws -> URL {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("nearby-lab-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        return url
    }
}

struct LabError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

/// A child process whose output goes to files (no pipe can fill up and stall it).
///
/// Spawned with posix_spawn and reaped with a non-blocking waitpid: Foundation's Process on
/// Linux reports termination through a run loop that a test process does not run.
final class LabProcess: @unchecked Sendable {
    // Mutable state is only touched under `lock`.
    private let lock = NSLock()
    /// The process id (the program's own: Tools/lab and `ip netns exec` exec it).
    let pid: pid_t
    private var status: Int32?
    private let outputURL: URL
    private let errorURL: URL

    init(script: String, arguments: [String]) throws {
        let directory = try Lab.temporaryDirectory()
        outputURL = directory.appendingPathComponent("stdout")
        errorURL = directory.appendingPathComponent("stderr")
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, outputURL.path, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        posix_spawn_file_actions_addopen(&actions, 2, errorURL.path, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        let argv = ([script] + arguments).map { strdup($0) } + [nil]
        defer { for pointer in argv { free(pointer) } }
        // Test threads (dispatch workers) block signals, and a spawned child inherits the mask:
        // give it an empty mask and default handlers, or SIGINT/SIGTERM would never reach it.
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var noSignals = sigset_t()
        sigemptyset(&noSignals)
        var defaults = sigset_t()
        sigemptyset(&defaults)
        for signal in [SIGINT, SIGTERM, SIGQUIT, SIGHUP, SIGPIPE, SIGCHLD] { sigaddset(&defaults, signal) }
        posix_spawnattr_setsigmask(&attributes, &noSignals)
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))
        var child: pid_t = 0
        let result = posix_spawn(&child, script, &actions, &attributes, argv, environ)
        guard result == 0 else { throw LabError("cannot start \(script): error \(result)") }
        pid = child
    }

    var output: String { (try? String(contentsOf: outputURL, encoding: .utf8)) ?? "" }
    var errorOutput: String { (try? String(contentsOf: errorURL, encoding: .utf8)) ?? "" }

    /// The exit status once the process has ended (128 + signal when killed by one).
    var exitStatus: Int32? {
        lock.lock()
        defer { lock.unlock() }
        if let status { return status }
        var raw: Int32 = 0
        guard waitpid(pid, &raw, WNOHANG) == pid else { return nil }
        let signal = raw & 0x7F
        status = signal == 0 ? (raw >> 8) & 0xFF : 128 + signal
        return status
    }

    var isRunning: Bool { exitStatus == nil }

    /// Waits for the process to end, polling; kills it after `timeout`.
    func wait(timeout: Duration) async throws -> Int32 {
        let deadline = ContinuousClock.now + timeout
        while true {
            if let status = exitStatus { return status }
            if ContinuousClock.now >= deadline {
                Glibc.kill(pid, SIGTERM)
                throw LabError("process timed out after \(timeout): \(output)\n\(errorOutput)")
            }
            try await Task.sleep(for: .milliseconds(50))
        }
    }

    /// Waits until stdout has a line containing `text`; returns that line.
    func waitForLine(containing text: String, timeout: Duration) async throws -> String {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            let running = isRunning
            if let line = output.split(separator: "\n").first(where: { $0.contains(text) }) {
                return String(line)
            }
            if !running {
                throw LabError("process ended before printing \"\(text)\": \(output)\n\(errorOutput)")
            }
            try await Task.sleep(for: .milliseconds(50))
        }
        throw LabError("no line containing \"\(text)\" within \(timeout): \(output)\n\(errorOutput)")
    }

    /// Waits until stdout has a line that `matches`; returns that line.
    func waitForLine(where matches: (Substring) -> Bool, timeout: Duration) async throws -> String {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            let running = isRunning
            if let line = output.split(separator: "\n").first(where: matches) { return String(line) }
            if !running { throw LabError("process ended before printing the line wanted: \(output)\n\(errorOutput)") }
            try await Task.sleep(for: .milliseconds(50))
        }
        throw LabError("no line as wanted within \(timeout): \(output)\n\(errorOutput)")
    }

    /// Sends `number` (e.g. SIGHUP) to the process.
    func signal(_ number: Int32) {
        _ = Glibc.kill(pid, number)
    }

    /// Sends SIGKILL to the process (and, through `ip netns exec`'s exec, to the program).
    func kill() {
        _ = Glibc.kill(pid, SIGKILL)
    }

    /// Sends SIGTERM and waits for the end (SIGKILL after 10 s).
    func stop() async {
        guard isRunning else { return }
        Glibc.kill(pid, SIGTERM)
        if (try? await wait(timeout: .seconds(10))) == nil {
            Glibc.kill(pid, SIGKILL)
            _ = try? await wait(timeout: .seconds(5))
        }
    }
}

/// UDP payloads of a pcap file (Ethernet, IPv4 or IPv6, UDP), in capture order.
func udpPayloads(ofPcap data: [UInt8]) throws -> [[UInt8]] {
    func u32(_ offset: Int, little: Bool) -> Int {
        let b = data[offset..<(offset + 4)].map(Int.init)
        return little ? b[0] | b[1] << 8 | b[2] << 16 | b[3] << 24 : b[3] | b[2] << 8 | b[1] << 16 | b[0] << 24
    }
    guard data.count >= 24 else { throw LabError("pcap file of \(data.count) bytes has no header") }
    let little: Bool
    switch Array(data[0..<4]) {
    case [0xD4, 0xC3, 0xB2, 0xA1], [0x4D, 0x3C, 0xB2, 0xA1]: little = true
    case [0xA1, 0xB2, 0xC3, 0xD4], [0xA1, 0xB2, 0x3C, 0x4D]: little = false
    default: throw LabError("not a pcap file")
    }
    guard u32(20, little: little) == 1 else { throw LabError("pcap link type is not Ethernet") }
    var payloads: [[UInt8]] = []
    var offset = 24
    while offset + 16 <= data.count {
        let captured = u32(offset + 8, little: little)
        let start = offset + 16
        offset = start + captured
        guard offset <= data.count else { break }
        let frame = Array(data[start..<offset])
        guard frame.count >= 14 else { continue }
        let etherType = Int(frame[12]) << 8 | Int(frame[13])
        var udp: Int
        switch etherType {
        case 0x0800:
            guard frame.count >= 34, frame[23] == 17 else { continue }
            udp = 14 + Int(frame[14] & 0x0F) * 4
        case 0x86DD:
            guard frame.count >= 62, frame[20] == 17 else { continue }
            udp = 14 + 40
        default:
            continue
        }
        guard udp + 8 <= frame.count else { continue }
        let length = Int(frame[udp + 4]) << 8 | Int(frame[udp + 5])
        guard length >= 8, udp + length <= frame.count else { continue }
        payloads.append(Array(frame[(udp + 8)..<(udp + length)]))
    }
    return payloads
}

/// The JSON objects of a command's output, one per line (lines that are not JSON are skipped).
func jsonLines(_ text: String) -> [[String: Any]] {
    text.split(separator: "\n").compactMap { line in
        (try? JSONSerialization.jsonObject(with: Data(line.utf8))) as? [String: Any]
    }
}
