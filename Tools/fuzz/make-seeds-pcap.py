#!/usr/bin/env python3
"""Writes the seed captures of the pcap fuzz target into Tools/fuzz/seeds-pcap/ (struct only).

Small classic pcap files as `tcpdump -w` writes them, one per variation the reader handles:
byte order, micro/nanosecond times, Ethernet / Linux cooked / raw IP links, IPv4 (with and
without options) and IPv6, frames that are not UDP and a record cut short. Each UDP payload is
a small mDNS query. Run it again after editing; the .pcap files are committed alongside it.

The lab-*.pcap and lab-*.pcapng seeds beside them are not made here: they are a few frames each
of the lab captures in Tests/PacketCaptureTests/Fixtures/captures (editcap -r), so that the
fuzzer starts from pcapng blocks, several interfaces, 802.11, radiotap, VLAN tags and fragments.

    python3 Tools/fuzz/make-seeds-pcap.py [OUTPUT_DIR]
"""

import os
import struct
import sys

# An mDNS query for _nearby._tcp.local PTR (QU bit set).
QUERY = (
    struct.pack("!6H", 0, 0, 1, 0, 0, 0)
    + b"\x07_nearby\x04_tcp\x05local\x00"
    + struct.pack("!2H", 12, 0x8001)
)


def udp(payload, sport=5353, dport=5353):
    return struct.pack("!4H", sport, dport, 8 + len(payload), 0) + payload


def ipv4(segment, src=bytes([192, 168, 1, 20]), dst=bytes([224, 0, 0, 251]), options=b"", proto=17):
    ihl = 5 + len(options) // 4
    return (
        struct.pack("!BBHHHBBH", 0x40 | ihl, 0, ihl * 4 + len(segment), 0, 0x4000, 255, proto, 0)
        + src + dst + options + segment
    )


def ipv6(segment, src=bytes.fromhex("fe800000000000000000000000000001"),
         dst=bytes.fromhex("ff0200000000000000000000000000fb"), next_header=17):
    return struct.pack("!IHBB", 0x60000000, len(segment), next_header, 255) + src + dst + segment


def ethernet(packet, v6=False):
    return bytes.fromhex("01005e0000fb020000000001") + (b"\x86\xdd" if v6 else b"\x08\x00") + packet


def cooked(packet, v6=False):
    return bytes.fromhex("0000000100060200000000010000") + (b"\x86\xdd" if v6 else b"\x08\x00") + packet


def capture(link, frames, little=True, nano=False, truncate_last=0):
    order = "<" if little else ">"
    magic = 0xA1B23C4D if nano else 0xA1B2C3D4
    out = struct.pack(order + "IHHiIII", magic, 2, 4, 0, 0, 262144, link)
    for index, frame in enumerate(frames):
        fraction = 250_000_000 if nano else 250_000
        out += struct.pack(order + "IIII", 1_700_000_000 + index, fraction, len(frame), len(frame)) + frame
    return out[: len(out) - truncate_last] if truncate_last else out


SEEDS = {
    "ethernet-ipv4.pcap": capture(1, [ethernet(ipv4(udp(QUERY)))]),
    "ethernet-ipv6-bigendian-nano.pcap": capture(
        1, [ethernet(ipv6(udp(QUERY)), v6=True)], little=False, nano=True),
    "cooked-mixed.pcap": capture(113, [
        cooked(ipv4(udp(QUERY), options=b"\x01\x01\x01\x00")),
        cooked(ipv4(b"\x00" * 20, proto=6)),  # TCP: passed over
        cooked(ipv6(udp(QUERY, sport=40000)), v6=True),
    ]),
    "raw-ip-padded.pcap": capture(101, [ipv4(udp(QUERY)) + b"\x00" * 6, ipv6(udp(b""))]),
    "truncated-record.pcap": capture(1, [ethernet(ipv4(udp(QUERY))), ethernet(ipv4(udp(QUERY)))],
                                     truncate_last=9),
    "header-only.pcap": capture(1, []),
    "unsupported-link.pcap": capture(105, [b"\x00" * 40]),
}


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    out_dir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "seeds-pcap")
    os.makedirs(out_dir, exist_ok=True)
    for name, data in SEEDS.items():
        with open(os.path.join(out_dir, name), "wb") as file:
            file.write(data)
    print(f"wrote {len(SEEDS)} seeds to {out_dir}")


if __name__ == "__main__":
    main()
