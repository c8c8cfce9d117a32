import Foundation
import Testing

/// `nearby proxy` as systemd runs it under a `Type=notify` unit (Tools/packaging/systemd),
/// with systemd's side played by the test, since the lab has no systemd: a Unix datagram
/// socket that receives sd_notify's messages with the sender's credentials, as systemd's
/// notification socket does (a unit with the default NotifyAccess=main takes them only from its
/// main process), and a stderr that `$JOURNAL_STREAM` names, as journald's stream is named.
/// systemd puts the unit in "active" when READY=1 arrives; here a question asked at that moment
/// must be answered from the link.
extension LabTestSuite {
@Suite("as a systemd service: readiness, stopping, journal lines")
struct ServiceLabTests {
    @Test("nearby proxy (with its registrar) sends READY=1 from its own PID only once it answers: a question asked at that moment is answered from the link; STOPPING=1 on SIGTERM, then exit status 0; in the journal each log line carries its level")
    func readiness() async throws {
        let lab = try ProxyLabTests().routerLab()
        let zone = ProxyLabTests.zone
        let directory = try Lab.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let socketPath = directory.appendingPathComponent("notify").path
        let manager = try NotifySocket(path: socketPath)
        defer { manager.close() }
        let advertiser = try lab.start(["exec", "h1", "--", DiscoveryLabTests.nearby, "advertise", "--json", "Ready Box", "_openagents._tcp", "9710"])
        // A client in h4 with its question ready, sent the moment the test opens the FIFO: no
        // process start between READY=1 and the question.
        let trigger = directory.appendingPathComponent("ask").path
        guard mkfifo(trigger, 0o600) == 0 else { throw LabError("mkfifo \(trigger): errno \(errno)") }
        let asker = try lab.start(["exec", "h4", "--", "python3", "-c", Self.asker, trigger, ProxyLabTests.proxyAddress, "_openagents._tcp.\(zone)"])
        // stderr is a file; $JOURNAL_STREAM names it, as systemd names the journal's stream.
        let proxy = try lab.start(["exec", "h5", "--", "sh", "-c",
            "JOURNAL_STREAM=$(stat -L -c %d:%i /proc/self/fd/2) NOTIFY_SOCKET='\(socketPath)' exec '\(DiscoveryLabTests.nearby)' proxy lan1=\(zone) --listen \(ProxyLabTests.proxyAddress) --name-server proxy-lan1.lab.example.test --registrar-port 8053 --backend embedded --log-level info"])
        try await lab.withProcesses([advertiser, asker, proxy]) {
            _ = try await advertiser.waitForLine(containing: "\"advertising\"", timeout: .seconds(15))
            _ = try await asker.waitForLine(containing: "waiting", timeout: .seconds(10))
            let ready = try await manager.next(within: .seconds(20), while: { proxy.isRunning })
            // Frozen the moment READY=1 is read, so that what follows sees the proxy as it was
            // when it said so: the question then reaches a bound socket (not a closed port,
            // which refuses it) and, once the proxy goes on, is answered from the link's mDNS.
            proxy.signal(SIGSTOP)
            let opened = open(trigger, O_WRONLY | O_NONBLOCK)
            #expect(opened >= 0, "the asker is not waiting: errno \(errno)")
            if opened >= 0 { Glibc.close(opened) }
            // By the time "sent" is read (polled every 50 ms), a closed port's refusal (ICMP,
            // from the kernel at once) has reached the asker.
            _ = try await asker.waitForLine(containing: "sent", timeout: .seconds(10))
            proxy.signal(SIGCONT)
            #expect(ready.text.hasPrefix("READY=1\nSTATUS=answering for \(zone) on \(ProxyLabTests.proxyAddress) port 53, registrar on port 8053\n"), "\(ready.text)")
            #expect(ready.pid == proxy.pid, "READY=1 came from PID \(ready.pid), the proxy is \(proxy.pid): systemd (NotifyAccess=main) would drop it")
            _ = try await asker.wait(timeout: .seconds(10))
            #expect(asker.output.contains("answered rcode=0 ready=True"), "the question asked at READY=1: \(asker.output)\(asker.errorOutput)")
            proxy.signal(SIGTERM)
            let stopping = try await manager.next(within: .seconds(10), while: { true })
            #expect(stopping.text.hasPrefix("STOPPING=1\n") && stopping.pid == proxy.pid, "\(stopping.text) from \(stopping.pid)")
            let status = try await proxy.wait(timeout: .seconds(10))
            #expect(status == 0, "exit status \(status): \(proxy.errorOutput)")
            #expect(manager.pending() == nil, "nothing after STOPPING=1")
            // The journal's format: <6> for info, no time stamp, one event a line.
            let lines = proxy.errorOutput.split(separator: "\n")
            #expect(lines.contains { $0.hasPrefix("<6>nearby.proxy: answering for \(zone).") }, "\(proxy.errorOutput)")
            let logged = lines.filter { $0.hasPrefix("<") }
            #expect(!logged.isEmpty && logged.allSatisfy { $0.range(of: #"^<[0-7]>nearby[a-z.]*: "#, options: .regularExpression) != nil }, "\(proxy.errorOutput)")
        }
    }

    /// A DNS client (Python's standard library only): prints "waiting", blocks on the FIFO
    /// (argument 1), then sends one PTR question for argument 3 to argument 2 port 53 over UDP
    /// and prints the answer's RCODE and whether it names Ready Box (a refused port, i.e. no
    /// socket yet, is an error).
    static let asker = #"""
        import socket, struct, sys
        fifo, server, name = sys.argv[1:4]
        question = struct.pack(">HHHHHH", 0x5eed, 0, 1, 0, 0, 0)
        question += b"".join(bytes([len(label)]) + label.encode() for label in name.split(".")) + b"\0"
        question += struct.pack(">HH", 12, 1)
        udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        udp.settimeout(3)
        udp.connect((server, 53))
        print("waiting", flush=True)
        open(fifo).close()
        udp.send(question)
        print("sent", flush=True)
        reply = udp.recv(4096)
        print("answered rcode=%d ready=%s" % (reply[3] & 15, b"Ready Box" in reply), flush=True)
        """#
}
}

/// systemd's end of sd_notify: a Unix datagram socket bound to a path, with SO_PASSCRED on so
/// that each datagram carries its sender's PID (SCM_CREDENTIALS), read without waiting.
struct NotifySocket {
    let descriptor: Int32

    init(path: String) throws {
        descriptor = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard descriptor >= 0 else { throw LabError("socket: errno \(errno)") }
        var on: Int32 = 1
        setsockopt(descriptor, SOL_SOCKET, SO_PASSCRED, &on, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        guard bytes.count < MemoryLayout.size(ofValue: address.sun_path) else { throw LabError("\(path) is too long for a Unix socket") }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in for (index, byte) in bytes.enumerated() { raw[index] = byte } }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard bound == 0 else {
            Glibc.close(descriptor)
            throw LabError("bind \(path): errno \(errno)")
        }
    }

    /// The datagram waiting, with its sender's PID (0 when it came without credentials), or nil.
    func pending() -> (text: String, pid: pid_t)? {
        var buffer = [UInt8](repeating: 0, count: 4096)
        var control = [UInt8](repeating: 0, count: 64)
        let count = buffer.withUnsafeMutableBytes { data in
            control.withUnsafeMutableBytes { control in
                var vector = iovec(iov_base: data.baseAddress, iov_len: data.count)
                return withUnsafeMutablePointer(to: &vector) { vector in
                    var message = msghdr()
                    message.msg_iov = vector
                    message.msg_iovlen = 1
                    message.msg_control = control.baseAddress
                    message.msg_controllen = control.count
                    return recvmsg(descriptor, &message, Int32(MSG_DONTWAIT))
                }
            }
        }
        guard count >= 0 else { return nil }
        // One control message: a cmsghdr (length, level, type), then struct ucred (pid, uid,
        // gid), the pid first. SCM_CREDENTIALS is 2 on Linux (Glibc hides it and ucred without
        // _GNU_SOURCE).
        var pid: pid_t = 0
        control.withUnsafeBytes { raw in
            let header = raw.loadUnaligned(as: cmsghdr.self)
            if header.cmsg_level == SOL_SOCKET, header.cmsg_type == 2 {
                pid = raw.loadUnaligned(fromByteOffset: MemoryLayout<cmsghdr>.size, as: pid_t.self)
            }
        }
        return (String(decoding: buffer[..<count], as: UTF8.self), pid)
    }

    /// The next datagram within `time` (checked every millisecond while `alive()` holds).
    func next(within time: Duration, while alive: () -> Bool) async throws -> (text: String, pid: pid_t) {
        let deadline = ContinuousClock.now + time
        while ContinuousClock.now < deadline {
            if let datagram = pending() { return datagram }
            guard alive() else { throw LabError("the process ended without notifying") }
            try await Task.sleep(for: .milliseconds(1))
        }
        throw LabError("no notification within \(time)")
    }

    func close() { Glibc.close(descriptor) }
}
