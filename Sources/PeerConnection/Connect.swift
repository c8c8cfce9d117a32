#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import NearbyBasics
import NIOCore
import NIOPosix
import NIOSSL
public import PeerTrust

#if canImport(Glibc)
    import Glibc
#endif

extension PeerConnection {
    /// Connects to a peer at `host:port`, judges it, runs `initialize`, and returns the live
    /// connection.
    ///
    /// - Parameters:
    ///   - host: an IPv4 address, an IPv6 address (`fe80::1%eth0` for link-local), or a DNS
    ///     name (resolve `.local` names through NearbyDiscovery first).
    ///   - port: the peer's TCP port, 1-65535.
    ///   - expecting: the peer ID discovery announced (TXT `id`) or the user expects: a
    ///     certificate with another key is refused before any application byte.
    ///   - configuration: this side's identity, trust policy, protocol version and timeouts.
    /// - Throws: `PeerConnectionError`: `unreachable`, `untrusted` (with the reasons), `tls`,
    ///   `upgrade`, `handshake`, `timeout`, `invalidInput`.
    public static func connect(
        host: String, port: Int, expecting: PeerID? = nil, configuration: PeerConnectionConfiguration
    ) async throws(PeerConnectionError) -> PeerConnection {
        let side = Setup.Side(
            role: .connecting, configuration: configuration, tls: nil, expected: expecting, requireTrust: true, decide: nil, host: "")
        return try await dial(host: host, port: port, side: side) { opening, open, channel, duration throws(PeerConnectionError) in
            guard case .initialized(let hello) = opening else { throw PeerConnectionError(.handshake, "the peer paired instead of initializing") }
            return PeerConnection(
                role: .connecting, peer: hello, proof: open.proof, channel: channel, session: open.session, streams: open.streams,
                requestTimeout: configuration.requestTimeout, setupDuration: duration)
        }
    }

    /// Pairs with a peer that does not trust us yet (nor we it): connects over TLS, runs the
    /// commit-then-reveal exchange, asks `confirm` whether the other device shows the same
    /// 6-digit code, and pins the peer in `store` once both people said yes. The connection is
    /// closed afterwards; connect again under the pinned trust policy.
    ///
    /// - Parameters:
    ///   - host: as in ``connect(host:port:expecting:configuration:)``.
    ///   - port: the peer's TCP port, 1-65535.
    ///   - expecting: when set, a peer with another key is refused before pairing starts.
    ///   - configuration: this side's identity (required) and settings; TLS cannot be off.
    ///   - store: where the peer is pinned.
    ///   - timeout: how long the whole pairing may take, the people's answers included.
    ///   - confirm: asks the person; true when both devices show the same code.
    /// - Throws: `PeerConnectionError`: `pairing` (refused, declined on either side, a wrong
    ///   reveal, too slow), `unreachable`, `tls`, `upgrade`, `invalidInput`.
    public static func pair(
        host: String, port: Int, expecting: PeerID? = nil, configuration: PeerConnectionConfiguration, store: TrustStore,
        timeout: Duration = .seconds(60), confirm: @escaping @Sendable (PairingRequest) async -> Bool
    ) async throws(PeerConnectionError) -> PairingResult {
        guard configuration.identity != nil, !configuration.insecure else {
            throw PeerConnectionError(.invalidInput, "pairing needs an identity and TLS (it proves both keys)")
        }
        // Not trusted yet: that is what pairing is for. Our own key and a key other than the
        // one expected are still refused in the TLS handshake.
        let side = Setup.Side(
            role: .connecting, configuration: configuration, tls: nil, expected: expecting, requireTrust: false, decide: nil, host: "",
            pairing: PairingSetup(side: .initiate, store: store, confirm: confirm, timeout: timeout))
        return try await dial(host: host, port: port, side: side) { opening, _, _, _ throws(PeerConnectionError) in
            guard case .paired(let result) = opening else { throw PeerConnectionError(.pairing, "the peer initialized instead of pairing") }
            return result
        }
    }

    /// Connects to `host:port` with `side`'s pipeline and waits for its opening to end.
    static func dial<Outcome: Sendable>(
        host: String, port: Int, side template: Setup.Side,
        make: @escaping @Sendable (Opening, OpenedChannel, any Channel, Duration) throws(PeerConnectionError) -> Outcome
    ) async throws(PeerConnectionError) -> Outcome {
        guard (1...65535).contains(port) else { throw PeerConnectionError(.invalidInput, "port \(port) is out of range; use 1-65535") }
        let configuration = template.configuration
        var side = template
        side.tls = try TLS.context(for: configuration, server: false)
        side.host = host.contains(":") ? "[\(host)]" : host
        let start = ContinuousClock.now
        let made = Locked<EventLoopFuture<Outcome>?>(nil)
        // The channel, so that cancelling the caller's task closes it: a dial under way ends at
        // once instead of at its set-up timeout (a broker shutting down waits for its dials).
        let dialing = Locked<(any Channel)?>(nil)
        let bootstrap = ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .channelOption(.socketOption(.so_reuseaddr), value: 1)
            .channelOption(.tcpOption(.tcp_nodelay), value: 1)
            .connectTimeout(.nanoseconds(nanoseconds(configuration.setupTimeout)))
            .channelInitializer { [side] channel in
                dialing.withLockedValue { $0 = channel }
                return channel.eventLoop.makeCompletedFuture {
                    let opened = try Setup.configure(channel, side: side)
                    // Everything the connection is made of is read on its event loop.
                    let outcome = opened.flatMap { open in
                        open.session.established.futureResult.flatMapThrowing { opening in
                            try make(opening, open, channel, ContinuousClock.now - start)
                        }
                    }
                    outcome.whenFailure { _ in channel.close(promise: nil) }
                    made.withLockedValue { $0 = outcome }
                }
            }
        let address = try literalAddress(host, port: port)
        let cancelled = PeerConnectionError(.cancelled, "the dial to \(host) port \(port) was cancelled")
        let result: Result<Outcome, PeerConnectionError> = await withTaskCancellationHandler {
            if Task.isCancelled { return .failure(cancelled) }
            do {
                if let address {
                    _ = try await bootstrap.connect(to: address).get()
                } else {
                    _ = try await bootstrap.connect(host: host, port: port).get()
                }
            } catch {
                if Task.isCancelled { return .failure(cancelled) }
                configuration.logger.debug("connect to \(host) port \(port) failed: \(error)")
                return .failure(SocketErrors.connectFailure(error, host: host, port: port, timeout: configuration.setupTimeout))
            }
            guard let outcome = made.withLockedValue({ $0 }) else {
                return .failure(PeerConnectionError(.unreachable, "cannot connect to \(host) port \(port)"))
            }
            // Cancelled while connecting, before the channel could be closed: close it now.
            if Task.isCancelled {
                dialing.withLockedValue { $0 }?.close(promise: nil)
            }
            do {
                return .success(try await outcome.get())
            } catch let error as PeerConnectionError {
                return .failure(Task.isCancelled ? cancelled : error)
            } catch {
                return .failure(PeerConnectionError(.handshake, "\(error)"))
            }
        } onCancel: {
            dialing.withLockedValue { $0 }?.close(promise: nil)
        }
        return try result.get()
    }

    /// `host` as a socket address when it is an IP literal (with `%interface` for IPv6); nil for a name.
    static func literalAddress(_ host: String, port: Int) throws(PeerConnectionError) -> SocketAddress? {
        let parts = host.split(separator: "%", maxSplits: 1).map(String.init)
        guard let address = parts.first, !address.isEmpty else { throw PeerConnectionError(.invalidInput, "an empty host name") }
        var v6 = in6_addr()
        if inet_pton(AF_INET6, address, &v6) == 1 {
            var socket = sockaddr_in6()
            socket.sin6_family = sa_family_t(AF_INET6)
            socket.sin6_port = in_port_t(UInt16(port).bigEndian)
            socket.sin6_addr = v6
            if parts.count == 2 {
                // A zone is an interface name (eth0) or its index (2), as IPAddress writes it.
                let index = UInt32(parts[1]) ?? if_nametoindex(parts[1])
                guard index != 0 else {
                    throw PeerConnectionError(.invalidInput, "no network interface \"\(parts[1])\" (in \(host)); `ip link` lists them")
                }
                socket.sin6_scope_id = index
            }
            return SocketAddress(socket, host: address)
        }
        if parts.count == 2 { throw PeerConnectionError(.invalidInput, "\"%\(parts[1])\" only goes with an IPv6 address, not \(address)") }
        var v4 = in_addr()
        if inet_pton(AF_INET, address, &v4) == 1 {
            return try? SocketAddress(ipAddress: address, port: port)
        }
        return nil
    }
}
