#!/usr/bin/env python3
"""Send raw mDNS packets (files of DNS message bytes) from inside a lab host.

    Tools/lab exec h1 -- python3 Tools/lab.d/peers/send_mdns.py [--repeat N] [--interval S]
                                   [--ipv6] [--interface lan1] PACKET.bin ...

Sends each file as one UDP datagram from port 5353 to 224.0.0.251:5353 (or [ff02::fb]:5353
with --ipv6) on the given interface, N times, S seconds apart. Only for lab namespaces: it
refuses to run when the interface does not exist (as in the root namespace, which has no lan1).
"""
import argparse
import socket
import struct
import sys
import time


def open_mdns_socket(interface, ipv6=False, loop=True):
    """A UDP socket on port 5353 bound to `interface`, aimed at the mDNS group, and the
    group's address. Raises OSError when the interface does not exist here (outside a lab)."""
    index = socket.if_nametoindex(interface)
    sock = socket.socket(socket.AF_INET6 if ipv6 else socket.AF_INET, socket.SOCK_DGRAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if hasattr(socket, "SO_REUSEPORT"):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_BINDTODEVICE, interface.encode())
    if ipv6:
        sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_MULTICAST_IF, index)
        sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_MULTICAST_HOPS, 255)
        sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_MULTICAST_LOOP, int(loop))
        sock.bind(("::", 5353))
        return sock, ("ff02::fb", 5353, 0, index)
    sock.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_IF, struct.pack("4s4si", b"\0" * 4, b"\0" * 4, index))
    sock.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_TTL, 255)
    sock.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_LOOP, int(loop))
    sock.bind(("0.0.0.0", 5353))
    return sock, ("224.0.0.251", 5353)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("packets", nargs="+")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--interval", type=float, default=1.0)
    parser.add_argument("--ipv6", action="store_true")
    parser.add_argument("--interface", default="lan1")
    args = parser.parse_args()
    try:
        sock, destination = open_mdns_socket(args.interface, ipv6=args.ipv6)
    except OSError:
        print(f"send_mdns: no interface {args.interface!r} here; run it inside a lab host", file=sys.stderr)
        return 2
    payloads = [open(path, "rb").read() for path in args.packets]
    for round_number in range(args.repeat):
        if round_number:
            time.sleep(args.interval)
        for payload in payloads:
            sock.sendto(payload, destination)
    print(f"sent {len(payloads)} packet(s) x {args.repeat} on {args.interface}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
