// The part of the mDNS receive path that needs the C library's macros and its GNU
// extensions (recvmmsg, struct in6_pktinfo, CMSG_*), which Swift's Glibc module does not
// import. Everything else about the sockets is Swift (Sources/MulticastDNS). The file calls
// are in nearby_files.h, the memory calls in nearby_memory.h.
#ifndef NEARBY_SOCKET_H
#define NEARBY_SOCKET_H

#include <stddef.h>
#include <stdint.h>

/// What the kernel said about one received datagram.
typedef struct {
    /// Bytes in the datagram's slot; -1 when it was longer than the slot (cut short).
    int length;
    /// The interface it arrived on (0 when the kernel gave no packet information).
    int interface_index;
    /// 1 when it was sent to a multicast group, 0 when to this host alone.
    int to_group;
    /// 4 or 6: the family of `source` (0 when the source address was not IP).
    int source_family;
    /// The sender's address in network byte order (4 or 16 bytes used) and port.
    uint8_t source[16];
    uint16_t source_port;
    /// The kernel's count of datagrams this socket dropped so far because its buffer was full
    /// (SO_RXQ_OVFL, when enabled and the system has it); -1 when the datagram did not say.
    int64_t dropped_so_far;
} nearby_datagram;

/// Asks the kernel to report, with each datagram, how many it dropped for want of buffer
/// space (SO_RXQ_OVFL). Returns 0, or -1 where the system has no such option.
int nearby_enable_drop_count(int fd);

/// Reads up to `count` datagrams that are waiting on the non-blocking socket `fd`, the n-th
/// into `slots + n * slot_size`, in one system call where the system has one (recvmmsg).
/// Returns how many were read (0 when none was waiting), or -1 with errno set.
int nearby_receive_datagrams(int fd, uint8_t *slots, size_t slot_size, nearby_datagram *datagrams, int count);

#endif
