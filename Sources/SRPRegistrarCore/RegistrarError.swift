public import DNSWire
public import NearbyBasics

/// Why the registrar refused an update, or could not read its saved state: a ``code`` to switch
/// on, one line a person can act on, and the DNS response code the requestor is given.
public struct RegistrarError: Error, Sendable, Equatable, CustomStringConvertible {
    /// What kind of refusal this is. New codes may be added; switch with a `default`.
    public typealias Code = OpenKind<RegistrarError>

    public var code: Code
    /// What was wrong, in words.
    public var message: String
    /// The RCODE the reply carries.
    public var responseCode: ResponseCode

    public init(_ code: Code, _ message: String, responseCode: ResponseCode = .formatError) {
        self.code = code
        self.message = message
        self.responseCode = responseCode
    }

    public var description: String { message }
}

extension OpenKind where Owner == RegistrarError {
    /// The update breaks DNS UPDATE's or SRP's form: no host description, a record that belongs
    /// to no instruction, no Update Lease option, prerequisites (FORMERR).
    public static var malformed: Self { Self("malformed") }
    /// A name outside the update's zone (NOTZONE, RFC 2136 §3.4.1.3).
    public static var outsideZone: Self { Self("outsideZone") }
    /// The zone is not one this registrar serves (REFUSED).
    public static var zoneNotServed: Self { Self("zoneNotServed") }
    /// No SIG(0), a SIG(0) that does not verify with the update's KEY, or a key SRP does not
    /// support (NOTAUTH).
    public static var badSignature: Self { Self("badSignature") }
    /// A service's TXT `id` names a peer whose key did not sign the update (NOTAUTH).
    public static var wrongPeerID: Self { Self("wrongPeerID") }
    /// A name is held by another key (YXDOMAIN).
    public static var nameHeld: Self { Self("nameHeld") }
    /// Too many registrations, from this source or in all, or too many services for one host
    /// (REFUSED).
    public static var limitReached: Self { Self("limitReached") }
    /// The source sent more updates per second than it may (REFUSED).
    public static var rateLimited: Self { Self("rateLimited") }
    /// Not a DNS UPDATE (NOTIMP).
    public static var notImplemented: Self { Self("notImplemented") }
    /// Saved state that cannot be read back.
    public static var damagedState: Self { Self("damagedState") }
}
