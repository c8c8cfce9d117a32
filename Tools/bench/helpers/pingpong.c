// Tools/bench/helpers/pingpong.c: the floor under Tools/bench/connection's round trips. A 1-byte TCP
// ping-pong between two processes on 127.0.0.1, each waiting in epoll_wait as an event loop
// does: no TLS, no WebSocket, no JSON. One-at-a-time round trips cannot beat it on a machine,
// whatever the implementation: each one wakes a sleeping thread on each side.
//
//   pingpong PORT SECONDS     prints {"figure":"floor","per_second":N}
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

// Echoes bytes (server) or sends, waits and counts until `seconds` are up (client).
static void loop(int fd, int client, double seconds) {
    int ep = epoll_create1(0);
    struct epoll_event ev = {.events = EPOLLIN, .data.fd = fd};
    epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
    char byte = 1;
    long count = 0;
    double start = now(), end = start + seconds;
    if (client && write(fd, &byte, 1) != 1) return;
    for (;;) {
        struct epoll_event out;
        if (epoll_wait(ep, &out, 1, -1) < 1) continue;
        if (read(fd, &byte, 1) < 1) break;
        count++;
        if (client && now() > end) {
            printf("{\"figure\":\"floor\",\"per_second\":%.0f}\n", count / (now() - start));
            break;
        }
        if (write(fd, &byte, 1) != 1) break;
    }
}

int main(int argc, char **argv) {
    if (argc != 3) { fprintf(stderr, "usage: pingpong PORT SECONDS\n"); return 2; }
    int one = 1;
    int listener = socket(AF_INET, SOCK_STREAM, 0);
    setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in address = {.sin_family = AF_INET, .sin_port = htons((unsigned short)atoi(argv[1]))};
    inet_pton(AF_INET, "127.0.0.1", &address.sin_addr);
    if (bind(listener, (struct sockaddr *)&address, sizeof address) != 0 || listen(listener, 1) != 0) { perror("pingpong"); return 1; }
    pid_t child = fork();
    if (child == 0) {
        int peer = accept(listener, 0, 0);
        setsockopt(peer, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        loop(peer, 0, 0);
        _exit(0);
    }
    int sock = socket(AF_INET, SOCK_STREAM, 0);
    if (connect(sock, (struct sockaddr *)&address, sizeof address) != 0) { perror("pingpong"); return 1; }
    setsockopt(sock, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    loop(sock, 1, atof(argv[2]));
    close(sock);
    waitpid(child, 0, 0);
    return 0;
}
