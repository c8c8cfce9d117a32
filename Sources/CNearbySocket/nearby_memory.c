#define _GNU_SOURCE 1
#include "nearby_memory.h"

#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#if defined(__linux__)
// Linux only: the loaded objects (dl_iterate_phdr, ELF program headers) and glibc's malloc_trim.
// Elsewhere nearby_release_mapped_pages releases nothing and says so (objects = 0).
#include <link.h>
#include <malloc.h>

#ifndef MADV_PAGEOUT
#define MADV_PAGEOUT 21
#endif

static int release_object(struct dl_phdr_info *info, size_t size, void *context) {
    (void)size;
    nearby_release_result *result = context;
    // The vDSO is the kernel's own page, not a file.
    if (info->dlpi_name != NULL && strstr(info->dlpi_name, "linux-vdso") != NULL) return 0;
    const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    result->objects += 1;
    for (int index = 0; index < info->dlpi_phnum; index++) {
        const ElfW(Phdr) *segment = &info->dlpi_phdr[index];
        if (segment->p_type != PT_LOAD || segment->p_memsz == 0) continue;
        // Only the part backed by the file: what lies beyond p_filesz (.bss) is anonymous.
        uintptr_t start = (info->dlpi_addr + segment->p_vaddr) & ~(page - 1);
        uintptr_t end = (info->dlpi_addr + segment->p_vaddr + segment->p_filesz + page - 1) & ~(page - 1);
        if (end <= start) continue;
        if (madvise((void *)start, end - start, MADV_PAGEOUT) == 0) {
            result->advised += (int64_t)(end - start);
        } else if (result->error == 0) {
            result->error = errno;
        }
    }
    return 0;
}

nearby_release_result nearby_release_mapped_pages(void) {
    nearby_release_result result = {0, 0, 0, 0};
    dl_iterate_phdr(release_object, &result);
#ifdef __GLIBC__
    result.trimmed = malloc_trim(0);
#endif
    return result;
}
#else
nearby_release_result nearby_release_mapped_pages(void) {
    nearby_release_result result = {0, 0, 0, 0};
    return result;
}
#endif

#if defined(__linux__)
#include <malloc.h> // mallopt (glibc); elsewhere nearby_tune_malloc_for_bulk does nothing
#endif

int nearby_tune_malloc_for_bulk(void) {
#if defined(M_MMAP_THRESHOLD) && defined(M_TRIM_THRESHOLD)
    int ok = mallopt(M_MMAP_THRESHOLD, 1 << 20) && mallopt(M_TRIM_THRESHOLD, 16 << 20);
    return ok ? 0 : -1;
#else
    return -1;
#endif
}
