import NearbyCrypto
import PeerTrust
import Testing

/// NearbyCrypto's SHA-256 (Swift) agrees with OpenSSL's on random inputs of every length up to
/// a few blocks and beyond.
@Suite("small crypto against OpenSSL")
struct CryptoOracleTests {
    @Test("SHA-256: Swift and OpenSSL agree on 600 random inputs of 0 to 599 bytes, and on 64 KiB")
    func sha256AgreesWithOpenSSL() {
        var generator = SystemRandomNumberGenerator()
        for length in 0..<600 {
            let input = (0..<length).map { _ in UInt8.random(in: .min ... .max, using: &generator) }
            #expect(SHA256.hash(input) == sha256(input), "length \(length)")
        }
        let big = randomBytes(1 << 16)
        #expect(SHA256.hash(big) == sha256(big))
    }
}
