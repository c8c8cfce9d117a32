public import Logging
public import PeerTrust
import NearbyBasics

/// How this side connects and accepts: who it is, whom it trusts, what it speaks, and how long
/// it waits. The defaults are the ones Documentation/Swift.md documents.
public struct PeerConnectionConfiguration: Sendable {
    /// This side's identity: its certificate goes to every peer. Nil only with ``insecure``.
    public var identity: PeerIdentity?
    /// Judges the peer's certificate chain during the TLS handshake.
    public var trust: TrustEvaluator
    /// Replaces ``trust`` when set: the chain (leaf first), the peer ID expected (if any) and the
    /// peer's role in, a verdict out. Runs off the event loop; it may read files.
    public var judge: (@Sendable (_ chain: [Certificate], _ expectedPeerID: PeerID?, _ role: PeerRole) -> TrustVerdict)?
    /// The protocol version this side speaks in `initialize`.
    public var protocolVersion: ProtocolVersion
    /// `client_info` / `agent_info`: `{"name", "title", "version"}`.
    public var info: JSONValue
    /// `client_capabilities` / `agent_capabilities`.
    public var capabilities: JSONValue = .object([:])
    /// Plain `ws://` without TLS: nothing proves who the peer is. Only for bridges that have no TLS.
    public var insecure = false
    /// TCP connect, TLS and the WebSocket upgrade must be done within this.
    public var setupTimeout: Duration = .seconds(10)
    /// Listening side: how many connections may be setting up at once (in all, and from one
    /// source), how soon a ClientHello must come, and how failures are summed up. The defaults
    /// let a pinned peer in at once while thousands of strangers hold connections open.
    public var admission = AdmissionSettings()
    /// The peer must send (or answer) `initialize` within this, once the WebSocket is open.
    public var initializeTimeout: Duration = .seconds(5)
    /// The app must accept an invitation within this, or it counts as declined. While it
    /// decides, the connecting side is told how long it may take, and waits that long.
    public var invitationTimeout: Duration = .seconds(30)
    /// Connecting side: when the peer says someone there decides whether to let us in (a
    /// person asked, up to its own invitation timeout), `initialize` waits that long instead of
    /// ``initializeTimeout``, but never longer than this.
    public var admissionWaitLimit: Duration = .seconds(120)
    /// Connecting side: called (on the connection's event loop; return at once) when the peer
    /// says someone there decides whether to let us in, with how long this side now waits.
    /// Tell the user: the connection is not stuck, it waits for the other side to accept.
    public var waitingForAdmission: (@Sendable (Duration) -> Void)?
    /// How long ``PeerConnection/request(_:params:timeout:)`` waits by default; nil: forever.
    public var requestTimeout: Duration? = .seconds(30)
    /// A peer silent this long is dead (pings go out after a third of it); zero: never.
    public var deadPeerTimeout: Duration = .seconds(30)
    /// The largest message accepted, in bytes; a larger one closes the connection with 1009.
    public var maximumMessageSize = 1 << 20
    /// How much may wait in ``PeerConnection/incoming`` before the connection stops reading
    /// from the peer (64 messages or 4 MiB; reading resumes at half). A peer faster than the
    /// app is then held back by TCP; nothing is dropped.
    public var incomingLimit = IncomingLimit()
    /// Our requests that may wait for answers at once; one more fails at once with `busy`.
    public var maximumPendingRequests = 1024
    /// Methods answered on the connection's event loop, before anything reaches
    /// ``PeerConnection/incoming``: for cheap work that never blocks or waits (a status, an
    /// echo). They save the two thread hops of answering through `incoming`. `ping` (result
    /// `{}`) is built in; remove it to answer `ping` yourself.
    public var methods: [String: BuiltInMethod] = ["ping": { _ in .success(.object([:])) }]
    /// Byte streams beside JSON-RPC (``PeerConnection/openStream(label:)``), offered to the peer
    /// in `initialize` with these terms (DATA frames no larger than ``maximumMessageSize``
    /// allows); nil: none offered, so `openStream` fails with `unsupported` and a binary
    /// message from the peer closes the connection with 1003.
    public var streams: StreamSettings? = StreamSettings()
    /// Where the connection says what it does; silent unless the handler's level asks.
    public var logger = Logger(label: "nearby.connection", factory: { _ in SwiftLogNoOpLogHandler() })

    /// - Parameters:
    ///   - identity: this side's identity.
    ///   - trust: whom to trust (for example `TrustEvaluator(policy: try .pinned(store))`).
    ///   - protocolVersion: the version spoken in `initialize` (default: the protocol's own,
    ///     `ProtocolVersion.current`).
    ///   - name: `info.name`; `title` and `version` complete `info`.
    ///   - title: `info.title`.
    ///   - version: `info.version` (default: this package's version, `NearbyVersion.current`).
    public init(
        identity: PeerIdentity?, trust: TrustEvaluator, protocolVersion: ProtocolVersion = .current,
        name: String = "nearby", title: String = "Nearby", version: String = NearbyVersion.current
    ) {
        self.identity = identity
        self.trust = trust
        self.protocolVersion = protocolVersion
        info = .object(["name": .string(name), "title": .string(title), "version": .string(version)])
    }

    func verdict(chain: [Certificate], expected: PeerID?, role: PeerRole) -> TrustVerdict {
        if let judge { return judge(chain, expected, role) }
        return trust.evaluate(chain: chain, expectedPeerID: expected, role: role)
    }

    /// The stream terms this side offers: ``streams`` with DATA frames that fit in a message
    /// (a frame is 5 bytes more than its payload); none when messages are too small for them.
    var offeredStreams: StreamSettings? {
        guard var settings = streams, maximumMessageSize - StreamFrame.headerSize >= 1 << 10 else { return nil }
        settings.maximumFrame = min(settings.maximumFrame, maximumMessageSize - StreamFrame.headerSize)
        return settings
    }

    func local() -> Handshake.Local {
        var announced = capabilities
        if let streams = offeredStreams, case .object(var members) = announced {
            members[StreamSettings.capabilityKey] = streams.capability
            announced = .object(members)
        }
        return Handshake.Local(
            peerID: insecure ? nil : identity?.peerID, displayName: identity?.displayName ?? PeerIdentity.defaultDisplayName(),
            protocolVersion: protocolVersion, info: info, capabilities: announced)
    }
}
