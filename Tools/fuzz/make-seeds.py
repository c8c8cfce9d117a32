#!/usr/bin/env python3
"""Writes the DNSWire fuzz seed corpus into Tools/fuzz/seeds/ (pure Python, struct only).

Valid mDNS packets (a DNS-SD response using compression, a query with known answers, a probe,
a goodbye, odd record types, a TXT RDATA blob for the DiscoveryInfo property) plus hostile
packets that each hit one rejection path of the decoder. Run it again after editing; the .bin
files are committed alongside it.

    python3 Tools/fuzz/make-seeds.py [OUTPUT_DIR]
"""

import os
import struct
import sys

A, NS, CNAME, PTR, HINFO, TXT, AAAA, SRV, OPT, NSEC, ANY = 1, 2, 5, 12, 13, 16, 28, 33, 41, 47, 255
IN = 1
FLUSH = 0x8000  # cache-flush bit on records
QU = 0x8000  # unicast-response bit on questions
RESPONSE = 0x8400  # QR + AA


def header(flags=0, qd=0, an=0, ns=0, ar=0, ident=0):
    return struct.pack("!6H", ident, flags, qd, an, ns, ar)


def labels(*parts):
    """Uncompressed labels without the final zero byte."""
    out = b""
    for part in parts:
        raw = part.encode() if isinstance(part, str) else part
        out += bytes([len(raw)]) + raw
    return out


def name(*parts):
    return labels(*parts) + b"\x00"


def pointer(offset):
    return struct.pack("!H", 0xC000 | offset)


def question(qname, qtype, qclass=IN):
    return qname + struct.pack("!HH", qtype, qclass)


def record(rname, rtype, rdata, ttl=4500, rclass=IN):
    return rname + struct.pack("!HHIH", rtype, rclass, ttl, len(rdata)) + rdata


def txt_rdata(*strings):
    return b"".join(bytes([len(s)]) + s for s in (x.encode() if isinstance(x, str) else x for x in strings))


def nsec_bitmap(*types):
    windows = {}
    for t in sorted(set(types)):
        windows.setdefault(t >> 8, set()).add(t & 0xFF)
    out = b""
    for window in sorted(windows):
        low = windows[window]
        bitmap = bytearray((max(low) >> 3) + 1)
        for bit in low:
            bitmap[bit >> 3] |= 0x80 >> (bit & 7)
        out += bytes([window, len(bitmap)]) + bytes(bitmap)
    return out


class Packet:
    """Builds a packet, tracking offsets so later names can point at earlier ones."""

    def __init__(self):
        self.body = b""

    @property
    def offset(self):
        return 12 + len(self.body)

    def add(self, data):
        start = self.offset
        self.body += data
        return start


def dnssd_response():
    """PTR/SRV/TXT/A/AAAA/NSEC answer for 'Build Box._http._tcp.local.' with compression."""
    p = Packet()
    svc_name = name("_http", "_tcp", "local")
    svc = p.offset
    local = svc + 1 + 5 + 1 + 4  # the "local" label inside _http._tcp.local.
    inst = svc + len(svc_name) + 10  # the PTR's RDATA starts with the instance name
    p.add(record(svc_name, PTR, labels("Build Box") + pointer(svc)))
    # SRV: instance -> buildbox.local.:8080, the target compressed onto "local"
    srv_start = p.offset
    host = srv_start + 2 + 10 + 6  # the SRV target's first label
    p.add(record(pointer(inst), SRV, struct.pack("!HHH", 0, 0, 8080) + labels("buildbox") + pointer(local),
                 ttl=120, rclass=IN | FLUSH))
    p.add(record(pointer(inst), TXT, txt_rdata("txtvers=1", "path=/", "secure", "empty="), rclass=IN | FLUSH))
    p.add(record(pointer(host), A, bytes([198, 18, 1, 2]), ttl=120, rclass=IN | FLUSH))
    p.add(record(pointer(host), AAAA, bytes.fromhex("fe800000000000000000000000000001"), ttl=120,
                 rclass=IN | FLUSH))
    # NSEC for the host (A, AAAA) and for the instance (TXT, SRV), next name compressed
    p.add(record(pointer(host), NSEC, pointer(host) + nsec_bitmap(A, AAAA), ttl=120, rclass=IN | FLUSH))
    p.add(record(pointer(inst), NSEC, pointer(inst) + nsec_bitmap(TXT, SRV), rclass=IN | FLUSH))
    return header(RESPONSE, an=2, ar=5) + p.body


def query_with_known_answers():
    """PTR questions (one QU) with two known answers in the answer section."""
    p = Packet()
    svc = p.add(question(name("_http", "_tcp", "local"), PTR))
    local = svc + 1 + 5 + 1 + 4
    p.add(question(labels("_services", "_dns-sd", "_udp") + pointer(local), PTR, IN | QU))
    p.add(record(pointer(svc), PTR, labels("Build Box") + pointer(svc), ttl=4000))
    p.add(record(pointer(svc), PTR, labels("Printer \u2014 2nd floor") + pointer(svc), ttl=3000))
    return header(0, qd=2, an=2) + p.body


def probe():
    """Probe: QU ANY questions for the instance and host, proposed records in authority."""
    p = Packet()
    inst = p.add(question(name("Build Box", "_http", "_tcp", "local"), ANY, IN | QU))
    host = p.add(question(labels("buildbox") + pointer(inst + 1 + 9 + 1 + 5 + 1 + 4), ANY, IN | QU))
    p.add(record(pointer(inst), SRV, struct.pack("!HHH", 0, 0, 8080) + pointer(host), ttl=120))
    p.add(record(pointer(inst), TXT, txt_rdata("txtvers=1"), ttl=4500))
    p.add(record(pointer(host), A, bytes([198, 18, 1, 2]), ttl=120))
    p.add(record(pointer(host), AAAA, bytes.fromhex("fd6e6272000100000000000000000002"), ttl=120))
    return header(0, qd=2, ns=4) + p.body


def goodbye():
    """Goodbye: the PTR and SRV again with TTL 0."""
    p = Packet()
    svc_name = name("_http", "_tcp", "local")
    svc = p.offset
    inst = svc + len(svc_name) + 10
    p.add(record(svc_name, PTR, labels("Build Box") + pointer(svc), ttl=0))
    p.add(record(pointer(inst), SRV, struct.pack("!HHH", 0, 0, 8080) + name("buildbox", "local"), ttl=0,
                 rclass=IN | FLUSH))
    return header(RESPONSE, an=2) + p.body


def assorted_types():
    """HINFO, CNAME, NS, an unknown type, an empty TXT, an OPT pseudo-record, a TC query."""
    p = Packet()
    host = p.add(question(name("buildbox", "local"), HINFO))
    p.add(record(pointer(host), HINFO, txt_rdata("X86_64", "LINUX"), ttl=120))
    p.add(record(name("www", "local"), CNAME, pointer(host), ttl=120))
    p.add(record(pointer(host + 9), NS, pointer(host), ttl=120))
    p.add(record(pointer(host), 99, b"v=spf1 -all", ttl=120))
    p.add(record(pointer(host), TXT, b"\x00", ttl=120))
    p.add(record(b"\x00", OPT, struct.pack("!HH", 4, 6) + bytes(6), ttl=0, rclass=1440))
    return header(0x0200, qd=1, an=5, ar=1) + p.body


# --- hostile packets ------------------------------------------------------------------------


def pointer_loop():
    # question name at 12 points to 14, which points back to 12
    return header(qd=1) + pointer(14) + pointer(12) + struct.pack("!HH", A, IN)


def self_pointer():
    return header(qd=1) + pointer(12) + struct.pack("!HH", A, IN)


def pointer_past_end():
    return header(qd=1) + labels("a") + pointer(0x3FFF) + struct.pack("!HH", A, IN)


def label_64():
    return header(qd=1) + bytes([64]) + b"x" * 64 + b"\x00" + struct.pack("!HH", A, IN)


def name_256():
    # 4 labels of 63 bytes = 256 octets with length bytes, 257 with the final zero
    return header(qd=1) + labels(*(["y" * 63] * 4)) + b"\x00" + struct.pack("!HH", A, IN)


def rdlength_overrun():
    return header(RESPONSE, an=1) + name("h", "local") + struct.pack("!HHIH", A, IN, 120, 200) + bytes(4)


def many_questions():
    return header(qd=65535)


def truncated_header():
    return header(RESPONSE, an=1)[:7]


def txt_string_overrun():
    rdata = b"\x09txtvers=1\x40path=/"  # second string claims 64 bytes, has 6
    return header(RESPONSE, an=1) + name("x", "_http", "_tcp", "local") + \
        struct.pack("!HHIH", TXT, IN, 4500, len(rdata)) + rdata


def txt_rdata_blob():
    """Not a packet: TXT RDATA for the DiscoveryInfo(rdata:) property."""
    return txt_rdata("txtvers=1", "path=/index.html", "PATH=dup", "flag", "=novalue", "", b"bin=\xff\x00")


SEEDS = {
    "dnssd-response.bin": dnssd_response,
    "query-known-answers.bin": query_with_known_answers,
    "probe.bin": probe,
    "goodbye.bin": goodbye,
    "assorted-types.bin": assorted_types,
    "txt-rdata.bin": txt_rdata_blob,
    "hostile-pointer-loop.bin": pointer_loop,
    "hostile-self-pointer.bin": self_pointer,
    "hostile-pointer-past-end.bin": pointer_past_end,
    "hostile-label-64.bin": label_64,
    "hostile-name-256.bin": name_256,
    "hostile-rdlength-overrun.bin": rdlength_overrun,
    "hostile-65535-questions.bin": many_questions,
    "hostile-truncated-header.bin": truncated_header,
    "hostile-txt-string-overrun.bin": txt_string_overrun,
}


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "seeds")
    os.makedirs(out, exist_ok=True)
    for filename, build in SEEDS.items():
        data = build()
        with open(os.path.join(out, filename), "wb") as f:
            f.write(data)
        print(f"{filename:34} {len(data):5} bytes")


if __name__ == "__main__":
    main()
