#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The operating system's answers about this machine's name and network interfaces, in one
/// place: the discovery modules above ask here instead of calling C themselves.
package enum NetworkPlatform {
    /// This machine's host name as the kernel has it (`buildbox.example.com`), or nil.
    package static func hostName() -> String? {
        var buffer = [CChar](repeating: 0, count: 256)
        guard gethostname(&buffer, buffer.count) == 0 else { return nil }
        let name = String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        return name.isEmpty ? nil : name
    }

    /// This machine's host name without a domain (`buildbox` for `buildbox.example.com`), or
    /// nil when it has none.
    package static func hostLabel() -> String? {
        guard let name = hostName() else { return nil }
        let label = name.split(separator: ".").first.map(String.init) ?? ""
        return label.isEmpty ? nil : label
    }

    /// The kernel's index of the interface named `name`, or nil when there is none.
    package static func interfaceIndex(named name: String) -> Int? {
        let index = if_nametoindex(name)
        return index == 0 ? nil : Int(index)
    }

    /// The name of the interface with this index, or "" when there is none.
    package static func interfaceName(index: Int) -> String {
        guard index > 0, index <= Int(UInt32.max) else { return "" }
        var buffer = [CChar](repeating: 0, count: Int(IF_NAMESIZE) + 1)
        guard if_indextoname(UInt32(index), &buffer) != nil else { return "" }
        return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// One address of one network interface, as `getifaddrs` reports it.
    package struct InterfaceAddress: Sendable, Hashable {
        /// The interface's name (`eth0`) and the kernel's index for it.
        package var name: String
        package var index: Int
        /// The address in network byte order: 4 bytes for IPv4, 16 for IPv6.
        package var address: [UInt8]
        /// The number of leading one bits in the netmask.
        package var prefixLength: Int
        /// IFF_MULTICAST: the interface can send and receive multicast.
        package var supportsMulticast: Bool
        /// IFF_UP and IFF_RUNNING: the interface is up and its link is.
        package var isRunning: Bool
        /// Whether this is an IPv6 address.
        package var isIPv6: Bool { address.count == 16 }
    }

    /// Every IPv4 and IPv6 address of every interface, in the order the kernel lists them.
    package static func interfaceAddresses() -> [InterfaceAddress] {
        var found: [InterfaceAddress] = []
        var list: UnsafeMutablePointer<ifaddrs>?
        guard getifaddrs(&list) == 0 else { return found }
        defer { freeifaddrs(list) }
        var cursor = list
        while let entry = cursor {
            cursor = entry.pointee.ifa_next
            guard let namePointer = entry.pointee.ifa_name, let address = entry.pointee.ifa_addr else { continue }
            let name = String(cString: namePointer)
            guard let index = interfaceIndex(named: name) else { continue }
            let flags = Int32(bitPattern: UInt32(truncatingIfNeeded: entry.pointee.ifa_flags))
            guard let bytes = addressBytes(address) else { continue }
            let mask = entry.pointee.ifa_netmask.flatMap(addressBytes) ?? []
            found.append(
                InterfaceAddress(
                    name: name, index: index, address: bytes, prefixLength: mask.reduce(0) { $0 + $1.nonzeroBitCount },
                    supportsMulticast: flags & Int32(IFF_MULTICAST) != 0,
                    isRunning: flags & Int32(IFF_UP) != 0 && flags & Int32(IFF_RUNNING) != 0))
        }
        return found
    }

    /// The address bytes of an AF_INET or AF_INET6 socket address; nil for other families.
    private static func addressBytes(_ address: UnsafeMutablePointer<sockaddr>) -> [UInt8]? {
        switch Int32(address.pointee.sa_family) {
        case AF_INET:
            return address.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { pointer in
                withUnsafeBytes(of: pointer.pointee.sin_addr) { Array($0) }
            }
        case AF_INET6:
            return address.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { pointer in
                withUnsafeBytes(of: pointer.pointee.sin6_addr) { Array($0) }
            }
        default:
            return nil
        }
    }
}
