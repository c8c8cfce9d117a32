#!/usr/bin/env python3
"""Send the hand-made UDP datagrams of Tools/captures/make from INSIDE a lab host.

    Tools/lab exec --name fx h2 -- python3 lab_send.py big  [--ipv6] [--interface lan1]
    Tools/lab exec --name fx h2 -- python3 lab_send.py hbh  [--interface lan1]
    Tools/lab exec --name fx h2 -- python3 lab_send.py dstopts [--interface lan1]
    Tools/lab exec --name fx h2 -- python3 lab_send.py mdns [--ipv6] [--interface lan1]
    Tools/lab exec --name fx h3 -- python3 lab_send.py query [--ipv6] [--interface lan1]
    Tools/lab exec --name fx h2 -- python3 lab_send.py unicast ADDRESS PORT
    Tools/lab exec --name fx h2 -- python3 lab_send.py ping ADDRESS

big      a valid mDNS response (ID 0, QR=1 AA=1) of ~3.5 KB with one large TXT record, from port
         5353 to 224.0.0.251:5353 (or [ff02::fb]:5353), with path-MTU discovery off
         (IP_MTU_DISCOVER / IPV6_MTU_DISCOVER = *_PMTUDISC_DONT) so that the kernel fragments it
         at the source: 3 IPv4 fragments, or 3 IPv6 fragments with a Fragment header.
hbh      a small mDNS announcement to [ff02::fb]:5353 carrying a Hop-by-Hop Options header
         (IPV6_HOPOPTS, one PadN option) that the kernel builds.
dstopts  the same with a Destination Options header (IPV6_DSTOPTS).
mdns     a small mDNS announcement on the given interface (used for the 802.1ad/802.1Q one).
query    a plain mDNS query (ID 0, one QM question: _openagents._tcp.local PTR IN, no known
         answers) from port 5353, which a responder answers by multicast.
unicast  one datagram "nearby fixture\n" to ADDRESS:PORT (not mDNS).
ping     one ICMP echo request (ID 0x4e42, sequence 1, 32 bytes of data) to an IPv4 ADDRESS;
         the kernel of ADDRESS answers it (there is no `ping` on this machine).

Every payload is fixed, so the bytes are the same on every run. The script refuses to run in
the root network namespace (or anywhere the interface does not exist): it is only for the lab.
"""
import argparse
import os
import socket
import struct
import sys

IP_MTU_DISCOVER, IP_PMTUDISC_DONT = 10, 0
IPV6_MTU_DISCOVER, IPV6_PMTUDISC_DONT = 23, 0
IPV6_HOPOPTS, IPV6_DSTOPTS = 54, 59
SERVICE_TYPE = "_openagents._tcp.local"


def refuse_root_namespace() -> None:
    """Exit unless this process runs in a lab host's namespace (/run/netns/nb*-hN)."""
    me = os.stat("/proc/self/ns/net")
    for entry in os.listdir("/run/netns") if os.path.isdir("/run/netns") else []:
        st = os.stat(os.path.join("/run/netns", entry))
        if (st.st_dev, st.st_ino) == (me.st_dev, me.st_ino):
            if entry.startswith("nb") and entry.rsplit("-", 1)[-1].startswith("h"):
                return
            break
    sys.exit("lab_send: not inside a lab host's network namespace; run me with `Tools/lab exec`")


def name(text: str) -> bytes:
    out = b""
    for label in text.rstrip(".").split("."):
        raw = label.encode()
        out += bytes([len(raw)]) + raw
    return out + b"\0"


def record(owner: str, rtype: int, rdata: bytes, ttl: int = 120, flush: bool = True) -> bytes:
    return name(owner) + struct.pack("!HHIH", rtype, 0x8001 if flush else 1, ttl, len(rdata)) + rdata


def response(answers: list[bytes]) -> bytes:
    return struct.pack("!HHHHHH", 0, 0x8400, 0, len(answers), 0, 0) + b"".join(answers)


def big_response() -> bytes:
    instance = f"Fixture Big.{SERVICE_TYPE}"
    strings = b""
    for i in range(14):  # 14 strings of 250 bytes: 3500 bytes of TXT rdata
        item = f"k{i:02d}=".encode() + bytes(ord("a") + (i + j) % 26 for j in range(246))
        strings += bytes([len(item)]) + item
    return response([
        record(SERVICE_TYPE, 12, name(instance), ttl=4500, flush=False),
        record(instance, 33, struct.pack("!HHH", 0, 0, 9097) + name("fixture-big.local")),
        record(instance, 16, strings, ttl=4500),
    ])


def small_announcement(label: str) -> bytes:
    instance = f"{label}.{SERVICE_TYPE}"
    return response([
        record(SERVICE_TYPE, 12, name(instance), ttl=4500, flush=False),
        record(instance, 16, b"\x0bfixture=yes", ttl=4500),
    ])


def mdns_socket(interface: str, ipv6: bool):
    try:
        index = socket.if_nametoindex(interface)
    except OSError:
        sys.exit(f"lab_send: no interface {interface!r} here; run me inside a lab host")
    sock = socket.socket(socket.AF_INET6 if ipv6 else socket.AF_INET, socket.SOCK_DGRAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_BINDTODEVICE, interface.encode())
    if ipv6:
        sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_MULTICAST_IF, index)
        sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_MULTICAST_HOPS, 255)
        sock.bind(("::", 5353))
        return sock, ("ff02::fb", 5353, 0, index)
    sock.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_IF, struct.pack("4s4si", b"\0" * 4, b"\0" * 4, index))
    sock.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_TTL, 255)
    sock.bind(("0.0.0.0", 5353))
    return sock, ("224.0.0.251", 5353)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("what", choices=["big", "hbh", "dstopts", "mdns", "query", "unicast", "ping"])
    parser.add_argument("rest", nargs="*")
    parser.add_argument("--ipv6", action="store_true")
    parser.add_argument("--interface", default="lan1")
    parser.add_argument("--label", default="Fixture Options")
    args = parser.parse_args()
    refuse_root_namespace()

    if args.what == "unicast":
        address, port = args.rest[0], int(args.rest[1])
        family = socket.AF_INET6 if ":" in address else socket.AF_INET
        with socket.socket(family, socket.SOCK_DGRAM) as sock:
            sock.sendto(b"nearby fixture\n", (address, port))
        return 0

    if args.what == "ping":
        data = b"nearby fixture ping 0123456789ab"
        header = struct.pack("!BBHHH", 8, 0, 0, 0x4E42, 1)
        total = sum(struct.unpack("!%dH" % ((len(header) + len(data)) // 2), header + data))
        total = (total >> 16) + (total & 0xFFFF)
        checksum = ~(total + (total >> 16)) & 0xFFFF
        with socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP) as sock:
            sock.sendto(struct.pack("!BBHHH", 8, 0, checksum, 0x4E42, 1) + data, (args.rest[0], 0))
            sock.settimeout(2)
            try:
                sock.recv(1500)  # the echo reply (or anything ICMP): just wait for it
            except socket.timeout:
                print("lab_send: no echo reply", file=sys.stderr)
        return 0

    ipv6 = args.ipv6 or args.what in ("hbh", "dstopts")
    sock, destination = mdns_socket(args.interface, ipv6)
    if args.what == "big":
        payload = big_response()
        if ipv6:
            sock.setsockopt(socket.IPPROTO_IPV6, IPV6_MTU_DISCOVER, IPV6_PMTUDISC_DONT)
        else:
            sock.setsockopt(socket.IPPROTO_IP, IP_MTU_DISCOVER, IP_PMTUDISC_DONT)
    elif args.what in ("hbh", "dstopts"):
        # Next header (the kernel fills it in), length 0 (= 8 bytes), one PadN option of 4
        # bytes (type 1, length 4, zeros): a valid 8-byte options header.
        block = bytes([17, 0, 1, 4, 0, 0, 0, 0])
        sock.setsockopt(socket.IPPROTO_IPV6, IPV6_HOPOPTS if args.what == "hbh" else IPV6_DSTOPTS, block)
        payload = small_announcement("Fixture Hop-by-Hop" if args.what == "hbh" else "Fixture Destination Options")
    elif args.what == "query":
        payload = struct.pack("!HHHHHH", 0, 0, 1, 0, 0, 0) + name(SERVICE_TYPE) + struct.pack("!HH", 12, 1)
    else:
        payload = small_announcement(args.label)
    sock.sendto(payload, destination)
    print(f"lab_send: {args.what}: {len(payload)} bytes to {destination[0]} on {args.interface}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
