// OpenSSL 3 calls for PeerTrust. See include/nearby_trust.h for the contract.
#include "nearby_trust.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/pem.h>
#include <openssl/pkcs12.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

// MARK: - helpers

/// Writes `what` and OpenSSL's most recent error (if any) into `error`; returns -1.
static int fail(char *error, size_t error_size, const char *what) {
    unsigned long code = ERR_peek_last_error();
    if (error && error_size > 0) {
        if (code != 0) {
            char reason[256];
            ERR_error_string_n(code, reason, sizeof reason);
            snprintf(error, error_size, "%s (%s)", what, reason);
        } else {
            snprintf(error, error_size, "%s", what);
        }
    }
    ERR_clear_error();
    return -1;
}

void nearby_buffer_free(nearby_buffer *buffer) {
    if (!buffer) return;
    OPENSSL_free(buffer->bytes);
    buffer->bytes = NULL;
    buffer->count = 0;
}

/// Hands over bytes that OpenSSL allocated.
static void give(nearby_buffer *buffer, unsigned char *bytes, int count) {
    buffer->bytes = bytes;
    buffer->count = count > 0 ? (size_t)count : 0;
}

static X509 *certificate_from_der(const uint8_t *der, size_t count) {
    if (!der || count == 0 || count > 1 << 24) return NULL;
    const unsigned char *cursor = der;
    X509 *certificate = d2i_X509(NULL, &cursor, (long)count);
    if (certificate && cursor != der + count) {  // trailing bytes: not one certificate
        X509_free(certificate);
        return NULL;
    }
    return certificate;
}

static EVP_PKEY *key_from_der(const uint8_t *der, size_t count) {
    if (!der || count == 0 || count > 1 << 20) return NULL;
    const unsigned char *cursor = der;
    return d2i_AutoPrivateKey(NULL, &cursor, (long)count);
}

static int key_to_pkcs8(EVP_PKEY *key, nearby_buffer *out) {
    PKCS8_PRIV_KEY_INFO *info = EVP_PKEY2PKCS8(key);
    if (!info) return -1;
    unsigned char *bytes = NULL;
    int count = i2d_PKCS8_PRIV_KEY_INFO(info, &bytes);
    PKCS8_PRIV_KEY_INFO_free(info);
    if (count <= 0) return -1;
    give(out, bytes, count);
    return 0;
}

/// Reads a list (4-byte big-endian lengths) of DER certificates into a new stack.
static STACK_OF(X509) *certificates_from_list(const uint8_t *list, size_t count, int *bad) {
    STACK_OF(X509) *stack = sk_X509_new_null();
    *bad = 0;
    if (!stack) {
        *bad = 1;
        return NULL;
    }
    size_t offset = 0;
    while (list && offset < count) {
        if (count - offset < 4) {
            *bad = 1;
            break;
        }
        size_t length = ((size_t)list[offset] << 24) | ((size_t)list[offset + 1] << 16) | ((size_t)list[offset + 2] << 8) |
                        (size_t)list[offset + 3];
        offset += 4;
        if (length > count - offset) {
            *bad = 1;
            break;
        }
        X509 *certificate = certificate_from_der(list + offset, length);
        if (!certificate || !sk_X509_push(stack, certificate)) {
            X509_free(certificate);
            *bad = 1;
            break;
        }
        offset += length;
    }
    return stack;
}

/// Writes a stack of certificates as a list.
static int certificates_to_list(STACK_OF(X509) *stack, nearby_buffer *out) {
    size_t total = 0;
    int count = sk_X509_num(stack);
    for (int index = 0; index < count; index++) {
        int length = i2d_X509(sk_X509_value(stack, index), NULL);
        if (length <= 0) return -1;
        total += 4 + (size_t)length;
    }
    unsigned char *bytes = OPENSSL_malloc(total > 0 ? total : 1);
    if (!bytes) return -1;
    size_t offset = 0;
    for (int index = 0; index < count; index++) {
        unsigned char *cursor = bytes + offset + 4;
        int length = i2d_X509(sk_X509_value(stack, index), &cursor);
        bytes[offset] = (unsigned char)(length >> 24);
        bytes[offset + 1] = (unsigned char)(length >> 16);
        bytes[offset + 2] = (unsigned char)(length >> 8);
        bytes[offset + 3] = (unsigned char)length;
        offset += 4 + (size_t)length;
    }
    out->bytes = bytes;
    out->count = total;
    return 0;
}

static int64_t seconds_of(const ASN1_TIME *time) {
    struct tm parts;
    memset(&parts, 0, sizeof parts);
    if (!time || ASN1_TIME_to_tm(time, &parts) != 1) return 0;
    return (int64_t)timegm(&parts);
}

static void name_text(const X509_NAME *name, char *out, size_t size) {
    out[0] = 0;
    if (!name || size == 0) return;
    BIO *bio = BIO_new(BIO_s_mem());
    if (!bio) return;
    if (X509_NAME_print_ex(bio, name, 0, XN_FLAG_RFC2253 & ~ASN1_STRFLGS_ESC_MSB) >= 0) {
        int count = BIO_read(bio, out, (int)size - 1);
        out[count > 0 ? count : 0] = 0;
    }
    BIO_free(bio);
}

// MARK: - hashing and keys

void nearby_sha256(const uint8_t *bytes, size_t count, uint8_t *digest) {
    unsigned int length = 32;
    EVP_Digest(bytes, count, digest, &length, EVP_sha256(), NULL);
}

void *nearby_sha256_new(void) {
    EVP_MD_CTX *context = EVP_MD_CTX_new();
    if (context == NULL) return NULL;
    if (EVP_DigestInit_ex(context, EVP_sha256(), NULL) != 1) {
        EVP_MD_CTX_free(context);
        return NULL;
    }
    return context;
}

int nearby_sha256_update(void *context, const uint8_t *bytes, size_t count) {
    if (count == 0) return 0;
    return EVP_DigestUpdate((EVP_MD_CTX *)context, bytes, count) == 1 ? 0 : -1;
}

int nearby_sha256_final(void *context, uint8_t *digest) {
    unsigned int length = 32;
    return EVP_DigestFinal_ex((EVP_MD_CTX *)context, digest, &length) == 1 ? 0 : -1;
}

void nearby_sha256_free(void *context) {
    EVP_MD_CTX_free((EVP_MD_CTX *)context);
}

void *nearby_sha256_copy(void *context) {
    EVP_MD_CTX *copy = EVP_MD_CTX_new();
    if (copy == NULL) return NULL;
    if (EVP_MD_CTX_copy_ex(copy, (const EVP_MD_CTX *)context) != 1) {
        EVP_MD_CTX_free(copy);
        return NULL;
    }
    return copy;
}

int nearby_hmac_sha256(const uint8_t *key, size_t key_count, const uint8_t *bytes, size_t count, uint8_t *mac) {
    unsigned int length = 32;
    static const uint8_t empty = 0;
    if (key_count > INT32_MAX) return -1;
    return HMAC(EVP_sha256(), key_count ? key : &empty, (int)key_count, count ? bytes : &empty, count, mac, &length) ? 0 : -1;
}

int nearby_equal_constant_time(const uint8_t *a, const uint8_t *b, size_t count) {
    return CRYPTO_memcmp(a, b, count) == 0;
}

int nearby_key_generate_p256(nearby_buffer *pkcs8, char *error, size_t error_size) {
    EVP_PKEY *key = EVP_EC_gen("P-256");
    if (!key) return fail(error, error_size, "cannot generate a P-256 key");
    int result = key_to_pkcs8(key, pkcs8);
    EVP_PKEY_free(key);
    return result == 0 ? 0 : fail(error, error_size, "cannot encode the new key");
}

/// Passphrase callback: hands OpenSSL the passphrase given, or none.
static int passphrase_callback(char *buffer, int size, int writing, void *user) {
    (void)writing;
    const char *passphrase = user;
    if (!passphrase) return -1;
    size_t length = strlen(passphrase);
    if (length > (size_t)size) return -1;
    memcpy(buffer, passphrase, length);
    return (int)length;
}

int nearby_key_from_pem(const char *pem, size_t count, const char *passphrase, nearby_buffer *pkcs8, char *error,
                        size_t error_size) {
    if (!pem || count == 0 || count > 1 << 20) return fail(error, error_size, "no key");
    BIO *bio = BIO_new_mem_buf(pem, (int)count);
    if (!bio) return fail(error, error_size, "out of memory");
    EVP_PKEY *key = PEM_read_bio_PrivateKey(bio, NULL, passphrase_callback, (void *)passphrase);
    BIO_free(bio);
    if (!key) {
        return fail(error, error_size, passphrase ? "cannot read the private key (wrong passphrase, or not a key)"
                                                  : "cannot read the private key");
    }
    int result = key_to_pkcs8(key, pkcs8);
    EVP_PKEY_free(key);
    return result == 0 ? 0 : fail(error, error_size, "cannot encode the key");
}

int nearby_key_matches_certificate(const uint8_t *pkcs8, size_t key_count, const uint8_t *der, size_t der_count) {
    EVP_PKEY *key = key_from_der(pkcs8, key_count);
    X509 *certificate = certificate_from_der(der, der_count);
    int result = -1;
    if (key && certificate) result = X509_check_private_key(certificate, key) == 1 ? 1 : 0;
    EVP_PKEY_free(key);
    X509_free(certificate);
    ERR_clear_error();
    return result;
}

// MARK: - certificates

int nearby_certificate_inspect(const uint8_t *der, size_t count, nearby_certificate_info *info, nearby_buffer *spki,
                               char *error, size_t error_size) {
    X509 *certificate = certificate_from_der(der, count);
    if (!certificate) return fail(error, error_size, "not a DER X.509 certificate");
    memset(info, 0, sizeof *info);
    info->not_before = seconds_of(X509_get0_notBefore(certificate));
    info->not_after = seconds_of(X509_get0_notAfter(certificate));
    info->is_ca = (X509_get_extension_flags(certificate) & EXFLAG_CA) != 0;
    info->self_signed = X509_self_signed(certificate, 1) == 1;
    name_text(X509_get_subject_name(certificate), info->subject, sizeof info->subject);
    name_text(X509_get_issuer_name(certificate), info->issuer, sizeof info->issuer);
    int index = X509_NAME_get_index_by_NID(X509_get_subject_name(certificate), NID_commonName, -1);
    if (index >= 0) {
        ASN1_STRING *value = X509_NAME_ENTRY_get_data(X509_NAME_get_entry(X509_get_subject_name(certificate), index));
        unsigned char *utf8 = NULL;
        int length = ASN1_STRING_to_UTF8(&utf8, value);
        if (length > 0) {
            size_t copy = (size_t)length < sizeof info->common_name - 1 ? (size_t)length : sizeof info->common_name - 1;
            memcpy(info->common_name, utf8, copy);
            info->common_name[copy] = 0;
        }
        OPENSSL_free(utf8);
    }
    unsigned char *bytes = NULL;
    int length = i2d_X509_PUBKEY(X509_get_X509_PUBKEY(certificate), &bytes);
    X509_free(certificate);
    ERR_clear_error();
    if (length <= 0) return fail(error, error_size, "certificate without a readable public key");
    give(spki, bytes, length);
    return 0;
}

static int add_extension(X509 *certificate, X509 *issuer, int nid, const char *value) {
    X509V3_CTX context;
    X509V3_set_ctx_nodb(&context);
    X509V3_set_ctx(&context, issuer, certificate, NULL, NULL, 0);
    X509_EXTENSION *extension = X509V3_EXT_conf_nid(NULL, &context, nid, value);
    if (!extension) return -1;
    int result = X509_add_ext(certificate, extension, -1) == 1 ? 0 : -1;
    X509_EXTENSION_free(extension);
    return result;
}

int nearby_certificate_create(const nearby_certificate_template *template, const uint8_t *subject_key,
                              size_t subject_key_count, const uint8_t *issuer_der, size_t issuer_count,
                              const uint8_t *issuer_key_der, size_t issuer_key_count, nearby_buffer *der,
                              char *error, size_t error_size) {
    EVP_PKEY *key = key_from_der(subject_key, subject_key_count);
    EVP_PKEY *signer = key_from_der(issuer_key_der, issuer_key_count);
    X509 *issuer = issuer_der ? certificate_from_der(issuer_der, issuer_count) : NULL;
    X509 *certificate = X509_new();
    ASN1_INTEGER *serial = ASN1_INTEGER_new();
    int result = -1;
    const char *problem = "cannot make the certificate";
    if (!key || !signer || (issuer_der && !issuer) || !certificate || !serial || !template->common_name) {
        problem = "bad key, issuer or template";
        goto done;
    }
    X509_set_version(certificate, X509_VERSION_3);
    if (!ASN1_INTEGER_set_uint64(serial, template->serial) || !X509_set_serialNumber(certificate, serial)) goto done;
    X509_NAME *name = X509_get_subject_name(certificate);
    if (template->organization &&
        !X509_NAME_add_entry_by_txt(name, "O", MBSTRING_UTF8, (const unsigned char *)template->organization, -1, -1, 0))
        goto done;
    if (!X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8, (const unsigned char *)template->common_name, -1, -1, 0))
        goto done;
    if (!X509_set_issuer_name(certificate, issuer ? X509_get_subject_name(issuer) : name)) goto done;
    if (!ASN1_TIME_set(X509_getm_notBefore(certificate), (time_t)template->not_before) ||
        !ASN1_TIME_set(X509_getm_notAfter(certificate), (time_t)template->not_after))
        goto done;
    if (!X509_set_pubkey(certificate, key)) goto done;
    X509 *issuing = issuer ? issuer : certificate;
    if (template->basic_constraints) {
        char value[64];
        if (template->is_ca && template->path_length >= 0)
            snprintf(value, sizeof value, "critical,CA:TRUE,pathlen:%d", template->path_length);
        else
            snprintf(value, sizeof value, "critical,%s", template->is_ca ? "CA:TRUE" : "CA:FALSE");
        if (add_extension(certificate, issuing, NID_basic_constraints, value) != 0) goto done;
    }
    const char *usage = template->is_ca ? "critical,keyCertSign,cRLSign,digitalSignature" : "critical,digitalSignature";
    if (add_extension(certificate, issuing, NID_key_usage, usage) != 0) goto done;
    int eku = template->extended_key_usage;
    if (eku) {
        const char *value = (eku & 3) == 3 ? "serverAuth,clientAuth" : (eku & 1) ? "serverAuth" : "clientAuth";
        if (add_extension(certificate, issuing, NID_ext_key_usage, value) != 0) goto done;
    }
    if (add_extension(certificate, issuing, NID_subject_key_identifier, "hash") != 0) goto done;
    if (issuer && add_extension(certificate, issuing, NID_authority_key_identifier, "keyid:always") != 0) goto done;
    if (X509_sign(certificate, signer, EVP_sha256()) <= 0) {
        problem = "cannot sign the certificate";
        goto done;
    }
    unsigned char *bytes = NULL;
    int length = i2d_X509(certificate, &bytes);
    if (length <= 0) goto done;
    give(der, bytes, length);
    result = 0;
done:
    ASN1_INTEGER_free(serial);
    X509_free(certificate);
    X509_free(issuer);
    EVP_PKEY_free(signer);
    EVP_PKEY_free(key);
    if (result != 0) return fail(error, error_size, problem);
    return 0;
}

// MARK: - PKCS#12

int nearby_pkcs12_read(const uint8_t *bytes, size_t count, const char *passphrase, nearby_buffer *pkcs8,
                       nearby_buffer *certificates, char *error, size_t error_size) {
    if (!bytes || count == 0 || count > 1 << 24) return fail(error, error_size, "empty PKCS#12 data");
    const unsigned char *cursor = bytes;
    PKCS12 *bundle = d2i_PKCS12(NULL, &cursor, (long)count);
    if (!bundle) return fail(error, error_size, "not a PKCS#12 file");
    if (!PKCS12_verify_mac(bundle, passphrase ? passphrase : "", -1) &&
        !(passphrase == NULL && PKCS12_verify_mac(bundle, NULL, 0))) {
        PKCS12_free(bundle);
        ERR_clear_error();
        return fail(error, error_size, "wrong passphrase for the PKCS#12 file");
    }
    EVP_PKEY *key = NULL;
    X509 *leaf = NULL;
    STACK_OF(X509) *others = NULL;
    int parsed = PKCS12_parse(bundle, passphrase ? passphrase : "", &key, &leaf, &others);
    PKCS12_free(bundle);
    int result = -1;
    const char *problem = "cannot read the PKCS#12 file (an unsupported legacy cipher?)";
    STACK_OF(X509) *all = sk_X509_new_null();
    if (parsed && key && leaf && all) {
        problem = "cannot encode its contents";
        if (sk_X509_push(all, leaf)) {
            leaf = NULL;
            while (others && sk_X509_num(others) > 0) {
                X509 *certificate = sk_X509_shift(others);
                if (!sk_X509_push(all, certificate)) X509_free(certificate);
            }
            if (key_to_pkcs8(key, pkcs8) == 0 && certificates_to_list(all, certificates) == 0) result = 0;
        }
    } else if (parsed && !key) {
        problem = "the PKCS#12 file holds no private key";
    } else if (parsed && !leaf) {
        problem = "the PKCS#12 file holds no certificate for its key";
    }
    sk_X509_pop_free(all, X509_free);
    sk_X509_pop_free(others, X509_free);
    X509_free(leaf);
    EVP_PKEY_free(key);
    if (result != 0) {
        nearby_buffer_free(pkcs8);
        return fail(error, error_size, problem);
    }
    return 0;
}

int nearby_pkcs12_write(const uint8_t *pkcs8, size_t key_count, const uint8_t *list, size_t list_count,
                        const char *passphrase, const char *friendly_name, nearby_buffer *bytes, char *error,
                        size_t error_size) {
    EVP_PKEY *key = key_from_der(pkcs8, key_count);
    int bad = 0;
    STACK_OF(X509) *certificates = certificates_from_list(list, list_count, &bad);
    int result = -1;
    if (key && certificates && !bad && sk_X509_num(certificates) > 0) {
        X509 *leaf = sk_X509_shift(certificates);
        PKCS12 *bundle = PKCS12_create(passphrase, friendly_name, key, leaf, certificates, 0, 0, 0, 0, 0);
        X509_free(leaf);
        if (bundle) {
            unsigned char *out = NULL;
            int length = i2d_PKCS12(bundle, &out);
            if (length > 0) {
                give(bytes, out, length);
                result = 0;
            }
            PKCS12_free(bundle);
        }
    }
    sk_X509_pop_free(certificates, X509_free);
    EVP_PKEY_free(key);
    return result == 0 ? 0 : fail(error, error_size, "cannot write the PKCS#12 file");
}

// MARK: - verification

/// "RSA 1024-bit", "EC P-192", "DSA 1024-bit", with the security level OpenSSL gives the key.
static void describe_key(X509 *certificate, char *out, size_t size) {
    out[0] = 0;
    EVP_PKEY *key = X509_get0_pubkey(certificate);
    if (!key) return;
    int bits = EVP_PKEY_get_bits(key), security = EVP_PKEY_get_security_bits(key);
    char group[80] = "";
    size_t group_length = 0;
    switch (EVP_PKEY_get_base_id(key)) {
    case EVP_PKEY_RSA:
    case EVP_PKEY_RSA_PSS:
        snprintf(out, size, "RSA %d-bit (%d-bit security)", bits, security);
        break;
    case EVP_PKEY_DSA:
        snprintf(out, size, "DSA %d-bit (%d-bit security)", bits, security);
        break;
    case EVP_PKEY_EC:
        if (EVP_PKEY_get_group_name(key, group, sizeof group, &group_length) != 1) snprintf(group, sizeof group, "%d-bit", bits);
        snprintf(out, size, "EC %s (%d-bit security)", group, security);
        break;
    default:
        snprintf(out, size, "%s %d-bit (%d-bit security)", OBJ_nid2sn(EVP_PKEY_get_base_id(key)), bits, security);
    }
    ERR_clear_error();
}

static X509_CRL *crl_from_der(const uint8_t *der, size_t count) {
    if (!der || count == 0 || count > 1 << 26) return NULL;
    const unsigned char *cursor = der;
    X509_CRL *crl = d2i_X509_CRL(NULL, &cursor, (long)count);
    if (crl && cursor != der + count) {
        X509_CRL_free(crl);
        return NULL;
    }
    return crl;
}

int nearby_crl_inspect(const uint8_t *der, size_t count, nearby_crl_info *info, char *error, size_t error_size) {
    memset(info, 0, sizeof *info);
    X509_CRL *crl = crl_from_der(der, count);
    if (!crl) return fail(error, error_size, "not a DER X.509 CRL");
    info->this_update = seconds_of(X509_CRL_get0_lastUpdate(crl));
    const ASN1_TIME *next = X509_CRL_get0_nextUpdate(crl);
    info->next_update = next ? seconds_of(next) : 0;
    STACK_OF(X509_REVOKED) *revoked = X509_CRL_get_REVOKED(crl);
    info->revoked_count = revoked ? sk_X509_REVOKED_num(revoked) : 0;
    name_text(X509_CRL_get_issuer(crl), info->issuer, sizeof info->issuer);
    X509_CRL_free(crl);
    ERR_clear_error();
    return 0;
}

typedef struct {
    nearby_verify_issue *issues;
    int capacity;
    int count;
} issue_collector;

/// Records every problem and lets verification go on, so that all of them are reported.
static int collect_issues(int ok, X509_STORE_CTX *context) {
    if (ok) return 1;
    issue_collector *collector = X509_STORE_CTX_get_app_data(context);
    if (!collector) return 0;
    int code = X509_STORE_CTX_get_error(context);
    int depth = X509_STORE_CTX_get_error_depth(context);
    if (code == X509_V_ERR_UNABLE_TO_GET_CRL) {
        // No CRL from this certificate's issuer: revocation is checked where a list is held.
        X509_STORE_CTX_set_error(context, X509_V_OK);
        return 1;
    }
    for (int index = 0; index < collector->count; index++) {
        if (collector->issues[index].code == code && collector->issues[index].depth == depth) return 1;
    }
    if (collector->count < collector->capacity) {
        nearby_verify_issue *issue = &collector->issues[collector->count++];
        memset(issue, 0, sizeof *issue);
        issue->code = code;
        issue->depth = depth;
        issue->revocation_reason = -1;
        X509 *certificate = X509_STORE_CTX_get_current_cert(context);
        if (certificate) {
            issue->not_before = seconds_of(X509_get0_notBefore(certificate));
            issue->not_after = seconds_of(X509_get0_notAfter(certificate));
            name_text(X509_get_subject_name(certificate), issue->subject, sizeof issue->subject);
            name_text(X509_get_issuer_name(certificate), issue->issuer, sizeof issue->issuer);
            describe_key(certificate, issue->key, sizeof issue->key);
            int digest = NID_undef;
            if (X509_get_signature_info(certificate, &digest, NULL, NULL, NULL) == 1 && digest != NID_undef) {
                snprintf(issue->digest, sizeof issue->digest, "%s", OBJ_nid2sn(digest));
            }
        }
        X509_CRL *crl = X509_STORE_CTX_get0_current_crl(context);
        if (crl) {
            issue->crl_this_update = seconds_of(X509_CRL_get0_lastUpdate(crl));
            const ASN1_TIME *next = X509_CRL_get0_nextUpdate(crl);
            issue->crl_next_update = next ? seconds_of(next) : 0;
            name_text(X509_CRL_get_issuer(crl), issue->crl_issuer, sizeof issue->crl_issuer);
            X509_REVOKED *entry = NULL;
            if (code == X509_V_ERR_CERT_REVOKED && certificate && X509_CRL_get0_by_cert(crl, &entry, certificate) == 1 && entry) {
                issue->revoked_at = seconds_of(X509_REVOKED_get0_revocationDate(entry));
                ASN1_ENUMERATED *reason = X509_REVOKED_get_ext_d2i(entry, NID_crl_reason, NULL, NULL);
                if (reason) {
                    issue->revocation_reason = (int)ASN1_ENUMERATED_get(reason);
                    ASN1_ENUMERATED_free(reason);
                }
            }
        }
    }
    ERR_clear_error();
    return 1;
}

int nearby_verify(const nearby_verify_request *request, nearby_verify_issue *issues, int capacity, int *issue_count,
                  nearby_buffer *chain, char *error, size_t error_size) {
    *issue_count = 0;
    X509 *leaf = certificate_from_der(request->leaf, request->leaf_count);
    int bad_untrusted = 0, bad_anchors = 0;
    STACK_OF(X509) *untrusted = certificates_from_list(request->untrusted, request->untrusted_count, &bad_untrusted);
    STACK_OF(X509) *anchors = certificates_from_list(request->anchors, request->anchors_count, &bad_anchors);
    X509_STORE *store = X509_STORE_new();
    X509_STORE_CTX *context = X509_STORE_CTX_new();
    int result = -1;
    const char *problem = "cannot verify";
    if (!leaf || bad_untrusted || bad_anchors) {
        problem = !leaf ? "the leaf is not a DER X.509 certificate" : "a certificate in the list is unreadable";
        goto done;
    }
    if (!store || !context || !untrusted || !anchors) goto done;
    for (int index = 0; index < sk_X509_num(anchors); index++) {
        if (!X509_STORE_add_cert(store, sk_X509_value(anchors, index))) goto done;
    }
    size_t crl_offset = 0;
    int crl_count = 0;
    while (request->crls && crl_offset < request->crls_count) {
        if (request->crls_count - crl_offset < 4) {
            problem = "a CRL in the list is unreadable";
            goto done;
        }
        const uint8_t *at = request->crls + crl_offset;
        size_t length = ((size_t)at[0] << 24) | ((size_t)at[1] << 16) | ((size_t)at[2] << 8) | (size_t)at[3];
        crl_offset += 4;
        X509_CRL *crl = length <= request->crls_count - crl_offset ? crl_from_der(request->crls + crl_offset, length) : NULL;
        if (!crl) {
            problem = "a CRL in the list is unreadable";
            goto done;
        }
        int added = X509_STORE_add_crl(store, crl);
        X509_CRL_free(crl);  // the store holds its own reference
        if (!added) goto done;
        crl_offset += length;
        crl_count++;
    }
    if (request->system_roots && !X509_STORE_set_default_paths(store)) {
        problem = "cannot load the system's trusted roots";
        goto done;
    }
    if (!X509_STORE_CTX_init(context, store, leaf, untrusted)) goto done;
    X509_VERIFY_PARAM *parameters = X509_STORE_CTX_get0_param(context);
    unsigned long flags = X509_V_FLAG_X509_STRICT | X509_V_FLAG_PARTIAL_CHAIN | X509_V_FLAG_USE_CHECK_TIME;
    if (request->check_self_signature) flags |= X509_V_FLAG_CHECK_SS_SIGNATURE;
    if (crl_count > 0) flags |= X509_V_FLAG_CRL_CHECK | X509_V_FLAG_CRL_CHECK_ALL;
    X509_VERIFY_PARAM_set_flags(parameters, flags);
    X509_VERIFY_PARAM_set_auth_level(parameters, request->auth_level);
    X509_VERIFY_PARAM_set_time(parameters, (time_t)request->time);
    X509_VERIFY_PARAM_set_depth(parameters, request->max_intermediates);
    if (request->purpose == 1 || request->purpose == 2) {
        int purpose = request->purpose == 1 ? X509_PURPOSE_SSL_SERVER : X509_PURPOSE_SSL_CLIENT;
        if (!X509_VERIFY_PARAM_set_purpose(parameters, purpose)) goto done;
    }
    issue_collector collector = {issues, capacity, 0};
    X509_STORE_CTX_set_app_data(context, &collector);
    X509_STORE_CTX_set_verify_cb(context, collect_issues);
    int verified = X509_verify_cert(context);
    *issue_count = collector.count;
    if (verified == 1 && collector.count == 0 && X509_STORE_CTX_get_error(context) == X509_V_OK) {
        STACK_OF(X509) *built = X509_STORE_CTX_get0_chain(context);
        if (!built || certificates_to_list(built, chain) != 0) goto done;
        result = 1;
    } else {
        if (collector.count == 0 && capacity > 0) {  // failed without telling the callback
            memset(&issues[0], 0, sizeof issues[0]);
            issues[0].code = X509_STORE_CTX_get_error(context);
            if (issues[0].code == X509_V_OK) issues[0].code = X509_V_ERR_UNSPECIFIED;
            *issue_count = 1;
        }
        result = 0;
    }
done:
    X509_STORE_CTX_free(context);
    X509_STORE_free(store);
    sk_X509_pop_free(anchors, X509_free);
    sk_X509_pop_free(untrusted, X509_free);
    X509_free(leaf);
    if (result < 0) return fail(error, error_size, problem);
    ERR_clear_error();
    return result;
}

const char *nearby_verify_error_string(int code) { return X509_verify_cert_error_string(code); }

// MARK: - ECDSA P-256 in DNSSEC's raw forms (RFC 6605 §4)

#include <openssl/core_names.h>
#include <openssl/ecdsa.h>
#include <openssl/params.h>

/// True when `key` is an EC key on P-256.
static int key_is_p256(EVP_PKEY *key) {
    char group[64] = {0};
    size_t length = 0;
    if (EVP_PKEY_get_base_id(key) != EVP_PKEY_EC) return 0;
    if (EVP_PKEY_get_utf8_string_param(key, OSSL_PKEY_PARAM_GROUP_NAME, group, sizeof group, &length) != 1) return 0;
    return strcmp(group, "prime256v1") == 0 || strcmp(group, "P-256") == 0;
}

int nearby_p256_public_raw(const uint8_t *pkcs8, size_t key_count, uint8_t *point) {
    EVP_PKEY *key = key_from_der(pkcs8, key_count);
    if (!key) return -1;
    unsigned char encoded[65];
    size_t length = 0;
    int ok = key_is_p256(key)
        && EVP_PKEY_get_octet_string_param(key, OSSL_PKEY_PARAM_ENCODED_PUBLIC_KEY, encoded, sizeof encoded, &length) == 1
        && length == 65 && encoded[0] == 0x04;
    EVP_PKEY_free(key);
    if (!ok) return -1;
    memcpy(point, encoded + 1, 64);
    return 0;
}

int nearby_p256_sign_raw(const uint8_t *pkcs8, size_t key_count, const uint8_t *bytes, size_t count,
                         uint8_t *signature, char *error, size_t error_size) {
    EVP_PKEY *key = key_from_der(pkcs8, key_count);
    if (!key) return fail(error, error_size, "cannot read the private key");
    if (!key_is_p256(key)) {
        EVP_PKEY_free(key);
        return fail(error, error_size, "the key is not a P-256 key");
    }
    EVP_MD_CTX *context = EVP_MD_CTX_new();
    unsigned char der[80];  // a P-256 ECDSA-Sig-Value in DER is at most 72 bytes
    size_t der_length = sizeof der;
    int ok = context && EVP_DigestSignInit(context, NULL, EVP_sha256(), NULL, key) == 1
        && EVP_DigestSign(context, der, &der_length, bytes, count) == 1;
    EVP_MD_CTX_free(context);
    EVP_PKEY_free(key);
    if (!ok) return fail(error, error_size, "cannot sign");
    const unsigned char *cursor = der;
    ECDSA_SIG *value = d2i_ECDSA_SIG(NULL, &cursor, (long)der_length);
    if (!value) return fail(error, error_size, "cannot read the signature OpenSSL made");
    const BIGNUM *r = NULL, *s = NULL;
    ECDSA_SIG_get0(value, &r, &s);
    ok = BN_bn2binpad(r, signature, 32) == 32 && BN_bn2binpad(s, signature + 32, 32) == 32;
    ECDSA_SIG_free(value);
    return ok ? 0 : fail(error, error_size, "cannot write the signature as r and s");
}

int nearby_p256_verify_raw(const uint8_t *point, const uint8_t *bytes, size_t count, const uint8_t *signature) {
    if (!point || !signature || (!bytes && count > 0)) return 0;
    // The public key from its encoded point (0x04 ‖ x ‖ y): OpenSSL checks it is on the curve.
    unsigned char encoded[65];
    encoded[0] = 0x04;
    memcpy(encoded + 1, point, 64);
    char group[] = "prime256v1";
    OSSL_PARAM parameters[] = {
        OSSL_PARAM_construct_utf8_string(OSSL_PKEY_PARAM_GROUP_NAME, group, 0),
        OSSL_PARAM_construct_octet_string(OSSL_PKEY_PARAM_PUB_KEY, encoded, sizeof encoded),
        OSSL_PARAM_construct_end(),
    };
    EVP_PKEY_CTX *factory = EVP_PKEY_CTX_new_from_name(NULL, "EC", NULL);
    EVP_PKEY *key = NULL;
    int made = factory && EVP_PKEY_fromdata_init(factory) == 1
        && EVP_PKEY_fromdata(factory, &key, EVP_PKEY_PUBLIC_KEY, parameters) == 1;
    EVP_PKEY_CTX_free(factory);
    if (!made || !key) {
        EVP_PKEY_free(key);
        ERR_clear_error();
        return 0;
    }
    // The signature from r and s into the DER form OpenSSL verifies.
    ECDSA_SIG *value = ECDSA_SIG_new();
    BIGNUM *r = BN_bin2bn(signature, 32, NULL);
    BIGNUM *s = BN_bin2bn(signature + 32, 32, NULL);
    unsigned char *der = NULL;
    int der_length = -1;
    if (value && r && s && ECDSA_SIG_set0(value, r, s) == 1) {
        r = NULL;  // owned by `value` now
        s = NULL;
        der_length = i2d_ECDSA_SIG(value, &der);
    }
    BN_free(r);
    BN_free(s);
    ECDSA_SIG_free(value);
    int verified = 0;
    EVP_MD_CTX *context = EVP_MD_CTX_new();
    if (der_length > 0 && context && EVP_DigestVerifyInit(context, NULL, EVP_sha256(), NULL, key) == 1) {
        verified = EVP_DigestVerify(context, der, (size_t)der_length, bytes, count) == 1;
    }
    EVP_MD_CTX_free(context);
    OPENSSL_free(der);
    EVP_PKEY_free(key);
    ERR_clear_error();
    return verified;
}
