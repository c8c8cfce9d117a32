#define _GNU_SOURCE 1
#include "nearby_socket.h"

#include <errno.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>

enum { NEARBY_MAX_BATCH = 64, NEARBY_CONTROL_SIZE = 128 };

// Fills `out` from one message header as the kernel left it.
static void describe(const struct msghdr *header, ssize_t length, size_t slot_size, nearby_datagram *out) {
    memset(out, 0, sizeof(*out));
    out->dropped_so_far = -1;
    out->length = (header->msg_flags & MSG_TRUNC) || length < 0 || (size_t)length > slot_size ? -1 : (int)length;
    const struct sockaddr_storage *name = header->msg_name;
    if (header->msg_namelen >= sizeof(struct sockaddr_in) && name->ss_family == AF_INET) {
        const struct sockaddr_in *v4 = (const struct sockaddr_in *)name;
        out->source_family = 4;
        memcpy(out->source, &v4->sin_addr, 4);
        out->source_port = ntohs(v4->sin_port);
    } else if (header->msg_namelen >= sizeof(struct sockaddr_in6) && name->ss_family == AF_INET6) {
        const struct sockaddr_in6 *v6 = (const struct sockaddr_in6 *)name;
        out->source_family = 6;
        memcpy(out->source, &v6->sin6_addr, 16);
        out->source_port = ntohs(v6->sin6_port);
    }
    for (struct cmsghdr *control = CMSG_FIRSTHDR((struct msghdr *)header); control != NULL;
         control = CMSG_NXTHDR((struct msghdr *)header, control)) {
#if defined(SO_RXQ_OVFL)
        if (control->cmsg_level == SOL_SOCKET && control->cmsg_type == SO_RXQ_OVFL
            && control->cmsg_len >= CMSG_LEN(sizeof(uint32_t))) {
            uint32_t dropped;
            memcpy(&dropped, CMSG_DATA(control), sizeof(dropped));
            out->dropped_so_far = dropped;
        } else
#endif
        if (control->cmsg_level == IPPROTO_IP && control->cmsg_type == IP_PKTINFO
            && control->cmsg_len >= CMSG_LEN(sizeof(struct in_pktinfo))) {
            struct in_pktinfo info;
            memcpy(&info, CMSG_DATA(control), sizeof(info));
            out->interface_index = (int)info.ipi_ifindex;
            out->to_group = (ntohl(info.ipi_addr.s_addr) >> 28) == 0xE;  // 224.0.0.0/4
        } else if (control->cmsg_level == IPPROTO_IPV6 && control->cmsg_type == IPV6_PKTINFO
                   && control->cmsg_len >= CMSG_LEN(sizeof(struct in6_pktinfo))) {
            struct in6_pktinfo info;
            memcpy(&info, CMSG_DATA(control), sizeof(info));
            out->interface_index = (int)info.ipi6_ifindex;
            out->to_group = info.ipi6_addr.s6_addr[0] == 0xFF;  // ff00::/8
        }
    }
}

int nearby_receive_datagrams(int fd, uint8_t *slots, size_t slot_size, nearby_datagram *datagrams, int count) {
    if (count <= 0) return 0;
    if (count > NEARBY_MAX_BATCH) count = NEARBY_MAX_BATCH;
    struct sockaddr_storage names[NEARBY_MAX_BATCH];
    struct iovec vectors[NEARBY_MAX_BATCH];
    // Aligned for struct cmsghdr, as CMSG_FIRSTHDR expects.
    union { struct cmsghdr align; uint8_t bytes[NEARBY_CONTROL_SIZE]; } controls[NEARBY_MAX_BATCH];
#if defined(__linux__)
    struct mmsghdr headers[NEARBY_MAX_BATCH];
    memset(headers, 0, sizeof(struct mmsghdr) * (size_t)count);
    for (int index = 0; index < count; index++) {
        vectors[index].iov_base = slots + (size_t)index * slot_size;
        vectors[index].iov_len = slot_size;
        struct msghdr *header = &headers[index].msg_hdr;
        header->msg_name = &names[index];
        header->msg_namelen = sizeof(names[index]);
        header->msg_iov = &vectors[index];
        header->msg_iovlen = 1;
        header->msg_control = controls[index].bytes;
        header->msg_controllen = NEARBY_CONTROL_SIZE;
    }
    int received;
    do {
        received = recvmmsg(fd, headers, (unsigned int)count, MSG_DONTWAIT, NULL);
    } while (received < 0 && errno == EINTR);
    if (received < 0) return (errno == EAGAIN || errno == EWOULDBLOCK) ? 0 : -1;
    for (int index = 0; index < received; index++) {
        describe(&headers[index].msg_hdr, (ssize_t)headers[index].msg_len, slot_size, &datagrams[index]);
    }
    return received;
#else
    int received = 0;
    while (received < count) {
        struct msghdr header;
        memset(&header, 0, sizeof(header));
        vectors[received].iov_base = slots + (size_t)received * slot_size;
        vectors[received].iov_len = slot_size;
        header.msg_name = &names[received];
        header.msg_namelen = sizeof(names[received]);
        header.msg_iov = &vectors[received];
        header.msg_iovlen = 1;
        header.msg_control = controls[received].bytes;
        header.msg_controllen = NEARBY_CONTROL_SIZE;
        ssize_t length = recvmsg(fd, &header, MSG_DONTWAIT);
        if (length < 0) {
            if (errno == EINTR) continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK) break;
            return received > 0 ? received : -1;
        }
        describe(&header, length, slot_size, &datagrams[received]);
        received++;
    }
    return received;
#endif
}

int nearby_enable_drop_count(int fd) {
#if defined(SO_RXQ_OVFL)
    int on = 1;
    return setsockopt(fd, SOL_SOCKET, SO_RXQ_OVFL, &on, sizeof(on));
#else
    (void)fd;
    errno = ENOPROTOOPT;
    return -1;
#endif
}
