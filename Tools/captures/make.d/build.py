#!/usr/bin/env python3
"""Write the synthesized and converted capture fixtures of Tools/captures/make.

    python3 build.py --real DIR --out DIR

DIR (--real) holds the real lab captures (ethernet.pcap, ethernet-ns.pcap, sll.pcap, ...);
everything written here is derived from them byte for byte, or is fixed data, so the same
real captures always give the same files. Standard library only (capfile.py next to it).
"""
from __future__ import annotations

import argparse
import gzip
import os
import random
import struct
import subprocess
import sys
import zlib

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from capfile import (Interface, Packet, Pcap, Record, Section, pcap_bytes,  # noqa: E402
                     read_pcap, section_bytes, write_pcap)

LINKTYPE_NULL, LINKTYPE_ETHERNET, LINKTYPE_RAW, LINKTYPE_LOOP = 0, 1, 101, 108
LINKTYPE_IEEE802_11, LINKTYPE_LINUX_SLL, LINKTYPE_RADIOTAP = 105, 113, 127

BSSID = bytes.fromhex("026e620a0001")  # the made-up access point
SSID = b"Nearby Lab"


def ip_records(p: Pcap) -> list[tuple[Record, int, bytes, bytes, bytes]]:
    """(record, ethertype, destination MAC, source MAC, IP packet) of every IPv4/IPv6 frame."""
    out = []
    for r in p.records:
        if len(r.data) < 14:
            continue
        ethertype = struct.unpack("!H", r.data[12:14])[0]
        if ethertype in (0x0800, 0x86DD):
            out.append((r, ethertype, r.data[0:6], r.data[6:12], r.data[14:]))
    return out


def with_link_header(p: Pcap, link_type: int, header) -> Pcap:
    """The IP frames of an Ethernet pcap with the Ethernet header replaced by header(ethertype)."""
    records = []
    for r, ethertype, _, _, packet in ip_records(p):
        h = header(ethertype)
        records.append(Record(r.seconds, r.fraction, h + packet, r.original_length - 14 + len(h)))
    return Pcap(link_type, records, p.nano, p.snaplen, "<")


# ------------------------------------------------------------------------------- 802.11


def mac_header(fc0: int, flags: int, a1: bytes, a2: bytes, a3: bytes, seq: int,
               a4: bytes | None = None, qos: bool = False, duration: int = 0) -> bytes:
    h = bytes([fc0, flags]) + struct.pack("<H", duration) + a1 + a2 + a3 + struct.pack("<H", (seq & 0xFFF) << 4)
    if a4 is not None:
        h += a4
    if qos:
        h += struct.pack("<H", 0)  # TID 0, normal ack
    return h


def beacon(seq: int, tsf: int) -> bytes:
    body = struct.pack("<QHH", tsf, 100, 0x0411)  # timestamp, 100 TU, ESS + privacy + short slot
    body += bytes([0, len(SSID)]) + SSID
    body += bytes([1, 8, 0x82, 0x84, 0x8B, 0x96, 0x0C, 0x12, 0x18, 0x24])  # supported rates
    body += bytes([3, 1, 6])  # DS parameter set: channel 6
    body += bytes([5, 4, 0, 1, 0, 0])  # TIM
    # RSN: version 1, group CCMP, 1 pairwise CCMP, 1 AKM PSK, capabilities 0
    rsn = struct.pack("<H", 1) + bytes.fromhex("000fac04") + struct.pack("<H", 1) + bytes.fromhex("000fac04")
    rsn += struct.pack("<H", 1) + bytes.fromhex("000fac02") + struct.pack("<H", 0)
    body += bytes([48, len(rsn)]) + rsn
    return mac_header(0x80, 0, b"\xff" * 6, BSSID, BSSID, seq) + body


def wifi_frames(p: Pcap) -> list[tuple[Record, bytes, str]]:
    """(timestamp record, 802.11 frame without FCS, what it is) for ieee80211.pcap/radiotap.pcap."""
    ips = ip_records(p)[:37]
    first = ips[0][0]
    frames = [(Record(first.seconds, first.fraction, b"", 0), beacon(0, 1_000_000), "beacon")]
    for n, (r, ethertype, dst, src, packet) in enumerate(ips, start=1):
        llc = bytes.fromhex("aaaa03000000") + struct.pack("!H", ethertype)
        if n == 4:  # a plain (non-QoS) data frame, from the AP
            kind, h = "data FromDS", mac_header(0x08, 0x02, dst, BSSID, src, n)
        elif n == 5:  # a 4-address frame (ToDS+FromDS: WDS/mesh): RA, TA, DA, SA
            kind, h = "QoS data ToDS+FromDS", mac_header(0x88, 0x03, BSSID, bytes.fromhex("026e620a0002"), dst, n,
                                                         a4=src, qos=True)
        elif dst[0] & 1:  # group addressed: the AP relays it to the stations
            kind, h = "QoS data FromDS", mac_header(0x88, 0x02, dst, BSSID, src, n, qos=True)
        else:  # unicast from a station to the AP
            kind, h = "QoS data ToDS", mac_header(0x88, 0x01, BSSID, src, dst, n, qos=True, duration=44)
        frames.append((r, h + llc + packet, kind))
    # A protected (CCMP) QoS data frame: the body is ciphertext we cannot (and need not) read.
    last = ips[-1][0]
    rng = random.Random(80211)
    ccmp = bytes([0x01, 0x00, 0x00, 0x20, 0x00, 0x00, 0x00, 0x00])  # PN 1, key 0, ExtIV
    body = ccmp + bytes(rng.randrange(256) for _ in range(96)) + bytes(rng.randrange(256) for _ in range(8))
    h = mac_header(0x88, 0x41, BSSID, ips[0][3], bytes.fromhex("01005e0000fb"), len(ips) + 1, qos=True, duration=44)
    frames.append((Record(last.seconds, last.fraction, b"", 0), h + body, "protected QoS data ToDS"))
    return frames


def ieee80211_pcap(p: Pcap) -> Pcap:
    records = [Record(r.seconds, r.fraction, f, len(f)) for r, f, _ in wifi_frames(p)]
    return Pcap(LINKTYPE_IEEE802_11, records, p.nano, p.snaplen)


def radiotap_header(tsft: int, flags: int, extended: bool) -> bytes:
    rate, freq, chan_flags, signal = 12, 2437, 0x00C0, -42  # 6 Mb/s, channel 6, 2 GHz OFDM
    if not extended:
        present = (1 << 0) | (1 << 1) | (1 << 2) | (1 << 3) | (1 << 5)  # TSFT Flags Rate Channel dBm-signal
        fields = struct.pack("<QBBHHb", tsft, flags, rate, freq, chan_flags, signal)
        return struct.pack("<BBHI", 0, 0, 8 + len(fields), present) + fields
    # Two present words, as iwlwifi writes them: the first ends with "radiotap namespace next"
    # (bit 29) and "extended" (bit 31); the second has the per-chain signal and antenna.
    present1 = (1 << 0) | (1 << 1) | (1 << 2) | (1 << 3) | (1 << 5) | (1 << 29) | (1 << 31)
    present2 = (1 << 5) | (1 << 11)
    fields = b"\0" * 4  # pad TSFT to 8 bytes (header 8 + second word 4 = 12)
    fields += struct.pack("<QBBHHb", tsft, flags, rate, freq, chan_flags, signal) + struct.pack("<bB", -44, 0)
    return struct.pack("<BBHII", 0, 0, 12 + len(fields), present1, present2) + fields


def radiotap_pcap(p: Pcap) -> Pcap:
    records = []
    frames = wifi_frames(p)
    base = p.timestamp_ns(frames[0][0]) // 1000
    for n, (r, frame, kind) in enumerate(frames):
        tsft = 1_000_000 + p.timestamp_ns(r) // 1000 - base
        flags, fcs = 0x00, b""
        if n % 2 == 1 or kind == "beacon":  # FCS present, a correct CRC-32
            flags, fcs = 0x10, struct.pack("<I", zlib.crc32(frame) & 0xFFFFFFFF)
        if n == 7:  # FCS present and bad: the driver says so (flag 0x40), and it is wrong
            flags, fcs = 0x50, struct.pack("<I", ~zlib.crc32(frame) & 0xFFFFFFFF)
        data = radiotap_header(tsft, flags, extended=(n == 2)) + frame + fcs
        records.append(Record(r.seconds, r.fraction, data, len(data)))
    return Pcap(LINKTYPE_RADIOTAP, records, p.nano, p.snaplen)


# ------------------------------------------------------------------------------- pcapng


def packets(p: Pcap, interface: int = 0, units_per_second: int | None = None) -> list[Packet]:
    units = units_per_second or (1_000_000_000 if p.nano else 1_000_000)
    return [Packet(interface, p.timestamp_ns(r) * units // 1_000_000_000, r.data, r.original_length) for r in p.records]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--real", required=True)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    real, out = args.real, args.out
    os.makedirs(os.path.join(out, "not-a-capture"), exist_ok=True)

    def path(name: str) -> str:
        return os.path.join(out, name)

    eth = read_pcap(os.path.join(real, "ethernet.pcap"))
    eth_ns = read_pcap(os.path.join(real, "ethernet-ns.pcap"))
    sll = read_pcap(os.path.join(real, "sll.pcap"))
    assert eth.link_type == LINKTYPE_ETHERNET and not eth.nano and eth_ns.nano and sll.link_type == LINKTYPE_LINUX_SLL

    # Same frames, other byte order.
    write_pcap(path("ethernet-be.pcap"), Pcap(eth.link_type, eth.records, False, eth.snaplen, ">"))

    # The IP packets with the link headers of BSD loopback (NULL: host order, here little-endian,
    # AF_INET6 = 30 as on macOS), OpenBSD loopback (LOOP: network order, AF_INET6 = 24) and none (RAW).
    write_pcap(path("null.pcap"), with_link_header(eth, LINKTYPE_NULL, lambda t: struct.pack("<I", 2 if t == 0x0800 else 30)))
    write_pcap(path("loop.pcap"), with_link_header(eth, LINKTYPE_LOOP, lambda t: struct.pack(">I", 2 if t == 0x0800 else 24)))
    write_pcap(path("raw.pcap"), with_link_header(eth, LINKTYPE_RAW, lambda t: b""))

    write_pcap(path("ieee80211.pcap"), ieee80211_pcap(eth))
    write_pcap(path("radiotap.pcap"), radiotap_pcap(eth))

    # pcapng written here.
    with open(path("nanosecond.pcapng"), "wb") as f:
        f.write(section_bytes(Section([Interface(LINKTYPE_ETHERNET, eth_ns.snaplen, "lan1", tsresol=9)], packets(eth_ns))))
    be = packets(eth)
    be[0].comment = "big-endian section; timestamps in microseconds (no if_tsresol)"
    with open(path("big-endian.pcapng"), "wb") as f:
        f.write(section_bytes(Section([Interface(LINKTYPE_ETHERNET, eth.snaplen, "lan1")], be, byte_order=">")))
    with open(path("simple-blocks.pcapng"), "wb") as f:
        f.write(section_bytes(Section([Interface(LINKTYPE_ETHERNET, eth.snaplen, "lan1")], packets(eth)[:20], simple=True)))
    with open(path("empty.pcapng"), "wb") as f:
        f.write(section_bytes(Section([Interface(LINKTYPE_ETHERNET, 262144, "lan1")])))
    # Two sections: dumpcap's ethernet.pcapng cut to 12 frames by editcap (little-endian, ns),
    # then a big-endian section of our own with 10 Linux cooked (v1) frames, µs.
    first = path("two-sections.first.pcapng")
    subprocess.run(["editcap", "-F", "pcapng", "-r", os.path.join(real, "ethernet.pcapng"), first, "1-12"], check=True)
    second = section_bytes(Section([Interface(LINKTYPE_LINUX_SLL, sll.snaplen, "any")], packets(sll)[:10], byte_order=">"))
    with open(path("two-sections.pcapng"), "wb") as f:
        f.write(open(first, "rb").read() + second)
    os.remove(first)

    # Edge cases.
    write_pcap(path("empty.pcap"), Pcap(LINKTYPE_ETHERNET, []))
    cut = pcap_bytes(eth, eth.records[:6])
    last = eth.records[5]
    with open(path("truncated-record.pcap"), "wb") as f:
        f.write(cut[: len(cut) - len(last.data) // 2])  # the 6th record's header says N bytes; N/2 follow

    # Not captures at all.
    with open(path("not-a-capture/passwd.txt"), "w") as f:
        f.write("root:x:0:0:root:/root:/bin/bash\n"
                "daemon:x:1:1:daemon:/usr/sbin:/usr/sbin/nologin\n"
                "avahi:x:105:112:Avahi mDNS daemon,,,:/nonexistent:/usr/sbin/nologin\n"
                "nearby:x:1000:1000:Nearby Fixture,,,:/home/nearby:/bin/bash\n"
                "mdns:x:1001:1001::/home/mdns:/bin/sh\n")
    with open(path("not-a-capture/random.bin"), "wb") as f:
        f.write(random.Random(5353).randbytes(256))
    with open(path("not-a-capture/ethernet.pcap.gz"), "wb") as f:
        f.write(gzip.compress(open(path("ethernet.pcap"), "rb").read(), compresslevel=9, mtime=0))
    return 0


if __name__ == "__main__":
    sys.exit(main())
