import Foundation
import PeerConnection
import PeerTrust
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// A TCP socket connected to 127.0.0.1 `port` (the kernel completes the handshake at once on
/// loopback), or nil.
func rawConnect(port: Int) -> Int32? {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { return nil }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = in_port_t(UInt16(port).bigEndian)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    let connected = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
    }
    guard connected == 0 else {
        close(fd)
        return nil
    }
    return fd
}

/// A plain TCP client on 127.0.0.1 that writes what it is given and reads until the server
/// closes (or `limit` passes). Blocking calls with short socket timeouts: test code only.
func rawExchange(port: Int, send bytes: [UInt8], limit: Double = 5) -> (received: [UInt8], closedBy: Double?) {
    guard let fd = rawConnect(port: port) else { return ([], nil) }
    return rawExchange(fd: fd, send: bytes, limit: limit)
}

/// The same on a socket connected already (closed on return).
func rawExchange(fd: Int32, send bytes: [UInt8], limit: Double = 5) -> (received: [UInt8], closedBy: Double?) {
    defer { close(fd) }
    var timeout = timeval(tv_sec: 0, tv_usec: 200_000)
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    if !bytes.isEmpty { _ = bytes.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) } }
    let start = Date()
    var received: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 4096)
    while Date().timeIntervalSince(start) < limit {
        let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
        if count == 0 { return (received, Date().timeIntervalSince(start)) }
        if count > 0 { received += buffer[0..<count] } else if errno != EAGAIN && errno != EWOULDBLOCK { return (received, Date().timeIntervalSince(start)) }
    }
    return (received, nil)
}

@Suite("loopback: hostile and careless clients")
struct HostileClientTests {
    @Test("garbage bytes instead of TLS: refused and reported; the server goes on serving")
    func garbage() async throws {
        let server = try Peers.identity("Build Box")
        let client = try Peers.identity("Laptop")
        let echo = try await EchoServer(Peers.configuration(server, pinning: [client]))
        let exchange = try await onOwnThread { rawExchange(port: echo.port, send: Array("GET / HTTP/1.1\r\nHost: x\r\n\r\n".utf8) + (0..<512).map { UInt8(truncatingIfNeeded: $0 &* 37) }) }
        #expect(exchange.closedBy != nil)
        let rejection = try #require(await echo.nextRejection())
        #expect(rejection.error.code == .tls)
        let connection = try await PeerConnection.connect(host: "127.0.0.1", port: echo.port, configuration: Peers.configuration(client, pinning: [server]))
        #expect(try await connection.request("ping") == .object([:]))
        await connection.close()
        await echo.stop()
    }

    @Test("a dialer that hangs up half way through the TLS handshake (a happy-eyeballs loser) is not reported as rejected; garbage still is")
    func hangUpMidHandshake() async throws {
        let server = try Peers.identity("Build Box")
        let client = try Peers.identity("Laptop")
        let echo = try await EchoServer(Peers.configuration(server, pinning: [client]))
        let hello = try #require(try await onOwnThread { captureClientHello() })
        #expect(hello.first == 0x16, "a TLS handshake record")
        // The ClientHello, the server's first flight back, then the dialer closes: the server
        // is left waiting for the client's certificate and finished.
        let (answered, hungUpPort) = try await onOwnThread { () -> (Int, Int) in
            guard let fd = rawConnect(port: echo.port) else { return (-1, 0) }
            defer { close(fd) }
            var local = sockaddr_in()
            var length = socklen_t(MemoryLayout<sockaddr_in>.size)
            _ = withUnsafeMutablePointer(to: &local) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) } }
            _ = hello.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            var timeout = timeval(tv_sec: 2, tv_usec: 0)
            setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
            var buffer = [UInt8](repeating: 0, count: 4096)
            return (buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }, Int(UInt16(bigEndian: local.sin_port)))
        }
        #expect(answered > 0, "the server answered the ClientHello")
        // Then garbage, which is refused and reported: the first rejection must be it.
        _ = try await onOwnThread { rawExchange(port: echo.port, send: Array("GET / HTTP/1.1\r\n\r\n".utf8)) }
        let rejection = try #require(await echo.nextRejection())
        #expect(rejection.port != hungUpPort, "the hang-up was reported: \(rejection.error.message)")
        #expect(rejection.error.code == .tls)
        let connection = try await PeerConnection.connect(host: "127.0.0.1", port: echo.port, configuration: Peers.configuration(client, pinning: [server]))
        #expect(try await connection.request("ping") == .object([:]))
        await connection.close()
        await echo.stop()
    }

    @Test("a client that connects and says nothing is closed after the set-up timeout, with a reason")
    func silentClient() async throws {
        let server = try Peers.identity("Build Box")
        var configuration = Peers.configuration(server)
        configuration.setupTimeout = .seconds(1)
        let echo = try await EchoServer(configuration)
        #expect(echo.listener.isIdle)
        let connectedAt = Date()
        let fd = try #require(rawConnect(port: echo.port))
        // Accepted and in its setup: the listener is not idle. Checked in a plain loop (every
        // 0.5 ms, at most 5 s) on this thread: NIO accepts on its own threads, and a busy
        // cooperative pool cannot delay the check past the setup's second.
        var busy = false
        for _ in 0..<10_000 where !busy {
            busy = !echo.listener.isIdle
            if !busy { usleep(500) }
        }
        #expect(busy, "a connection in its setup did not count")
        let exchange = try await onOwnThread { rawExchange(fd: fd, send: [], limit: 5) }
        _ = try #require(exchange.closedBy, "the server never closed the silent connection")
        #expect(Date().timeIntervalSince(connectedAt) >= 0.9)
        let rejection = try #require(await echo.nextRejection())
        #expect(rejection.error.code == .timeout)
        #expect(echo.listener.isIdle, "the timed-out setup still counts")
        await echo.stop()
    }

    @Test("a TLS 1.2-only client is refused in the handshake (openssl s_client -tls1_2)")
    func tls12Client() async throws {
        let server = try Peers.identity("Build Box")
        let echo = try await EchoServer(Peers.configuration(server))
        let output = try await onOwnThread { try opensslClient(port: echo.port, arguments: ["-tls1_2"]) }
        #expect(!output.contains("Protocol  : TLSv1.2"), "a TLS 1.2 session was set up: \(output)")
        let rejection = try #require(await echo.nextRejection())
        #expect(rejection.error.code == .tls)
        #expect(rejection.error.message.contains("TLS 1.3"))
        await echo.stop()
    }

    @Test("openssl s_client -tls1_3 negotiates TLS 1.3 and is asked for a certificate")
    func tls13CertificateRequest() async throws {
        let server = try Peers.identity("Build Box")
        let echo = try await EchoServer(Peers.configuration(server))
        let output = try await onOwnThread { try opensslClient(port: echo.port, arguments: ["-tls1_3"]) }
        #expect(output.contains("TLSv1.3"), "\(output)")
        #expect(output.contains("Acceptable client certificate CA names") || output.contains("Requested Signature Algorithms"), "\(output)")
        await echo.stop()
    }

    @Test("an oversized message closes the connection with 1009; the server goes on serving")
    func oversized() async throws {
        let server = try Peers.identity("Build Box")
        let client = try Peers.identity("Laptop")
        var configuration = Peers.configuration(server, pinning: [client])
        configuration.maximumMessageSize = 4096
        let echo = try await EchoServer(configuration)
        let connection = try await PeerConnection.connect(host: "127.0.0.1", port: echo.port, configuration: Peers.configuration(client, pinning: [server]))
        try await connection.send(text: JSONRPCMessage.notification(method: "big", params: .string(String(repeating: "x", count: 8192))).jsonText)
        let reason = await connection.closed()
        #expect(reason.message.contains("1009"), "\(reason)")
        #expect(reason.kind == .closed && reason.closeCode == .messageTooLarge && reason.byPeer, "\(reason)")
        let again = try await PeerConnection.connect(host: "127.0.0.1", port: echo.port, configuration: Peers.configuration(client, pinning: [server]))
        #expect(try await again.request("echo", params: .array([.string(String(repeating: "y", count: 3000))])) == .array([.string(String(repeating: "y", count: 3000))]))
        await again.close()
        await echo.stop()
    }

    @Test("10,000 malformed lines: each answered -32700, and the connection is still alive")
    func tenThousandMalformed() async throws {
        let server = try Peers.identity("Build Box")
        let client = try Peers.identity("Laptop")
        let echo = try await EchoServer(Peers.configuration(server, pinning: [client]))
        let connection = try await PeerConnection.connect(host: "127.0.0.1", port: echo.port, configuration: Peers.configuration(client, pinning: [server]))
        let count = 10_000
        let reader = Task {
            var parseErrors = 0
            for await message in connection.incoming {
                if case .failure(nil, let error) = message.message, error.code == JSONRPCError.parseError { parseErrors += 1 }
                if parseErrors == count { break }
            }
            return parseErrors
        }
        for index in 0..<count { try await connection.send(text: "{not json \(index)") }
        #expect(await reader.value == count)
        #expect(try await connection.request("ping") == .object([:]))
        await connection.close()
        await echo.stop()
    }
}

@Suite("loopback: requests")
struct RequestTests {
    @Test("a request nobody answers times out; a cancelled one tells the peer; Codable params and results")
    func timeoutCancelCodable() async throws {
        let server = try Peers.identity("Build Box")
        let client = try Peers.identity("Laptop")
        let echo = try await EchoServer(Peers.configuration(server, pinning: [client]))
        let connection = try await PeerConnection.connect(host: "127.0.0.1", port: echo.port, configuration: Peers.configuration(client, pinning: [server]))
        do {
            _ = try await connection.request("slow", timeout: .milliseconds(200))
            Issue.record("slow was answered")
        } catch {
            #expect(error.code == .timeout)
        }
        let waiting = Task { try await connection.request("slow", timeout: .seconds(30)) }
        try await Task.sleep(for: .milliseconds(50))
        waiting.cancel()
        do {
            _ = try await waiting.value
            Issue.record("a cancelled request returned")
        } catch let error as PeerConnectionError {
            #expect(error.code == .cancelled)
        }
        do {
            _ = try await connection.request("nope")
            Issue.record("nope was answered")
        } catch {
            #expect(error.code == .remote)
            #expect(error.remoteError?.code == JSONRPCError.methodNotFound)
        }
        struct Point: Codable, Equatable { var x: Int; var y: Int }
        let point: Point = try await connection.request("echo", params: Point(x: 3, y: -4))
        #expect(point == Point(x: 3, y: 4 - 8))
        #expect((await connection.statistics()).requestsAbandoned == 2)
        await connection.close()
        await echo.stop()
    }

    @Test("a batch is answered as one array once every request in it is answered")
    func batch() async throws {
        let server = try Peers.identity("Build Box")
        let client = try Peers.identity("Laptop")
        let echo = try await EchoServer(Peers.configuration(server, pinning: [client]))
        let connection = try await PeerConnection.connect(host: "127.0.0.1", port: echo.port, configuration: Peers.configuration(client, pinning: [server]))
        try await connection.send(text: #"[{"jsonrpc":"2.0","id":"a","method":"ping"},{"jsonrpc":"2.0","method":"note"},{"jsonrpc":"2.0","id":"b","method":"echo","params":[5]},7]"#)
        var answers: [JSONRPCMessage] = []
        for await message in connection.incoming {
            answers.append(message.message)
            if answers.count == 3 { break }
        }
        #expect(answers.contains(.response(id: .string("a"), result: .object([:]))))
        #expect(answers.contains(.response(id: .string("b"), result: .array([.integer(5)]))))
        #expect(answers.contains { if case .failure(nil, let error) = $0 { error.code == JSONRPCError.invalidRequest } else { false } })
        await connection.close()
        await echo.stop()
    }
}

/// A real TLS 1.3 ClientHello, as openssl s_client sends it, caught by a plain TCP listener.
func captureClientHello() -> [UInt8]? {
    let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard listener >= 0 else { return nil }
    defer { close(listener) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    let bound = withUnsafeMutablePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listener, $0, length) == 0 && listen(listener, 1) == 0 && getsockname(listener, $0, &length) == 0 }
    }
    guard bound else { return nil }
    let port = Int(UInt16(bigEndian: address.sin_port))
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
    process.arguments = ["s_client", "-connect", "127.0.0.1:\(port)", "-tls1_3"]
    process.standardOutput = FileHandle.nullDevice
    process.standardError = FileHandle.nullDevice
    process.standardInput = Pipe()
    guard (try? process.run()) != nil else { return nil }
    defer {
        process.terminate()
        process.waitUntilExit()
    }
    let fd = accept(listener, nil, nil)
    guard fd >= 0 else { return nil }
    defer { close(fd) }
    var timeout = timeval(tv_sec: 5, tv_usec: 0)
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    var buffer = [UInt8](repeating: 0, count: 8192)
    let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
    return count > 0 ? Array(buffer[0..<count]) : nil
}

/// Runs `openssl s_client` against 127.0.0.1:port without a client certificate; returns its output.
func opensslClient(port: Int, arguments: [String]) throws -> String {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
    process.arguments = ["s_client", "-connect", "127.0.0.1:\(port)", "-brief", "-state"] + arguments
    let output = Pipe()
    process.standardOutput = output
    process.standardError = output
    let input = Pipe()
    process.standardInput = input
    try process.run()
    input.fileHandleForWriting.closeFile()
    let data = output.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    return String(decoding: data, as: UTF8.self)
}
