public import DNSWire
public import Logging
public import MulticastDNSCore
import NetworkPlatform
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A datagram as it arrived on one of the mDNS sockets.
public struct ReceivedDatagram: Sendable {
    public var bytes: [UInt8]
    public var source: DNSWire.SocketAddress
    public var interfaceIndex: Int
    public var family: IPFamily
    /// Sent to the mDNS group rather than to this host alone.
    public var toGroup: Bool
}

/// The bounded buffer between the sockets' event loop and the engine. The event loop never
/// waits: when the buffer is full (the engine is behind, say under a flood) a datagram is
/// dropped and counted. The engine takes datagrams in batches, one wake-up per batch.
public final class DatagramInbox: Sendable {
    /// At most this many datagrams wait; at most this many bytes in all.
    public static let capacity = 4096
    public static let byteCapacity = 4 << 20

    private struct State {
        var queue: [ReceivedDatagram] = []
        var head = 0
        var bytes = 0
        var dropped = 0
        var received = 0
        var closed = false
    }
    private let state = NIOLockedValueBox(State())
    /// Signals that datagrams are waiting (at most one signal is buffered).
    public let wakeUps: AsyncStream<Void>
    private let wake: AsyncStream<Void>.Continuation

    init() {
        (wakeUps, wake) = AsyncStream<Void>.makeStream(bufferingPolicy: .bufferingNewest(1))
    }

    /// Adds a datagram, or drops it when the inbox is full. Called on the event loop.
    func push(_ datagram: ReceivedDatagram) {
        let signal: Bool = state.withLockedValue { state in
            guard !state.closed else { return false }
            state.received += 1
            guard state.queue.count - state.head < Self.capacity, state.bytes + datagram.bytes.count <= Self.byteCapacity else {
                state.dropped += 1
                return false
            }
            let wasEmpty = state.queue.count == state.head
            state.queue.append(datagram)
            state.bytes += datagram.bytes.count
            return wasEmpty
        }
        if signal { wake.yield() }
    }

    /// Takes up to `limit` datagrams, oldest first.
    public func take(upTo limit: Int) -> [ReceivedDatagram] {
        state.withLockedValue { state in
            let end = min(state.queue.count, state.head + limit)
            let batch = Array(state.queue[state.head..<end])
            state.head = end
            for datagram in batch { state.bytes -= datagram.bytes.count }
            if state.head == state.queue.count {
                state.queue.removeAll(keepingCapacity: state.queue.capacity <= 256)
                state.head = 0
            } else if state.head > 1024 {
                state.queue.removeFirst(state.head)
                state.head = 0
            }
            return batch
        }
    }

    /// Whether datagrams are waiting.
    public var isEmpty: Bool { state.withLockedValue { $0.queue.count == $0.head } }

    /// Datagrams that arrived, and those dropped because the inbox was full.
    public var counts: (received: Int, dropped: Int) { state.withLockedValue { ($0.received, $0.dropped) } }

    /// Asks the engine to look again (more is waiting than one batch took).
    public func signal() { wake.yield() }

    func close() {
        state.withLockedValue { $0.closed = true }
        wake.finish()
    }
}

/// What one interface looks like to the engine: its addresses and their prefixes.
public struct InterfaceInfo: Sendable, Hashable {
    public var interface: NetworkInterface
    public var addresses: [IPAddress]
    /// (address, prefix length) pairs, for the on-link check of unicast sources.
    var networks: [IPNetwork]
}

/// An address range, for deciding whether a source is on-link.
struct IPNetwork: Sendable, Hashable {
    var address: IPAddress
    var prefixLength: Int

    func contains(_ other: IPAddress) -> Bool {
        switch (address, other) {
        case (.v4(let network), .v4(let candidate)):
            guard prefixLength > 0 else { return true }
            let mask: UInt32 = prefixLength >= 32 ? .max : ~(UInt32.max >> UInt32(prefixLength))
            return network.value & mask == candidate.value & mask
        case (.v6(let network, _), .v6(let candidate, _)):
            let bits = min(prefixLength, 128)
            let highMask: UInt64 = bits >= 64 ? .max : (bits == 0 ? 0 : ~(UInt64.max >> UInt64(bits)))
            let lowBits = max(0, bits - 64)
            let lowMask: UInt64 = lowBits >= 64 ? .max : (lowBits == 0 ? 0 : ~(UInt64.max >> UInt64(lowBits)))
            return network.high & highMask == candidate.high & highMask && network.low & lowMask == candidate.low & lowMask
        default:
            return false
        }
    }
}

/// UDP port 5353 on IPv4 and IPv6 through SwiftNIO: one socket per family, shared with any
/// other responder on the machine (SO_REUSEADDR and SO_REUSEPORT), joined to the mDNS group
/// on each chosen interface, with packet info so that every datagram's interface is known.
public final class NIOMulticastTransport: Sendable {
    public static let groupV4 = "224.0.0.251"
    public static let groupV6 = "ff02::fb"

    let group: any EventLoopGroup
    /// The open sockets. SwiftNIO closes a datagram channel on most socket errors (a link that
    /// goes down makes a send fail with ENETDOWN, say), so they are reopened when that happens.
    private let channelBox: NIOLockedValueBox<[IPFamily: any Channel]>
    /// Incoming datagrams, bounded, in arrival order.
    public let inbox: DatagramInbox
    let logger: Logger
    private let failedSends = NIOLockedValueBox(0)

    var channels: [IPFamily: any Channel] { channelBox.withLockedValue { $0 } }

    /// Datagrams the sockets failed to send so far.
    public var sendFailures: Int { failedSends.withLockedValue { $0 } }

    private init(group: any EventLoopGroup, channels: [IPFamily: any Channel], inbox: DatagramInbox, logger: Logger) {
        self.group = group
        self.channelBox = NIOLockedValueBox(channels)
        self.inbox = inbox
        self.logger = logger
    }

    static let datagramsPerRead = 16

    private static func bind(_ family: IPFamily, group: any EventLoopGroup, inbox: DatagramInbox) async throws -> any Channel {
        let bootstrap = DatagramBootstrap(group: group)
            .channelOption(.socketOption(.so_reuseaddr), value: 1)
            .channelOption(ChannelOptions.Types.SocketOption(level: SocketOptionLevel(SOL_SOCKET), name: SocketOptionName(SO_REUSEPORT)), value: 1)
            .channelOption(.receivePacketInfo, value: true)
            // Up to 16 datagrams per system call (recvmmsg), each in a 9000-byte slot: mDNS packets
            // may be that large (RFC 6762 §17), and a shorter slot would truncate them.
            .channelOption(.datagramVectorReadMessageCount, value: Self.datagramsPerRead)
            .channelOption(.recvAllocator, value: FixedSizeRecvByteBufferAllocator(capacity: 9000 * Self.datagramsPerRead))
            .channelOption(.maxMessagesPerRead, value: 4)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(InboundHandler(inbox: inbox, family: family))
                }
            }
        switch family {
        case .v4:
            return try await bootstrap.bind(host: "0.0.0.0", port: Int(DNSWire.SocketAddress.mdnsPort)).get()
        case .v6:
            return try await bootstrap
                .channelOption(ChannelOptions.Types.SocketOption(level: .ipv6, name: .ipv6_v6only), value: 1)
                .bind(host: "::", port: Int(DNSWire.SocketAddress.mdnsPort)).get()
        }
    }

    /// Whether another program on this machine already has UDP port 5353 (avahi-daemon,
    /// mDNSResponder, python-zeroconf): a plain bind without SO_REUSEADDR fails then.
    public static func portInUse(_ port: UInt16 = DNSWire.SocketAddress.mdnsPort) -> Bool {
        udpPortInUse(port)
    }

    /// Opens the sockets. Fails with a clear error when port 5353 cannot be bound.
    public static func open(
        families: Set<IPFamily> = [.v4, .v6], logger: Logger = Logger(label: "nearby.mdns", factory: { _ in SwiftLogNoOpLogHandler() })
    ) async throws -> NIOMulticastTransport {
        let group = MultiThreadedEventLoopGroup.singleton
        let inbox = DatagramInbox()
        var channels: [IPFamily: any Channel] = [:]
        for family in families.sorted(by: { $0 == .v4 && $1 == .v6 }) {
            do {
                channels[family] = try await bind(family, group: group, inbox: inbox)
            } catch {
                if family == .v6 && !channels.isEmpty {
                    logger.notice("no IPv6 mDNS: \(error)")  // no IPv6 on this host
                    continue
                }
                for channel in channels.values { try? await channel.close() }
                throw TransportError("cannot open UDP port 5353 for \(family == .v4 ? "IPv4" : "IPv6") mDNS: \(error)")
            }
        }
        return NIOMulticastTransport(group: group, channels: channels, inbox: inbox, logger: logger)
    }

    /// Reopens any socket SwiftNIO closed after an error; true if one was reopened (its group
    /// memberships are gone: join again).
    public func reopenClosedChannels() async -> Bool {
        var reopened = false
        for (family, channel) in channels where !channel.isActive {
            guard let fresh = try? await Self.bind(family, group: group, inbox: inbox) else { continue }
            channelBox.withLockedValue { $0[family] = fresh }
            reopened = true
        }
        return reopened
    }

    /// Joins the mDNS group on `interface` for each family it has addresses of.
    public func join(_ info: InterfaceInfo) async {
        guard let devices = try? System.enumerateDevices() else { return }
        for (family, channel) in channels {
            let wanted = info.addresses.contains { $0.isIPv6 == (family == .v6) }
            guard wanted, let device = devices.first(where: { $0.interfaceIndex == info.interface.index && ($0.address?.protocol == (family == .v6 ? .inet6 : .inet)) }),
                let multicast = channel as? any MulticastChannel
            else { continue }
            let groupAddress = try? NIOCore.SocketAddress(ipAddress: family == .v4 ? Self.groupV4 : Self.groupV6, port: Int(DNSWire.SocketAddress.mdnsPort))
            guard let groupAddress else { continue }
            do {
                try await multicast.joinGroup(groupAddress, device: device).get()
            } catch {
                logger.warning("cannot join the mDNS group \(groupAddress) on \(info.interface.name): \(error)")
            }
        }
    }

    /// Leaves the mDNS group on an interface that went away (errors ignored: it may be gone).
    public func leave(_ info: InterfaceInfo) async {
        guard let devices = try? System.enumerateDevices() else { return }
        for (family, channel) in channels {
            guard let device = devices.first(where: { $0.interfaceIndex == info.interface.index }),
                let multicast = channel as? any MulticastChannel,
                let groupAddress = try? NIOCore.SocketAddress(ipAddress: family == .v4 ? Self.groupV4 : Self.groupV6, port: Int(DNSWire.SocketAddress.mdnsPort))
            else { continue }
            _ = try? await multicast.leaveGroup(groupAddress, device: device).get()
        }
    }

    /// Sends `bytes` out of `interface`: to the group of `family`, or to one address.
    public func send(_ bytes: [UInt8], to destination: Destination, on interface: InterfaceInfo) {
        let family: IPFamily
        let target: NIOCore.SocketAddress?
        switch destination {
        case .multicast(let groupFamily):
            family = groupFamily
            target = try? NIOCore.SocketAddress(ipAddress: family == .v4 ? Self.groupV4 : Self.groupV6, port: Int(DNSWire.SocketAddress.mdnsPort))
        case .unicast(let address):
            family = address.address.isIPv6 ? .v6 : .v4
            target = address.nioAddress
        }
        guard let channel = channels[family], let target else {
            failedSends.withLockedValue { $0 += 1 }
            return
        }
        let buffer = channel.allocator.buffer(bytes: bytes)
        let envelope = AddressedEnvelope(remoteAddress: target, data: buffer)
        let failedSends = failedSends
        channel.eventLoop.execute {
            // Choose the outgoing interface for this datagram; the event loop runs the option
            // change and the write in this order, so concurrent sends cannot interleave.
            if let options = channel as? any SocketOptionProvider {
                switch family {
                case .v4:
                    if case .v4(let address)? = interface.addresses.first(where: { !$0.isIPv6 }) {
                        var value = in_addr()
                        value.s_addr = address.value.bigEndian
                        _ = options.setIPMulticastIF(value)
                    }
                    _ = options.setIPMulticastTTL(255)
                case .v6:
                    _ = options.setIPv6MulticastIF(CUnsignedInt(interface.interface.index))
                    _ = options.setIPv6MulticastHops(255)
                }
            }
            channel.writeAndFlush(envelope).whenFailure { _ in failedSends.withLockedValue { $0 += 1 } }
        }
    }

    /// Closes the sockets.
    public func close() async {
        for channel in channels.values { try? await channel.close() }
        inbox.close()
    }

    /// The machine's multicast-capable interfaces with their addresses (loopback left out
    /// unless named), optionally only those named.
    public static func interfaces(named names: [String]? = nil) -> [InterfaceInfo] {
        guard let devices = try? System.enumerateDevices() else { return [] }
        let running = NetworkPlatform.runningInterfaceNames()
        var byIndex: [Int: InterfaceInfo] = [:]
        // A link that is down keeps its addresses; only interfaces up and running count.
        for device in devices where device.multicastSupported && running.contains(device.name) {
            if let names, !names.contains(device.name) { continue }
            if names == nil && device.name == "lo" { continue }
            guard let address = device.address?.ipAddress(scope: device.interfaceIndex) else { continue }
            let prefix = device.netmask?.prefixLength ?? (address.isIPv6 ? 64 : 24)
            var info = byIndex[device.interfaceIndex]
                ?? InterfaceInfo(interface: NetworkInterface(index: device.interfaceIndex, name: device.name), addresses: [], networks: [])
            if !info.addresses.contains(address) {
                info.addresses.append(address)
                info.networks.append(IPNetwork(address: address, prefixLength: prefix))
            }
            byIndex[device.interfaceIndex] = info
        }
        return byIndex.values.sorted { $0.interface.index < $1.interface.index }
    }
}

/// Why the transport could not start.
public struct TransportError: Error, CustomStringConvertible, Sendable {
    public var description: String
    /// True when the caller named an interface this machine does not have (bad input, not a
    /// network failure).
    public var isUnknownInterface: Bool
    init(_ description: String, unknownInterface: Bool = false) {
        self.description = description
        self.isUnknownInterface = unknownInterface
    }
}

private final class InboundHandler: ChannelInboundHandler, Sendable {
    typealias InboundIn = AddressedEnvelope<ByteBuffer>
    let inbox: DatagramInbox
    let family: IPFamily

    init(inbox: DatagramInbox, family: IPFamily) {
        self.inbox = inbox
        self.family = family
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let envelope = Self.unwrapInboundIn(data)
        guard let info = envelope.metadata?.packetInfo,
            let source = envelope.remoteAddress.ipAddress(scope: info.interfaceIndex),
            let port = envelope.remoteAddress.port
        else { return }
        let toGroup: Bool = switch info.destinationAddress {
        case .v4(let address): UInt32(bigEndian: address.address.sin_addr.s_addr) >> 28 == 0xE  // 224.0.0.0/4
        case .v6(let address): withUnsafeBytes(of: address.address.sin6_addr) { $0.first == 0xFF }  // ff00::/8
        default: true
        }
        inbox.push(
            ReceivedDatagram(bytes: Array(envelope.data.readableBytesView), source: DNSWire.SocketAddress(source, port: UInt16(clamping: port)),
                             interfaceIndex: info.interfaceIndex, family: family, toGroup: toGroup))
    }
}

extension NIOCore.SocketAddress {
    /// The address as the engine's type; link-local IPv6 addresses get `scope`.
    func ipAddress(scope: Int) -> IPAddress? {
        switch self {
        case .v4(let address):
            return .v4(DNSWire.IPv4Address(UInt32(bigEndian: address.address.sin_addr.s_addr)))
        case .v6(let address):
            let bytes = withUnsafeBytes(of: address.address.sin6_addr) { Array($0) }
            guard let v6 = DNSWire.IPv6Address(bytes: bytes) else { return nil }
            return .v6(v6, scope: v6.isLinkLocal ? scope : nil)
        default:
            return nil
        }
    }

    /// The prefix length of a netmask.
    var prefixLength: Int? {
        switch self {
        case .v4(let address):
            return UInt32(bigEndian: address.address.sin_addr.s_addr).nonzeroBitCount
        case .v6(let address):
            return withUnsafeBytes(of: address.address.sin6_addr) { $0.reduce(0) { $0 + $1.nonzeroBitCount } }
        default:
            return nil
        }
    }
}

extension DNSWire.SocketAddress {
    var nioAddress: NIOCore.SocketAddress? {
        switch address {
        case .v4(let v4):
            return try? NIOCore.SocketAddress(ipAddress: v4.description, port: Int(port))
        case .v6(let v6, let scope):
            var raw = sockaddr_in6()
            raw.sin6_family = sa_family_t(AF_INET6)
            raw.sin6_port = in_port_t(port).bigEndian
            raw.sin6_scope_id = UInt32(scope ?? 0)
            let bytes = v6.bytes
            withUnsafeMutableBytes(of: &raw.sin6_addr) { target in
                for index in 0..<16 { target[index] = bytes[index] }
            }
            return NIOCore.SocketAddress(raw, host: v6.description)
        }
    }
}

/// Whether binding UDP `port` on all IPv4 addresses, without SO_REUSEADDR, fails because the
/// port is taken.
private func udpPortInUse(_ port: UInt16) -> Bool {
    #if canImport(Glibc)
    let descriptor = Glibc.socket(AF_INET, Int32(SOCK_DGRAM.rawValue), 0)
    #else
    let descriptor = Darwin.socket(AF_INET, SOCK_DGRAM, 0)
    #endif
    guard descriptor >= 0 else { return false }
    defer { _ = close(descriptor) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = port.bigEndian
    address.sin_addr.s_addr = INADDR_ANY
    let result = withUnsafePointer(to: &address) { pointer in
        pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
    }
    return result != 0 && errno == EADDRINUSE
}
