import DNSWire
import NearbyBasics
import Testing

@testable import UnicastDNSSD

/// Signatures checked against dnspython 2.9 (a second implementation nobody here wrote): the
/// vectors below were made with `dns.update.UpdateMessage(..., keyring=..., id=0x1234)` with
/// the clock held at 1700000000 (request) and 1700000002 (response), key `nearby-key.`,
/// secret bytes 0...31.
@Suite("TSIG")
struct TSIGTests {
    static let request = bytes(fromHex: """
        123428000001000100010001036c6162076578616d706c650474657374000006000103426f780b5f6f70656e6167656e7473045f746370\
        c00c00ff00ff000000000000c022001000010000001e000403613d620a6e65617262792d6b65790000fa00ff00000000003d0b686d61632d\
        7368613235360000006553f100012c0020282e19d283818f0381ab64d35accd19b76cc1462c5a0adecea3ed0c32b1c33d3123400000000
        """)!
    static let response = bytes(fromHex: """
        1234a8000001000000000001036c6162076578616d706c65047465737400000600010a6e65617262792d6b65790000fa00ff00000000003d\
        0b686d61632d7368613235360000006553f102012c0020137a7c17b11f720ad5dfec1563ec9b1bc2f6f8ccfb03198b4aa58784090547da\
        123400000000
        """)!
    static let requestMAC = bytes(fromHex: "282e19d283818f0381ab64d35accd19b76cc1462c5a0adecea3ed0c32b1c33d3")!
    static let key = TSIGKey(name: "nearby-key.", secret: Array(0...31))

    static func update() -> DNSUpdate {
        var update = DNSUpdate(zone: "lab.example.test.")
        update.require(.nameIsInUse("Box._openagents._tcp.lab.example.test."))
        update.add(ResourceRecord(name: "Box._openagents._tcp.lab.example.test.", data: .txt(try! TXTData(strings: [Array("a=b".utf8)])), ttl: 30))
        return update
    }

    @Test("an UPDATE is encoded and signed byte for byte as dnspython does it")
    func signsLikeDnspython() throws {
        let unsigned = try Self.update().message(id: 0x1234).encoded()
        let (signed, mac) = Self.key.sign(unsigned, id: 0x1234, at: 1_700_000_000)
        #expect(hexString(signed) == hexString(Self.request))
        #expect(mac == Self.requestMAC)
    }

    @Test("a response dnspython signed verifies, with the request's MAC in the digest")
    func verifiesDnspythonResponse() {
        #expect(Self.key.verify(response: Self.response, requestMAC: Self.requestMAC, at: 1_700_000_010) == nil)
    }

    @Test("one changed byte, another request's MAC, another secret, or a far clock each fail, with what went wrong")
    func rejectsTampering() {
        var changed = Self.response
        changed[3] ^= 0x01  // a header flag
        #expect(Self.key.verify(response: changed, requestMAC: Self.requestMAC, at: 1_700_000_010)?.code == .badResponse)
        var otherMAC = Self.requestMAC
        otherMAC[0] ^= 0xFF
        #expect(Self.key.verify(response: Self.response, requestMAC: otherMAC, at: 1_700_000_010)?.code == .badResponse)
        let wrong = TSIGKey(name: "nearby-key.", secret: Array(1...32))
        #expect(wrong.verify(response: Self.response, requestMAC: Self.requestMAC, at: 1_700_000_010)?.code == .badResponse)
        let skew = Self.key.verify(response: Self.response, requestMAC: Self.requestMAC, at: 1_700_001_000)
        #expect(skew?.code == .clockSkew)
    }

    @Test("an unsigned answer to a signed request is refused")
    func unsignedAnswer() throws {
        let unsigned = try Self.update().message(id: 0x1234).encoded()
        let problem = Self.key.verify(response: unsigned, requestMAC: Self.requestMAC, at: 1_700_000_000)
        #expect(problem?.code == .badResponse)
        #expect(problem?.message.contains("not signed") == true)
    }

    @Test("TSIG errors in the answer become one line each: BADKEY, BADSIG, BADTIME with the server's clock")
    func tsigErrors() throws {
        func answer(_ error: ResponseCode, other: [UInt8] = []) throws -> [UInt8] {
            var header = Header(id: 0x1234)
            header.isResponse = true
            header.opcode = Header.updateOpcode
            header.responseCode = 9
            let message = try Message(header: header, questions: [Question(name: "lab.example.test.", type: .soa)]).encoded()
            return TSIGRecord(keyName: "nearby-key.", timeSigned: 1_700_000_000, mac: [], originalID: 0x1234, error: error, otherData: other)
                .appended(to: message)
        }
        let badKey = Self.key.verify(response: try answer(.badKey), requestMAC: Self.requestMAC, at: 1_700_000_000)
        #expect(badKey?.code == .notAuthorized)
        #expect(badKey?.message.contains("BADKEY") == true)
        let badSig = Self.key.verify(response: try answer(.badSignature), requestMAC: Self.requestMAC, at: 1_700_000_000)
        #expect(badSig?.message.contains("BADSIG") == true)
        let serverTime: UInt64 = 1_700_000_000
        let clock = (0..<6).reversed().map { UInt8(truncatingIfNeeded: serverTime >> UInt64($0 * 8)) }
        let badTime = Self.key.verify(response: try answer(.badTime, other: clock), requestMAC: Self.requestMAC, at: 1_700_003_600)
        #expect(badTime?.code == .clockSkew)
        #expect(badTime?.message.contains("ours is 3600 s ahead") == true)
    }

    @Test("split finds the TSIG record at the end and gives back the message it signs")
    func split() throws {
        let (unsigned, record) = try #require(try TSIGRecord.split(Self.request))
        #expect(record.keyName == "nearby-key.")
        #expect(record.algorithm == TSIGRecord.hmacSHA256)
        #expect(record.timeSigned == 1_700_000_000)
        #expect(record.originalID == 0x1234)
        #expect(unsigned == (try Self.update().message(id: 0x1234).encoded()))
        // A message without TSIG: nil, not an error.
        #expect(try TSIGRecord.split(unsigned) == nil)
        // A TSIG record whose data is cut: an error naming it.
        var cut = Self.request
        cut[cut.count - 40] = 0xFF
        #expect(throws: DNSWireError.self) { _ = try TSIGRecord.split(Array(cut.dropLast(3))) }
    }
}

@Suite("TSIG key files")
struct TSIGKeyFileTests {
    @Test("the file tsig-keygen writes, and nsupdate's NAME:SECRET form")
    func parses() throws {
        let file = """
            key "nearby-key" {
            \talgorithm hmac-sha256;
            \tsecret "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=";
            };
            """
        let key = try TSIGKey(parsing: file)
        #expect(key.name == "nearby-key.")
        #expect(key.secret == Array(0...31))
        #expect(key.description == "TSIG key nearby-key (hmac-sha256)")
        let short = try TSIGKey(parsing: "hmac-sha256:nearby-key:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=")
        #expect(short == key)
        // A key named after a keyword is still read right.
        let tricky = try TSIGKey(parsing: "key \"secret\" { algorithm hmac-sha256; secret \"AAEC\"; };")
        #expect(tricky.name == "secret." && tricky.secret == [0, 1, 2])
    }

    @Test("a secret holding \"//\" (about one key in a hundred) is read whole; comments outside quotes still end a line")
    func slashesInSecret() throws {
        // 0xFF 0xFF 0xFF is "////" in base64.
        let file = """
            # made by tsig-keygen
            key "nearby-key" { // the lab's key
            	algorithm hmac-sha256; # the only one supported
            	secret "AAEC////AAEC";
            };
            """
        let key = try TSIGKey(parsing: file)
        #expect(key.secret == [0, 1, 2, 0xFF, 0xFF, 0xFF, 0, 1, 2])
    }

    @Test("each broken key file is refused with what is wrong", arguments: [
        ("", "neither a key file"),
        ("key \"k\" { algorithm hmac-md5; secret \"AAEC\"; };", "only hmac-sha256"),
        ("key \"k\" { algorithm hmac-sha256; };", "no `secret"),
        ("key \"k\" { secret \"AAEC\"; };", "no `algorithm"),
        ("key \"k\" { algorithm hmac-sha256; secret \"not base64!\"; };", "not base64"),
        ("key { algorithm hmac-sha256; secret \"AAEC\"; };", "no `key"),
    ])
    func refuses(text: String, expected: String) {
        #expect {
            _ = try TSIGKey(parsing: text, source: "k.key")
        } throws: { error in
            guard let error = error as? UnicastDNSError else { return false }
            return error.code == .invalidInput && error.message.contains(expected)
        }
    }
}
