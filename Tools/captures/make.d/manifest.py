#!/usr/bin/env python3
"""Write manifest.json for the capture fixtures: tshark's view of every file.

    python3 manifest.py DIR NOTES.json

For every capture in DIR it runs `tshark -r FILE -T json --no-duplicate-keys` (IP reassembly
on, tshark's default) and lists each UDP datagram tshark dissects at the top level (not the
copies quoted inside ICMP errors), in the frame where tshark has it whole: for fragmented
datagrams that is the frame that completed the set. NOTES.json maps file names to the "notes"
text (how the file was made). Link types and byte orders come from the file headers (capfile.py).
"""
from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from capfile import read_pcap, read_pcapng_link_types  # noqa: E402


def tshark_version() -> str:
    out = subprocess.run(["tshark", "--version"], capture_output=True, text=True).stdout
    return out.split("\n")[0].split()[2]  # "TShark (Wireshark) 4.0.17 (Git ...)"


def walk(obj, key: str):
    """Every value of `key` anywhere inside obj (lists flattened)."""
    if isinstance(obj, dict):
        for k, v in obj.items():
            if k == key:
                yield from (v if isinstance(v, list) else [v])
            else:
                yield from walk(v, key)
    elif isinstance(obj, list):
        for v in obj:
            yield from walk(v, key)


def one(layer: dict, key: str):
    v = layer.get(key)
    return v[0] if isinstance(v, list) else v


def hex_bytes(s: str) -> bytes:
    return bytes.fromhex(s.replace(":", ""))


def dns_summary(layer: dict) -> dict:
    flags = next(walk(layer, "dns.flags.response"), None)
    return {
        "id": int(one(layer, "dns.id"), 16),
        "response": flags == "1",
        "questions": list(walk(layer.get("Queries", {}), "dns.qry.name")),
        "answers": int(one(layer, "dns.count.answers")),
        "authorities": int(one(layer, "dns.count.auth_rr")),
        "additionals": int(one(layer, "dns.count.add_rr")),
    }


def udp_entry(layers: dict) -> dict | None:
    udp = layers.get("udp")
    if not isinstance(udp, dict):
        return None
    frame = layers["frame"]
    # Simple Packet Blocks have no timestamp: tshark then has no frame.time_epoch (null here).
    entry: dict = {"frame": int(frame["frame.number"]), "time": frame.get("frame.time_epoch")}
    net = layers.get("ipv6") if "ipv6" in layers else layers.get("ip")
    if isinstance(net, list):
        net = net[-1]
    family = "ipv6" if "ipv6" in layers else "ip"
    entry["source"] = one(net, f"{family}.src")
    entry["sourcePort"] = int(one(udp, "udp.srcport"))
    entry["destination"] = one(net, f"{family}.dst")
    entry["destinationPort"] = int(one(udp, "udp.dstport"))
    declared = int(one(udp, "udp.length")) - 8
    entry["payloadLength"] = declared
    payload = hex_bytes(one(udp, "udp.payload") or "")
    entry["payloadSHA256"] = hashlib.sha256(payload).hexdigest()
    if len(payload) != declared:
        entry["capturedPayloadLength"] = len(payload)  # the frame was cut short (snaplen)
    fragments = [int(f) for f in walk(net, f"{family}.fragment")]
    entry["fragmentFrames"] = fragments if len(fragments) > 1 else []
    vlan = []
    for key in layers:  # outer tag first (tshark keeps the order of the layers)
        if key == "ieee8021ad":
            vlan += [int(v) for v in walk(layers[key], "ieee8021ad.id")]
        elif key == "vlan":
            vlan += [int(v) for v in walk(layers[key], "vlan.id")]
    entry["vlan"] = vlan
    for proto in ("mdns", "dns"):
        if isinstance(layers.get(proto), dict) and "dns.id" in layers[proto]:
            entry["dns"] = dns_summary(layers[proto])
            entry["protocol"] = proto
            break
    return entry


def stderr_text(r: subprocess.CompletedProcess, path: str, name: str) -> str:
    """tshark's complaints, with the path as the manifest names the file."""
    lines = [line for line in r.stderr.splitlines() if "Running as user" not in line]
    return "\n".join(lines).strip().replace(path, name)


def tshark_json(path: str, name: str) -> tuple[list, str]:
    r = subprocess.run(["tshark", "-n", "-r", path, "-T", "json", "--no-duplicate-keys"],
                       capture_output=True, text=True)
    return (json.loads(r.stdout) if r.stdout.strip() else []), stderr_text(r, path, name)


def malformed_frames(path: str) -> list[int]:
    r = subprocess.run(["tshark", "-n", "-r", path, "-Y", "_ws.malformed || _ws.short", "-T", "fields",
                        "-e", "frame.number"], capture_output=True, text=True)
    return [int(x) for x in r.stdout.split()]


def describe(path: str, name: str, notes: str) -> dict:
    head = open(path, "rb").read(4)
    info: dict = {"file": name}
    if head == b"\x0a\x0d\x0d\x0a":
        link_types, orders = read_pcapng_link_types(path)
        info["format"] = "pcapng"
        info["linkTypes"] = link_types
        info["byteOrder"] = orders[0] if len(set(orders)) == 1 else orders
        info["sections"] = len(orders)
    else:
        p = read_pcap(path)
        info["format"] = "pcap"
        info["linkTypes"] = [p.link_type]
        info["byteOrder"] = "little" if p.byte_order == "<" else "big"
        info["timestampResolution"] = "ns" if p.nano else "us"
        info["snaplen"] = p.snaplen
    packets, err = tshark_json(path, name)
    info["frames"] = len(packets)
    info["udp"] = [e for e in (udp_entry(p["_source"]["layers"]) for p in packets) if e]
    info["malformed"] = malformed_frames(path)
    if err:
        info["tsharkError"] = err
    info["notes"] = notes
    return info


def main() -> int:
    directory, notes_path = sys.argv[1], sys.argv[2]
    notes = json.load(open(notes_path))
    captures, not_captures = [], []
    for name, note in notes.items():
        path = os.path.join(directory, name)
        if name.startswith("not-a-capture/"):
            kind = {"txt": "text", "bin": "binary", "gz": "gzip"}[name.rsplit(".", 1)[-1]]
            r = subprocess.run(["tshark", "-n", "-r", path, "-c", "1"], capture_output=True, text=True)
            err = stderr_text(r, path, name)
            entry = {"file": name, "kind": kind, "tsharkOpens": r.returncode == 0, "notes": note}
            if err:
                entry["tsharkError"] = err
            not_captures.append(entry)
        else:
            captures.append(describe(path, name, note))
    with open(os.path.join(directory, "manifest.json"), "w") as f:
        f.write(manifest_text(tshark_version(), captures, not_captures))
    return 0


def manifest_text(version: str, captures: list[dict], not_captures: list[dict]) -> str:
    """JSON laid out for reading and diffing: one line per key of a capture, one per datagram."""
    def compact(v) -> str:
        return json.dumps(v, ensure_ascii=False)

    def obj(d: dict, indent: str) -> str:
        lines = []
        for k, v in d.items():
            if k == "udp" and v:
                items = (",\n" + indent + "  ").join(compact(u) for u in v)
                lines.append(f'{indent} {compact(k)}: [\n{indent}  {items}\n{indent} ]')
            else:
                lines.append(f"{indent} {compact(k)}: {compact(v)}")
        return indent + "{\n" + ",\n".join(lines) + "\n" + indent + "}"

    parts = [f'{{"tshark": {compact(version)},', ' "captures": [']
    parts.append(",\n".join(obj(c, "  ") for c in captures))
    parts.append(' ],')
    parts.append(' "notCaptures": [')
    parts.append(",\n".join("  " + compact(n) for n in not_captures))
    parts.append(" ]}")
    text = "\n".join(parts) + "\n"
    json.loads(text)  # still valid JSON
    return text


if __name__ == "__main__":
    sys.exit(main())
