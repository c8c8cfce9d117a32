"""Small pcap and pcapng readers and writers for Tools/captures/make (standard library only).

Written for making fixtures, not for general use: the readers understand what the writers
write and what tcpdump/dumpcap/editcap write (pcap in both byte orders, µs and ns; pcapng
SHB/IDB/EPB/SPB/ISB in both byte orders), and nothing more.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass, field

PCAP_MAGIC_US = 0xA1B2C3D4
PCAP_MAGIC_NS = 0xA1B23C4D
PCAPNG_SHB = 0x0A0D0D0A
PCAPNG_BOM = 0x1A2B3C4D


@dataclass
class Record:
    seconds: int
    fraction: int  # microseconds or nanoseconds, see Pcap.nano
    data: bytes
    original_length: int


@dataclass
class Pcap:
    link_type: int
    records: list[Record]
    nano: bool = False
    snaplen: int = 262144
    byte_order: str = "<"

    def timestamp_ns(self, r: Record) -> int:
        return r.seconds * 1_000_000_000 + r.fraction * (1 if self.nano else 1000)


def read_pcap(path: str) -> Pcap:
    raw = open(path, "rb").read()
    for order in "<>":
        magic = struct.unpack(order + "I", raw[:4])[0]
        if magic in (PCAP_MAGIC_US, PCAP_MAGIC_NS):
            break
    else:
        raise ValueError(f"{path}: not a pcap file")
    _, _, _, _, snaplen, link_type = struct.unpack(order + "HHiIII", raw[4:24])
    records, offset = [], 24
    while offset + 16 <= len(raw):
        sec, frac, caplen, origlen = struct.unpack(order + "IIII", raw[offset:offset + 16])
        records.append(Record(sec, frac, raw[offset + 16:offset + 16 + caplen], origlen))
        offset += 16 + caplen
    return Pcap(link_type, records, magic == PCAP_MAGIC_NS, snaplen, order)


def pcap_bytes(p: Pcap, records: list[Record] | None = None) -> bytes:
    o = p.byte_order
    out = struct.pack(o + "IHHiIII", PCAP_MAGIC_NS if p.nano else PCAP_MAGIC_US, 2, 4, 0, 0, p.snaplen, p.link_type)
    for r in p.records if records is None else records:
        out += struct.pack(o + "IIII", r.seconds, r.fraction, len(r.data), r.original_length) + r.data
    return out


def write_pcap(path: str, p: Pcap) -> None:
    with open(path, "wb") as f:
        f.write(pcap_bytes(p))


# ------------------------------------------------------------------------------- pcapng


def _pad(b: bytes) -> bytes:
    return b + b"\0" * (-len(b) % 4)


def _options(o: str, options: list[tuple[int, bytes]]) -> bytes:
    if not options:
        return b""
    out = b""
    for code, value in options:
        out += struct.pack(o + "HH", code, len(value)) + _pad(value)
    return out + struct.pack(o + "HH", 0, 0)  # opt_endofopt


def _block(o: str, block_type: int, body: bytes) -> bytes:
    body = _pad(body)
    total = 12 + len(body)
    return struct.pack(o + "II", block_type, total) + body + struct.pack(o + "I", total)


@dataclass
class Interface:
    link_type: int
    snaplen: int = 262144
    name: str | None = None
    tsresol: int | None = None  # None: no if_tsresol option (microseconds)
    description: str | None = None


@dataclass
class Packet:
    interface: int
    timestamp: int  # in units of the interface's resolution
    data: bytes
    original_length: int
    comment: str | None = None


@dataclass
class Section:
    interfaces: list[Interface]
    packets: list[Packet] = field(default_factory=list)
    byte_order: str = "<"
    # The name the committed pcapng fixtures carry (the script was Tools/make-captures when they were
    # made); kept so that a rerun writes the same bytes.
    application: str = "Nearby Tools/make-captures"
    simple: bool = False  # Simple Packet Blocks (interface 0, no timestamps) instead of EPBs


def section_bytes(s: Section) -> bytes:
    o = s.byte_order
    out = _block(o, PCAPNG_SHB, struct.pack(o + "IHHq", PCAPNG_BOM, 1, 0, -1)
                 + _options(o, [(4, s.application.encode())]))  # shb_userappl
    for i in s.interfaces:
        opts = []
        if i.name:
            opts.append((2, i.name.encode()))  # if_name
        if i.description:
            opts.append((3, i.description.encode()))  # if_description
        if i.tsresol is not None:
            opts.append((9, bytes([i.tsresol])))  # if_tsresol
        out += _block(o, 1, struct.pack(o + "HHI", i.link_type, 0, i.snaplen) + _options(o, opts))
    for p in s.packets:
        if s.simple:
            out += _block(o, 3, struct.pack(o + "I", p.original_length) + p.data)
        else:
            opts = [(1, p.comment.encode())] if p.comment else []  # opt_comment
            body = struct.pack(o + "IIIII", p.interface, p.timestamp >> 32, p.timestamp & 0xFFFFFFFF,
                               len(p.data), p.original_length) + _pad(p.data) + _options(o, opts)
            out += _block(o, 6, body)
    return out


def read_pcapng_link_types(path: str) -> tuple[list[int], list[str]]:
    """(link types of every IDB in file order, byte order of every section: "little"/"big")."""
    raw = open(path, "rb").read()
    link_types, orders, offset, o = [], [], 0, "<"
    while offset + 12 <= len(raw):
        block_type = struct.unpack("<I", raw[offset:offset + 4])[0]
        if block_type == PCAPNG_SHB:
            o = "<" if struct.unpack("<I", raw[offset + 8:offset + 12])[0] == PCAPNG_BOM else ">"
            orders.append("little" if o == "<" else "big")
        block_type, total = struct.unpack(o + "II", raw[offset:offset + 8])
        if block_type == 1:
            link_types.append(struct.unpack(o + "H", raw[offset + 8:offset + 10])[0])
        if total < 12:
            break
        offset += total
    return link_types, orders
