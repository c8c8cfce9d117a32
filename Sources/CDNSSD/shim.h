// The DNS-SD C API (dns_sd.h). On Linux it comes from Avahi's compatibility library
// (Debian: libavahi-compat-libdnssd-dev, pkg-config avahi-compat-libdns_sd); SystemDNSSD is
// the only module that sees it.
#ifndef NEARBY_CDNSSD_SHIM_H
#define NEARBY_CDNSSD_SHIM_H
#include <dns_sd.h>
#endif
