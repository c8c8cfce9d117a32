public import DNSWire

/// A DNS server to ask: an address and a port (53 unless said otherwise).
public struct DNSServer: Hashable, Sendable, CustomStringConvertible {
    public var address: IPAddress
    public var port: UInt16

    public init(_ address: IPAddress, port: UInt16 = 53) {
        self.address = address
        self.port = port
    }

    /// Reads `ADDR`, `ADDR:PORT`, `[IPV6]` or `[IPV6]:PORT` (an IPv6 address alone needs no brackets).
    /// - Throws: ``UnicastDNSError`` (`invalidInput`) saying what is wrong.
    public init(parsing text: String) throws(UnicastDNSError) {
        var host = Substring(text)
        var port: UInt16 = 53
        func badPort(_ value: Substring) -> UnicastDNSError {
            UnicastDNSError(.invalidInput, "\"\(text)\" has port \"\(value)\"; a port is 1-65535")
        }
        if host.hasPrefix("[") {
            guard let close = host.firstIndex(of: "]") else {
                throw UnicastDNSError(.invalidInput, "\"\(text)\" opens \"[\" but never closes it; write [IPV6]:PORT")
            }
            let rest = host[host.index(after: close)...]
            host = host[host.index(after: host.startIndex)..<close]
            if !rest.isEmpty {
                guard rest.hasPrefix(":"), let value = UInt16(rest.dropFirst()), value > 0 else { throw badPort(rest.dropFirst()) }
                port = value
            }
        } else if host.filter({ $0 == ":" }).count == 1, let colon = host.firstIndex(of: ":") {
            let value = host[host.index(after: colon)...]
            guard let number = UInt16(value), number > 0 else { throw badPort(value) }
            port = number
            host = host[..<colon]
        }
        if let v4 = IPv4Address(String(host)) {
            self.init(.v4(v4), port: port)
        } else if let v6 = IPv6Address(String(host)) {
            self.init(.v6(v6), port: port)
        } else {
            throw UnicastDNSError(
                .invalidInput, "\"\(text)\" is not a server address; write an IPv4 or IPv6 address, optionally with :PORT (e.g. 192.0.2.53 or [2001:db8::53]:5300)")
        }
    }

    public var description: String {
        switch address {
        case .v4: port == 53 ? address.description : "\(address):\(port)"
        case .v6: port == 53 ? address.description : "[\(address)]:\(port)"
        }
    }
}
