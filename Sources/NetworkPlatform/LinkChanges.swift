#if canImport(Glibc)
import Glibc
#endif

extension NetworkPlatform {
    /// A socket on which the kernel reports links and addresses that come, go or change
    /// (Linux: a `NETLINK_ROUTE` socket in the groups for links, IPv4 addresses and IPv6
    /// addresses; RTM_NEWLINK, RTM_DELLINK, RTM_NEWADDR, RTM_DELADDR), non-blocking. Nil where
    /// there is no such thing (another platform, or the kernel refused): callers then look
    /// at the interfaces on a timer instead.
    package static func openLinkChangeSocket() -> Int32? {
        #if canImport(Glibc)
            let descriptor = socket(AF_NETLINK, Int32(SOCK_RAW.rawValue) | Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0)
            guard descriptor >= 0 else { return nil }
            // struct sockaddr_nl: nl_family (u16), nl_pad (u16), nl_pid (u32, 0: the kernel
            // picks), nl_groups (u32): RTMGRP_LINK | RTMGRP_IPV4_IFADDR | RTMGRP_IPV6_IFADDR.
            var address = [UInt8](repeating: 0, count: 12)
            withUnsafeBytes(of: UInt16(AF_NETLINK)) { address.replaceSubrange(0..<2, with: $0) }
            withUnsafeBytes(of: UInt32(0x1 | 0x10 | 0x100)) { address.replaceSubrange(8..<12, with: $0) }
            let bound = address.withUnsafeBytes { raw -> Int32 in
                guard let base = raw.baseAddress else { return -1 }
                return bind(descriptor, base.assumingMemoryBound(to: sockaddr.self), socklen_t(raw.count))
            }
            guard bound == 0 else {
                close(descriptor)
                return nil
            }
            return descriptor
        #else
            return nil
        #endif
    }

    /// Reads every report waiting on a socket from ``openLinkChangeSocket()`` (their content
    /// does not matter: the interfaces are looked at afresh). Returns whether there was any,
    /// and false also when the socket failed for good (closed, or the kernel dropped reports:
    /// ENOBUFS counts as a report, since something changed that we missed).
    package static func drainLinkChanges(_ descriptor: Int32) -> (any: Bool, failed: Bool) {
        #if canImport(Glibc)
            var buffer = [UInt8](repeating: 0, count: 8192)
            var any = false
            while true {
                let count = buffer.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }
                if count > 0 {
                    any = true
                    continue
                }
                if count == 0 { return (any, true) }
                switch errno {
                case EINTR: continue
                case EAGAIN, EWOULDBLOCK: return (any, false)
                case ENOBUFS: any = true  // the kernel's queue overflowed: reports were lost
                default: return (any, true)
                }
            }
        #else
            return (false, true)
        #endif
    }
}
