public import NearbyBasics

/// An error from decoding or encoding DNS wire data, or from parsing a name in presentation
/// format.
///
/// Every error says what was wrong and, for wire data, at which byte offset of the packet, so
/// that a hostile or broken packet can be diagnosed from a log line alone.
public struct DNSWireError: Error, Hashable, Sendable, CustomStringConvertible {
    /// What kind of problem this is. New codes may be added; switch with a `default`.
    public typealias Code = OpenKind<DNSWireError>

    /// What kind of problem this is.
    public var code: Code
    /// Byte offset in the packet (or in the text, for presentation names) where it was found.
    public var offset: Int?
    /// A sentence saying what was wrong.
    public var reason: String {
        get { explain() }
        set { explain = { newValue } }
    }
    /// Builds the sentence when someone reads it: a flood of hostile packets makes an error
    /// per packet, and most are only counted.
    private var explain: @Sendable () -> String

    public init(_ code: Code, _ reason: @autoclosure @escaping @Sendable () -> String, at offset: Int? = nil) {
        self.code = code
        self.explain = reason
        self.offset = offset
    }

    public static func == (lhs: DNSWireError, rhs: DNSWireError) -> Bool {
        lhs.code == rhs.code && lhs.offset == rhs.offset && lhs.reason == rhs.reason
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(code)
        hasher.combine(offset)
        hasher.combine(reason)
    }

    public var description: String {
        if let offset { return "\(reason) (at offset \(offset))" }
        return reason
    }
}

extension OpenKind where Owner == DNSWireError {
    /// The data ended before a field that had to be there.
    public static var truncated: Self { Self("truncated") }
    /// A section count claims more entries than the packet could possibly hold.
    public static var countExceedsData: Self { Self("countExceedsData") }
    /// A compression pointer points at itself.
    public static var selfPointer: Self { Self("selfPointer") }
    /// A compression pointer leads back to a place already visited in the same name.
    public static var pointerLoop: Self { Self("pointerLoop") }
    /// A compression pointer points at or beyond the end of the packet.
    public static var pointerOutOfBounds: Self { Self("pointerOutOfBounds") }
    /// A name uses more compression pointers than it could need.
    public static var tooManyPointers: Self { Self("tooManyPointers") }
    /// A label is longer than 63 bytes.
    public static var labelTooLong: Self { Self("labelTooLong") }
    /// A name is longer than 255 bytes on the wire.
    public static var nameTooLong: Self { Self("nameTooLong") }
    /// A name has more than 128 labels.
    public static var tooManyLabels: Self { Self("tooManyLabels") }
    /// A label starts with the reserved type bits 01 or 10.
    public static var reservedLabelType: Self { Self("reservedLabelType") }
    /// A record's data does not fill exactly its RDLENGTH, or is malformed for its type.
    public static var badRecordData: Self { Self("badRecordData") }
    /// A name in presentation format (text) is malformed.
    public static var badPresentationName: Self { Self("badPresentationName") }
    /// A value cannot be encoded (too large for its field or for a packet).
    public static var cannotEncode: Self { Self("cannotEncode") }
    /// A DSO message or TLV breaks RFC 8490's or RFC 8765's rules: not OPCODE 6, records in
    /// its sections, a TLV whose data does not fit its type, a compressed name, a reserved TTL.
    public static var badDSO: Self { Self("badDSO") }
}
