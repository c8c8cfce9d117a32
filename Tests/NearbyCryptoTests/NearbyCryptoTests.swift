import NearbyBasics
import NearbyCrypto
import Testing

/// SHA-256 and HMAC-SHA-256 against the published vectors (FIPS 180-4's examples as NIST
/// publishes them, RFC 4231), and against OpenSSL on random inputs in PeerTrustTests.
@Suite("small crypto")
struct NearbyCryptoTests {
    func hex(_ bytes: [UInt8]) -> String { bytes.map { String($0, radix: 16).count == 1 ? "0" + String($0, radix: 16) : String($0, radix: 16) }.joined() }
    func bytes(_ hex: String) -> [UInt8] {
        var out: [UInt8] = []
        var index = hex.startIndex
        while index < hex.endIndex {
            let next = hex.index(index, offsetBy: 2)
            out.append(UInt8(hex[index..<next], radix: 16) ?? 0)
            index = next
        }
        return out
    }

    @Test("SHA-256 of the NIST examples: empty, abc, the two-block 448-bit message, a million a's")
    func sha256Vectors() {
        #expect(hex(SHA256.hash([])) == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
        #expect(hex(SHA256.hash(Array("abc".utf8))) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        #expect(
            hex(SHA256.hash(Array("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq".utf8)))
                == "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1")
        var hasher = SHA256()
        let thousand = [UInt8](repeating: UInt8(ascii: "a"), count: 1000)
        for _ in 0..<1000 { hasher.update(thousand) }
        #expect(hex(hasher.finalize()) == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0")
    }

    @Test("SHA-256 given in pieces equals SHA-256 given whole, at every split of 0 to 130 bytes")
    func sha256Pieces() {
        let message = (0..<130).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ 3) }
        for length in 0...message.count {
            let whole = SHA256.hash(message[..<length])
            for split in stride(from: 0, through: length, by: 13) {
                var hasher = SHA256()
                hasher.update(message[..<split])
                hasher.update(message[split..<length])
                #expect(hasher.finalize() == whole)
            }
        }
    }

    @Test("HMAC-SHA-256: RFC 4231 test cases 1, 2, 3, 4, 6 and 7 (keys shorter than, equal to and longer than a block)")
    func hmacVectors() {
        let cases: [(key: [UInt8], data: [UInt8], mac: String)] = [
            ([UInt8](repeating: 0x0b, count: 20), Array("Hi There".utf8), "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7"),
            (Array("Jefe".utf8), Array("what do ya want for nothing?".utf8), "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"),
            ([UInt8](repeating: 0xaa, count: 20), [UInt8](repeating: 0xdd, count: 50), "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe"),
            (bytes("0102030405060708090a0b0c0d0e0f10111213141516171819"), [UInt8](repeating: 0xcd, count: 50),
             "82558a389a443c0ea4cc819899f2083a85f0faa3e578f8077a2e3ff46729665b"),
            ([UInt8](repeating: 0xaa, count: 131), Array("Test Using Larger Than Block-Size Key - Hash Key First".utf8),
             "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"),
            ([UInt8](repeating: 0xaa, count: 131),
             Array("This is a test using a larger than block-size key and a larger than block-size data. The key needs to be hashed before being used by the HMAC algorithm.".utf8),
             "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2"),
        ]
        for (key, data, mac) in cases { #expect(hex(hmacSHA256(key: key, data)) == mac) }
    }

    @Test("constant-time comparison: equal, different, different lengths; random bytes are as many as asked and differ")
    func compareAndRandom() {
        #expect(equalInConstantTime([1, 2, 3], [1, 2, 3]))
        #expect(!equalInConstantTime([1, 2, 3], [1, 2, 4]))
        #expect(!equalInConstantTime([1, 2, 3], [1, 2]))
        #expect(equalInConstantTime([], []))
        #expect(randomBytes(32).count == 32)
        #expect(randomBytes(-1).isEmpty)
        #expect(randomBytes(32) != randomBytes(32))
    }
}
