public import DNSWire
public import NIOCore
import NIOPosix
import NIOSSL
import NIOTLS
public import UnicastDNSSD

/// DNS Push over TLS (RFC 8765 §6.1, TLS 1.2 or later): the transport a browse in a DNS zone
/// needs to use a zone's Push server. Give it to `WideAreaSettings.pushTransport`; without it,
/// such browses poll.
///
/// It lives apart from UnicastDNSSD so that only programs that use Push compile BoringSSL (in
/// swift-nio-ssl).
public struct TLSPushTransport: DNSPushTransport {
    public init() {}

    /// Connects and completes the TLS handshake before returning, so that a certificate that
    /// fails the check is this call's error (not whichever of the session's reads and writes
    /// meets the closed connection first).
    public func connect(
        to address: IPAddress, port: UInt16, serverName: String, checkCertificate: Bool, timeout: Duration
    ) async throws -> NIOAsyncChannel<ByteBuffer, ByteBuffer> {
        var tls = TLSConfiguration.makeClientConfiguration()
        tls.minimumTLSVersion = .tlsv12
        if !checkCertificate { tls.certificateVerification = .none }
        let context = try NIOSSLContext(configuration: tls)
        let (channel, handshake) = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .connectTimeout(.nanoseconds(Int64(timeout.components.seconds) * 1_000_000_000 + timeout.components.attoseconds / 1_000_000_000))
            .connect(host: address.withoutScope.description, port: Int(port)) { channel in
                channel.eventLoop.makeCompletedFuture {
                    let handshake = channel.eventLoop.makePromise(of: Void.self)
                    try channel.pipeline.syncOperations.addHandler(NIOSSLClientHandler(context: context, serverHostname: serverName))
                    try channel.pipeline.syncOperations.addHandler(HandshakeWatch(handshake))
                    return (try NIOAsyncChannel<ByteBuffer, ByteBuffer>(wrappingChannelSynchronously: channel), handshake.futureResult)
                }
            }
        do {
            try await handshake.get()
        } catch {
            try? await channel.channel.close()
            throw error
        }
        return channel
    }
}

/// Says when the TLS handshake is over: done at `handshakeCompleted`, failed with the first
/// error the connection reports (a certificate that fails the check) or when it closes first.
private final class HandshakeWatch: ChannelInboundHandler, RemovableChannelHandler, @unchecked Sendable {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer

    // Used on the channel's event loop only.
    private let handshake: EventLoopPromise<Void>

    init(_ handshake: EventLoopPromise<Void>) {
        self.handshake = handshake
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let event = event as? TLSUserEvent, case .handshakeCompleted = event { handshake.succeed() }
        context.fireUserInboundEventTriggered(event)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        handshake.fail(error)
        context.fireErrorCaught(error)
    }

    func channelInactive(context: ChannelHandlerContext) {
        handshake.fail(ChannelError.ioOnClosedChannel)
        context.fireChannelInactive()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        handshake.fail(ChannelError.ioOnClosedChannel)
    }
}
