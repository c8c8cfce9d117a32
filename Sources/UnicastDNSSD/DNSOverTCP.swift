package import DNSWire
public import NIOCore

/// DNS messages on a byte stream (RFC 1035 §4.2.2, RFC 7766 §8; DSO and DNS Push use the same,
/// RFC 8490 §5.4): each message preceded by its length in two bytes. The one home of the
/// framing for plain DNS over TCP (DNSClient, the discovery proxy's TCP listener) and for DNS
/// Push sessions (PushSubscriber, the proxy's Push listener).
public enum DNSOverTCP {
    /// `message` with its two-byte length before it; a message longer than 65,535 bytes cannot
    /// be framed and is cut to that length's low bits (callers never make one).
    public static func framed(_ message: [UInt8]) -> ByteBuffer {
        var framed = ByteBuffer()
        framed.reserveCapacity(2 + message.count)
        framed.writeInteger(UInt16(truncatingIfNeeded: message.count))
        framed.writeBytes(message)
        return framed
    }

    /// Reads `inbound` to its end, handing `body` each whole message as it is complete (the
    /// bytes of a message split over several reads wait for the rest; several in one read come
    /// one by one). Returns when the stream ends or `body` returns false; what `inbound` or
    /// `body` throws ends it too. What is left unread at the end (a message cut short) is
    /// returned, in bytes, for the caller to report.
    @discardableResult
    public static func messages<Inbound: AsyncSequence<ByteBuffer, any Error>>(
        in inbound: Inbound, _ body: ([UInt8]) async throws -> Bool
    ) async throws -> Int {
        var pending = ByteBuffer()
        for try await chunk in inbound {
            var chunk = chunk
            pending.writeBuffer(&chunk)
            while let slice = pending.readLengthPrefixedSlice(as: UInt16.self) {
                guard try await body(Array(slice.readableBytesView)) else { return pending.readableBytes }
            }
            pending.discardReadBytes()
        }
        return pending.readableBytes
    }
}

extension IPAddress {
    /// The address of a socket address, without going through text (the one home of this
    /// conversion: the proxy's and the registrar's listeners).
    package init?(_ address: NIOCore.SocketAddress) {
        switch address {
        case .v4(let v4):
            self = .v4(IPv4Address(UInt32(bigEndian: v4.address.sin_addr.s_addr)))
        case .v6(let v6):
            let bytes = withUnsafeBytes(of: v6.address.sin6_addr) { Array($0) }
            guard let address = IPv6Address(bytes: bytes) else { return nil }
            self = .v6(address)
        case .unixDomainSocket: return nil
        }
    }
}
