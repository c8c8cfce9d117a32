#define _GNU_SOURCE 1
#include "nearby_files.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>

int nearby_start_write_back(int fd, int64_t offset, int64_t count) {
#ifdef SYNC_FILE_RANGE_WRITE
    return sync_file_range(fd, (off_t)offset, (off_t)count, SYNC_FILE_RANGE_WRITE);
#else
    (void)fd; (void)offset; (void)count;
    return -1;
#endif
}

int nearby_rename_noreplace(const char *from, const char *to) {
#ifdef RENAME_NOREPLACE
    return renameat2(AT_FDCWD, from, AT_FDCWD, to, RENAME_NOREPLACE);
#else
    (void)from; (void)to;
    errno = ENOSYS;
    return -1;
#endif
}
