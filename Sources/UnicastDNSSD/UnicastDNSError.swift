public import NearbyBasics
public import DNSWire

/// Why a unicast DNS operation failed: a ``code`` to switch on and one line a person can act on.
public struct UnicastDNSError: Error, Sendable, Equatable, CustomStringConvertible {
    /// What kind of failure this is. New codes may be added; switch with a `default`.
    public typealias Code = OpenKind<UnicastDNSError>

    public var code: Code
    /// What happened and what to do, in words.
    public var message: String
    /// The response code the server gave, when it gave one.
    public var responseCode: ResponseCode?

    public init(_ code: Code, _ message: String, responseCode: ResponseCode? = nil) {
        self.code = code
        self.message = message
        self.responseCode = responseCode
    }

    public var description: String { message }
}

extension OpenKind where Owner == UnicastDNSError {
    /// No server answered in time (none reachable, or all silent).
    public static var unreachable: Self { Self("unreachable") }
    /// The domain is not a zone any server knows (no SOA found).
    public static var noSuchZone: Self { Self("noSuchZone") }
    /// The server did not accept the signature: NOTAUTH, BADSIG, BADKEY (a wrong or unknown key).
    public static var notAuthorized: Self { Self("notAuthorized") }
    /// The server refused (REFUSED): the key is not allowed to change this zone, or updates are off.
    public static var refused: Self { Self("refused") }
    /// The signing time is too far from the server's clock (BADTIME).
    public static var clockSkew: Self { Self("clockSkew") }
    /// The server answered with an error the caller cannot fix here (SERVFAIL, FORMERR, …).
    public static var serverFailure: Self { Self("serverFailure") }
    /// The answer did not make sense (unreadable, unsigned where a signature was due, a bad MAC).
    public static var badResponse: Self { Self("badResponse") }
    /// The caller's input is unusable (a key file that does not parse, a server address that is not one).
    public static var invalidInput: Self { Self("invalidInput") }
    /// The socket could not be opened or used.
    public static var transportFailure: Self { Self("transportFailure") }
    /// Every name tried is held by someone else.
    public static var nameTaken: Self { Self("nameTaken") }
}
