public import NearbyBasics

/// Why a discovery proxy could not be set up or run: a ``code`` to switch on and one line a
/// person can act on.
public struct ProxyError: Error, Sendable, Equatable, CustomStringConvertible {
    /// What kind of failure this is. New codes may be added; switch with a `default`.
    public typealias Code = OpenKind<ProxyError>

    public var code: Code
    /// What happened and what to do, in words.
    public var message: String

    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { message }
}

extension OpenKind where Owner == ProxyError {
    /// The configuration is unusable: a zone under `local.`, no name server, a bad address.
    public static var invalidInput: Self { Self("invalidInput") }
    /// A socket could not be opened: the address is not this host's, or the port is taken.
    public static var cannotListen: Self { Self("cannotListen") }
    /// The link side could not start: no such interface, or no multicast on it.
    public static var linkUnavailable: Self { Self("linkUnavailable") }
}
