import CPeerTrust

// ECDSA P-256 in the raw forms DNSSEC uses (RFC 6605 §4): a public key is x ‖ y (64 bytes), a
// signature is r ‖ s (64 bytes). SRP's SIG(0) (RFC 9665, RFC 2931) signs with the identity's
// key in this form, so a registration can be tied to the peer ID the key hashes to.

/// Checking an ECDSA P-256 signature given in raw form.
public enum P256Signature {
    /// The length of a raw public key (x ‖ y) and of a raw signature (r ‖ s).
    public static let rawLength = 64

    /// True when `signature` (r ‖ s) is a valid ECDSA P-256 SHA-256 signature of `message`
    /// under `publicKey` (x ‖ y). False for anything else, a point off the curve included:
    /// callers pass bytes from the network, and no input makes this throw or trap.
    public static func verify(publicKey: [UInt8], message: [UInt8], signature: [UInt8]) -> Bool {
        guard publicKey.count == rawLength, signature.count == rawLength else { return false }
        return publicKey.withUnsafeBufferPointer { point in
            message.withUnsafeBufferPointer { bytes in
                signature.withUnsafeBufferPointer { raw in
                    nearby_p256_verify_raw(point.baseAddress, bytes.baseAddress, bytes.count, raw.baseAddress) == 1
                }
            }
        }
    }
}

extension PeerIdentity {
    /// The identity's public key as x ‖ y (64 bytes), as a DNS KEY record carries it.
    /// - Throws: ``PeerTrustError`` (`crypto`) when the key is not a P-256 key.
    public func rawPublicKey() throws(PeerTrustError) -> [UInt8] {
        var point = [UInt8](repeating: 0, count: P256Signature.rawLength)
        let result = privateKey.pkcs8.withUnsafeBufferPointer { key in
            point.withUnsafeMutableBufferPointer { out in nearby_p256_public_raw(key.baseAddress, key.count, out.baseAddress) }
        }
        guard result == 0 else { throw PeerTrustError(.crypto, "the identity's key is not a P-256 key") }
        return point
    }

    /// Signs the SHA-256 of `message` with the identity's key; the signature is r ‖ s (64 bytes).
    /// - Throws: ``PeerTrustError`` (`crypto`) when the key is not a P-256 key or OpenSSL fails.
    public func signRaw(_ message: [UInt8]) throws(PeerTrustError) -> [UInt8] {
        var signature = [UInt8](repeating: 0, count: P256Signature.rawLength)
        var text = [CChar](repeating: 0, count: 256)
        let result = privateKey.pkcs8.withUnsafeBufferPointer { key in
            message.withUnsafeBufferPointer { bytes in
                signature.withUnsafeMutableBufferPointer { out in
                    text.withUnsafeMutableBufferPointer { error in
                        nearby_p256_sign_raw(
                            key.baseAddress, key.count, bytes.baseAddress, bytes.count, out.baseAddress, error.baseAddress, error.count)
                    }
                }
            }
        }
        guard result == 0 else { throw PeerTrustError(.crypto, OpenSSL.text(text)) }
        return signature
    }
}
