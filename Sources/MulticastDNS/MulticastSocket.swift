import CNearbySocket
import DNSWire

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A system call that failed: which one, and what errno said.
struct SocketError: Error, CustomStringConvertible {
    var call: String
    var code: Int32

    init(_ call: String, code: Int32 = errno) {
        self.call = call
        self.code = code
    }

    var description: String { "\(call): \(String(cString: strerror(code)))" }
}

/// One non-blocking UDP socket on port 5353 for one address family, shared with any other
/// responder on the machine (SO_REUSEADDR, SO_REUSEPORT), that reports each datagram's
/// interface and destination (IP_PKTINFO / IPV6_RECVPKTINFO) and sends with a hop limit of
/// 255 (RFC 6762 §11). A plain descriptor: the transport decides who may use it when.
struct MulticastSocket {
    let descriptor: Int32
    let family: IPFamily

    static let groupV4 = IPv4Address(224, 0, 0, 251)
    static let groupV6: [UInt8] = [0xFF, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFB]

    /// Opens and binds the socket.
    static func open(_ family: IPFamily, port: UInt16) throws(SocketError) -> MulticastSocket {
        #if canImport(Glibc)
        let descriptor = socket(family == .v4 ? AF_INET : AF_INET6, Int32(SOCK_DGRAM.rawValue), 0)
        #else
        let descriptor = socket(family == .v4 ? AF_INET : AF_INET6, SOCK_DGRAM, 0)
        #endif
        guard descriptor >= 0 else { throw SocketError("socket") }
        let socket = MulticastSocket(descriptor: descriptor, family: family)
        do {
            let flags = fcntl(descriptor, F_GETFL)
            guard flags >= 0, fcntl(descriptor, F_SETFL, flags | O_NONBLOCK) == 0 else { throw SocketError("fcntl(O_NONBLOCK)") }
            _ = fcntl(descriptor, F_SETFD, FD_CLOEXEC)
            for option in Self.sharedOptions + (family == .v4 ? Self.v4Options : Self.v6Options) {
                try socket.set(option.level, option.name, option.value, option.label)
            }
            // Room for a burst while the receive thread pauses: as much as the system allows
            // without privileges (it caps the request at net.core.rmem_max). Best effort.
            try? socket.set(SOL_SOCKET, SO_RCVBUF, Int32(1 << 20), "SO_RCVBUF")
            // Datagrams the kernel drops for want of that room are counted, not silent.
            _ = nearby_enable_drop_count(descriptor)
            switch family {
            case .v4:
                var address = sockaddr_in()
                address.sin_family = sa_family_t(AF_INET)
                address.sin_port = port.bigEndian
                try socket.bind(&address)
            case .v6:
                var address = sockaddr_in6()
                address.sin6_family = sa_family_t(AF_INET6)
                address.sin6_port = port.bigEndian
                try socket.bind(&address)
            }
        } catch let error as SocketError {
            socket.close()
            throw error
        } catch {
            socket.close()
            throw SocketError("socket setup", code: EINVAL)
        }
        return socket
    }

    private typealias Option = (level: Int32, name: Int32, value: Int32, label: String)
    /// Shared with other responders on the machine (RFC 6762 §15.1).
    private static let sharedOptions: [Option] = [
        (SOL_SOCKET, SO_REUSEADDR, 1, "SO_REUSEADDR"), (SOL_SOCKET, SO_REUSEPORT, 1, "SO_REUSEPORT"),
    ]
    /// Each datagram's interface and destination; hop limit 255 on everything sent (§11).
    #if canImport(Glibc)
    private static let v4Options: [Option] = [
        (Int32(IPPROTO_IP), IP_PKTINFO, 1, "IP_PKTINFO"), (Int32(IPPROTO_IP), IP_TTL, 255, "IP_TTL"),
        (Int32(IPPROTO_IP), IP_MULTICAST_TTL, 255, "IP_MULTICAST_TTL"),
    ]
    #else
    private static let v4Options: [Option] = [
        (Int32(IPPROTO_IP), IP_RECVPKTINFO, 1, "IP_RECVPKTINFO"), (Int32(IPPROTO_IP), IP_TTL, 255, "IP_TTL"),
        (Int32(IPPROTO_IP), IP_MULTICAST_TTL, 255, "IP_MULTICAST_TTL"),
    ]
    #endif
    private static let v6Options: [Option] = [
        (Int32(IPPROTO_IPV6), IPV6_V6ONLY, 1, "IPV6_V6ONLY"), (Int32(IPPROTO_IPV6), IPV6_RECVPKTINFO, 1, "IPV6_RECVPKTINFO"),
        (Int32(IPPROTO_IPV6), IPV6_UNICAST_HOPS, 255, "IPV6_UNICAST_HOPS"),
        (Int32(IPPROTO_IPV6), IPV6_MULTICAST_HOPS, 255, "IPV6_MULTICAST_HOPS"),
    ]

    private func set<Value>(_ level: Int32, _ name: Int32, _ value: Value, _ label: String) throws(SocketError) {
        let result = withUnsafeBytes(of: value) { setsockopt(descriptor, level, name, $0.baseAddress, socklen_t($0.count)) }
        guard result == 0 else { throw SocketError("setsockopt(\(label))") }
    }

    private func bind<Address>(_ address: inout Address) throws(SocketError) {
        let result = withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                #if canImport(Glibc)
                Glibc.bind(descriptor, $0, socklen_t(MemoryLayout<Address>.size))
                #else
                Darwin.bind(descriptor, $0, socklen_t(MemoryLayout<Address>.size))
                #endif
            }
        }
        guard result == 0 else { throw SocketError("bind to port 5353") }
    }

    /// Joins (or leaves) the mDNS group on the interface with this index; IPv4 also names the
    /// interface by one of its addresses, for systems that want that.
    func membership(join: Bool, interfaceIndex: Int, address: IPv4Address?) throws(SocketError) {
        switch family {
        case .v4:
            #if canImport(Glibc)
            var request = ip_mreqn()
            request.imr_multiaddr.s_addr = Self.groupV4.value.bigEndian
            request.imr_address.s_addr = (address?.value ?? 0).bigEndian
            request.imr_ifindex = Int32(truncatingIfNeeded: interfaceIndex)
            #else
            var request = ip_mreq()
            request.imr_multiaddr.s_addr = Self.groupV4.value.bigEndian
            request.imr_interface.s_addr = (address?.value ?? 0).bigEndian
            #endif
            try set(Int32(IPPROTO_IP), join ? IP_ADD_MEMBERSHIP : IP_DROP_MEMBERSHIP, request, join ? "IP_ADD_MEMBERSHIP" : "IP_DROP_MEMBERSHIP")
        case .v6:
            var request = ipv6_mreq()
            withUnsafeMutableBytes(of: &request.ipv6mr_multiaddr) { target in
                for (index, byte) in Self.groupV6.enumerated() { target[index] = byte }
            }
            request.ipv6mr_interface = numericCast(interfaceIndex)
            try set(Int32(IPPROTO_IPV6), join ? IPV6_JOIN_GROUP : IPV6_LEAVE_GROUP, request, join ? "IPV6_JOIN_GROUP" : "IPV6_LEAVE_GROUP")
        }
    }

    /// Sends one datagram; multicast leaves through the interface given (by index, and for
    /// IPv4 by its address). The caller keeps two sends on one socket from interleaving.
    func send(_ bytes: [UInt8], to destination: DNSWire.SocketAddress, interfaceIndex: Int, interfaceAddress: IPv4Address?) throws(SocketError) {
        switch destination.address {
        case .v4(let address):
            if address.value >> 28 == 0xE {
                var interface = in_addr()
                interface.s_addr = (interfaceAddress?.value ?? 0).bigEndian
                try set(Int32(IPPROTO_IP), IP_MULTICAST_IF, interface, "IP_MULTICAST_IF")
            }
            var target = sockaddr_in()
            target.sin_family = sa_family_t(AF_INET)
            target.sin_port = destination.port.bigEndian
            target.sin_addr.s_addr = address.value.bigEndian
            try sendTo(bytes, &target)
        case .v6(let address, let scope):
            let addressBytes = address.bytes
            if addressBytes.first == 0xFF {
                try set(Int32(IPPROTO_IPV6), IPV6_MULTICAST_IF, UInt32(truncatingIfNeeded: interfaceIndex), "IPV6_MULTICAST_IF")
            }
            var target = sockaddr_in6()
            target.sin6_family = sa_family_t(AF_INET6)
            target.sin6_port = destination.port.bigEndian
            target.sin6_scope_id = UInt32(truncatingIfNeeded: scope ?? (addressBytes.first == 0xFF ? interfaceIndex : 0))
            withUnsafeMutableBytes(of: &target.sin6_addr) { raw in
                for (index, byte) in addressBytes.enumerated() { raw[index] = byte }
            }
            try sendTo(bytes, &target)
        }
    }

    private func sendTo<Address>(_ bytes: [UInt8], _ target: inout Address) throws(SocketError) {
        let sent = bytes.withUnsafeBytes { payload in
            withUnsafePointer(to: &target) { pointer in
                pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    sendto(descriptor, payload.baseAddress, payload.count, 0, $0, socklen_t(MemoryLayout<Address>.size))
                }
            }
        }
        guard sent == bytes.count else { throw SocketError("sendto") }
    }

    func close() {
        closeDescriptor(descriptor)
    }
}

/// Reads many datagrams per system call (recvmmsg on Linux, recvmsg elsewhere; the C part is
/// in CNearbySocket) into slots allocated once, and turns each into a ``ReceivedDatagram``: no
/// allocation per datagram but its bytes. Used by one thread only.
final class DatagramReader {
    /// mDNS datagrams may be this large (RFC 6762 §17); a smaller slot would truncate them.
    static let slotSize = 9000
    let count: Int
    private let slots: UnsafeMutableBufferPointer<UInt8>
    private let infos: UnsafeMutableBufferPointer<nearby_datagram>

    /// Datagrams longer than a slot (cut short by the kernel, so dropped), and those without
    /// the packet information that names their interface or with a source that is not IP.
    private(set) var truncated = 0
    private(set) var malformed = 0
    /// Datagrams the kernel dropped because a socket's buffer was full, per socket (the
    /// kernel's running count, as the latest datagram reported it).
    private(set) var kernelDrops: [Int32: Int64] = [:]
    var kernelDropped: Int { Int(kernelDrops.values.reduce(0, +)) }

    init(count: Int) {
        self.count = count
        slots = .allocate(capacity: count * Self.slotSize)
        infos = .allocate(capacity: count)
    }

    deinit {
        slots.deallocate()
        infos.deallocate()
    }

    /// Reads what is waiting on `socket`, up to `count` datagrams, and appends it to `batch`.
    /// Returns how many datagrams the kernel handed over: 0 when none was waiting, -1 when
    /// the read failed.
    func read(_ socket: MulticastSocket, into batch: inout [ReceivedDatagram]) -> Int {
        guard let slotBase = slots.baseAddress, let infoBase = infos.baseAddress else { return -1 }
        let received = Int(nearby_receive_datagrams(socket.descriptor, slotBase, Self.slotSize, infoBase, Int32(count)))
        guard received > 0 else { return received }
        for index in 0..<min(received, count) {
            let info = infos[index]
            if info.dropped_so_far >= 0 { kernelDrops[socket.descriptor] = info.dropped_so_far }
            guard info.length >= 0 else {
                truncated += 1
                continue
            }
            guard info.interface_index > 0, let source = Self.source(info) else {
                malformed += 1
                continue
            }
            let bytes = [UInt8](UnsafeBufferPointer(start: slotBase + index * Self.slotSize, count: min(Int(info.length), Self.slotSize)))
            batch.append(
                ReceivedDatagram(bytes: bytes, source: source, interfaceIndex: Int(info.interface_index), family: socket.family, toGroup: info.to_group != 0))
        }
        return received
    }

    /// The sender; link-local IPv6 addresses get the interface as their scope.
    static func source(_ info: nearby_datagram) -> DNSWire.SocketAddress? {
        let length = switch info.source_family {
        case 4: 4
        case 6: 16
        default: 0
        }
        // Read in place: no array per datagram.
        let address = withUnsafeBytes(of: info.source) { IPAddress(bytes: $0.prefix(length), linkScope: Int(info.interface_index)) }
        return address.map { DNSWire.SocketAddress($0, port: info.source_port) }
    }
}
