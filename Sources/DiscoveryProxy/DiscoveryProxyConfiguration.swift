public import DNSWire
public import DiscoveryProxyCore
public import PeerTrust

// The proxy's settings and counters, as the CLI and programs see them.
extension DiscoveryProxy {
    /// One link: the zone that stands for it, and the interface the proxy hears it on.
    public struct Link: Sendable, Hashable {
        public var zone: ProxyZone
        public var interface: String
        public init(zone: ProxyZone, interface: String) {
            self.zone = zone
            self.interface = interface
        }
    }

    /// Where and how the proxy works.
    public struct Configuration: Sendable {
        public var links: [Link]
        /// The addresses to answer on (UDP and TCP): only these, never every address.
        public var listen: [IPAddress]
        /// The port, 53 by default; 0 picks a free one (the same for UDP and TCP, and for
        /// every address), reported by ``DiscoveryProxy/port``.
        public var port: UInt16
        /// The answering machine's settings; its zones are the links' zones, in order.
        public var answering: ProxyStateMachine.Configuration
        /// At most this many TCP connections at once, and this many from one address; more are
        /// closed at once.
        public var maximumTCPConnections = 256
        public var maximumTCPConnectionsPerSource = 16
        /// At most this many questions in flight on one TCP connection (asked, not yet answered
        /// and written); a client that asks more without reading is closed.
        public var maximumTCPQuestionsInFlight = 64
        /// A TCP connection that sends no question for this long is closed (RFC 7766 §6.2.3).
        public var tcpIdleTimeout: Duration = .seconds(10)
        /// Who asks the links: Nearby's own mDNS engine on the links' interfaces, or the host's
        /// daemon (avahi-daemon) through dns_sd.
        public var backend: Backend = .embedded
        /// DNS Push (RFC 8765) over TLS, when offered: clients then subscribe and are told of
        /// every change instead of asking again. Nil offers none (clients poll).
        public var push: PushService?

        public init(links: [Link], listen: [IPAddress], port: UInt16 = 53) {
            self.links = links
            self.listen = listen
            self.port = port
            answering = ProxyStateMachine.Configuration(zones: links.map(\.zone))
        }
    }

    /// The DNS Push service: DSO sessions (RFC 8490) over TLS on the `--listen` addresses,
    /// named in each zone by `_dns-push-tls._tcp.<zone>` SRV (its target is the zone's first
    /// name server, so that name must lead to the proxy).
    public struct PushService: Sendable {
        /// The TLS port: 853 by default (RFC 8765 §6.1 uses the DNS-over-TLS port); 0 picks a
        /// free one, reported by ``DiscoveryProxy/pushPort``.
        public var port: UInt16
        /// The certificate and key the TLS server shows; nil makes a self-signed one at start,
        /// which clients that check certificates will not accept (Nearby's client encrypts
        /// without checking unless asked to: Push tells it nothing the plain DNS answers would
        /// not).
        public var identity: PeerIdentity?
        /// The sessions' timeouts and their limit of subscriptions.
        public var session = PushSession.Configuration()
        /// At most this many sessions at once, and this many from one address.
        public var maximumSessions = 256
        public var maximumSessionsPerSource = 16
        /// A session whose client leaves this many bytes unread is aborted (it resubscribes and
        /// gets the current records again): nothing is dropped from a live session, and a
        /// client that reads nothing holds at most this much of the proxy's memory.
        public var maximumUnsentBytes = 512 * 1024

        public init(port: UInt16 = 853, identity: PeerIdentity? = nil) {
            self.port = port
            self.identity = identity
        }
    }

    /// Who asks the links' questions.
    public enum Backend: Sendable, Hashable {
        /// Nearby's own mDNS engine, bound to the links' interfaces and no others.
        case embedded
        /// The host's mDNS daemon (avahi-daemon) through dns_sd; answers are kept to the links'
        /// interfaces.
        case system
    }

    /// What the shell itself counted (the machine counts the rest).
    public struct ShellStatistics: Sendable, Equatable {
        /// UDP replies not sent because their socket's queue was over its high watermark.
        public var udpRepliesDropped = 0
        public var tcpConnections = 0
        public var tcpConnectionsRefused = 0
        public var tcpIdleClosed = 0
        public var tcpOverfull = 0
        public var pushSessions = 0
        public var pushSessionsRefused = 0
        /// Sessions closed because their client left too many messages unread.
        public var pushSessionsOverfull = 0
        /// RECONFIRMs received (those of records the link holds are asked again on it).
        public var pushReconfirms = 0
    }
}

extension DiscoveryProxy.PushService {
    /// The session table's settings.
    var table: PushSessionTable.Configuration {
        var table = PushSessionTable.Configuration()
        table.session = session
        table.maximumSessions = maximumSessions
        table.maximumSessionsPerSource = maximumSessionsPerSource
        table.maximumUnsentBytes = maximumUnsentBytes
        return table
    }
}
