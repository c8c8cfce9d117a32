import Testing

@testable import PeerConnection

@Suite("protocol versions")
struct ProtocolVersionTests {
    @Test("same major, and for 0.x the same minor: 0.2.2 and 0.2.9 are compatible, 0.2 and 0.3 are not")
    func compatibility() throws {
        func compatible(_ a: String, _ b: String) throws -> Bool {
            let (x, y) = (try ProtocolVersion(parsing: a), try ProtocolVersion(parsing: b))
            #expect(x.isCompatible(with: y) == y.isCompatible(with: x), "the rule is symmetric")
            return x.isCompatible(with: y)
        }
        #expect(try compatible("0.2.2", "0.2.9"))
        #expect(try compatible("0.2", "0.2.7"))
        #expect(try !compatible("0.2", "0.3"))
        #expect(try !compatible("0.2.2", "1.2.2"))
        #expect(try compatible("1.4", "1.9.3"))
        #expect(try compatible("2", "2.0.1"))
        #expect(try !compatible("1.0", "2.0"))
    }

    @Test("one to three decimal numbers; anything else is refused with what is allowed")
    func parsing() throws {
        #expect(try ProtocolVersion(parsing: "0.2.2") == ProtocolVersion(major: 0, minor: 2, patch: 2))
        #expect(try ProtocolVersion(parsing: "3").description == "3.0.0")
        #expect(try ProtocolVersion(parsing: "1.10") > ProtocolVersion(parsing: "1.9.9"))
        for bad in ["", ".", "1.", ".1", "1.2.3.4", "v1", "1.-2", "+1", "1.2a", " 1", "1234567890", "١"] {
            let error = #expect(throws: ProtocolVersionError.self) { try ProtocolVersion(parsing: bad) }
            #expect(error?.description.contains("invalid protocol version") == true, "\(bad)")
        }
        #expect(ProtocolVersion("0.2.2") != nil && ProtocolVersion("x") == nil)
    }
}
