// Tools/bench/helpers/tls_strangers.c: the handshake loops of Tools/bench/strangers, in C, so that the
// attacker's own cost per handshake is small and the server's is what is measured. Each of N
// threads completes TLS 1.3 handshakes one after another until the time is up, each with an
// identity of its own made just before it (a new P-256 key and a self-signed certificate for
// it: nothing the server remembered of the last stranger helps with the next), or with one
// identity from a PEM file for all. After the handshake it waits up to WAIT ms for the
// server's verdict (an alert, a close, or data). Every socket is bound to the next of COUNT
// addresses from FIRST on.
//
//   tls_strangers HOST PORT SECONDS THREADS FIRST COUNT WAIT_MS (fresh | PEM-FILE)
//
// Prints one JSON object: attempted, completed, keys_made and the outcomes with their counts.
// Build: cc -O2 -o tls_strangers tls_strangers.c -lssl -lcrypto -lpthread (libssl-dev).
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

enum outcome {
    REFUSED_ALERT,   // handshake done, then the server's alert (its refusal)
    CLOSED_EOF,      // handshake done, then closed without an alert
    SAID_SOMETHING,  // handshake done, then data (?!)
    VERDICT_TIMEOUT, // handshake done, no verdict within WAIT
    HANDSHAKE_FAILED,
    CONNECT_FAILED,
    CONNECT_TIMEOUT,
    BIND_FAILED,
    OUTCOMES
};
static const char *names[OUTCOMES] = {
    "handshake done, then refused (TLS alert)", "handshake done, then closed (EOF)",
    "handshake done, server said something",   "handshake done, no verdict in time",
    "handshake failed",                         "TCP connect failed",
    "TCP connect timed out",                    "bind to the source address failed",
};

static struct sockaddr_in server;
static uint32_t first_source;
static int source_count, wait_ms;
static double deadline;
static SSL_CTX *context;
static const char *pem_file;  // NULL: a fresh identity each time
static atomic_long attempted, completed, keys_made, next_source, counts[OUTCOMES];

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

static void timeouts(int fd, int ms) {
    struct timeval tv = {.tv_sec = ms / 1000, .tv_usec = (ms % 1000) * 1000};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

// A new P-256 key and a self-signed certificate for it, valid from an hour ago for a year.
static int fresh_identity(SSL *ssl, long serial) {
    EVP_PKEY *key = EVP_EC_gen("P-256");
    X509 *cert = X509_new();
    int ok = 0;
    if (key && cert) {
        char name[64];
        snprintf(name, sizeof name, "stranger %ld", serial);
        X509_set_version(cert, 2);
        ASN1_INTEGER_set(X509_get_serialNumber(cert), serial);
        X509_gmtime_adj(X509_getm_notBefore(cert), -3600);
        X509_gmtime_adj(X509_getm_notAfter(cert), 365L * 24 * 3600);
        X509_NAME *subject = X509_get_subject_name(cert);
        X509_NAME_add_entry_by_txt(subject, "CN", MBSTRING_UTF8, (const unsigned char *)name, -1, -1, 0);
        X509_set_issuer_name(cert, subject);
        X509_set_pubkey(cert, key);
        ok = X509_sign(cert, key, EVP_sha256()) > 0 && SSL_use_certificate(ssl, cert) == 1 && SSL_use_PrivateKey(ssl, key) == 1;
    }
    X509_free(cert);
    EVP_PKEY_free(key);
    return ok;
}

static void *loop(void *unused) {
    (void)unused;
    char byte;
    while (now() < deadline) {
        atomic_fetch_add(&attempted, 1);
        SSL *ssl = SSL_new(context);
        if (!pem_file) {
            if (!fresh_identity(ssl, atomic_fetch_add(&keys_made, 1) + 1)) {
                fprintf(stderr, "tls_strangers: could not make an identity\n");
                ERR_print_errors_fp(stderr);
                exit(1);
            }
        }
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        struct sockaddr_in source = {.sin_family = AF_INET};
        source.sin_addr.s_addr = htonl(first_source + (uint32_t)(atomic_fetch_add(&next_source, 1) % source_count));
        int one = 1;
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        if (bind(fd, (struct sockaddr *)&source, sizeof source) != 0) {
            atomic_fetch_add(&counts[BIND_FAILED], 1);
            close(fd);
            SSL_free(ssl);
            usleep(100000);
            continue;
        }
        timeouts(fd, 5000);
        if (connect(fd, (struct sockaddr *)&server, sizeof server) != 0) {
            atomic_fetch_add(&counts[errno == EINPROGRESS || errno == EAGAIN || errno == ETIMEDOUT ? CONNECT_TIMEOUT : CONNECT_FAILED], 1);
            close(fd);
            SSL_free(ssl);
            usleep(100000);
            continue;
        }
        timeouts(fd, 10000);
        SSL_set_fd(ssl, fd);
        if (SSL_connect(ssl) != 1) {
            atomic_fetch_add(&counts[HANDSHAKE_FAILED], 1);
        } else {
            atomic_fetch_add(&completed, 1);
            timeouts(fd, wait_ms);
            int n = SSL_read(ssl, &byte, 1);
            if (n > 0) {
                atomic_fetch_add(&counts[SAID_SOMETHING], 1);
            } else {
                int error = SSL_get_error(ssl, n);
                if (error == SSL_ERROR_ZERO_RETURN)
                    atomic_fetch_add(&counts[CLOSED_EOF], 1);
                else if (error == SSL_ERROR_SSL && ERR_GET_REASON(ERR_peek_last_error()) >= SSL_AD_REASON_OFFSET)
                    atomic_fetch_add(&counts[REFUSED_ALERT], 1);
                else if (error == SSL_ERROR_SYSCALL && (errno == EAGAIN || errno == EWOULDBLOCK))
                    atomic_fetch_add(&counts[VERDICT_TIMEOUT], 1);
                else
                    atomic_fetch_add(&counts[CLOSED_EOF], 1);
            }
        }
        ERR_clear_error();
        SSL_free(ssl);
        close(fd);
    }
    return NULL;
}

int main(int argc, char **argv) {
    if (argc != 9) {
        fprintf(stderr, "usage: tls_strangers HOST PORT SECONDS THREADS FIRST COUNT WAIT_MS (fresh | PEM-FILE)\n");
        return 2;
    }
    server.sin_family = AF_INET;
    server.sin_port = htons((uint16_t)atoi(argv[2]));
    struct in_addr first;
    if (inet_pton(AF_INET, argv[1], &server.sin_addr) != 1 || inet_pton(AF_INET, argv[5], &first) != 1) {
        fprintf(stderr, "tls_strangers: HOST and FIRST must be IPv4 addresses\n");
        return 2;
    }
    first_source = ntohl(first.s_addr);
    double seconds = atof(argv[3]);
    int threads = atoi(argv[4]);
    source_count = atoi(argv[6]);
    wait_ms = atoi(argv[7]);
    if (threads < 1 || source_count < 1 || wait_ms < 1 || seconds <= 0) {
        fprintf(stderr, "tls_strangers: SECONDS, THREADS, COUNT and WAIT_MS must be positive\n");
        return 2;
    }
    pem_file = strcmp(argv[8], "fresh") == 0 ? NULL : argv[8];
    signal(SIGPIPE, SIG_IGN);  // a server that closes first is an outcome, not the end of the attack
    context = SSL_CTX_new(TLS_client_method());
    SSL_CTX_set_min_proto_version(context, TLS1_3_VERSION);
    SSL_CTX_set_verify(context, SSL_VERIFY_NONE, NULL);  // we are here to be judged, not to judge
    SSL_CTX_set_session_cache_mode(context, SSL_SESS_CACHE_OFF);
    if (pem_file && (SSL_CTX_use_certificate_chain_file(context, pem_file) != 1 ||
                     SSL_CTX_use_PrivateKey_file(context, pem_file, SSL_FILETYPE_PEM) != 1)) {
        fprintf(stderr, "tls_strangers: cannot use %s\n", pem_file);
        ERR_print_errors_fp(stderr);
        return 1;
    }
    deadline = now() + seconds;
    pthread_t ids[threads];
    for (int i = 0; i < threads; i++) pthread_create(&ids[i], NULL, loop, NULL);
    for (int i = 0; i < threads; i++) pthread_join(ids[i], NULL);
    printf("{\"attempted\": %ld, \"completed\": %ld, \"keys_made\": %ld, \"outcomes\": {", attempted, completed, keys_made);
    int comma = 0;
    for (int i = 0; i < OUTCOMES; i++) {
        if (counts[i] == 0) continue;
        printf("%s\"%s\": %ld", comma ? ", " : "", names[i], counts[i]);
        comma = 1;
    }
    printf("}}\n");
    return 0;
}
