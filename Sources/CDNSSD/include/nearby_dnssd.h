// The part of the DNS-SD C API (dns_sd.h) that SystemDNSSD uses, loaded at run time.
//
// On Linux the API comes from Avahi's compatibility library, libdns_sd.so.1 (Debian:
// libavahi-compat-libdnssd1), which pulls in libavahi-client, libdbus and more. Linking it
// would make every program that imports Nearby fail to start without it, even one that only
// uses the embedded engine. So nothing links it: nearby_dnssd_load() opens it with dlopen the
// first time the system backend is asked for, and the inline functions below call through the
// pointers it found. Their names and types are dns_sd.h's, whose ABI has been stable since the
// API was published, so SystemDNSSD's Swift reads the same against this header as against
// Apple's SDK. The declarations are static inline, so they never clash with the library's own
// exported symbols.
#ifndef NEARBY_DNSSD_H
#define NEARBY_DNSSD_H

#include <stddef.h>
#include <stdint.h>

typedef struct _DNSServiceRef_t *DNSServiceRef;
typedef struct _DNSRecordRef_t *DNSRecordRef;
typedef uint32_t DNSServiceFlags;
typedef int32_t DNSServiceErrorType;

typedef void (*DNSServiceRegisterReply)(DNSServiceRef sdRef, DNSServiceFlags flags, DNSServiceErrorType errorCode,
                                        const char *name, const char *regtype, const char *domain, void *context);
typedef void (*DNSServiceBrowseReply)(DNSServiceRef sdRef, DNSServiceFlags flags, uint32_t interfaceIndex,
                                      DNSServiceErrorType errorCode, const char *serviceName, const char *regtype,
                                      const char *replyDomain, void *context);
typedef void (*DNSServiceResolveReply)(DNSServiceRef sdRef, DNSServiceFlags flags, uint32_t interfaceIndex,
                                       DNSServiceErrorType errorCode, const char *fullname, const char *hosttarget,
                                       uint16_t port, uint16_t txtLen, const unsigned char *txtRecord, void *context);
typedef void (*DNSServiceQueryRecordReply)(DNSServiceRef sdRef, DNSServiceFlags flags, uint32_t interfaceIndex,
                                           DNSServiceErrorType errorCode, const char *fullname, uint16_t rrtype,
                                           uint16_t rrclass, uint16_t rdlen, const void *rdata, uint32_t ttl, void *context);

/// The library's entry points, filled in by nearby_dnssd_load().
struct nearby_dnssd_api {
    DNSServiceErrorType (*registerService)(DNSServiceRef *, DNSServiceFlags, uint32_t, const char *, const char *,
                                           const char *, const char *, uint16_t, uint16_t, const void *,
                                           DNSServiceRegisterReply, void *);
    DNSServiceErrorType (*browse)(DNSServiceRef *, DNSServiceFlags, uint32_t, const char *, const char *,
                                  DNSServiceBrowseReply, void *);
    DNSServiceErrorType (*resolve)(DNSServiceRef *, DNSServiceFlags, uint32_t, const char *, const char *, const char *,
                                   DNSServiceResolveReply, void *);
    DNSServiceErrorType (*queryRecord)(DNSServiceRef *, DNSServiceFlags, uint32_t, const char *, uint16_t, uint16_t,
                                       DNSServiceQueryRecordReply, void *);
    DNSServiceErrorType (*updateRecord)(DNSServiceRef, DNSRecordRef, DNSServiceFlags, uint16_t, const void *, uint32_t);
    DNSServiceErrorType (*processResult)(DNSServiceRef);
    int (*refSockFD)(DNSServiceRef);
    void (*refDeallocate)(DNSServiceRef);
};

extern struct nearby_dnssd_api nearby_dnssd;

/// Opens the library and looks up every entry point, once per process (thread-safe). Returns 0
/// when all are there; otherwise -1, with the reason (dlerror's words) copied into `reason`.
int nearby_dnssd_load(char *reason, size_t size);

/// Whether avahi-daemon holds its name on the system bus (asked through libdbus, which avahi's
/// library loads anyway, on a private connection of our own): 1 yes, 0 no, -1 cannot tell (no
/// libdbus, or no bus). One thread only (SystemDNSSD's loop): the connection is not shared.
/// Asked before dispatching: avahi's compat library can call into freed memory while it
/// dispatches the message that says the daemon is gone, so that message is never dispatched.
int nearby_dnssd_daemon_present(void);

/// 1 when there is certainly no D-Bus system bus to reach avahi-daemon through (the socket
/// named by DBUS_SYSTEM_BUS_ADDRESS, or the standard one, does not exist), 0 otherwise (it
/// exists, or the address is not a plain socket path). Costs one stat(); loads nothing, so a
/// program on a host without D-Bus (a container, a minimal install) does not load avahi's,
/// D-Bus's and systemd's libraries to learn that no daemon answers.
int nearby_dnssd_bus_absent(void);

/// Returned by the calls below when the library is not loaded: kDNSServiceErr_ServiceNotRunning.
#define NEARBY_DNSSD_NOT_LOADED (-65563)

static inline DNSServiceErrorType DNSServiceRegister(DNSServiceRef *sdRef, DNSServiceFlags flags, uint32_t interfaceIndex,
                                                     const char *name, const char *regtype, const char *domain,
                                                     const char *host, uint16_t port, uint16_t txtLen, const void *txtRecord,
                                                     DNSServiceRegisterReply callBack, void *context) {
    if (!nearby_dnssd.registerService) return NEARBY_DNSSD_NOT_LOADED;
    return nearby_dnssd.registerService(sdRef, flags, interfaceIndex, name, regtype, domain, host, port, txtLen, txtRecord,
                                        callBack, context);
}

static inline DNSServiceErrorType DNSServiceBrowse(DNSServiceRef *sdRef, DNSServiceFlags flags, uint32_t interfaceIndex,
                                                   const char *regtype, const char *domain, DNSServiceBrowseReply callBack,
                                                   void *context) {
    if (!nearby_dnssd.browse) return NEARBY_DNSSD_NOT_LOADED;
    return nearby_dnssd.browse(sdRef, flags, interfaceIndex, regtype, domain, callBack, context);
}

static inline DNSServiceErrorType DNSServiceResolve(DNSServiceRef *sdRef, DNSServiceFlags flags, uint32_t interfaceIndex,
                                                    const char *name, const char *regtype, const char *domain,
                                                    DNSServiceResolveReply callBack, void *context) {
    if (!nearby_dnssd.resolve) return NEARBY_DNSSD_NOT_LOADED;
    return nearby_dnssd.resolve(sdRef, flags, interfaceIndex, name, regtype, domain, callBack, context);
}

static inline DNSServiceErrorType DNSServiceQueryRecord(DNSServiceRef *sdRef, DNSServiceFlags flags, uint32_t interfaceIndex,
                                                        const char *fullname, uint16_t rrtype, uint16_t rrclass,
                                                        DNSServiceQueryRecordReply callBack, void *context) {
    if (!nearby_dnssd.queryRecord) return NEARBY_DNSSD_NOT_LOADED;
    return nearby_dnssd.queryRecord(sdRef, flags, interfaceIndex, fullname, rrtype, rrclass, callBack, context);
}

static inline DNSServiceErrorType DNSServiceUpdateRecord(DNSServiceRef sdRef, DNSRecordRef recordRef, DNSServiceFlags flags,
                                                         uint16_t rdlen, const void *rdata, uint32_t ttl) {
    if (!nearby_dnssd.updateRecord) return NEARBY_DNSSD_NOT_LOADED;
    return nearby_dnssd.updateRecord(sdRef, recordRef, flags, rdlen, rdata, ttl);
}

static inline DNSServiceErrorType DNSServiceProcessResult(DNSServiceRef sdRef) {
    if (!nearby_dnssd.processResult) return NEARBY_DNSSD_NOT_LOADED;
    return nearby_dnssd.processResult(sdRef);
}

static inline int DNSServiceRefSockFD(DNSServiceRef sdRef) {
    if (!nearby_dnssd.refSockFD) return -1;
    return nearby_dnssd.refSockFD(sdRef);
}

static inline void DNSServiceRefDeallocate(DNSServiceRef sdRef) {
    if (nearby_dnssd.refDeallocate) nearby_dnssd.refDeallocate(sdRef);
}

#endif
