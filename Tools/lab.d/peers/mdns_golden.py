#!/usr/bin/env python3
"""Turn lab captures of real mDNS peers into golden packet fixtures.

Pure python, standard library only (no scapy, no zeroconf): a small pcap reader
(Ethernet / Linux cooked, IPv4 / IPv6, UDP) and a small DNS message parser.

    mdns_golden.py dump FILE.pcap
        print every mDNS packet in the capture, decoded, one JSON object per line
    mdns_golden.py extract --out DIR PEER=FILE.pcap [PEER=FILE.pcap ...]
        classify every packet, keep a modest distinct set per (peer, kind), write
        DIR/<peer>-<kind>-<n>.bin (the UDP payload, byte for byte) and DIR/manifest.json
    mdns_golden.py table DIR/manifest.json
        print a markdown table of the fixtures

Kinds (by the classify() rules below):
    probe                 QR=0 with questions and an authority section (RFC 6762 8.1)
    query-known-answers   QR=0 with records in the answer section (RFC 6762 7.1)
    query                 any other QR=0 message
    goodbye               QR=1 with an answer of TTL 0 (RFC 6762 10.1; avahi mixes goodbyes
                          with live records in one message)
    response              QR=1 that answers a question of a query that another host (by MAC
                          address) sent in the 1 s before it, with a record that is not among
                          that query's known answers; or QR=1 that echoes a question
    announcement          any other QR=1 message (unsolicited, RFC 6762 8.3)
"""

from __future__ import annotations

import ipaddress
import json
import os
import struct
import sys
from dataclasses import dataclass, field
from typing import Any

MDNS_PORT = 5353
TYPE_NAMES = {1: "A", 12: "PTR", 13: "HINFO", 16: "TXT", 28: "AAAA", 33: "SRV", 41: "OPT",
              47: "NSEC", 255: "ANY"}


# ------------------------------------------------------------------------------------- pcap

@dataclass
class Packet:
    time: float
    family: str  # "ipv4" | "ipv6"
    src: str
    dst: str
    sport: int
    dport: int
    payload: bytes
    src_mac: str = ""
    msg: dict[str, Any] | None = None
    kind: str = ""
    index: int = 0
    peer: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


def read_pcap(path: str) -> list[Packet]:
    data = open(path, "rb").read()
    if len(data) < 24:
        raise ValueError(f"{path}: not a pcap file (too short)")
    magic = data[:4]
    if magic in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1"):
        endian = "<"
    elif magic in (b"\xa1\xb2\xc3\xd4", b"\xa1\xb2\x3c\x4d"):
        endian = ">"
    else:
        raise ValueError(f"{path}: not a classic pcap file (magic {magic.hex()}); pcapng is not supported")
    nanos = magic in (b"\x4d\x3c\xb2\xa1", b"\xa1\xb2\x3c\x4d")
    _, _, _, _, _, linktype = struct.unpack(endian + "HHiIII", data[4:24])
    out: list[Packet] = []
    off = 24
    while off + 16 <= len(data):
        sec, frac, incl, _orig = struct.unpack(endian + "IIII", data[off:off + 16])
        off += 16
        frame = data[off:off + incl]
        off += incl
        t = sec + frac / (1e9 if nanos else 1e6)
        pkt = parse_frame(frame, linktype, t)
        if pkt is not None:
            out.append(pkt)
    return out


def parse_frame(frame: bytes, linktype: int, t: float) -> Packet | None:
    if linktype == 1:  # Ethernet
        if len(frame) < 14:
            return None
        mac = frame[6:12].hex(":")
        ethertype = struct.unpack("!H", frame[12:14])[0]
        off = 14
        while ethertype in (0x8100, 0x88A8) and len(frame) >= off + 4:  # VLAN tags
            ethertype = struct.unpack("!H", frame[off + 2:off + 4])[0]
            off += 4
    elif linktype == 113:  # Linux cooked (SLL)
        ethertype, off = struct.unpack("!H", frame[14:16])[0], 16
        mac = frame[6:6 + min(8, struct.unpack("!H", frame[4:6])[0])].hex(":")
    elif linktype == 276:  # Linux cooked v2 (SLL2)
        ethertype, off = struct.unpack("!H", frame[0:2])[0], 20
        mac = frame[12:12 + min(8, frame[11])].hex(":")
    else:
        raise ValueError(f"unsupported pcap link type {linktype}")
    ip = frame[off:]
    if ethertype == 0x0800 and len(ip) >= 20:
        ihl = (ip[0] & 0x0F) * 4
        total = struct.unpack("!H", ip[2:4])[0]
        frag = struct.unpack("!H", ip[6:8])[0]
        if ip[9] != 17 or frag & 0x3FFF:  # not UDP, or a fragment
            return None
        family, src, dst = "ipv4", str(ipaddress.IPv4Address(ip[12:16])), str(ipaddress.IPv4Address(ip[16:20]))
        udp = ip[ihl:total]
    elif ethertype == 0x86DD and len(ip) >= 40:
        nxt, off6 = ip[6], 40
        while nxt in (0, 43, 60):  # hop-by-hop, routing, destination options
            nxt, off6 = ip[off6], off6 + (ip[off6 + 1] + 1) * 8
        if nxt != 17:
            return None
        plen = struct.unpack("!H", ip[4:6])[0]
        family, src, dst = "ipv6", str(ipaddress.IPv6Address(ip[8:24])), str(ipaddress.IPv6Address(ip[24:40]))
        udp = ip[off6:40 + plen]
    else:
        return None
    if len(udp) < 8:
        return None
    sport, dport, ulen = struct.unpack("!HHH", udp[:6])
    if MDNS_PORT not in (sport, dport):
        return None
    return Packet(t, family, src, dst, sport, dport, bytes(udp[8:ulen]), mac)


# -------------------------------------------------------------------------------------- DNS

class DNSError(ValueError):
    pass


def escape_label(label: bytes) -> str:
    """DNS-SD presentation format: \\. and \\\\ escaped, bytes < 0x21 and 0x7F as \\DDD,
    valid UTF-8 kept as characters, invalid bytes as \\DDD."""
    out = []
    for ch in label.decode("utf-8", "surrogateescape"):
        o = ord(ch)
        if 0xDC80 <= o <= 0xDCFF:  # an undecodable byte
            out.append("\\%03d" % (o - 0xDC00))
        elif o < 0x21 or o == 0x7F:
            out.append("\\%03d" % o)
        elif ch in ".\\":
            out.append("\\" + ch)
        else:
            out.append(ch)
    return "".join(out)


def read_name(buf: bytes, off: int) -> tuple[str, int]:
    """Returns (presentation name ending in '.', offset after the name in place)."""
    labels: list[str] = []
    end = None
    seen = set()
    while True:
        if off >= len(buf):
            raise DNSError("name runs past the end")
        n = buf[off]
        if n & 0xC0 == 0xC0:
            if off + 1 >= len(buf):
                raise DNSError("truncated pointer")
            ptr = ((n & 0x3F) << 8) | buf[off + 1]
            if end is None:
                end = off + 2
            if ptr in seen or ptr >= len(buf):
                raise DNSError("bad compression pointer")
            seen.add(ptr)
            off = ptr
            continue
        if n & 0xC0:
            raise DNSError("unknown label type")
        off += 1
        if n == 0:
            break
        if off + n > len(buf):
            raise DNSError("label runs past the end")
        labels.append(escape_label(buf[off:off + n]))
        off += n
    name = ".".join(labels) + "." if labels else "."
    return name, (end if end is not None else off)


def decode_rdata(buf: bytes, rtype: int, off: int, rdlen: int) -> dict[str, Any]:
    rd = buf[off:off + rdlen]
    if rtype == 1 and rdlen == 4:
        return {"address": str(ipaddress.IPv4Address(rd))}
    if rtype == 28 and rdlen == 16:
        return {"address": str(ipaddress.IPv6Address(rd))}
    if rtype in (12, 5, 2):  # PTR, CNAME, NS
        return {"target": read_name(buf, off)[0]}
    if rtype == 33:
        prio, weight, port = struct.unpack("!HHH", rd[:6])
        return {"priority": prio, "weight": weight, "port": port, "target": read_name(buf, off + 6)[0]}
    if rtype == 16:
        strings, i = [], 0
        while i < len(rd):
            n = rd[i]
            strings.append(rd[i + 1:i + 1 + n].decode("utf-8", "backslashreplace"))
            i += 1 + n
        return {"strings": strings}
    if rtype == 13:
        cpu_n = rd[0]
        os_n = rd[1 + cpu_n]
        return {"cpu": rd[1:1 + cpu_n].decode("utf-8", "backslashreplace"),
                "os": rd[2 + cpu_n:2 + cpu_n + os_n].decode("utf-8", "backslashreplace")}
    if rtype == 47:
        nxt, i = read_name(buf, off)
        types = []
        while i < off + rdlen:
            window, blen = buf[i], buf[i + 1]
            bitmap = buf[i + 2:i + 2 + blen]
            for b, byte in enumerate(bitmap):
                for bit in range(8):
                    if byte & (0x80 >> bit):
                        types.append(window * 256 + b * 8 + bit)
            i += 2 + blen
        return {"next": nxt, "types": types}
    return {"hex": rd.hex()}


def parse_message(buf: bytes) -> dict[str, Any]:
    if len(buf) < 12:
        raise DNSError("shorter than a DNS header")
    mid, flags, qd, an, ns, ar = struct.unpack("!HHHHHH", buf[:12])
    msg: dict[str, Any] = {
        "id": mid,
        "flags": {"raw": flags, "qr": flags >> 15, "opcode": (flags >> 11) & 0xF,
                  "aa": (flags >> 10) & 1, "tc": (flags >> 9) & 1, "rd": (flags >> 8) & 1,
                  "ra": (flags >> 7) & 1, "rcode": flags & 0xF},
        "counts": {"questions": qd, "answers": an, "authorities": ns, "additionals": ar},
        "questions": [], "answers": [], "authorities": [], "additionals": [],
    }
    off = 12
    for _ in range(qd):
        name, off = read_name(buf, off)
        if off + 4 > len(buf):
            raise DNSError("truncated question")
        qtype, qclass = struct.unpack("!HH", buf[off:off + 4])
        off += 4
        msg["questions"].append({"name": name, "type": qtype, "class": qclass & 0x7FFF,
                                 "qu": bool(qclass & 0x8000)})
    for section, count in (("answers", an), ("authorities", ns), ("additionals", ar)):
        for _ in range(count):
            name, off = read_name(buf, off)
            if off + 10 > len(buf):
                raise DNSError("truncated record")
            rtype, rclass, ttl, rdlen = struct.unpack("!HHIH", buf[off:off + 10])
            off += 10
            if off + rdlen > len(buf):
                raise DNSError("rdata runs past the end")
            rec = {"name": name, "type": rtype}
            if rtype == 41:  # OPT: the class is the UDP payload size, no cache-flush bit
                rec.update({"class": rclass, "cache_flush": False, "ttl": ttl})
            else:
                rec.update({"class": rclass & 0x7FFF, "cache_flush": bool(rclass & 0x8000), "ttl": ttl})
            rec["rdlength"] = rdlen
            rec["rdata"] = decode_rdata(buf, rtype, off, rdlen)
            off += rdlen
            msg[section].append(rec)
    if off != len(buf):
        msg["trailing_bytes"] = len(buf) - off
    return msg


# --------------------------------------------------------------------------- classification

RESPONSE_WINDOW = 1.0  # seconds


def answers_query(rec: dict[str, Any], query: dict[str, Any]) -> bool:
    """rec answers one of the query's questions and is not among its known answers."""
    def same(a: dict[str, Any], b: dict[str, Any]) -> bool:
        return a["name"].lower() == b["name"].lower() and a["type"] == b["type"] and a["rdata"] == b["rdata"]
    asked = any(rec["name"].lower() == q["name"].lower() and q["type"] in (rec["type"], 255)
                for q in query["questions"])
    return asked and not any(same(rec, ka) for ka in query["answers"])


def classify(packets: list[Packet]) -> None:
    recent_queries: list[Packet] = []
    for p in packets:
        m = p.msg
        if m is None:
            p.kind = "malformed"
            continue
        if m["flags"]["qr"] == 0:
            if m["questions"] and m["authorities"]:
                p.kind = "probe"
            elif m["answers"]:
                p.kind = "query-known-answers"
            else:
                p.kind = "query"
            recent_queries.append(p)
            continue
        if any(r["ttl"] == 0 for r in m["answers"]):
            p.kind = "goodbye"
            continue
        recent_queries = [q for q in recent_queries if p.time - q.time <= RESPONSE_WINDOW]
        solicited = bool(m["questions"]) or any(
            q.src_mac != p.src_mac and any(answers_query(r, q.msg) for r in m["answers"])
            for q in recent_queries)
        p.kind = "response" if solicited else "announcement"


# ------------------------------------------------------------------------------- selection

KIND_ORDER = ["probe", "announcement", "query", "query-known-answers", "response", "goodbye"]


def mentions(p: Packet, needle: str) -> bool:
    m = p.msg or {}
    names = [q["name"] for q in m.get("questions", [])]
    for s in ("answers", "authorities", "additionals"):
        names += [r["name"] for r in m.get(s, [])]
    return any(needle in n for n in names)  # case-sensitive: lab host names are lower case


def select(packets: list[Packet], per_kind: int, prefer: str) -> list[Packet]:
    """Distinct payloads, at most per_kind per kind, those that mention `prefer` first,
    each kind in capture order."""
    seen: set[bytes] = set()
    distinct = []
    for p in packets:
        if p.msg is None or p.payload in seen:
            continue
        seen.add(p.payload)
        distinct.append(p)
    chosen: list[Packet] = []
    for kind in KIND_ORDER:
        of_kind = [p for p in distinct if p.kind == kind]
        ranked = [p for p in of_kind if mentions(p, prefer)] + [p for p in of_kind if not mentions(p, prefer)]
        chosen += sorted(ranked[:per_kind], key=lambda p: p.time)
    return chosen


def describe(p: Packet) -> dict[str, Any]:
    d: dict[str, Any] = {
        "family": p.family, "src": p.src, "dst": p.dst, "sport": p.sport, "dport": p.dport,
        "multicast": ipaddress.ip_address(p.dst).is_multicast, "size": len(p.payload),
    }
    d.update(p.msg or {})
    return d


def cmd_dump(path: str) -> int:
    packets = read_pcap(path)
    for p in packets:
        try:
            p.msg = parse_message(p.payload)
        except DNSError as e:
            p.extra["error"] = str(e)
    classify(packets)
    t0 = packets[0].time if packets else 0
    for p in packets:
        print(json.dumps({"t": round(p.time - t0, 3), "kind": p.kind, **describe(p), **p.extra}))
    return 0


def cmd_extract(out_dir: str, specs: list[str], per_kind: int, prefer: str) -> int:
    os.makedirs(out_dir, exist_ok=True)
    for f in os.listdir(out_dir):
        if f.endswith(".bin"):
            os.unlink(os.path.join(out_dir, f))
    files = []
    summary = {}
    for spec in specs:
        peer, path = spec.split("=", 1)
        packets = read_pcap(path)
        bad = 0
        for p in packets:
            try:
                p.msg = parse_message(p.payload)
            except DNSError:
                bad += 1
        classify(packets)
        chosen = select(packets, per_kind, prefer)
        counter: dict[str, int] = {}
        for p in chosen:
            counter[p.kind] = counter.get(p.kind, 0) + 1
            fname = f"{peer}-{p.kind}-{counter[p.kind]}.bin"
            with open(os.path.join(out_dir, fname), "wb") as fh:
                fh.write(p.payload)
            files.append({"file": fname, "peer": peer, "kind": p.kind, **describe(p)})
        seen_kinds = sorted({p.kind for p in packets})
        summary[peer] = {"captured": len(packets), "malformed": bad, "kinds_seen": seen_kinds,
                         "kept": counter}
        missing = [k for k in KIND_ORDER if k not in counter]
        print(f"{peer}: {len(packets)} mDNS packets captured, kept {len(chosen)}: "
              + ", ".join(f"{k} {counter[k]}" for k in KIND_ORDER if k in counter)
              + (f"; none of: {', '.join(missing)}" if missing else ""), file=sys.stderr)
    manifest = {
        "about": "Golden mDNS packets captured from real peers in the Nearby lab; see README.md. "
                 "Names are in DNS-SD presentation format (\\. \\\\ \\DDD escapes). "
                 "Decoded by Tools/lab.d/peers/mdns_golden.py, independently of any mDNS library.",
        "files": files,
    }
    with open(os.path.join(out_dir, "manifest.json"), "w") as fh:
        json.dump(manifest, fh, indent=1, ensure_ascii=False)
        fh.write("\n")
    return 0


def cmd_table(manifest_path: str) -> int:
    m = json.load(open(manifest_path))
    print("| file | kind | family | id | qd/an/ns/ar | names |")
    print("| --- | --- | --- | --- | --- | --- |")
    for f in m["files"]:
        c = f["counts"]
        names = sorted({q["name"] for q in f["questions"]} |
                       {r["name"] for s in ("answers", "authorities", "additionals") for r in f[s]})
        shown = ", ".join(f"`{n}`" for n in names[:3]) + (" …" if len(names) > 3 else "")
        print(f"| {f['file']} | {f['kind']} | {f['family']} | {f['id']} | "
              f"{c['questions']}/{c['answers']}/{c['authorities']}/{c['additionals']} | {shown} |")
    return 0


def main(argv: list[str]) -> int:
    import argparse
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    d = sub.add_parser("dump")
    d.add_argument("pcap")
    e = sub.add_parser("extract")
    e.add_argument("--out", required=True)
    e.add_argument("--per-kind", type=int, default=3)
    e.add_argument("--prefer", default="Golden", help="keep packets naming this first")
    e.add_argument("specs", nargs="+", metavar="PEER=FILE.pcap")
    t = sub.add_parser("table")
    t.add_argument("manifest")
    a = ap.parse_args(argv)
    if a.cmd == "dump":
        return cmd_dump(a.pcap)
    if a.cmd == "extract":
        return cmd_extract(a.out, a.specs, a.per_kind, a.prefer)
    return cmd_table(a.manifest)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
