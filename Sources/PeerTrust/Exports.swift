// A peer ID is a hash of a key, so it lives with the small crypto below discovery and the
// protocol core, and a trust decision's reasons live in NearbyBasics, where the core's errors can
// carry them: `import PeerTrust` names all three.
@_exported import struct NearbyCrypto.PeerID
@_exported import struct NearbyCrypto.PeerIDError
@_exported import struct NearbyBasics.TrustReason
