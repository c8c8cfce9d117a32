/// The 12-byte DNS header less the section counts, which the encoder derives from the sections.
public struct Header: Hashable, Sendable {
    /// Query identifier; 0 in multicast mDNS messages.
    public var id: UInt16
    /// The 16 flag bits as they appear on the wire (QR, OPCODE, AA, TC, RD, RA, Z, AD, CD, RCODE).
    public var flags: UInt16

    public init(id: UInt16 = 0, flags: UInt16 = 0) {
        self.id = id
        self.flags = flags
    }

    /// A header for an mDNS query.
    public static let query = Header()
    /// A header for an mDNS response: QR and AA set (RFC 6762 §18.2, §18.4).
    public static let response = Header(flags: 0x8400)

    /// QR: true for a response.
    public var isResponse: Bool { get { self[0x8000] != 0 } set { self[0x8000] = newValue ? 1 : 0 } }
    /// OPCODE (4 bits); mDNS uses 0, and receivers ignore messages with any other (RFC 6762 §18.3).
    public var opcode: UInt8 { get { UInt8(self[0x7800]) } set { self[0x7800] = UInt16(newValue) } }
    /// AA: authoritative answer.
    public var isAuthoritative: Bool { get { self[0x0400] != 0 } set { self[0x0400] = newValue ? 1 : 0 } }
    /// TC: truncated. In an mDNS query, more known answers follow in further packets.
    public var isTruncated: Bool { get { self[0x0200] != 0 } set { self[0x0200] = newValue ? 1 : 0 } }
    /// RD: recursion desired.
    public var recursionDesired: Bool { get { self[0x0100] != 0 } set { self[0x0100] = newValue ? 1 : 0 } }
    /// RA: recursion available.
    public var recursionAvailable: Bool { get { self[0x0080] != 0 } set { self[0x0080] = newValue ? 1 : 0 } }
    /// RCODE (4 bits); mDNS receivers ignore messages with a non-zero one (RFC 6762 §18.11).
    public var responseCode: UInt8 { get { UInt8(self[0x000F]) } set { self[0x000F] = UInt16(newValue) } }

    /// The field of ``flags`` that `mask` covers, as a number from 0: read shifted down, written
    /// shifted up and cut to the mask (so a value too wide for its field cannot spill into others).
    private subscript(mask: UInt16) -> UInt16 {
        get { (flags & mask) >> mask.trailingZeroBitCount }
        set { flags = (flags & ~mask) | ((newValue << mask.trailingZeroBitCount) & mask) }
    }
}

/// A DNS message: header, questions and three sections of records.
///
/// In mDNS a query carries known answers in ``answers`` and, while probing, the proposed
/// records in ``authorities`` (RFC 6762 §7.1, §8.2).
public struct Message: Hashable, Sendable {
    public var header: Header
    public var questions: [Question]
    public var answers: [ResourceRecord]
    public var authorities: [ResourceRecord]
    public var additionals: [ResourceRecord]

    public init(
        header: Header = .query, questions: [Question] = [], answers: [ResourceRecord] = [],
        authorities: [ResourceRecord] = [], additionals: [ResourceRecord] = []
    ) {
        self.header = header
        self.questions = questions
        self.answers = answers
        self.authorities = authorities
        self.additionals = additionals
    }

    /// True for a query that is a probe: it has questions and proposes records in the
    /// authority section (RFC 6762 §8.2).
    public var isProbe: Bool { !header.isResponse && !questions.isEmpty && !authorities.isEmpty }

    /// All records of all three sections.
    public var allRecords: [ResourceRecord] { answers + authorities + additionals }
}

/// The three record sections, for diagnostics.
public enum MessageSection: String, Sendable, Hashable, CustomStringConvertible {
    case question, answer, authority, additional
    public var description: String { rawValue }
}
