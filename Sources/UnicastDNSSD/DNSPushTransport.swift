public import DNSWire
public import NIOCore

/// What carries a DNS Push session (RFC 8765): a byte stream to the zone's Push server, which
/// RFC 8765 §6.1 says is TLS. UnicastDNSSD speaks DSO over whatever this gives it and knows
/// nothing of TLS, so that a program that only advertises and browses compiles no TLS library;
/// `DNSPushTLS` gives the TLS one (swift-nio-ssl). Without a transport, browses in DNS zones
/// poll.
public protocol DNSPushTransport: Sendable {
    /// Opens a connection to the Push server `serverName` at `address` and `port`, checking
    /// its certificate against the system's roots and `serverName` when `checkCertificate` is
    /// set, encrypting without checking when not; gives up after `timeout`.
    /// - Throws: whatever made the connection fail; a certificate that fails the check should
    ///   throw an error whose text says so.
    func connect(
        to address: IPAddress, port: UInt16, serverName: String, checkCertificate: Bool, timeout: Duration
    ) async throws -> NIOAsyncChannel<ByteBuffer, ByteBuffer>
}
