import PeerTrust

/// What ``ConnectionBroker/connect(host:port:timeout:)`` decides, without I/O: one connection
/// per peer holds for connections made by address too.
///
/// - Before dialing: when a peer announced at that address and port is connected already, that
///   connection is the answer and nothing is dialed.
/// - After dialing: a peer that proved no peer ID is refused; when the peer turns out to be
///   connected already (announced elsewhere, or not at all), the connection already open stays
///   and the new one is closed as a duplicate; otherwise the new one is the peer's.
enum ManualConnect {
    /// The open connection to whoever announces `host` (an address literal) at `port`, if any.
    /// A host name (not an address) matches nothing: its address is known only after dialing.
    static func existing(
        host: String, port: Int, announcements: some Sequence<PeerAnnouncement>, connection: (PeerID) -> BrokerStateMachine.ConnectionID?
    ) -> BrokerStateMachine.ConnectionID? {
        guard let literal = PeerAddress(host) else { return nil }
        for announcement in announcements where announcement.port == port && announcement.addresses.contains(literal) {
            if let peer = announcement.peerID.flatMap({ PeerID($0) }), let open = connection(peer) { return open }
        }
        return nil
    }

    /// What becomes of a connection just made by address.
    enum Outcome: Equatable, Sendable {
        /// Close it and fail the call: the peer proved no identity.
        case refuse(String)
        /// Close it as a duplicate and answer with the connection already open.
        case keepOpen(BrokerStateMachine.ConnectionID)
        /// It is the peer's connection now: hand it to the broker's machine.
        case adopt(PeerID)
    }

    /// Decides about the connection a dial to `host` and `port` made to `peer` (nil: no peer
    /// ID proven), given the peer's connection already open, if any.
    static func settle(peer: PeerID?, host: String, port: Int, open: BrokerStateMachine.ConnectionID?) -> Outcome {
        guard let peer else { return .refuse("the peer at \(host) port \(port) proved no peer ID") }
        if let open { return .keepOpen(open) }
        return .adopt(peer)
    }
}
