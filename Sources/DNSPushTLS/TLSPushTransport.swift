public import DNSWire
public import NIOCore
import NIOPosix
import NIOSSL
public import UnicastDNSSD

/// DNS Push over TLS (RFC 8765 §6.1, TLS 1.2 or later): the transport a browse in a DNS zone
/// needs to use a zone's Push server. Give it to `WideAreaSettings.pushTransport`; without it,
/// such browses poll.
///
/// It lives apart from UnicastDNSSD so that only programs that use Push compile BoringSSL (in
/// swift-nio-ssl).
public struct TLSPushTransport: DNSPushTransport {
    public init() {}

    public func connect(
        to address: IPAddress, port: UInt16, serverName: String, checkCertificate: Bool, timeout: Duration
    ) async throws -> NIOAsyncChannel<ByteBuffer, ByteBuffer> {
        var tls = TLSConfiguration.makeClientConfiguration()
        tls.minimumTLSVersion = .tlsv12
        if !checkCertificate { tls.certificateVerification = .none }
        let context = try NIOSSLContext(configuration: tls)
        return try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .connectTimeout(.nanoseconds(Int64(timeout.components.seconds) * 1_000_000_000 + timeout.components.attoseconds / 1_000_000_000))
            .connect(host: address.withoutScope.description, port: Int(port)) { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(NIOSSLClientHandler(context: context, serverHostname: serverName))
                    return try NIOAsyncChannel<ByteBuffer, ByteBuffer>(wrappingChannelSynchronously: channel)
                }
            }
    }
}
