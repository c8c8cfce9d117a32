public import DNSWire
public import NearbyCrypto

/// A registration that names a Nearby peer (TXT `id`) must be signed by that peer's key: the
/// peer ID is the SHA-256 of the key's SubjectPublicKeyInfo, and the KEY that signs an SRP
/// update is the same P-256 key, so the registrar can check the two agree. A browser that finds
/// the service on the link then connects to it only if the certificate's key hashes to the `id`
/// (as it does for every Nearby peer), which makes it the registration's KEY: nobody can
/// register a service in another peer's name.
public enum PeerIDBinding {
    /// The DER SubjectPublicKeyInfo of an ECDSA P-256 key given as x ‖ y (RFC 5480: the
    /// id-ecPublicKey and prime256v1 OIDs, then the uncompressed point).
    public static func subjectPublicKeyInfo(p256 key: [UInt8]) -> [UInt8]? {
        guard key.count == KEYData.p256PublicKeyLength else { return nil }
        let prefix: [UInt8] = [
            0x30, 0x59, 0x30, 0x13, 0x06, 0x07, 0x2A, 0x86, 0x48, 0xCE, 0x3D, 0x02, 0x01, 0x06, 0x08, 0x2A, 0x86, 0x48, 0xCE,
            0x3D, 0x03, 0x01, 0x07, 0x03, 0x42, 0x00, 0x04,
        ]
        return prefix + key
    }

    /// The peer ID of a P-256 KEY (nil for another kind of key).
    public static func peerID(of key: KEYData) -> PeerID? {
        guard key.isP256, let spki = subjectPublicKeyInfo(p256: key.publicKey) else { return nil }
        return PeerID(publicKeyInfo: spki)
    }

    /// Why `txt`'s `id` cannot be claimed by `key`'s signature, or nil when it names no peer
    /// or names `key`'s.
    static func mismatch(_ txt: TXTData, key: KEYData, instance: DomainName) -> String? {
        guard let claimed = DiscoveryInfo(rdata: txt.rdata).string(for: "id") else { return nil }
        guard let peer = PeerID(claimed) else {
            return "\(instance)'s TXT id \"\(claimed.prefix(64))\" is not a peer ID"
        }
        guard peer == peerID(of: key) else {
            return "\(instance)'s TXT id \(peer) is not the peer ID of the key that signed the update; a peer registers only in its own name"
        }
        return nil
    }
}
