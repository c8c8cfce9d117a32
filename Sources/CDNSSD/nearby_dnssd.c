#include "nearby_dnssd.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

struct nearby_dnssd_api nearby_dnssd;

static pthread_once_t once = PTHREAD_ONCE_INIT;
static int loaded = -1;
static char failure[512];

// The names the library goes by: the versioned one that the runtime package installs, then the
// development symlink.
static const char *const library_names[] = {"libdns_sd.so.1", "libdns_sd.so"};

static void *symbol(void *library, const char *name) {
    void *found = dlsym(library, name);
    if (!found && failure[0] == 0) {
        snprintf(failure, sizeof failure, "%s has no %s", "libdns_sd.so.1", name);
    }
    return found;
}

static void load(void) {
    void *library = NULL;
    for (size_t i = 0; i < sizeof library_names / sizeof library_names[0] && !library; i++) {
        // RTLD_LOCAL: the library's own dependencies stay out of the global namespace.
        library = dlopen(library_names[i], RTLD_NOW | RTLD_LOCAL);
    }
    if (!library) {
        const char *error = dlerror();
        snprintf(failure, sizeof failure, "%s", error ? error : "libdns_sd.so.1: cannot open shared object file");
        return;
    }
    struct nearby_dnssd_api api;
    memset(&api, 0, sizeof api);
    // dlsym returns void *; POSIX guarantees it converts to a function pointer.
    *(void **)&api.registerService = symbol(library, "DNSServiceRegister");
    *(void **)&api.browse = symbol(library, "DNSServiceBrowse");
    *(void **)&api.resolve = symbol(library, "DNSServiceResolve");
    *(void **)&api.queryRecord = symbol(library, "DNSServiceQueryRecord");
    *(void **)&api.updateRecord = symbol(library, "DNSServiceUpdateRecord");
    *(void **)&api.processResult = symbol(library, "DNSServiceProcessResult");
    *(void **)&api.refSockFD = symbol(library, "DNSServiceRefSockFD");
    *(void **)&api.refDeallocate = symbol(library, "DNSServiceRefDeallocate");
    if (failure[0] != 0) {
        dlclose(library);
        return;
    }
    // Published once, before `loaded`; pthread_once orders it for every later caller.
    nearby_dnssd = api;
    loaded = 0;
}

int nearby_dnssd_load(char *reason, size_t size) {
    pthread_once(&once, load);
    if (loaded != 0 && reason && size > 0) snprintf(reason, size, "%s", failure);
    return loaded;
}
