// The protocol's core (JSON-RPC, the handshake, pairing, invitations, the session and stream
// machines) is its own module, PeerProtocol, so that "no I/O" is the compiler's rule there. This
// module is the NIO shell around it; `import PeerConnection` gives both, as NIO's umbrella does.
@_exported import PeerProtocol
