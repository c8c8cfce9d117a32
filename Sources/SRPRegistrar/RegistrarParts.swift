import DNSWire
import MulticastDNS
import MulticastDNSCore
import NIOCore
import NIOPosix
import NearbyBasics
import UnicastDNSSD

/// One of the registrar's registrations on the link (a host's or a service's), told apart
/// from the same name published again later.
struct RegistrationKey: Hashable, Sendable {
    var name: DomainName
    var serial: Int
}

/// Which engine registration publishes each name of the zone, and for which host, as a pure
/// value.
struct LinkPublications: Sendable {
    private var byName: [DomainName: (id: RegistrationID, key: RegistrationKey)] = [:]
    private var byID: [RegistrationID: (key: RegistrationKey, host: DomainName)] = [:]
    private var serial = 0

    /// `name` (of `host`'s registration) is now published as `id`.
    mutating func published(_ name: DomainName, id: RegistrationID, host: DomainName) -> RegistrationKey {
        serial += 1
        let key = RegistrationKey(name: name, serial: serial)
        byName[name] = (id, key)
        byID[id] = (key, host)
        return key
    }

    /// The registration the engine knows as `id`, and its host; nil once withdrawn.
    func registration(_ id: RegistrationID) -> (key: RegistrationKey, host: DomainName)? { byID[id] }

    /// `name` comes off the link: the engine registration to withdraw, if any.
    mutating func withdrawn(_ name: DomainName) -> RegistrationID? {
        guard let id = byName.removeValue(forKey: name)?.id else { return nil }
        byID[id] = nil
        return id
    }

    /// The engine gave `id` up (a conflict): nothing to withdraw any more.
    mutating func forget(_ id: RegistrationID) {
        guard let (key, _) = byID.removeValue(forKey: id) else { return }
        if byName[key.name]?.key == key { byName[key.name] = nil }
    }

    /// The addresses the link can use: not loopback, not unspecified, not link-local (a
    /// device's link-local address is on its own link, not this one).
    static func advertisable(_ addresses: [IPAddress]) -> [IPAddress] {
        addresses.filter { address in
            switch address {
            case .v4(let v4):
                let bytes = v4.bytes
                return bytes[0] != 127 && bytes[0] != 0 && !(bytes[0] == 169 && bytes[1] == 254)
            case .v6(let v6, _):
                let bytes = v6.bytes
                let loopbackOrUnspecified = bytes.dropLast().allSatisfy { $0 == 0 } && (bytes.last ?? 0) <= 1
                return !v6.isLinkLocal && !loopbackOrUnspecified
            }
        }
    }
}

/// Replies held until the link has accepted the names they acknowledge, as a pure value: each
/// waits for its registrations, or until its deadline. `Path` says where a reply goes.
struct HeldReplies<Path: Sendable>: Sendable {
    struct Held: Sendable {
        var message: Message
        var path: Path
        var host: DomainName
        /// When the update came.
        var arrived: Duration
        var waiting: Set<RegistrationKey>
        var deadline: Duration
    }

    private var held: [Held] = []

    /// Holds `message` until every one of `waiting` is accepted on the link, or `deadline`.
    mutating func hold(_ message: Message, path: Path, host: DomainName, arrived: Duration, waiting: Set<RegistrationKey>, until deadline: Duration) {
        held.append(Held(message: message, path: path, host: host, arrived: arrived, waiting: waiting, deadline: deadline))
    }

    /// `key` was accepted: the replies that waited for nothing else.
    mutating func accepted(_ key: RegistrationKey) -> [Held] {
        for index in held.indices { held[index].waiting.remove(key) }
        return take { $0.waiting.isEmpty }
    }

    /// A name of `host` is in use on the link: its replies, to be answered with a refusal.
    mutating func refused(_ host: DomainName) -> [Held] {
        take { $0.host == host }
    }

    /// The replies whose deadline has come.
    mutating func due(at time: Duration) -> [Held] {
        take { $0.deadline <= time }
    }

    /// Everything held (shutting down).
    mutating func takeAll() -> [Held] {
        take { _ in true }
    }

    var nextDeadline: Duration? { held.map(\.deadline).min() }

    private mutating func take(_ which: (Held) -> Bool) -> [Held] {
        let taken = held.filter(which)
        held.removeAll(where: which)
        return taken
    }
}

/// Where a reply goes: back to a datagram's source, or down a TCP connection.
enum ReplyPath: Sendable {
    case udp(NIOAsyncChannelOutboundWriter<AddressedEnvelope<ByteBuffer>>, NIOCore.SocketAddress)
    case tcp(NIOAsyncChannelOutboundWriter<ByteBuffer>)

    func send(_ message: Message) async {
        guard let bytes = try? message.encoded() else { return }
        switch self {
        case .udp(let writer, let destination):
            try? await writer.write(AddressedEnvelope(remoteAddress: destination, data: ByteBuffer(bytes: bytes)))
        case .tcp(let writer):
            try? await writer.write(DNSOverTCP.framed(bytes))
        }
    }
}

/// The registrar's sockets: UDP and TCP on each address, on one port.
struct Sockets: Sendable {
    typealias Datagrams = NIOAsyncChannel<AddressedEnvelope<ByteBuffer>, AddressedEnvelope<ByteBuffer>>
    typealias Server = NIOAsyncChannel<NIOAsyncChannel<ByteBuffer, ByteBuffer>, Never>

    var udp: [Datagrams]
    var tcp: [Server]
    var port: Int

    static func open(_ addresses: [IPAddress], port: Int) async throws -> Sockets {
        var sockets = Sockets(udp: [], tcp: [], port: port)
        do {
            for address in addresses {
                let socket = try NIOCore.SocketAddress(ipAddress: address.withoutScope.description, port: sockets.port)
                let udp = try await DatagramBootstrap(group: MultiThreadedEventLoopGroup.singleton)
                    .channelOption(.socketOption(.so_reuseaddr), value: 1)
                    // Room for a burst (a thousand devices after a power cut): the default 208 KiB
                    // held about 500 updates, and the kernel dropped the rest unread.
                    .channelOption(.socketOption(.so_rcvbuf), value: 4 << 20)
                    .bind(to: socket) { channel in
                        channel.eventLoop.makeCompletedFuture { try Datagrams(wrappingChannelSynchronously: channel) }
                    }
                if sockets.port == 0 { sockets.port = udp.channel.localAddress?.port ?? 0 }
                sockets.udp.append(udp)
                let tcp = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
                    .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
                    .serverChannelOption(.backlog, value: 64)
                    .bind(to: try NIOCore.SocketAddress(ipAddress: address.withoutScope.description, port: sockets.port)) { channel in
                        channel.eventLoop.makeCompletedFuture { try NIOAsyncChannel<ByteBuffer, ByteBuffer>(wrappingChannelSynchronously: channel) }
                    }
                sockets.tcp.append(tcp)
            }
        } catch {
            await sockets.close()
            throw error
        }
        return sockets
    }

    func close() async {
        for channel in udp { try? await channel.channel.close() }
        for server in tcp { try? await server.channel.close() }
    }
}
