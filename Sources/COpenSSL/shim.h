// OpenSSL 3 (Debian: libssl-dev, pkg-config openssl). Only CPeerTrust and PeerTrust see it.
#ifndef NEARBY_COPENSSL_SHIM_H
#define NEARBY_COPENSSL_SHIM_H
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/pkcs12.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#endif
