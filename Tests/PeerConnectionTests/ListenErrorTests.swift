import NIOCore
import Testing

#if canImport(Glibc)
    import Glibc
#endif

@testable import PeerConnection

/// Why a listener could not start, in our words: never the library's text.
@Suite("listening: what failed, in words a user can act on")
struct ListenErrorTests {
    @Test("an error with no errno says to look at --verbose, not what the library said")
    func noErrno() {
        struct Odd: Error {}
        let message = SocketErrors.listenFailure(Odd(), host: "::", port: 9601).message
        #expect(message.hasPrefix("cannot listen on port 9601: "), "\(message)")
        #expect(message.contains("--verbose") && !message.contains("Odd"), "\(message)")
    }

    @Test("no IPv6 family, protocol or address means IPv4 alone; a port in use or a permission does not")
    func noIPv6() {
        #expect(SocketErrors.meansNoIPv6(EAFNOSUPPORT))
        #expect(SocketErrors.meansNoIPv6(EPROTONOSUPPORT))
        #expect(SocketErrors.meansNoIPv6(EADDRNOTAVAIL))
        #expect(!SocketErrors.meansNoIPv6(EADDRINUSE))
        #expect(!SocketErrors.meansNoIPv6(EACCES))
        #expect(!SocketErrors.meansNoIPv6(nil))
    }
}
