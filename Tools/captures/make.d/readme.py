#!/usr/bin/env python3
"""Write README.md for the capture fixtures from notes.json and manifest.json.

    python3 readme.py DIR NOTES.json
"""
import json
import os
import platform
import subprocess
import sys
import time


def version(cmd: list[str]) -> str:
    r = subprocess.run(cmd, capture_output=True, text=True)
    return (r.stdout or r.stderr).strip().splitlines()[0].rstrip(".")


def main() -> int:
    directory, notes_path = sys.argv[1], sys.argv[2]
    notes = json.load(open(notes_path))
    manifest = json.load(open(os.path.join(directory, "manifest.json")))
    by_file = {c["file"]: c for c in manifest["captures"]}
    avahi = version(["avahi-daemon", "--version"])
    repository = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..")  # Tools/captures/make.d/
    venv_python = os.path.join(repository, ".build-venv", "bin", "python")
    zc = version([venv_python, "-c", "import zeroconf; print(zeroconf.__version__)"])
    lines = [
        "# Capture-file fixtures for `nearby decode`",
        "",
        "Small capture files in the formats and link types people capture mDNS with, and",
        "`manifest.json`, tshark's view of each of them. Do not edit by hand: regenerate everything",
        "with `Tools/captures/make` as root (about a minute; `--help`). The real captures are taken",
        "in a lab of their own (`Tools/lab`, lab `nb-fx`, 3 hosts: network namespaces on a bridge in",
        "its own namespace, so no packet left the machine); the lab is torn down afterwards.",
        "",
        f"Made on {time.strftime('%Y-%m-%d', time.gmtime())} with tcpdump/libpcap "
        f"({version(['tcpdump', '--version'])}), {version(['dumpcap', '--version'])}, tshark "
        f"{manifest['tshark']}, {avahi}, python-zeroconf {zc}, Linux {platform.release()}.",
        "Lab addresses: h1 198.18.1.1 / fd6e:6272:1::1 / 02:6e:62:01:00:01, h2 .2, h3 .3 (fe80::6e:62ff:fe01:N).",
        "",
        "## The two lab scenarios",
        "",
        "All captures of a scenario run at the same time in h1, so the real files of the main",
        "scenario hold the same traffic (`-i any` adds nothing: h1's lo stays quiet).",
        "",
        "1. **main** (before the captures start: `Tools/lab dns start h1` = BIND, `Tools/lab avahi start h2`,",
        "   then 5 s for avahi's own start-up chatter): in h2 `avahi-publish -s \"Fixture Avahi\"",
        "   _openagents._tcp 9099 version=1 mode=fixture` (probes, three announcements); in h1",
        "   `Tools/lab zeroconf h1 -- browse _openagents._tcp --resolve --timeout 2` (python-zeroconf's",
        "   QU then QM queries with known answers, avahi's answers to h1, by unicast or multicast as",
        "   avahi decides, IGMP/MLD joins and leaves); from h3 `lab_send.py query` and `query --ipv6`",
        "   (plain QM queries, which avahi answers by multicast); from h2",
        "   `Tools/captures/make.d/lab_send.py`: `big` (a 3713-byte mDNS response, ID 0, PTR + SRV + a",
        "   3514-byte TXT, to 224.0.0.251 with IP_MTU_DISCOVER = IP_PMTUDISC_DONT: 3 IPv4 fragments),",
        "   `big --ipv6` (to ff02::fb with IPV6_MTU_DISCOVER = IPV6_PMTUDISC_DONT: 3 fragments with a",
        "   Fragment header), `hbh` and `dstopts` (small announcements with an 8-byte Hop-by-Hop resp.",
        "   Destination Options header holding one PadN option, built by the kernel from",
        "   setsockopt IPV6_HOPOPTS / IPV6_DSTOPTS); `dig @198.18.1.1 +nocookie",
        "   b._dns-sd._udp.lab.example.test PTR` (unicast DNS on port 53, with ARP first); `lab_send.py",
        "   unicast 198.18.1.1 9999` (UDP, answered by ICMP port unreachable); `lab_send.py ping",
        "   198.18.1.1` (ICMP echo and reply); a TCP connect to 198.18.1.1:9 (SYN, RST); then SIGINT to",
        "   avahi-publish (goodbye, TTL 0).",
        "2. **vlan**: the kernel here has no 802.1Q module, so `Tools/captures/make.d/vlan_tagger.py`",
        "   loads two hand-assembled eBPF programs in tc clsact filters on lan1 of h2 and h3",
        "   (egress: `bpf_skb_vlan_push` VLAN 7; ingress: `bpf_skb_vlan_pop`). In h2 `Tools/lab zeroconf",
        "   h2 -- register \"Fixture VLAN\" _openagents._tcp 9096 vlan=7`, in h3 `browse _openagents._tcp",
        "   --timeout 1.5`; then h3 pushes 802.1ad VLAN 100 outside 802.1Q VLAN 7 and sends one",
        "   announcement (\"Fixture QinQ\") over IPv4 and IPv6; then SIGTERM to the registrant",
        "   (goodbyes). h1, untagged, only captures.",
        "",
        "Real captures are not byte-for-byte repeatable (timestamps, IPv4 IDs, IPv6 flow labels, dig's",
        "query ID, whether avahi answers a QU query by unicast or multicast, the exact interleaving,",
        "so frame numbers and counts move a little from run to run); the payloads of the hand-made",
        "datagrams are fixed, and the converted and synthesized files depend only on the real ones.",
        "`Tools/captures/make.d/check.py` checks every run: each file opens in tshark and holds what",
        "it is meant to (both fragmented responses, HBH and DSTOPTS mDNS, unicast DNS, ARP, TCP, a",
        "goodbye, VLAN 7 and QinQ 100/7 mDNS, the 802.11 frame kinds, good and bad FCS, ...).",
        "",
        "## manifest.json",
        "",
        "`{\"tshark\": version, \"captures\": [...], \"notCaptures\": [...]}`. Per capture: `file`, `format`",
        "(`pcap`/`pcapng`), `linkTypes` (from the file's header / every IDB, in order), `byteOrder`",
        "(per section if they differ), `sections` (pcapng), `timestampResolution` and `snaplen` (pcap),",
        "`frames` (as tshark counts them), `udp`, `malformed` (frames tshark marks `_ws.malformed` or",
        "`_ws.short`), `tsharkError` (what tshark printed on stderr, if anything) and `notes`.",
        "Each `udp` entry is one UDP datagram as tshark dissects it at the top level (UDP headers",
        "quoted inside ICMP errors are not listed), in the frame where tshark has it whole: for a",
        "fragmented datagram the frame that completed the reassembly, with `fragmentFrames` listing",
        "all its fragments. `time` is `frame.time_epoch` as tshark prints it (9 decimals), `payloadLength`",
        "is the UDP length field minus 8, `payloadSHA256` the SHA-256 of the payload bytes tshark has",
        "(`udp.payload`; reassembled if fragmented); when the frame was cut short,",
        "`capturedPayloadLength` says how many bytes that was. `vlan` lists VLAN IDs outermost first.",
        "`dns` (when tshark dissects DNS or mDNS; `protocol` says which) has `id`, `response`,",
        "`questions` (names), and the `answers`, `authorities`, `additionals` counts.",
        "",
        "## Files",
        "",
        "| file | bytes | frames | link types | how it was made |",
        "| --- | ---: | ---: | --- | --- |",
    ]
    for name, note in notes.items():
        size = os.path.getsize(os.path.join(directory, name))
        c = by_file.get(name)
        frames = str(c["frames"]) if c else "-"
        links = ", ".join(str(t) for t in c["linkTypes"]) if c else "-"
        lines.append(f"| `{name}` | {size} | {frames} | {links} | {note} |")
    flagged = [f"`{c['file']}`: frames {', '.join(map(str, c['malformed']))}" for c in manifest["captures"] if c["malformed"]]
    errors = [f"`{c['file']}`: {c['tsharkError']}" for c in manifest["captures"] if c.get("tsharkError")]
    lines += ["", "## What tshark flags", ""]
    lines += [f"- malformed/short: {x}" for x in flagged] or ["- no malformed or short frames"]
    lines += [f"- error: {x}" for x in errors]
    lines += [f"- `{n['file']}`: tshark {'opens it' if n['tsharkOpens'] else 'refuses it'}"
              + (f" ({n['tsharkError']})" if n.get("tsharkError") else "") for n in manifest["notCaptures"]]
    with open(os.path.join(directory, "README.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
