#include "nearby_dnssd.h"

#include <dlfcn.h>
#include <stdlib.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <errno.h>
#include <sys/stat.h>

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

// ---- Is avahi-daemon there? (libdbus through dlopen, like dns_sd itself)

typedef struct nearby_dbus_error { void *fields[8]; } nearby_dbus_error;  // room for DBusError
static struct {
    int loaded;
    void *(*open_private)(const char *, nearby_dbus_error *);
    unsigned (*bus_register)(void *, nearby_dbus_error *);
    unsigned (*name_has_owner)(void *, const char *, nearby_dbus_error *);
    void (*close)(void *);
    void (*unref)(void *);
    void (*error_init)(nearby_dbus_error *);
    void (*error_free)(nearby_dbus_error *);
    unsigned (*error_is_set)(const nearby_dbus_error *);
    unsigned (*get_is_connected)(void *);
} dbus;
static void *connection;

static int load_dbus(void) {
    if (dbus.loaded) return dbus.loaded > 0;
    dbus.loaded = -1;
    void *library = dlopen("libdbus-1.so.3", RTLD_NOW | RTLD_LOCAL);
    if (library == NULL) return 0;
    *(void **)&dbus.open_private = dlsym(library, "dbus_connection_open_private");
    *(void **)&dbus.bus_register = dlsym(library, "dbus_bus_register");
    *(void **)&dbus.name_has_owner = dlsym(library, "dbus_bus_name_has_owner");
    *(void **)&dbus.close = dlsym(library, "dbus_connection_close");
    *(void **)&dbus.unref = dlsym(library, "dbus_connection_unref");
    *(void **)&dbus.error_init = dlsym(library, "dbus_error_init");
    *(void **)&dbus.error_free = dlsym(library, "dbus_error_free");
    *(void **)&dbus.error_is_set = dlsym(library, "dbus_error_is_set");
    *(void **)&dbus.get_is_connected = dlsym(library, "dbus_connection_get_is_connected");
    if (!dbus.open_private || !dbus.bus_register || !dbus.name_has_owner || !dbus.close || !dbus.unref || !dbus.error_init
        || !dbus.error_free || !dbus.error_is_set || !dbus.get_is_connected) return 0;
    dbus.loaded = 1;
    return 1;
}

static void drop_connection(void) {
    if (connection != NULL) {
        dbus.close(connection);
        dbus.unref(connection);
        connection = NULL;
    }
}

int nearby_dnssd_bus_absent(void) {
    const char *address = getenv("DBUS_SYSTEM_BUS_ADDRESS");
    if (address == NULL || *address == 0) address = "unix:path=/var/run/dbus/system_bus_socket";
    static const char prefix[] = "unix:path=";
    if (strncmp(address, prefix, sizeof prefix - 1) != 0) return 0;
    const char *path = address + sizeof prefix - 1;
    // One address, with nothing after the path, and no escapes (%xx) to undo: else libdbus may
    // try others, or mean another path.
    if (strpbrk(path, ",;%") != NULL) return 0;
    struct stat info;
    return stat(path, &info) != 0 && errno == ENOENT ? 1 : 0;
}

int nearby_dnssd_daemon_present(void) {
    if (!load_dbus()) return -1;
    if (connection != NULL && !dbus.get_is_connected(connection)) drop_connection();
    nearby_dbus_error error;
    if (connection == NULL) {
        // Where avahi's library connects: DBUS_SYSTEM_BUS_ADDRESS, else the standard socket.
        const char *address = getenv("DBUS_SYSTEM_BUS_ADDRESS");
        if (address == NULL || *address == 0) address = "unix:path=/var/run/dbus/system_bus_socket";
        dbus.error_init(&error);
        connection = dbus.open_private(address, &error);
        if (dbus.error_is_set(&error)) dbus.error_free(&error);
        if (connection == NULL) return -1;
        dbus.error_init(&error);
        if (!dbus.bus_register(connection, &error)) {
            if (dbus.error_is_set(&error)) dbus.error_free(&error);
            drop_connection();
            return -1;
        }
    }
    dbus.error_init(&error);
    unsigned owned = dbus.name_has_owner(connection, "org.freedesktop.Avahi", &error);
    if (dbus.error_is_set(&error)) {
        dbus.error_free(&error);
        drop_connection();
        return -1;
    }
    return owned ? 1 : 0;
}
