import NIOCore
import NIOPosix

#if canImport(Glibc)
    import Glibc
#endif

/// Socket failures in our words: what happened, to which address and port, and what to do.
/// The library's own text is kept for the log (`--verbose`), never shown as the message.
enum SocketErrors {
    /// The errno inside a SwiftNIO error, if there is one (the first attempt's, for a name with
    /// several addresses).
    static func errno(of error: any Error) -> Int32? {
        if let error = error as? IOError { return error.errnoCode }
        if let error = error as? NIOConnectionError {
            for failure in error.connectionErrors { if let code = errno(of: failure.error) { return code } }
        }
        return nil
    }

    /// Why connecting to `host` port `port` failed.
    static func connectFailure(_ error: any Error, host: String, port: Int, timeout: Duration) -> PeerConnectionError {
        let place = "\(host) port \(port)"
        if let error = error as? NIOConnectionError, error.connectionErrors.isEmpty, error.dnsAError != nil || error.dnsAAAAError != nil {
            return unknownHost(host)
        }
        if error is SocketAddressError || error is SocketAddressError.UnknownHost { return unknownHost(host) }
        if case ChannelError.connectTimeout? = error as? ChannelError {
            return PeerConnectionError(
                .unreachable, "cannot connect to \(place): no answer within \(secondsText(timeout)) (the host is off, or a firewall drops the connection)")
        }
        guard let code = errno(of: error) else {
            return PeerConnectionError(.unreachable, "cannot connect to \(place) (\(error))")
        }
        let why: String
        switch code {
        case ECONNREFUSED: why = "nothing listens there (connection refused); check the port, and that the server runs"
        case ETIMEDOUT: why = "no answer (timed out); the host may be off, or a firewall drops the connection"
        case EHOSTUNREACH, ENETUNREACH: why = "no route to it (\(String(cString: strerror(code)))); check the address, and that this machine is on its network"
        case EADDRNOTAVAIL: why = "the address is not usable from here (\(String(cString: strerror(code))))"
        case ECONNRESET: why = "the host reset the connection; it may not be a Nearby server"
        default: why = String(cString: strerror(code)) + " (errno \(code))"
        }
        return PeerConnectionError(.unreachable, "cannot connect to \(place): \(why)")
    }

    static func unknownHost(_ host: String) -> PeerConnectionError {
        PeerConnectionError(
            .unreachable, "cannot find the host \"\(host)\": the name does not resolve; check its spelling, or give its IP address (a .local name needs mDNS on this network)")
    }

    /// Why listening on `host` port `port` failed.
    static func listenFailure(_ error: any Error, host: String, port: Int) -> PeerConnectionError {
        let place = host == "::" || host == "0.0.0.0" ? "port \(port)" : "\(host) port \(port)"
        if error is SocketAddressError || error is SocketAddressError.UnknownHost {
            return PeerConnectionError(.invalidInput, "cannot listen on \(place): \"\(host)\" is not an address of this machine")
        }
        guard let code = errno(of: error) else {
            // The library's text is in the log (--verbose), not in the message.
            return PeerConnectionError(.invalidInput, "cannot listen on \(place): the system refused the socket (run with --verbose for its words)")
        }
        let why: String
        switch code {
        case EADDRINUSE: why = "another program already uses it (address in use); stop that program, or choose another port (0 picks a free one)"
        case EACCES: why = "ports below 1024 need root (permission denied); choose a port from 1024 up"
        case EADDRNOTAVAIL: why = "\(host) is not an address of this machine"
        default: why = String(cString: strerror(code)) + " (errno \(code))"
        }
        return PeerConnectionError(.invalidInput, "cannot listen on \(place): \(why)")
    }

    /// True when a failure to open or bind an IPv6 socket means this host has no IPv6 (a kernel
    /// without the family, or the family switched off), so IPv4 alone is the way to listen.
    static func meansNoIPv6(_ code: Int32?) -> Bool {
        guard let code else { return false }
        return code == EAFNOSUPPORT || code == EPROTONOSUPPORT || code == EADDRNOTAVAIL
    }

    /// A socket error during set-up (TLS, the WebSocket upgrade), or nil when it is no socket error.
    static func setupFailure(_ error: any Error) -> PeerConnectionError? {
        guard let code = errno(of: error) else { return nil }
        switch code {
        case ECONNRESET, EPIPE:
            return PeerConnectionError(
                .closed, "the peer closed the connection during set-up (\(code == EPIPE ? "broken pipe" : "connection reset")); it may not be a Nearby server, or it refused our certificate")
        default:
            return PeerConnectionError(.closed, "the connection failed during set-up: \(String(cString: strerror(code))) (errno \(code))")
        }
    }
}
