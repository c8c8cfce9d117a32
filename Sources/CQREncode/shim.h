// libqrencode (Debian: libqrencode-dev, pkg-config libqrencode). Only NearbyQRCode sees it.
#ifndef NEARBY_CQRENCODE_SHIM_H
#define NEARBY_CQRENCODE_SHIM_H
#include <qrencode.h>
#endif
