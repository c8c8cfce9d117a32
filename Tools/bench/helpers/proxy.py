"""The discovery proxy (RFC 8766) under load, beside BIND 9 serving the same records: figures,
never assertions.

Run through Tools/bench/proxy, which builds a one-LAN lab of four hosts and sets NEARBY_LAB,
NEARBY_BIN and NEARBY_MASS_BIN. Every packet stays inside the lab's namespaces.

- h1 advertises BENCH_SERVICES (1,000) instances "mass-N" of _bench._tcp with Nearby's engine
  (named without a space: dnsperf's query files cannot carry one)
  in one process (host name mass.local; port 10000+N; an empty TXT).
- h2 runs `nearby proxy lan1=lan1.bench.test --listen 198.18.1.2` with no per-source limit
  (dnsperf is one source; a site's resolver is too) and a link budget high enough to learn
  every name in the warm-up.
- h3 runs BIND 9 (`named`, recursion off) with a static zone lan1.bench.test holding the same
  records: the 1,000 PTRs, SRVs and TXTs, and mass's A and AAAA. A few answers from each are
  compared before measuring.
- h4 runs dnsperf with one query file for both: for every instance its SRV and TXT, the host's
  A, and the type's PTR once (2,002 questions, read in order, over UDP).

Per round (BENCH_ROUNDS, 3): dnsperf for BENCH_SECONDS (10) against the proxy, then against
BIND, as fast as each answers (-c 10 -q 100 -T 2). Printed: queries per second (proxy/BIND as
a ratio, per round and the median), lost queries, mean latency; the proxy's and named's CPU
(user+system seconds over the run's wall time, from /proc) and resident memory after the run.

Then the link: tcpdump in h1 counts the mDNS packets the proxy sends on lan1 over windows of
BENCH_SECONDS with no questions at all, with 100 questions a second, at full rate, and with
none again. The proxy answers from what its continuous queries keep, so its mDNS follows the
records' TTLs (refreshes at 80-95 % of 120 s), not the load.

Each round also gives each server's CPU time per question answered (microseconds), which
does not depend on how fast the one dnsperf can ask: on 2 cores dnsperf shares the machine
with the server it measures, and at full rate both servers may be waiting for it.

BENCH_PROXY_ARGS adds options to the proxy's command line: with "--metrics 198.18.1.2:9153" its
metrics are exposed and scraped once a second during its rounds (the cost of recording them).

BENCH_PROFILE=1 samples the proxy with `perf record -e cpu-clock -g` during its first round and
prints the functions where it spends its time (perf report, self time, over 2 %); the whole
report is kept in the logs. BENCH_CLIENTS (10) sets dnsperf's -c.

Raw values: .build/bench/proxy.json; every child's output under .build/bench/proxy-logs/.
"""
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

LAB = os.environ["NEARBY_LAB"]
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))  # Tools/bench/helpers/ -> the repository
SERVICES = int(os.environ.get("BENCH_SERVICES", "1000"))
ROUNDS = int(os.environ.get("BENCH_ROUNDS", "3"))
SECONDS = int(os.environ.get("BENCH_SECONDS", "10"))
PROFILE = os.environ.get("BENCH_PROFILE", "") == "1"
CLIENTS = os.environ.get("BENCH_CLIENTS", "10")
# More options for the proxy, e.g. BENCH_PROXY_ARGS="--metrics 198.18.1.2:9153" to measure with
# its metrics exposed (then scraped once a second during each round, as a busy Prometheus would).
EXTRA_PROXY_ARGUMENTS = os.environ.get("BENCH_PROXY_ARGS", "").split()
METRICS = next((EXTRA_PROXY_ARGUMENTS[i + 1] for i, a in enumerate(EXTRA_PROXY_ARGUMENTS[:-1]) if a == "--metrics"), None)
ZONE = "lan1.bench.test"
TYPE = "_bench._tcp"
PROXY, BIND, CLIENT = "198.18.1.2", "198.18.1.3", "h4"
LOGS = os.path.join(ROOT, ".build", "bench", "proxy-logs")
os.makedirs(LOGS, exist_ok=True)
WORK = tempfile.mkdtemp(prefix="nearby-bench-proxy-")
os.chmod(WORK, 0o755)
# The binaries are copied, so that a build meanwhile does not change them in the middle of a run.
NEARBY = shutil.copy(os.environ["NEARBY_BIN"], os.path.join(WORK, "nearby"))
MASS = shutil.copy(os.environ["NEARBY_MASS_BIN"], os.path.join(WORK, "nearby-mass-advertise"))
children = []


def say(text):
    print(text, flush=True)


def lab(*args, check=True, timeout=120):
    result = subprocess.run([LAB, *args], capture_output=True, text=True, timeout=timeout)
    if check and result.returncode != 0:
        raise SystemExit(f"bench/proxy: Tools/lab {' '.join(args)} failed: {result.stdout}{result.stderr}")
    return result.stdout


def start(name, host, *command):
    log = open(os.path.join(LOGS, f"{name}.log"), "w")
    process = subprocess.Popen([LAB, "exec", host, "--", *command], stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    children.append(process)
    return process


def wait_for(name, text, seconds=60):
    path = os.path.join(LOGS, f"{name}.log")
    deadline = time.time() + seconds
    while time.time() < deadline:
        with open(path) as f:
            if text in f.read():
                return
        time.sleep(0.1)
    raise SystemExit(f"bench/proxy: {name} did not say {text!r} within {seconds} s (see {path})")


def pid_of(pattern):
    out = subprocess.run(["pgrep", "-f", pattern], capture_output=True, text=True).stdout.split()
    pids = [int(p) for p in out if int(p) != os.getpid()]
    # The process itself, not `ip netns exec` around it: the one whose command starts with it.
    for pid in pids:
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
            if os.path.basename(pattern.split()[0]).encode() in os.path.basename(argv[0]):
                return pid
        except OSError:
            pass
    raise SystemExit(f"bench/proxy: no process {pattern!r}")


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / ticks


def rss_mib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def dig(server, name, rtype):
    return lab("exec", CLIENT, "--", "dig", f"@{server}", name, rtype, "+short", "+norec", "+time=3", "+tries=2").strip()


def dnsperf(server, seconds, rate=None):
    args = ["dnsperf", "-s", server, "-d", os.path.join(WORK, "queries.txt"), "-l", str(seconds), "-c", CLIENTS, "-q", "100", "-T", "2"]
    if rate:
        args += ["-Q", str(rate)]
    out = lab("exec", CLIENT, "--", *args, timeout=seconds + 60)

    def number(label):
        match = re.search(label + r"\s+([0-9.]+)", out)
        return float(match.group(1)) if match else float("nan")
    lost = re.search(r"Queries lost:\s+(\d+)", out)
    completed = re.search(r"Queries completed:\s+(\d+)", out)
    return {"qps": number("Queries per second:"), "lost": int(lost.group(1)) if lost else -1,
            "completed": int(completed.group(1)) if completed else 0,
            "latency_ms": number(r"Average Latency \(s\):") * 1000, "raw": out}


def write_files():
    with open(os.path.join(WORK, "queries.txt"), "w") as f:
        f.write(f"{TYPE}.{ZONE} PTR\n")
        for n in range(1, SERVICES + 1):
            f.write(f"mass-{n}.{TYPE}.{ZONE} SRV\nmass-{n}.{TYPE}.{ZONE} TXT\n")
        f.write(f"mass.{ZONE} A\n")
    with open(os.path.join(WORK, "zone"), "w") as f:
        f.write(f"$ORIGIN {ZONE}.\n$TTL 10\n@ IN SOA proxy.bench.test. hostmaster.{ZONE}. 0 7200 3600 86400 10\n@ IN NS ns.bench.test.\n")
        for n in range(1, SERVICES + 1):
            f.write(f"{TYPE} IN PTR mass-{n}.{TYPE}.{ZONE}.\n")
            f.write(f"mass-{n}.{TYPE} IN SRV 0 0 {10000 + n} mass.{ZONE}.\n")
            f.write(f"mass-{n}.{TYPE} IN TXT \"\"\n")
        f.write("mass IN A 198.18.1.1\nmass IN AAAA fd6e:6272:1::1\n")
    with open(os.path.join(WORK, "named.conf"), "w") as f:
        f.write(f"""options {{
    directory "{WORK}";
    pid-file "{WORK}/named.pid";
    session-keyfile "{WORK}/session.key";
    managed-keys-directory "{WORK}";
    listen-on port 53 {{ {BIND}; }};
    listen-on-v6 {{ none; }};
    recursion no;
    dnssec-validation no;
    notify no;
    empty-zones-enable no;
    max-records-per-type 0;
}};
controls {{ }};
zone "{ZONE}" {{ type primary; file "{WORK}/zone"; }};
""")


def count_mdns(seconds, load, label):
    tag = label.replace("/", "-per-").replace(" ", "-")
    pcap = os.path.join(WORK, f"mdns-{tag}.pcap")
    tcpdump = start(f"tcpdump-{tag}", "h1", "tcpdump", "-i", "lan1", "-U", "-w", pcap, "udp port 5353 and src host 198.18.1.2")
    time.sleep(1)
    if load == "none":
        time.sleep(seconds)
    else:
        dnsperf(PROXY, seconds, rate=100 if load == "100/s" else None)
    tcpdump.send_signal(signal.SIGINT)
    tcpdump.wait(timeout=10)
    out = subprocess.run(["tcpdump", "-r", pcap, "-nn"], capture_output=True, text=True).stdout
    lines = [line for line in out.splitlines() if line.strip()]
    # What was asked, kept with the logs: refreshes name SRV/A/AAAA questions of known records.
    with open(os.path.join(LOGS, f"mdns-{tag}.txt"), "w") as f:
        f.write(out)
    return len(lines)


def main():
    write_files()
    say(f"bench/proxy: {SERVICES} services of {TYPE} on lan1 (h1); the proxy in h2, BIND 9 in h3 (the same records, static); dnsperf in h4")
    start("mass", "h1", MASS, str(SERVICES), TYPE, "--host", "mass", "--prefix", "mass-")
    wait_for("mass", f"advertised {SERVICES}", seconds=120)
    proxy = start("proxy", "h2", NEARBY, "proxy", f"lan1={ZONE}", "--listen", PROXY, "--name-server", "proxy.bench.test",
          "--rate", "0", "--link-rate", "5000", "--json", *EXTRA_PROXY_ARGUMENTS)
    wait_for("proxy", "proxying")
    start("named", "h3", "named", "-g", "-c", os.path.join(WORK, "named.conf"))
    wait_for("named", "running", seconds=30)
    # By the copies' paths in this run's own directory: another lab may run a proxy or a named too.
    proxy_pid, named_pid = pid_of(f"{NEARBY} proxy"), pid_of(f"named -g -c {os.path.join(WORK, 'named.conf')}")

    # Warm-up: every question asked once (the proxy starts its link questions), then again.
    for _ in range(2):
        dnsperf(PROXY, 5, rate=2000)
        time.sleep(2)
    same = True
    for n in (1, SERVICES // 2, SERVICES):
        for rtype in ("SRV", "TXT"):
            a, b = dig(PROXY, f"mass-{n}.{TYPE}.{ZONE}", rtype), dig(BIND, f"mass-{n}.{TYPE}.{ZONE}", rtype)
            if a != b:
                same = False
                say(f"  differs: mass-{n} {rtype}: proxy {a!r}, BIND {b!r}")
    a, b = sorted(dig(PROXY, f"mass.{ZONE}", "A").split()), sorted(dig(BIND, f"mass.{ZONE}", "A").split())
    same = same and a == b
    say(f"  the proxy and BIND give the same answers for the sampled names: {'yes' if same else 'NO'}")

    rounds = []
    for r in range(1, ROUNDS + 1):
        row = {}
        for who, server, pid in (("proxy", PROXY, proxy_pid), ("bind", BIND, named_pid)):
            profiler = None
            if PROFILE and who == "proxy" and r == 1 and shutil.which("perf"):
                profiler = subprocess.Popen(["perf", "record", "-e", "cpu-clock", "-F", "999", "-g", "-p", str(pid), "-o",
                                             os.path.join(WORK, "perf.data"), "--", "sleep", str(SECONDS)],
                                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            scraper = None
            if METRICS and who == "proxy":
                scraper = start("scraper", CLIENT, "sh", "-c",
                                f"for i in $(seq {SECONDS}); do curl -s -o /dev/null --max-time 2 http://{METRICS}/metrics; sleep 1; done")
            cpu0, t0 = cpu_seconds(pid), time.time()
            result = dnsperf(server, SECONDS)
            wall = time.time() - t0
            if scraper:
                scraper.wait(timeout=SECONDS + 30)
            cpu = cpu_seconds(pid) - cpu0
            result["cpu_share"] = cpu / wall
            result["cpu_us_per_query"] = cpu * 1e6 / result["completed"] if result["completed"] else float("nan")
            if profiler:
                profiler.wait(timeout=SECONDS + 30)
                report = subprocess.run(["perf", "report", "-i", os.path.join(WORK, "perf.data"), "--no-children", "--stdio",
                                         "--percent-limit", "2", "-g", "none", "--sort", "symbol"],
                                        capture_output=True, text=True).stdout
                with open(os.path.join(LOGS, "proxy-profile.txt"), "w") as f:
                    f.write(report)
                say("  where the proxy's CPU went (perf, self time, over 2 %):")
                for line in report.splitlines():
                    if "%" in line and not line.startswith("#"):
                        say("    " + line.strip()[:150])
            result["rss_mib"] = rss_mib(pid)
            with open(os.path.join(LOGS, f"dnsperf-{who}-{r}.txt"), "w") as f:
                f.write(result.pop("raw"))
            row[who] = result
        row["ratio"] = row["proxy"]["qps"] / row["bind"]["qps"]
        rounds.append(row)
        p, b = row["proxy"], row["bind"]
        say(f"  round {r}: proxy {p['qps']:,.0f} q/s (lost {p['lost']}, {p['latency_ms']:.2f} ms, CPU {p['cpu_share']:.0%}, "
            f"{p['cpu_us_per_query']:.1f} µs/question, {p['rss_mib']:.0f} MiB); BIND {b['qps']:,.0f} q/s (lost {b['lost']}, "
            f"{b['latency_ms']:.2f} ms, CPU {b['cpu_share']:.0%}, {b['cpu_us_per_query']:.1f} µs/question, {b['rss_mib']:.0f} MiB); "
            f"proxy/BIND {row['ratio']:.2f}")
    median = statistics.median(row["ratio"] for row in rounds)
    say(f"  median proxy/BIND queries per second over {ROUNDS} rounds: {median:.2f}")
    cpu_ratio = statistics.median(row["bind"]["cpu_us_per_query"] / row["proxy"]["cpu_us_per_query"] if row["proxy"]["cpu_us_per_query"] else float("nan")
                                  for row in rounds)
    say(f"  median BIND/proxy CPU per question (above 1: the proxy spends less): {cpu_ratio:.2f}")

    # Four windows: no load, some, full, and none again. The proxy's own mDNS queries are
    # refreshes at 80-95 % of the records' TTLs (120 s for SRV and addresses), so they fall in
    # whichever window the clock puts them, whatever the load.
    link = {}
    for load in ("none", "100/s", "full", "none again"):
        link[load] = count_mdns(SECONDS, "none" if load == "none again" else load, label=load)
    say(f"  mDNS packets the proxy sent on lan1, per {SECONDS} s window: no questions {link['none']}, "
        f"100 questions/s {link['100/s']}, full rate {link['full']}, no questions again {link['none again']}")
    # The proxy's own account: how many answers held records from the link.
    os.killpg(proxy.pid, signal.SIGINT)
    proxy.wait(timeout=15)
    counts = {}
    with open(os.path.join(LOGS, "proxy.log")) as f:
        for line in f:
            if line.startswith("{") and '"stopped"' in line:
                counts = json.loads(line)
    say(f"  the proxy answered {counts.get('questions', 0):,} questions: {counts.get('answeredFromLink', 0):,} with records from the link, "
        f"{counts.get('noData', 0):,} with none, {counts.get('rateLimited', 0):,} over a rate")
    out = {"proxy_counts": counts, "services": SERVICES, "seconds": SECONDS, "same_answers": same, "rounds": rounds, "median_ratio": median, "median_cpu_ratio": cpu_ratio, "mdns_packets": link,
           "date": time.strftime("%Y-%m-%d")}
    with open(os.path.join(ROOT, ".build", "bench", "proxy.json"), "w") as f:
        json.dump(out, f, indent=1)


try:
    main()
finally:
    for child in children:
        try:
            os.killpg(child.pid, signal.SIGINT)
        except ProcessLookupError:
            pass
    for child in children:
        try:
            child.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(child.pid, signal.SIGKILL)
    shutil.rmtree(WORK, ignore_errors=True)
