#!/usr/bin/env python3
"""Check the capture fixtures with tshark: every file opens and holds what it is meant to hold.

    python3 check.py DIR

Exits non-zero with one line per problem. Uses DIR/manifest.json (manifest.py) and a few
tshark display filters of its own.
"""
import json
import os
import subprocess
import sys


def count(path: str, display_filter: str, *options: str) -> int:
    r = subprocess.run(["tshark", "-n", *options, "-r", path, "-Y", display_filter, "-T", "fields", "-e", "frame.number"],
                       capture_output=True, text=True)
    return len(r.stdout.split())


def main() -> int:
    d = sys.argv[1]
    m = json.load(open(os.path.join(d, "manifest.json")))
    caps = {c["file"]: c for c in m["captures"]}
    bad: list[str] = []

    def need(ok: bool, what: str) -> None:
        if not ok:
            bad.append(what)

    for c in m["captures"]:
        name, udp = c["file"], c["udp"]
        need("tsharkError" not in c or name == "truncated-record.pcap", f"{name}: tshark: {c.get('tsharkError')}")
        if name in ("empty.pcap", "empty.pcapng"):
            need(c["frames"] == 0, f"{name}: has frames")
        elif name == "no-udp.pcap":
            need(not udp and c["frames"] > 0, f"{name}: has UDP or nothing")
        else:
            need(any("dns" in u for u in udp), f"{name}: tshark found no DNS/mDNS")
        need(not c["malformed"] or name == "snaplen.pcap", f"{name}: malformed frames {c['malformed']}")

    e = caps["ethernet.pcap"]["udp"]
    v4 = [u for u in e if ":" not in u["source"]]
    v6 = [u for u in e if ":" in u["source"]]
    for fam, us in (("IPv4", v4), ("IPv6", v6)):
        mdns = [u for u in us if u.get("protocol") == "mdns"]
        need(any(not u["dns"]["response"] for u in mdns), f"ethernet.pcap: no mDNS query over {fam}")
        need(any(u["dns"]["response"] for u in mdns), f"ethernet.pcap: no mDNS response over {fam}")
        need(any(len(u["fragmentFrames"]) in (2, 3) and u["payloadLength"] == 3713 for u in us),
             f"ethernet.pcap: no fragmented 3713-byte response over {fam}")
    need(any(u["destinationPort"] == 53 for u in e) and any(u["sourcePort"] == 53 for u in e), "ethernet.pcap: no unicast DNS")
    need(any(u["destinationPort"] == 9999 for u in e), "ethernet.pcap: no UDP to port 9999")
    path = os.path.join(d, "ethernet.pcap")
    for flt in ("arp", "tcp", "icmp.type == 0", "ipv6.hopopts && mdns", "ipv6.dstopts && mdns", "mdns && dns.resp.ttl == 0"):
        need(count(path, flt) > 0, f"ethernet.pcap: nothing matches {flt!r}")

    vl = caps["vlan.pcap"]["udp"]
    need(any(u["vlan"] == [7] and "dns" in u for u in vl), "vlan.pcap: no mDNS in 802.1Q VLAN 7")
    need(any(u["vlan"] == [100, 7] and "dns" in u for u in vl), "vlan.pcap: no mDNS in QinQ 100/7")
    need(count(os.path.join(d, "vlan.pcap"), "ieee8021ad.id == 100 && vlan.id == 7 && ipv6") > 0, "vlan.pcap: no QinQ IPv6")

    for name in ("ieee80211.pcap", "radiotap.pcap"):
        p = os.path.join(d, name)
        need(count(p, "wlan.fc.type_subtype == 0x0008") == 1, f"{name}: no beacon")
        need(count(p, "wlan.fc.type_subtype == 0x0020 && mdns") == 1, f"{name}: no non-QoS data with mDNS")
        need(count(p, "wlan.fc.ds == 3 && mdns") == 1, f"{name}: no 4-address frame with mDNS")
        need(count(p, "wlan.fc.protected == 1") == 1, f"{name}: no protected frame")
    rt = os.path.join(d, "radiotap.pcap")
    need(count(rt, "wlan.fcs.status == 1", "-o", "wlan.check_checksum:TRUE") >= 10, "radiotap.pcap: too few good FCS")
    need(count(rt, "wlan.fcs.status == 0 && radiotap.flags.badfcs == 1", "-o", "wlan.check_checksum:TRUE") == 1,
         "radiotap.pcap: not exactly one bad FCS")
    need(caps["multi.pcapng"]["linkTypes"] == [1, 113], "multi.pcapng: link types")
    need(caps["two-sections.pcapng"]["sections"] == 2, "two-sections.pcapng: sections")
    need(caps["sll.pcap"]["linkTypes"] == [113] and caps["sll2.pcap"]["linkTypes"] == [276], "sll/sll2 link types")
    need(caps["snaplen.pcap"]["malformed"] != [], "snaplen.pcap: nothing cut short?")
    need(caps["truncated-record.pcap"].get("tsharkError", "").find("cut short") >= 0, "truncated-record.pcap: tshark did not complain")

    for line in bad:
        print(f"captures/make: check: {line}", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
