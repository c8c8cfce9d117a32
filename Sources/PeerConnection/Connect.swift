import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import NIOSSL
public import PeerTrust

#if canImport(Glibc)
    import Glibc
#endif

extension PeerConnection {
    /// Connects to a peer at `host:port`, judges it, runs `initialize`, and returns the live
    /// connection.
    ///
    /// - Parameters:
    ///   - host: an IPv4 address, an IPv6 address (`fe80::1%eth0` for link-local), or a DNS
    ///     name (resolve `.local` names through NearbyDiscovery first).
    ///   - expecting: the peer ID discovery announced (TXT `id`) or the user expects: a
    ///     certificate with another key is refused before any application byte.
    /// - Throws: ``PeerConnectionError``: `unreachable`, `untrusted` (with the reasons), `tls`,
    ///   `upgrade`, `handshake`, `timeout`, `invalidInput`.
    public static func connect(
        host: String, port: Int, expecting: PeerID? = nil, configuration: PeerConnectionConfiguration
    ) async throws(PeerConnectionError) -> PeerConnection {
        guard (1...65535).contains(port) else { throw PeerConnectionError(.invalidInput, "port \(port) is out of range; use 1-65535") }
        let tls = try TLS.context(for: configuration, server: false)
        let start = ContinuousClock.now
        let side = Setup.Side(
            role: .connecting, configuration: configuration, tls: tls, expected: expecting, requireTrust: true, decide: nil,
            host: host.contains(":") ? "[\(host)]" : host)
        let made = NIOLockedValueBox<EventLoopFuture<PeerConnection>?>(nil)
        let bootstrap = ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .channelOption(.socketOption(.so_reuseaddr), value: 1)
            .channelOption(.tcpOption(.tcp_nodelay), value: 1)
            .connectTimeout(.nanoseconds(nanoseconds(configuration.setupTimeout)))
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    let opened = try Setup.configure(channel, side: side)
                    // Everything the connection is made of is read on its event loop.
                    let connection = opened.flatMap { open in
                        open.session.established.futureResult.map { hello in
                            PeerConnection(
                                role: .connecting, peer: hello, proof: open.proof, channel: channel, session: open.session,
                                requestTimeout: configuration.requestTimeout, setupDuration: ContinuousClock.now - start)
                        }
                    }
                    connection.whenFailure { _ in channel.close(promise: nil) }
                    made.withLockedValue { $0 = connection }
                }
            }
        let address = try literalAddress(host, port: port)
        do {
            if let address {
                _ = try await bootstrap.connect(to: address).get()
            } else {
                _ = try await bootstrap.connect(host: host, port: port).get()
            }
        } catch {
            throw PeerConnectionError(.unreachable, "cannot connect to \(host) port \(port): \(error)")
        }
        guard let connection = made.withLockedValue({ $0 }) else {
            throw PeerConnectionError(.unreachable, "cannot connect to \(host) port \(port)")
        }
        do {
            return try await connection.get()
        } catch let error as PeerConnectionError {
            throw error
        } catch {
            throw PeerConnectionError(.handshake, "\(error)")
        }
    }

    /// `host` as a socket address when it is an IP literal (with `%interface` for IPv6); nil for a name.
    static func literalAddress(_ host: String, port: Int) throws(PeerConnectionError) -> SocketAddress? {
        let parts = host.split(separator: "%", maxSplits: 1).map(String.init)
        guard let address = parts.first, !address.isEmpty else { throw PeerConnectionError(.invalidInput, "an empty host name") }
        var v6 = in6_addr()
        if inet_pton(AF_INET6, address, &v6) == 1 {
            var socket = sockaddr_in6()
            socket.sin6_family = sa_family_t(AF_INET6)
            socket.sin6_port = in_port_t(UInt16(port).bigEndian)
            socket.sin6_addr = v6
            if parts.count == 2 {
                let index = if_nametoindex(parts[1])
                guard index != 0 else {
                    throw PeerConnectionError(.invalidInput, "no network interface \"\(parts[1])\" (in \(host)); `ip link` lists them")
                }
                socket.sin6_scope_id = index
            }
            return SocketAddress(socket, host: address)
        }
        if parts.count == 2 { throw PeerConnectionError(.invalidInput, "\"%\(parts[1])\" only goes with an IPv6 address, not \(address)") }
        var v4 = in_addr()
        if inet_pton(AF_INET, address, &v4) == 1 {
            return try? SocketAddress(ipAddress: address, port: port)
        }
        return nil
    }
}
