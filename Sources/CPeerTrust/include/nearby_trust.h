// Small C functions over OpenSSL 3 for PeerTrust: they take and return DER bytes, so no
// OpenSSL object lives longer than one call and none is seen by Swift. Lists of certificates
// travel as one buffer of items, each a 4-byte big-endian length followed by that many bytes.
//
// Functions that can fail return -1 and write a message into `error` (NUL-terminated, at most
// `error_size` bytes); they never abort on bad input.
#ifndef NEARBY_TRUST_H
#define NEARBY_TRUST_H

#include <stddef.h>
#include <stdint.h>

/// Bytes allocated by this library; release with nearby_buffer_free.
typedef struct {
    uint8_t *bytes;
    size_t count;
} nearby_buffer;

void nearby_buffer_free(nearby_buffer *buffer);

/// SHA-256 of `count` bytes into `digest` (32 bytes).
void nearby_sha256(const uint8_t *bytes, size_t count, uint8_t *digest);

/* An incremental SHA-256 (files hashed as they are sent or received): new returns NULL when
   OpenSSL fails; final writes 32 bytes and frees the context. */
void *nearby_sha256_new(void);
int nearby_sha256_update(void *context, const uint8_t *bytes, size_t count);
int nearby_sha256_final(void *context, uint8_t *digest);
void nearby_sha256_free(void *context);
void *nearby_sha256_copy(void *context);

/// HMAC-SHA-256 of `count` bytes under `key` into `mac` (32 bytes); -1 when OpenSSL fails.
int nearby_hmac_sha256(const uint8_t *key, size_t key_count, const uint8_t *bytes, size_t count, uint8_t *mac);

/// 1 when the `count` bytes at `a` and `b` are equal, else 0, in time that depends on `count` only.
int nearby_equal_constant_time(const uint8_t *a, const uint8_t *b, size_t count);

/// A new P-256 key pair, as PKCS#8 DER.
int nearby_key_generate_p256(nearby_buffer *pkcs8, char *error, size_t error_size);

/// Reads a private key from PEM (PKCS#8, SEC1 or an encrypted PKCS#8 with `passphrase`,
/// which may be NULL) and returns it as PKCS#8 DER.
int nearby_key_from_pem(const char *pem, size_t count, const char *passphrase, nearby_buffer *pkcs8,
                        char *error, size_t error_size);

/// 1 when the private key belongs to the certificate, 0 when not, -1 when either is unreadable.
int nearby_key_matches_certificate(const uint8_t *pkcs8, size_t key_count, const uint8_t *der, size_t der_count);

/// What a certificate says about itself.
typedef struct {
    int64_t not_before;     // seconds since 1970, UTC
    int64_t not_after;
    int is_ca;              // basicConstraints CA:TRUE
    int self_signed;        // issuer == subject and its own key verifies its signature
    char subject[512];      // RFC 2253 one-line form
    char issuer[512];
    char common_name[256];  // first CN of the subject, or ""
} nearby_certificate_info;

/// Parses one DER certificate (the whole buffer must be that certificate) and describes it;
/// `spki` receives its DER SubjectPublicKeyInfo.
int nearby_certificate_inspect(const uint8_t *der, size_t count, nearby_certificate_info *info, nearby_buffer *spki,
                               char *error, size_t error_size);

/// What a certificate made by nearby_certificate_create contains.
typedef struct {
    const char *common_name;
    const char *organization;   // NULL: none
    uint64_t serial;            // > 0
    int64_t not_before;
    int64_t not_after;
    int basic_constraints;      // 0: no basicConstraints extension at all
    int is_ca;
    int path_length;            // -1: no limit
    int extended_key_usage;     // bit 0: serverAuth, bit 1: clientAuth; 0: no EKU extension
} nearby_certificate_template;

/// Makes a certificate for the key `subject_key` (PKCS#8), signed with `issuer_key` and naming
/// `issuer` (DER) as its issuer; `issuer` NULL makes it self-signed (then `issuer_key` is the
/// subject's own key). Signatures are ECDSA or RSA with SHA-256.
int nearby_certificate_create(const nearby_certificate_template *template, const uint8_t *subject_key,
                              size_t subject_key_count, const uint8_t *issuer, size_t issuer_count,
                              const uint8_t *issuer_key, size_t issuer_key_count, nearby_buffer *der,
                              char *error, size_t error_size);

/// Reads a PKCS#12 file: the key (PKCS#8) and the certificates, the one matching the key first.
int nearby_pkcs12_read(const uint8_t *bytes, size_t count, const char *passphrase, nearby_buffer *pkcs8,
                       nearby_buffer *certificates, char *error, size_t error_size);

/// Writes a PKCS#12 file (AES-256 and PBKDF2, OpenSSL 3's defaults) with the key and the
/// certificates (leaf first), protected by `passphrase`.
int nearby_pkcs12_write(const uint8_t *pkcs8, size_t key_count, const uint8_t *certificates, size_t certificates_count,
                        const char *passphrase, const char *friendly_name, nearby_buffer *bytes,
                        char *error, size_t error_size);

/// One problem found while verifying a chain.
typedef struct {
    int code;               // X509_V_ERR_*
    int depth;              // 0: the leaf
    int64_t not_before;     // of the certificate at `depth`, when there was one
    int64_t not_after;
    char subject[512];
    char issuer[512];
    char key[64];           // the certificate's public key, e.g. "RSA 1024-bit", "EC P-192 (80-bit security)"
    char digest[32];        // the digest its signature uses, e.g. "SHA1"
    int64_t crl_this_update;  // the CRL involved (revoked, CRL expired, CRL signature...), 0 when none
    int64_t crl_next_update;  // 0 when the CRL has no next update
    int64_t revoked_at;       // for X509_V_ERR_CERT_REVOKED: the revocation date, 0 when unknown
    int revocation_reason;    // its CRLReason code, -1 when the entry gives none
    char crl_issuer[512];
} nearby_verify_issue;

/// How to verify a chain.
typedef struct {
    const uint8_t *leaf;
    size_t leaf_count;
    const uint8_t *untrusted;       // list: intermediates the peer sent (may be NULL)
    size_t untrusted_count;
    const uint8_t *anchors;         // list: trusted certificates (may be NULL)
    size_t anchors_count;
    int system_roots;               // also trust the system's default store
    int purpose;                    // 1: TLS server, 2: TLS client, 0: none
    int64_t time;                   // verification time, seconds since 1970
    int max_intermediates;          // X509_VERIFY_PARAM_set_depth
    int check_self_signature;       // X509_V_FLAG_CHECK_SS_SIGNATURE
    const uint8_t *crls;            // list: DER CRLs (may be NULL)
    size_t crls_count;
    int auth_level;                 // X509_VERIFY_PARAM_set_auth_level: 2 refuses keys and digests under 112 bits; -1 none
} nearby_verify_request;

/// Verifies with X509_verify_cert under X509_V_FLAG_X509_STRICT and X509_V_FLAG_PARTIAL_CHAIN,
/// recording every problem (up to `capacity`) rather than stopping at the first. Returns 1 when
/// trusted (then `chain` holds the validated chain, leaf first), 0 when rejected, -1 when the
/// input is unusable.
///
/// With CRLs, every certificate of the chain whose issuer has one of them is checked against it
/// (X509_V_FLAG_CRL_CHECK_ALL); a certificate whose issuer has none is not (OpenSSL's "unable to
/// get certificate CRL" is passed over: revocation is checked where the caller holds a list).
/// A CRL that has expired, is not valid yet or whose signature does not verify is a problem.
int nearby_verify(const nearby_verify_request *request, nearby_verify_issue *issues, int capacity, int *issue_count,
                  nearby_buffer *chain, char *error, size_t error_size);

/// What a CRL says about itself.
typedef struct {
    int64_t this_update;
    int64_t next_update;    // 0 when absent
    int revoked_count;
    char issuer[512];       // RFC 2253 one-line form
} nearby_crl_info;

/// Parses one DER CRL (the whole buffer must be that CRL) and describes it. Returns 0, or -1
/// with the reason in `error`.
int nearby_crl_inspect(const uint8_t *der, size_t count, nearby_crl_info *info, char *error, size_t error_size);

/// OpenSSL's words for an X509_V_ERR_* code.
const char *nearby_verify_error_string(int code);

/* ECDSA P-256 with SHA-256 in the raw forms DNSSEC uses (RFC 6605 §4): a public key is the
   point's x and y (64 bytes, no 0x04 prefix), a signature is r and s (64 bytes), not DER. */

/// Writes the raw public key (64 bytes) of a P-256 private key given as PKCS#8 DER into `point`.
/// Returns 0, or -1 when the key is unreadable or not on P-256.
int nearby_p256_public_raw(const uint8_t *pkcs8, size_t key_count, uint8_t *point);

/// Signs the SHA-256 of `count` bytes with a P-256 private key (PKCS#8 DER) and writes r ‖ s
/// (64 bytes) into `signature`. Returns 0, or -1 with the reason in `error`.
int nearby_p256_sign_raw(const uint8_t *pkcs8, size_t key_count, const uint8_t *bytes, size_t count,
                         uint8_t *signature, char *error, size_t error_size);

/// 1 when `signature` (r ‖ s, 64 bytes) is a valid ECDSA P-256 SHA-256 signature of the `count`
/// bytes under the raw public key `point` (64 bytes); 0 when it is not, or the point is not on
/// the curve.
int nearby_p256_verify_raw(const uint8_t *point, const uint8_t *bytes, size_t count, const uint8_t *signature);

#endif
