#!/usr/bin/env python3
"""The flood benchmark (run by Tools/bench/flood inside `Tools/lab run --hosts 3`).

For each responder — nearby (embedded engine), avahi-daemon, python-zeroconf — in turn, in the
same run: h1 publishes "Flood Box" (_openagents._tcp); h2 floods the mDNS group with hostile
packets and valid PTR queries (Tools/bench/helpers/flood_sender.py) for FLOOD_SECONDS at FLOOD_RATE;
h3 resolves the service with `nearby resolve` every 2 s during the flood and three times after
it (h3 drops the flooder's packets, so only the responder is under test). Measured on the
responder's process: CPU time over the flood (from /proc/PID/stat), resident memory growth
(VmRSS sampled every 0.25 s, peak minus the level before the flood), and datagrams the kernel
dropped on h1's port-5353 sockets because a socket buffer was full. Prints a table; asserts
nothing. Environment: NEARBY_LAB, NEARBY_LAB_NAME, NEARBY_BIN, FLOOD_RATE (30000),
FLOOD_SECONDS (15), FLOOD_ONLY (comma list of responders to run).
"""
import json
import os
import subprocess
import sys
import threading
import time

LAB = os.environ["NEARBY_LAB"]
NAME = os.environ["NEARBY_LAB_NAME"]
BIN = os.environ["NEARBY_BIN"]
RATE = int(os.environ.get("FLOOD_RATE", "30000"))
SECONDS = float(os.environ.get("FLOOD_SECONDS", "15"))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))  # Tools/bench/helpers/ -> the repository
TICKS = os.sysconf("SC_CLK_TCK")


def lab(*args, **kwargs):
    return subprocess.run([LAB, *args], capture_output=True, text=True, **kwargs)


def start(*args):
    return subprocess.Popen([LAB, *args], stdout=subprocess.PIPE, stderr=open("/tmp/nearby-flood-" + args[0] + ".err", "a"), text=True)


def namespace_pids(host):
    out = subprocess.run(["ip", "netns", "pids", f"{NAME}-{host}"], capture_output=True, text=True).stdout
    return [int(p) for p in out.split()]


def find_pid(host, match):
    for _ in range(50):
        for pid in namespace_pids(host):
            try:
                comm = open(f"/proc/{pid}/comm").read().strip()
                cmdline = open(f"/proc/{pid}/cmdline", "rb").read().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if match(comm, cmdline):
                return pid
        time.sleep(0.1)
    raise SystemExit(f"bench/flood: no process matching in {host}")


def cpu_seconds(pid):
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def rss_kib(pid):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def kernel_drops(host):
    """Datagrams the kernel dropped on h1's UDP port 5353 sockets (socket buffer full), so far."""
    text = lab("exec", host, "--", "cat", "/proc/net/udp", "/proc/net/udp6").stdout
    total = 0
    for line in text.splitlines():
        fields = line.split()
        if len(fields) > 2 and fields[1].endswith(":14E9") and fields[-1].isdigit():
            total += int(fields[-1])
    return total


def resolve_once():
    started = time.monotonic()
    result = lab("exec", "h3", "--", BIN, "resolve", "Flood Box", "_openagents._tcp", "--backend", "embedded",
                 "--timeout", "2", "--json", timeout=20)
    ok = result.returncode == 0 and '"port":9500' in result.stdout.replace(" ", "")
    return ok, time.monotonic() - started


def run_one(kind):
    if kind == "nearby":
        publisher = start("exec", "h1", "--", BIN, "advertise", "Flood Box", "_openagents._tcp", "9500", "--host", "flood-h1",
                          "--backend", "embedded", "--json")
        pid = find_pid("h1", lambda comm, cmd: comm == "nearby")
    elif kind == "avahi-daemon":
        if lab("avahi", "start", "h1").returncode != 0:
            raise SystemExit("bench/flood: avahi-daemon did not start in h1")
        publisher = start("avahi", "exec", "h1", "--", "avahi-publish", "-s", "Flood Box", "_openagents._tcp", "9500")
        pid = find_pid("h1", lambda comm, cmd: comm == "avahi-daemon")
    else:
        publisher = start("zeroconf", "h1", "--", "register", "Flood Box", "_openagents._tcp", "9500")
        pid = find_pid("h1", lambda comm, cmd: "zeroconf_peer" in cmd and "register" in cmd)
    time.sleep(3)  # probing and announcing are over
    warm_ok, _ = resolve_once()
    base_rss = rss_kib(pid)
    peak = [base_rss]
    sampling = [True]

    def sample():
        while sampling[0]:
            try:
                peak[0] = max(peak[0], rss_kib(pid))
            except OSError:
                return
            time.sleep(0.25)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    cpu_before = cpu_seconds(pid)
    drops_before = kernel_drops("h1")
    flood_start = time.monotonic()
    sender = start("exec", "h2", "--", "python3", os.path.join(ROOT, "Tools/bench/helpers/flood_sender.py"),
                   "--rate", str(RATE), "--seconds", str(SECONDS))
    during = []
    next_resolve = flood_start + 1
    while time.monotonic() < flood_start + SECONDS - 1.5:
        time.sleep(max(0, next_resolve - time.monotonic()))
        during.append(resolve_once())
        next_resolve += 2
    out, _ = sender.communicate(timeout=SECONDS + 30)
    flood_seconds = time.monotonic() - flood_start
    cpu_used = cpu_seconds(pid) - cpu_before
    dropped = kernel_drops("h1") - drops_before
    flood = json.loads(out.strip().splitlines()[-1]) if out.strip() else {"sent": 0, "rate": 0}
    after = []
    for _ in range(3):
        time.sleep(0.5)
        after.append(resolve_once())
    sampling[0] = False
    sampler.join()
    publisher.terminate()
    try:
        publisher.wait(timeout=10)
    except subprocess.TimeoutExpired:
        publisher.kill()
    if kind == "avahi-daemon":
        lab("avahi", "stop", "h1")
    time.sleep(1)
    return {
        "responder": kind,
        "warm": warm_ok,
        "sent": flood["sent"],
        "rate": flood["rate"],
        "cpu_percent": 100 * cpu_used / flood_seconds,
        "us_per_packet": 1e6 * cpu_used / max(1, flood["sent"]),
        "during": (sum(ok for ok, _ in during), len(during)),
        "after": (sum(ok for ok, _ in after), len(after)),
        "slowest_during": max((t for _, t in during), default=0),
        "rss_growth_mib": (peak[0] - base_rss) / 1024,
        "kernel_drops": dropped,
    }


def main():
    only = os.environ.get("FLOOD_ONLY")
    kinds = only.split(",") if only else ["nearby", "avahi-daemon", "python-zeroconf"]
    # h3 resolves; it must not be flooded itself, or the resolver would be measured too.
    for tool in ("iptables", "ip6tables"):
        source = "198.18.1.2" if tool == "iptables" else "fd6e:6272:1::2"
        lab("exec", "h3", "--", tool, "-A", "INPUT", "-s", source, "-p", "udp", "--dport", "5353", "-j", "DROP")
    results = [run_one(kind) for kind in kinds]
    print()
    print(f"flood: {RATE} packets/s asked for {SECONDS:.0f} s, half hostile, half valid PTR queries; "
          "resolves from a third host every 2 s during, 3 after")
    print(f"{'responder':<17}{'sent/s':>8}{'CPU %':>8}{'µs/packet':>11}{'resolves during':>17}{'after':>7}"
          f"{'slowest':>9}{'RSS growth':>12}{'kernel drops':>14}")
    for r in results:
        print(f"{r['responder']:<17}{r['rate']:>8}{r['cpu_percent']:>7.0f}%{r['us_per_packet']:>11.2f}"
              f"{'%d/%d' % r['during']:>17}{'%d/%d' % r['after']:>7}{r['slowest_during']:>8.2f}s"
              f"{r['rss_growth_mib']:>9.1f} MiB{r['kernel_drops']:>14}")
    by = {r["responder"]: r for r in results}
    if "nearby" in by and "avahi-daemon" in by and by["avahi-daemon"]["us_per_packet"] > 0:
        print(f"nearby's CPU per packet / avahi-daemon's: {by['nearby']['us_per_packet'] / by['avahi-daemon']['us_per_packet']:.2f}")
    if "nearby" in by and "python-zeroconf" in by and by["python-zeroconf"]["us_per_packet"] > 0:
        print(f"nearby's CPU per packet / python-zeroconf's: {by['nearby']['us_per_packet'] / by['python-zeroconf']['us_per_packet']:.2f}")
    print(json.dumps(results))


if __name__ == "__main__":
    main()
