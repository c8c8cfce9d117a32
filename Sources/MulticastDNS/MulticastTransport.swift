public import DNSWire
public import Logging
public import MulticastDNSCore
import NetworkPlatform
import NearbyBasics

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// What one interface looks like to the engine: its addresses and their prefixes.
public struct InterfaceInfo: Sendable, Hashable {
    public var interface: NetworkInterface
    public var addresses: [IPAddress]
    /// (address, prefix length) pairs, for the on-link check of unicast sources.
    var networks: [IPNetwork]

    /// The first IPv4 address, which names the interface for IPv4 multicast.
    var firstIPv4: IPv4Address? {
        for case .v4(let address) in addresses { return address }
        return nil
    }
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

/// UDP port 5353 on IPv4 and IPv6: one socket per family, shared with any other responder on
/// the machine, joined to the mDNS group on each chosen interface.
///
/// The receive path is the hot one on a busy link, so it is as short as it can be: a thread of
/// its own waits in `poll`, reads up to 32 datagrams per system call (`recvmmsg`) into buffers
/// allocated once, and hands the whole turn to the bounded ``DatagramInbox`` under one lock.
/// When a turn was busy it pauses 2 ms before the next, so that a flood is read in large
/// batches instead of one wake-up per datagram. Sends go straight to the socket (they are rare:
/// the engine rate-limits them).
public final class MulticastTransport: Sendable {
    public static let groupV4 = "224.0.0.251"
    public static let groupV6 = "ff02::fb"

    private struct State {
        var sockets: [IPFamily: MulticastSocket]
        var closed = false
        var failedSends = 0
        var lastSendFailure: String?
        /// Resumed when the receive thread has closed the sockets.
        var onStopped: CheckedContinuation<Void, Never>?
        var stopped = false
    }
    /// The sockets, and the lock that keeps sends, option changes and close from interleaving.
    private let state: Locked<State>
    /// A pipe written to when the transport closes, to wake the receive thread from `poll`.
    /// Both ends stay open until the thread has stopped (a write to a pipe nobody reads would
    /// raise SIGPIPE).
    private let wakeRead: Int32
    private let wakeWrite: Int32
    /// Incoming datagrams, bounded, in arrival order.
    public let inbox: DatagramInbox
    let logger: Logger
    private let receiveCounters = Locked((truncated: 0, malformed: 0, errors: 0, kernelDropped: 0))

    /// Datagrams per `recvmmsg` call.
    static let datagramsPerRead = 32
    /// A turn that read at least this many datagrams was busy: the thread pauses before the
    /// next, for as long as it takes the link to bring `datagramsPerPause` more at the rate
    /// just seen (well within the socket buffer), but never longer than `longestPause`.
    static let busyTurn = 16
    static let datagramsPerPause = 96.0
    static let longestPause = 4_000_000  // ns

    private init(sockets: [IPFamily: MulticastSocket], wake: (read: Int32, write: Int32), inbox: DatagramInbox, logger: Logger) {
        self.state = Locked(State(sockets: sockets))
        self.wakeRead = wake.read
        self.wakeWrite = wake.write
        self.inbox = inbox
        self.logger = logger
    }

    /// Datagrams the sockets failed to send so far, and why the last one failed.
    package var sendFailures: Int { state.withLockedValue { $0.failedSends } }
    package var lastSendFailure: String? { state.withLockedValue { $0.lastSendFailure } }

    /// Datagrams read but thrown away before decoding: longer than 9000 bytes (cut short), or
    /// without the packet information that names their interface; and failed reads.
    /// How long the receive thread pauses (ns) after a turn that read `count` datagrams, which
    /// arrived over `nanoseconds` since the turn before: not at all after a quiet turn (a lone
    /// query is answered at once), else long enough for about `datagramsPerPause` more at that
    /// rate, at most `longestPause`.
    static func pause(afterTurnOf count: Int, tookNanoseconds nanoseconds: Int) -> Int {
        guard count >= busyTurn, nanoseconds > 0 else { return 0 }
        let perNanosecond = Double(count) / Double(nanoseconds)
        return min(longestPause, Int(datagramsPerPause / perNanosecond))
    }

    /// `kernelDropped`: datagrams the kernel dropped because a socket's buffer was full.
    package var receiveDrops: (truncated: Int, malformed: Int, errors: Int, kernelDropped: Int) { receiveCounters.withLockedValue { $0 } }

    /// Whether another program on this machine already has UDP port 5353 (avahi-daemon,
    /// mDNSResponder, python-zeroconf): a plain bind without SO_REUSEADDR fails then.
    public static func portInUse(_ port: UInt16 = DNSWire.SocketAddress.mdnsPort) -> Bool {
        udpPortInUse(port)
    }

    /// Opens the sockets and starts the receive thread. Fails with a clear error when port
    /// 5353 cannot be bound.
    public static func open(
        families: Set<IPFamily> = [.v4, .v6], logger: Logger = Logger(label: "nearby.mdns", factory: { _ in SwiftLogNoOpLogHandler() })
    ) async throws -> MulticastTransport {
        var sockets: [IPFamily: MulticastSocket] = [:]
        func closeAll() { for socket in sockets.values { socket.close() } }
        for family in families.sorted(by: { $0 == .v4 && $1 == .v6 }) {
            do {
                sockets[family] = try MulticastSocket.open(family, port: DNSWire.SocketAddress.mdnsPort)
            } catch {
                if family == .v6 && !sockets.isEmpty {
                    logger.notice("no IPv6 mDNS: \(error)")  // no IPv6 on this host
                    continue
                }
                closeAll()
                throw TransportError("cannot open UDP port 5353 for \(family == .v4 ? "IPv4" : "IPv6") mDNS: \(error)")
            }
        }
        var pipeEnds: [Int32] = [-1, -1]
        guard pipe(&pipeEnds) == 0 else {
            closeAll()
            throw TransportError("cannot start the mDNS receive thread: \(SocketError("pipe"))")
        }
        let opened = sockets
        let transport = MulticastTransport(sockets: sockets, wake: (pipeEnds[0], pipeEnds[1]), inbox: DatagramInbox(), logger: logger)
        do {
            try startThread(name: "nearby-mdns-rx") { transport.receiveLoop(sockets: Array(opened.values)) }
        } catch {
            closeAll()
            closeDescriptor(pipeEnds[0])
            closeDescriptor(pipeEnds[1])
            throw TransportError("cannot start the mDNS receive thread: \(error)")
        }
        return transport
    }

    /// The receive thread's loop: wait, read everything waiting on both sockets, hand it over
    /// in one piece; stop when the wake pipe says so, and close the sockets on the way out.
    private func receiveLoop(sockets: [MulticastSocket]) {
        let reader = DatagramReader(count: Self.datagramsPerRead)
        var descriptors = sockets.map { pollfd(fd: $0.descriptor, events: Int16(POLLIN), revents: 0) }
        descriptors.append(pollfd(fd: wakeRead, events: Int16(POLLIN), revents: 0))
        var batch: [ReceivedDatagram] = []
        var errors = 0
        var failure: String?
        var lastTurn = monotonicNanoseconds()
        loop: while true {
            for index in descriptors.indices { descriptors[index].revents = 0 }
            let ready = poll(&descriptors, nfds_t(descriptors.count), -1)
            if ready < 0 {
                if errno == EINTR { continue }
                errors += 1
                failure = "poll: \(String(cString: strerror(errno)))"
                break loop
            }
            if descriptors[descriptors.count - 1].revents != 0 { break loop }
            for (index, socket) in sockets.enumerated() where descriptors[index].revents != 0 {
                if descriptors[index].revents & Int16(POLLNVAL) != 0 {
                    failure = "a socket was closed under the receive thread"
                    break loop
                }
                // Everything waiting, up to a bounded number of reads per turn. A failed read
                // (a pending ICMP error, say) clears the error; it is counted.
                for _ in 0..<16 {
                    let read = reader.read(socket, into: &batch)
                    if read < 0 { errors += 1 }
                    if read != reader.count { break }
                }
            }
            let turn = batch.count
            inbox.push(taking: &batch)
            if batch.capacity < 256 { batch.reserveCapacity(256) }
            receiveCounters.withLockedValue { $0 = (reader.truncated, reader.malformed, errors, reader.kernelDropped) }
            let now = monotonicNanoseconds()
            let pause = Self.pause(afterTurnOf: turn, tookNanoseconds: now - lastTurn)
            if pause > 0 {
                var interval = timespec(tv_sec: 0, tv_nsec: pause)
                _ = nanosleep(&interval, nil)
            }
            lastTurn = now
        }
        receiveCounters.withLockedValue { $0 = (reader.truncated, reader.malformed, errors, reader.kernelDropped) }
        if let failure {
            // Nothing more will be received: say so loudly (sends fail from now on, counted).
            logger.error("mDNS receiving stopped: \(failure)")
        }
        state.withLockedValue { state in
            for socket in state.sockets.values { socket.close() }
            state.sockets = [:]
            state.stopped = true
            state.onStopped?.resume()
            state.onStopped = nil
        }
    }

    /// Joins the mDNS group on `interface` for each family it has addresses of.
    public func join(_ info: InterfaceInfo) {
        membership(join: true, info)
    }

    /// Leaves the mDNS group on an interface that went away (errors ignored: it may be gone).
    public func leave(_ info: InterfaceInfo) {
        membership(join: false, info)
    }

    private func membership(join: Bool, _ info: InterfaceInfo) {
        let failures: [String] = state.withLockedValue { state in
            guard !state.closed else { return [] }
            var failures: [String] = []
            for (family, socket) in state.sockets where info.addresses.contains(where: { $0.isIPv6 == (family == .v6) }) {
                do {
                    try socket.membership(join: join, interfaceIndex: info.interface.index, address: info.firstIPv4)
                } catch let error as SocketError where join && error.code != EADDRINUSE {
                    failures.append("cannot join the mDNS group \(family == .v4 ? Self.groupV4 : Self.groupV6) on \(info.interface.name): \(error)")
                } catch {
                    // Already a member, or leaving an interface that is gone: nothing to do.
                }
            }
            return failures
        }
        for failure in failures { logger.warning("\(failure)") }
    }

    /// Sends `bytes` out of `interface`: to the group of `family`, or to one address. A send
    /// that fails is counted (see ``sendFailures``); the engine logs the count.
    public func send(_ bytes: [UInt8], to destination: Destination, on interface: InterfaceInfo) {
        let target: DNSWire.SocketAddress = switch destination {
        case .multicast(.v4): DNSWire.SocketAddress(.v4(MulticastSocket.groupV4), port: DNSWire.SocketAddress.mdnsPort)
        case .multicast(.v6):
            DNSWire.SocketAddress(.v6(IPv6Address(bytes: MulticastSocket.groupV6) ?? IPv6Address(high: 0, low: 0), scope: interface.interface.index),
                                  port: DNSWire.SocketAddress.mdnsPort)
        case .unicast(let address): address
        }
        let family: IPFamily = target.address.isIPv6 ? .v6 : .v4
        state.withLockedValue { state in
            guard !state.closed, let socket = state.sockets[family] else {
                state.failedSends += 1
                state.lastSendFailure = "to \(target): the transport is closed or has no \(family == .v4 ? "IPv4" : "IPv6") socket"
                return
            }
            do {
                try socket.send(bytes, to: target, interfaceIndex: interface.interface.index, interfaceAddress: interface.firstIPv4)
            } catch {
                state.failedSends += 1
                state.lastSendFailure = "to \(target) on \(interface.interface.name): \(error)"
            }
        }
    }

    /// Stops the receive thread and closes the sockets.
    public func close() async {
        let wasOpen: Bool = state.withLockedValue { state in
            defer { state.closed = true }
            return !state.closed
        }
        inbox.close()
        guard wasOpen else { return }
        var byte: UInt8 = 1
        _ = write(wakeWrite, &byte, 1)
        await withCheckedContinuation { continuation in
            state.withLockedValue { state in
                if state.stopped { continuation.resume() } else { state.onStopped = continuation }
            }
        }
        closeDescriptor(wakeRead)
        closeDescriptor(wakeWrite)
    }

    /// The machine's multicast-capable interfaces that are up, with their addresses, optionally
    /// only those named. Unnamed, only LANs count: not loopback, not a container bridge or a
    /// hypervisor's link (unless `NEARBY_VIRTUAL_LINKS` names it), not a point-to-point tunnel.
    public static func interfaces(named names: [String]? = nil) -> [InterfaceInfo] {
        var byIndex: [Int: InterfaceInfo] = [:]
        // A link that is down keeps its addresses; only interfaces up and running count.
        for entry in NetworkPlatform.interfaceAddresses() where entry.supportsMulticast && entry.isRunning {
            if let names, !names.contains(entry.name) { continue }
            if names == nil && !entry.carriesDiscovery { continue }
            guard let address = IPAddress(bytes: entry.address, linkScope: entry.index) else { continue }
            var info = byIndex[entry.index] ?? InterfaceInfo(interface: NetworkInterface(index: entry.index, name: entry.name), addresses: [], networks: [])
            if !info.addresses.contains(address) {
                info.addresses.append(address)
                info.networks.append(IPNetwork(address: address, prefixLength: entry.prefixLength))
            }
            byIndex[entry.index] = info
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

/// Whether binding UDP `port` on all IPv4 addresses, without SO_REUSEADDR, fails because the
/// port is taken.
private func udpPortInUse(_ port: UInt16) -> Bool {
    #if canImport(Glibc)
    let descriptor = Glibc.socket(AF_INET, Int32(SOCK_DGRAM.rawValue), 0)
    #else
    let descriptor = Darwin.socket(AF_INET, SOCK_DGRAM, 0)
    #endif
    guard descriptor >= 0 else { return false }
    defer { closeDescriptor(descriptor) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = port.bigEndian
    address.sin_addr.s_addr = INADDR_ANY
    let result = withUnsafePointer(to: &address) { pointer in
        pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
    }
    return result != 0 && errno == EADDRINUSE
}

func closeDescriptor(_ descriptor: Int32) {
    #if canImport(Glibc)
    _ = Glibc.close(descriptor)
    #else
    _ = Darwin.close(descriptor)
    #endif
}

/// The monotonic clock in nanoseconds, for the receive thread's pacing.
func monotonicNanoseconds() -> Int {
    var now = timespec()
    clock_gettime(CLOCK_MONOTONIC, &now)
    return now.tv_sec * 1_000_000_000 + now.tv_nsec
}
