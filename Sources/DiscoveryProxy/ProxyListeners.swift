import DNSWire
import DiscoveryProxyCore
import NIOCore
import NIOPosix
import NIOSSL
import NearbyBasics
import PeerTrust

/// The proxy's sockets, opened by ``DiscoveryProxy/prepare(_:logger:)``: UDP and TCP for plain
/// DNS, TLS for DNS Push, on the configured addresses only.
extension DiscoveryProxy {
    typealias Server = NIOAsyncChannel<NIOAsyncChannel<ByteBuffer, ByteBuffer>, Never>

    static func tlsContext(_ service: PushService, names: [String]) throws(ProxyError) -> NIOSSLContext {
        let identity: PeerIdentity
        do {
            identity = try service.identity ?? PeerIdentity.generate(displayName: names.first ?? "nearby proxy")
        } catch {
            throw ProxyError(.invalidInput, "cannot make a certificate for DNS Push: \(error)")
        }
        do {
            let chain = try identity.certificateChain.map { NIOSSLCertificateSource.certificate(try NIOSSLCertificate(bytes: $0.der, format: .der)) }
            let key = NIOSSLPrivateKeySource.privateKey(try NIOSSLPrivateKey(bytes: identity.privateKeyPKCS8, format: .der))
            var configuration = TLSConfiguration.makeServerConfiguration(certificateChain: chain, privateKey: key)
            configuration.minimumTLSVersion = .tlsv12  // RFC 8490 §8: TLS 1.2 or later
            return try NIOSSLContext(configuration: configuration)
        } catch {
            throw ProxyError(.invalidInput, "the DNS Push certificate or key cannot be used for TLS: \(error)")
        }
    }

    /// DNS Push's TLS listeners, on `port` (0: a free one, the same for every address); the
    /// port they got.
    static func openPush(_ configuration: Configuration, tls: NIOSSLContext, port: Int) async throws(ProxyError) -> ([Server], Int) {
        var servers: [Server] = []
        var port = port
        do {
            for address in configuration.listen {
                let server = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
                    .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
                    .serverChannelOption(.backlog, value: 128)
                    .bind(to: try NIOCore.SocketAddress(ipAddress: address.withoutScope.description, port: port)) { channel in
                        channel.eventLoop.makeCompletedFuture {
                            try channel.pipeline.syncOperations.addHandler(NIOSSLServerHandler(context: tls))
                            return try NIOAsyncChannel<ByteBuffer, ByteBuffer>(wrappingChannelSynchronously: channel)
                        }
                    }
                if port == 0 { port = server.channel.localAddress?.port ?? 0 }
                servers.append(server)
            }
        } catch {
            for server in servers { try? await server.channel.close() }
            throw ProxyError(.cannotListen, "cannot offer DNS Push on \(configuration.listen.map(\.description).joined(separator: ", ")) port \(configuration.push?.port ?? 0): \(error) (is the port free, and below 1024 allowed: root or CAP_NET_BIND_SERVICE? --push-port 0 picks a free one, --no-push offers none)")
        }
        return (servers, port)
    }

    /// The UDP sockets, answered by `desk` on their event loop, and the TCP listeners, on the
    /// configured port (0: a free one, the same for UDP and TCP and every address); the port
    /// they got.
    static func openDNS(_ configuration: Configuration, desk: AnsweringDesk, clock: any ShellClock) async throws(ProxyError) -> ([any Channel], [Server], Int) {
        var udp: [any Channel] = []
        var tcp: [Server] = []
        var port = Int(configuration.port)
        do {
            // One event loop answers every UDP socket: the answering machine is behind one lock,
            // and sockets on two loops (SO_REUSEPORT) spent more on waiting for it and on
            // waking each other than they gained (measured with Tools/bench/proxy: 19 µs of CPU
            // per question instead of 12).
            let loop = MultiThreadedEventLoopGroup.singleton.next()
            for address in configuration.listen {
                let socket = try NIOCore.SocketAddress(ipAddress: address.withoutScope.description, port: port)
                let channel = try await DatagramBootstrap(group: loop)
                    .channelOption(.socketOption(.so_reuseaddr), value: 1)
                    // Up to 16 questions read per wake-up, and their replies flushed together.
                    .channelOption(.maxMessagesPerRead, value: 16)
                    .channelInitializer { channel in
                        channel.eventLoop.makeCompletedFuture {
                            try channel.pipeline.syncOperations.addHandler(UDPAnswering(desk: desk, clock: clock))
                        }
                    }
                    .bind(to: socket).get()
                if port == 0 { port = channel.localAddress?.port ?? 0 }
                udp.append(channel)
                let server = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
                    .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
                    .serverChannelOption(.backlog, value: 128)
                    // A client may half-close once it has asked (RFC 7766 §6.2.1 lets it): its
                    // answers still go out, so the connection stays writable after its end.
                    .childChannelOption(.allowRemoteHalfClosure, value: true)
                    .bind(to: try NIOCore.SocketAddress(ipAddress: address.withoutScope.description, port: port)) { channel in
                        channel.eventLoop.makeCompletedFuture { try NIOAsyncChannel<ByteBuffer, ByteBuffer>(wrappingChannelSynchronously: channel) }
                    }
                tcp.append(server)
            }
        } catch {
            for channel in udp { try? await channel.close() }
            for server in tcp { try? await server.channel.close() }
            throw ProxyError(.cannotListen, "cannot answer on \(configuration.listen.map(\.description).joined(separator: ", ")) port \(configuration.port): \(error) (is the address this host's, the port free, and port 53 allowed: root or CAP_NET_BIND_SERVICE?)")
        }
        return (udp, tcp, port)
    }
}
