// The part of the mDNS receive path that needs the C library's macros and its GNU
// extensions (recvmmsg, struct in6_pktinfo, CMSG_*), which Swift's Glibc module does not
// import. Everything else about the sockets is Swift (Sources/MulticastDNS). Also one GNU
// file call the file transfer needs (sync_file_range).
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

/// For a process that moves bulk bytes (nearby send, receive, pipe): buffers up to 1 MiB come
/// from the heap rather than from fresh mappings, and up to 16 MiB of freed heap stays mapped,
/// instead of being handed back to the kernel and faulted in again (zeroed) for the next
/// buffer, which was half of a sender's system time. Returns 0, or -1 where malloc has no
/// such settings.
int nearby_tune_malloc_for_bulk(void);

/// Renames `from` to `to` unless `to` exists (renameat2 with RENAME_NOREPLACE, a GNU
/// extension): 0, or -1 with errno (EEXIST when `to` exists; EINVAL or ENOSYS where the file
/// system or the system cannot).
int nearby_rename_noreplace(const char *from, const char *to);

/// Starts writing a file's range to the disk without waiting (Linux's sync_file_range with
/// SYNC_FILE_RANGE_WRITE, a GNU extension). Returns 0, or -1 with errno set (or where the
/// system has no such call).
int nearby_start_write_back(int fd, int64_t offset, int64_t count);

#include "nearby_memory.h"

#endif
