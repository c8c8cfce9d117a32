/// A value from an open set of named kinds: an error's code, an event's kind. Nearby's codes
/// and kinds are all of this type, made only inside the package, each named by a static member
/// of the type that owns it (`DNSWireError.Code.truncated`, `BrowseEvent.Kind.found`).
///
/// A struct rather than an enum, so that kinds can be added in later versions without breaking
/// anyone: a `switch` over one needs a `default:` branch, and that is where new kinds go.
public struct OpenKind<Owner>: Hashable, Sendable, CustomStringConvertible {
    private let name: String
    package init(_ name: String) { self.name = name }
    /// The kind's name, as its static member is spelled (`"truncated"`, `"found"`).
    public var description: String { name }
}

