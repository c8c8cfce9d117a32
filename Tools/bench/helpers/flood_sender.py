#!/usr/bin/env python3
"""Flood the mDNS group from inside a lab host: hostile packets mixed with valid PTR queries.

    Tools/lab exec h2 -- python3 Tools/bench/helpers/flood_sender.py [--rate 30000] [--seconds 15]
                                                             [--interface lan1] [--type _openagents._tcp]
                                                             [--family 4|6|both]

Sends to 224.0.0.251:5353 (--family 4, the default), to [ff02::fb]:5353 (6), or to both in
turn (both: the rate is the total), from port 5353 on the lab interface only (it refuses to
run where that interface does not exist, as in the root namespace). Half the packets are hostile
(compression-pointer loops, self pointers, pointers past the end, over-long labels, section
counts beyond the data, truncated headers, random bytes), half are valid QM queries for the
type's PTR, each with a fresh id. Prints one JSON line at the end: packets sent and the rate.
"""
import argparse
import json
import os
import random
import struct
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "lab.d", "peers"))
from send_mdns import open_mdns_socket  # noqa: E402  (one socket recipe for the lab's senders)


def name(text: str) -> bytes:
    out = b""
    for label in text.strip(".").split("."):
        out += bytes([len(label)]) + label.encode()
    return out + b"\0"


def header(qd=0, an=0, ns=0, ar=0, flags=0, ident=0) -> bytes:
    return struct.pack("!HHHHHH", ident, flags, qd, an, ns, ar)


def hostile_packets() -> list:
    packets = []
    # A question whose name is a pointer to itself.
    packets.append(header(qd=1) + b"\xc0\x0c" + b"\x00\x0c\x00\x01")
    # Two pointers pointing at each other.
    packets.append(header(qd=1) + b"\xc0\x0e\xc0\x0c" + b"\x00\x0c\x00\x01")
    # A pointer beyond the end of the packet.
    packets.append(header(qd=1) + b"\xc3\xff" + b"\x00\x0c\x00\x01")
    # A label longer than 63 bytes (the length byte says 0x7f: reserved bits).
    packets.append(header(qd=1) + b"\x7f" + b"a" * 127 + b"\x00" + b"\x00\x0c\x00\x01")
    # Section counts far beyond the data.
    packets.append(header(qd=65535, an=65535, ns=65535, ar=65535) + name("x.local") + b"\x00\x01\x00\x01")
    # A truncated header.
    packets.append(b"\x00\x00\x84")
    # A response whose record claims more RDATA than there is.
    packets.append(header(an=1, flags=0x8400) + name("x.local") + b"\x00\x01\x00\x01\x00\x00\x00\x78\xff\xff\x01\x02")
    # A name of 200 one-byte labels (over the 128-label limit).
    packets.append(header(qd=1) + b"\x01a" * 200 + b"\x00" + b"\x00\x0c\x00\x01")
    rng = random.Random(7)
    for _ in range(8):
        packets.append(bytes(rng.getrandbits(8) for _ in range(rng.randint(12, 300))))
    return packets


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rate", type=int, default=30000, help="packets per second (default 30000)")
    parser.add_argument("--seconds", type=float, default=15)
    parser.add_argument("--interface", default="lan1")
    parser.add_argument("--type", default="_openagents._tcp")
    parser.add_argument("--family", choices=["4", "6", "both"], default="4")
    args = parser.parse_args()
    try:
        targets = [open_mdns_socket(args.interface, ipv6=(family == "6"), loop=False)
                   for family in (["4", "6"] if args.family == "both" else [args.family])]
    except OSError:
        print(f"flood_sender: no interface {args.interface!r} here; run it inside a lab host", file=sys.stderr)
        return 2
    hostile = hostile_packets()
    question = name(args.type + ".local") + b"\x00\x0c\x00\x01"
    queries = [header(qd=1, ident=i) + question for i in range(256)]
    mix = [p for pair in zip(hostile * 2, queries[: len(hostile) * 2]) for p in pair]
    sent = errors = 0
    start = time.monotonic()
    end = start + args.seconds
    burst = max(1, args.rate // 1000)  # packets per millisecond
    next_slot = start
    i = 0
    while True:
        now = time.monotonic()
        if now >= end:
            break
        if now < next_slot:
            time.sleep(next_slot - now)
        for _ in range(burst):
            # Pairs (a hostile packet, a query) alternate between the families.
            sock, destination = targets[(i // 2) % len(targets)]
            try:
                sock.sendto(mix[i % len(mix)], destination)
                sent += 1
            except OSError:
                errors += 1
            i += 1
        next_slot += 0.001
    elapsed = time.monotonic() - start
    print(json.dumps({"event": "flooded", "family": args.family, "sent": sent, "errors": errors,
                      "seconds": round(elapsed, 3), "rate": round(sent / elapsed)}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
