import PeerTrust
import Testing

@Suite("ECDSA P-256 in raw form, for SIG(0)")
struct RawSignatureSIG0Tests {
    @Test("an identity signs r ‖ s that verifies with its raw x ‖ y key, and nothing else verifies")
    func signAndVerify() throws {
        let identity = try PeerIdentity.generate(displayName: "signer")
        let key = try identity.rawPublicKey()
        #expect(key.count == 64)
        let message = Array("an SRP update".utf8)
        let signature = try identity.signRaw(message)
        #expect(signature.count == 64)
        #expect(P256Signature.verify(publicKey: key, message: message, signature: signature))

        var flipped = signature
        flipped[10] ^= 0x01
        #expect(!P256Signature.verify(publicKey: key, message: message, signature: flipped))
        #expect(!P256Signature.verify(publicKey: key, message: message + [0], signature: signature))
        let other = try PeerIdentity.generate(displayName: "other").rawPublicKey()
        #expect(!P256Signature.verify(publicKey: other, message: message, signature: signature))
    }

    @Test("hostile keys and signatures are refused, never trap: wrong lengths, a point off the curve, zeros")
    func hostileInput() throws {
        let identity = try PeerIdentity.generate(displayName: "signer")
        let key = try identity.rawPublicKey()
        let signature = try identity.signRaw([1, 2, 3])
        #expect(!P256Signature.verify(publicKey: [], message: [1, 2, 3], signature: signature))
        #expect(!P256Signature.verify(publicKey: key, message: [1, 2, 3], signature: []))
        #expect(!P256Signature.verify(publicKey: Array(key.prefix(63)), message: [1, 2, 3], signature: signature))
        #expect(!P256Signature.verify(publicKey: [UInt8](repeating: 0, count: 64), message: [1, 2, 3], signature: signature))
        #expect(!P256Signature.verify(publicKey: [UInt8](repeating: 0xFF, count: 64), message: [1, 2, 3], signature: signature))
        #expect(!P256Signature.verify(publicKey: key, message: [1, 2, 3], signature: [UInt8](repeating: 0, count: 64)))
        #expect(!P256Signature.verify(publicKey: key, message: [1, 2, 3], signature: [UInt8](repeating: 0xFF, count: 64)))
        // An empty message is a message like any other.
        let empty = try identity.signRaw([])
        #expect(P256Signature.verify(publicKey: key, message: [], signature: empty))
    }
}
