// The two GNU file calls the file transfer needs, which Swift's Glibc module does not import.
#ifndef NEARBY_FILES_H
#define NEARBY_FILES_H

#include <stdint.h>

/// Renames `from` to `to` unless `to` exists (renameat2 with RENAME_NOREPLACE, a GNU
/// extension): 0, or -1 with errno (EEXIST when `to` exists; EINVAL or ENOSYS where the file
/// system or the system cannot).
int nearby_rename_noreplace(const char *from, const char *to);

/// Starts writing a file's range to the disk without waiting (Linux's sync_file_range with
/// SYNC_FILE_RANGE_WRITE, a GNU extension). Returns 0, or -1 with errno set (or where the
/// system has no such call).
int nearby_start_write_back(int fd, int64_t offset, int64_t count);

#endif
