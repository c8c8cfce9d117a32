// Giving back the pages a long-running command needed only to start.
#ifndef NEARBY_MEMORY_H
#define NEARBY_MEMORY_H

#include <stdint.h>

/// What one release of start-up pages did.
typedef struct {
    /// Bytes of mapped segments the kernel was asked to reclaim.
    int64_t advised;
    /// Loaded objects (the executable and its libraries) whose segments were visited.
    int objects;
    /// 0, or the errno of the first madvise that failed (EINVAL: a kernel before 5.4).
    int error;
    /// 1 when malloc gave free heap memory back to the system (malloc_trim), else 0.
    int trimmed;
} nearby_release_result;

/// Asks the kernel to reclaim the pages of every loaded object's segments (code, symbol and
/// relocation tables, read-only data) with MADV_PAGEOUT. That is not destructive: clean file
/// pages are dropped and read again from the file when next used; pages written since they
/// were mapped (relocated data) cannot be reclaimed without swap and simply stay; pages other
/// processes also map are left alone by the kernel. A process that is idle after starting up
/// holds mostly code and tables it used once; this gives them back. Then the heap's free
/// memory goes back to the system too (glibc's malloc_trim): what a burst of connections (or
/// strangers' TLS handshakes) allocated and freed would otherwise stay in malloc's arenas.
nearby_release_result nearby_release_mapped_pages(void);

/// For a process that moves bulk bytes (nearby send, receive, pipe): buffers up to 1 MiB come
/// from the heap rather than from fresh mappings, and up to 16 MiB of freed heap stays mapped,
/// instead of being handed back to the kernel and faulted in again (zeroed) for the next
/// buffer, which was half of a sender's system time. Returns 0, or -1 where malloc has no
/// such settings.
int nearby_tune_malloc_for_bulk(void);

#endif
