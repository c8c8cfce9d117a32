"""The SRP registrar (nearby registrar, RFC 9665) beside avahi publishing the same services on
the LAN: figures, never assertions.

Run through Tools/bench/registrar, which builds the router lab (h1-h5 on LAN 1, h5 the router,
h5 and h6 on LAN 2) and sets NEARBY_LAB, NEARBY_BIN and NEARBY_LAB_PYTHON. Every packet stays
inside the lab's namespaces.

- h5 runs `nearby registrar --listen 198.18.2.5 --interface lan1 --json`: updates from LAN 2,
  services advertised on LAN 1.
- h6 (LAN 2) is the requestor: Tools/lab.d/peers/srp_client.py, written from the RFCs.
- h4 (LAN 1) runs avahi-daemon, the publisher beside it (avahi-publish, avahi_mass_publish.py).
- The browsers on LAN 1, running from the start to the end: python-zeroconf in h3 (a browser
  that resolves every instance it finds: SRV, TXT and an address, stamped with
  time.monotonic() in h3) and `avahi-browse -rp` through avahi-daemon in h2 (its `=` lines,
  stamped when this script reads them). CLOCK_MONOTONIC is one clock for every namespace.

1. Ack to resolvable: BENCH_TRIALS (20) fresh registrations, one after another, each a new
   srp_client.py process with a new key; the time from the registrar's NOERROR reaching h6
   to each browser's resolved line. Beside it avahi-publish in h4, the same number of fresh
   names one after another, from its "Established" line to each browser's resolved line.
   Median, p95, max, misses (not resolved within 10 s).
2. Registrations per second: BENCH_REGISTRATIONS (1,000) hosts with a service each, from
   BENCH_SOURCES (100) addresses of h6 (10 each: under the registrar's 32 per source and its
   burst of 20), at most BENCH_WINDOW (64) unanswered at once; wall time from the first send
   to the last reply, replies by rcode, retransmissions, send-to-reply times; then how many of
   them each browser has resolved 1, 5, 10 and BENCH_SEE_SECONDS (30) s after the last reply.
   Then (BENCH_BURST=1, the default) as many again all at once, after the memory is taken:
   replies, retransmissions and the updates the kernel dropped at the registrar's UDP receive
   buffer (ss's skmem d counter in h5). The registrar then stops (its goodbyes clear the link)
   and both avahi-daemons start afresh (avahi caches every record it hears, 4,096 at most).
   Beside it avahi-daemon in h4 given the same number of services, each on its own host, by
   one D-Bus client (avahi_mass_publish.py --hosts): seen by the same browsers, from its
   last commit.
3. Memory: VmRSS (and RssAnon) of the registrar started, after part 1 and with the 1,000;
   per registration over part 2. Of avahi-daemon in h4 freshly started and with its 1,000.

Raw values: .build/bench/registrar.json; every child's output under .build/bench/registrar-logs/.
"""
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import tempfile
import threading
import time

LAB = os.environ["NEARBY_LAB"]
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
PYTHON = os.environ.get("NEARBY_LAB_PYTHON") or os.path.join(ROOT, ".build-venv", "bin", "python")
CLIENT = os.path.join(ROOT, "Tools", "lab.d", "peers", "srp_client.py")
PEERS = os.path.join(ROOT, "Tools", "lab.d", "peers")
MASS_PUBLISH = os.path.join(ROOT, "Tools", "bench", "helpers", "avahi_mass_publish.py")
STATE = os.environ.get("NEARBY_LAB_STATE", "")
TRIALS = int(os.environ.get("BENCH_TRIALS", "20"))
COUNT = int(os.environ.get("BENCH_REGISTRATIONS", "1000"))
SOURCES = int(os.environ.get("BENCH_SOURCES", "100"))
WINDOW = int(os.environ.get("BENCH_WINDOW", "128"))
BURST = os.environ.get("BENCH_BURST", "1") == "1"
SEE_SECONDS = float(os.environ.get("BENCH_SEE_SECONDS", "30"))
VERBOSE = os.environ.get("BENCH_VERBOSE", "") == "1"
TYPE = "_benchreg._tcp"
REGISTRAR, DEVICE = "198.18.2.5", "198.18.2.6"
LOGS = os.path.join(ROOT, ".build", "bench", "registrar-logs")
os.makedirs(LOGS, exist_ok=True)
WORK = tempfile.mkdtemp(prefix="nearby-bench-registrar-")
os.chmod(WORK, 0o755)
# A copy, so that a build meanwhile does not change the binary in the middle of a run.
NEARBY = shutil.copy(os.environ["NEARBY_BIN"], os.path.join(WORK, "nearby"))
children = []

# The python-zeroconf browser in h3: every instance of TYPE it finds, resolved (port and an
# address), once per name, stamped with time.monotonic() when it was resolved.
ZEROCONF_BROWSER = r"""
import asyncio, json, sys, time
sys.path.insert(0, sys.argv[1])
from zeroconf import ServiceStateChange
from zeroconf.asyncio import AsyncServiceBrowser, AsyncServiceInfo
from zeroconf_peer import make_zeroconf
stype = sys.argv[2].rstrip(".") + ".local."
done, tasks = set(), set()
async def resolve(zc, name):
    for _ in range(5):
        info = AsyncServiceInfo(stype, name)
        if await info.async_request(zc, 3000) and info.port and info.parsed_addresses():
            if name not in done:
                done.add(name)
                sys.stdout.write(json.dumps({"name": name[: -len(stype) - 1], "t": time.monotonic(), "addresses": info.parsed_addresses()}) + "\n")
                sys.stdout.flush()
            return
    sys.stdout.write(json.dumps({"unresolved": name}) + "\n"); sys.stdout.flush()
async def main():
    aiozc = make_zeroconf()
    def changed(zeroconf, service_type, name, state_change):
        if state_change is ServiceStateChange.Removed:
            done.discard(name)
            return
        if name not in done:
            task = asyncio.ensure_future(resolve(aiozc.zeroconf, name))
            tasks.add(task); task.add_done_callback(tasks.discard)
    browser = AsyncServiceBrowser(aiozc.zeroconf, [stype], handlers=[changed])
    print(json.dumps({"browsing": stype}), flush=True)
    await asyncio.Event().wait()
asyncio.run(main())
"""


def say(text=""):
    print(text, flush=True)


def lab(*args, check=True, timeout=120):
    result = subprocess.run([LAB, *args], capture_output=True, text=True, timeout=timeout)
    if check and result.returncode != 0:
        raise SystemExit(f"bench/registrar: Tools/lab {' '.join(args)} failed: {result.stdout}{result.stderr}")
    return result.stdout


class Child:
    """A process in a lab host whose output lines are read by a thread, each stamped with
    time.monotonic() when read, copied to its log, and handed to `on_line`."""

    def __init__(self, name, args, on_line=None):
        self.name, self.lines, self.on_line = name, [], on_line
        self.log = open(os.path.join(LOGS, f"{name}.log"), "w")
        self.process = subprocess.Popen([LAB, *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                        stdin=subprocess.DEVNULL, start_new_session=True)
        children.append(self)
        self.lock = threading.Lock()
        self.thread = threading.Thread(target=self.read, daemon=True)
        self.thread.start()

    def read(self):
        rest = b""
        while True:
            chunk = os.read(self.process.stdout.fileno(), 65536)
            if not chunk:
                break
            now = time.monotonic()
            rest += chunk
            *complete, rest = rest.split(b"\n")
            for raw in complete:
                line = raw.decode(errors="replace")
                self.log.write(f"{now:.6f} {line}\n")
                with self.lock:
                    self.lines.append((now, line))
                if self.on_line:
                    self.on_line(now, line)
        self.log.flush()

    def wait_for(self, text, seconds):
        """The read time of the first line holding text, waiting at most `seconds`; None if none."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            with self.lock:
                for stamp, line in self.lines:
                    if text in line:
                        return stamp, line
            if self.process.poll() is not None and not self.thread.is_alive():
                break
            time.sleep(0.01)
        return None

    def stop(self, sig=signal.SIGINT, seconds=10):
        if self.process.poll() is None:
            try:
                os.killpg(self.process.pid, sig)
                self.process.wait(timeout=seconds)
            except ProcessLookupError:
                pass
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
        self.thread.join(timeout=5)
        self.log.flush()


class Seen:
    """Instance name -> when a browser first resolved it."""

    def __init__(self):
        self.first, self.lock = {}, threading.Lock()

    def add(self, name, stamp):
        with self.lock:
            self.first.setdefault(name, stamp)

    def when(self, name):
        with self.lock:
            return self.first.get(name)

    def count(self, names, before=None):
        with self.lock:
            return sum(1 for n in names if n in self.first and (before is None or self.first[n] <= before))

    def forget(self, names):
        with self.lock:
            for n in names:
                self.first.pop(n, None)


def avahi_unescape(text):
    return re.sub(r"\\(\d{3})", lambda m: chr(int(m.group(1))), text).replace("\\.", ".").replace("\\\\", "\\")


def pid_of_binary(path):
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
            if argv and argv[0] == path.encode() and len(argv) > 1 and argv[1] == b"registrar":
                return int(entry)
        except OSError:
            pass
    raise SystemExit(f"bench/registrar: no process {path} registrar")


def memory(pid):
    fields = {}
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key in ("Name", "VmRSS", "RssAnon", "RssFile"):
                    fields[key] = value.strip() if key == "Name" else int(value.split()[0])
    except OSError:
        return {"gone": True}
    return fields


def mib(kib):
    return kib / 1024


def stats(values, total):
    ok = sorted(v for v in values if v is not None)
    if not ok:
        return {"median": None, "p95": None, "max": None, "min": None, "misses": total}
    return {"median": statistics.median(ok), "p95": ok[min(len(ok) - 1, int(round(0.95 * (len(ok) - 1))))],
            "max": ok[-1], "min": ok[0], "misses": total - len(ok)}


def ms(value):
    return "—" if value is None else f"{value * 1000:.1f} ms"


def port53_drops():
    """Datagrams the kernel dropped for the registrar's UDP socket (ss's skmem d), in h5."""
    out = lab("exec", "h5", "--", "ss", "-uanm", "sport", "=", ":53", check=False)
    found = re.search(r"skmem:\([^)]*\bd(\d+)\)", out)
    return int(found.group(1)) if found else None


def mass_register(prefix, sources, window, timeout):
    client_args = ["exec", "h6", "--", PYTHON, CLIENT, "--registrar", REGISTRAR, "--host", prefix.lower().replace(" ", "-"),
                   "--instance", prefix, "--type", TYPE, "--mass", str(COUNT), "--window", str(window), "--timeout", str(timeout)]
    for a in sources:
        client_args += ["--source", a]
    result = subprocess.run([LAB, *client_args], capture_output=True, text=True, timeout=180)
    with open(os.path.join(LOGS, f"mass-client-{window}.log"), "w") as f:
        f.write(result.stdout + result.stderr)
    lines = [l for l in result.stdout.splitlines() if l.startswith("{")]
    if not lines:
        raise SystemExit(f"bench/registrar: the mass requestor said nothing useful: {result.stdout}{result.stderr}")
    return json.loads(lines[-1])


def wait_seen(browsers, names, seconds):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if all(seen.when(n) is not None for seen in browsers for n in names):
            return
        time.sleep(0.02)


def main():
    run = time.strftime("%H%M%S")
    say(f"bench/registrar: nearby registrar in h5 (updates on {REGISTRAR}, advertised on LAN 1), requestors in h6 on LAN 2; "
        f"avahi-daemon publishing in h4; browsers on LAN 1: python-zeroconf in h3, avahi-browse in h2")
    lab("avahi", "start", "h2")
    lab("avahi", "start", "h4")
    args = ["exec", "h5", "--", NEARBY, "registrar", "--listen", REGISTRAR, "--interface", "lan1", "--json"]
    if VERBOSE:
        args.append("--verbose")
    registrar = Child("registrar", args)
    if not registrar.wait_for('"registrar"', 20):
        raise SystemExit("bench/registrar: the registrar did not start (see .build/bench/registrar-logs/registrar.log)")
    registrar_pid = pid_of_binary(NEARBY)
    time.sleep(1)
    mem = {"registrar_started": memory(registrar_pid)}

    zc_seen, avahi_seen = Seen(), Seen()

    def zc_line(stamp, line):
        if line.startswith('{"name"'):
            event = json.loads(line)
            zc_seen.add(event["name"], event["t"])

    def avahi_line(stamp, line):
        fields = line.split(";")
        if line.startswith("=") and len(fields) > 3:
            avahi_seen.add(avahi_unescape(fields[3]), stamp)
    zc = Child("zeroconf-browser", ["exec", "h3", "--", PYTHON, "-u", "-c", ZEROCONF_BROWSER, PEERS, TYPE], zc_line)
    av = Child("avahi-browse", ["avahi", "exec", "h2", "--", "stdbuf", "-oL", "avahi-browse", "-rp", TYPE], avahi_line)
    if not zc.wait_for("browsing", 30):
        raise SystemExit("bench/registrar: the python-zeroconf browser did not start (see its log)")
    time.sleep(1)
    browsers = (("python-zeroconf (h3)", zc_seen), ("avahi-browse -r (h2)", avahi_seen))

    # 1. Ack (or Established) to resolvable, one fresh name at a time.
    say(f"\n1. ack to resolvable on LAN 1, {TRIALS} fresh names one after another (browsers running since the start)")
    part1 = {"registrar": {label: [] for label, _ in browsers}, "avahi-publish": {label: [] for label, _ in browsers},
             "registrar_rcodes": {}, "registrar_ack_ms": []}
    for i in range(1, TRIALS + 1):
        name = f"Reg {run} {i}"
        out = lab("exec", "h6", "--", PYTHON, CLIENT, "--registrar", REGISTRAR, "--host", f"reg-{run}-{i}", "--instance", name,
                  "--type", TYPE, "--service-port", str(9000 + i), "--address", DEVICE, "--txt", "bench=1", "--timing", timeout=30)
        reply = json.loads(out.strip().splitlines()[-1])
        part1["registrar_rcodes"][reply["rcode"]] = part1["registrar_rcodes"].get(reply["rcode"], 0) + 1
        acked = reply.get("acked")
        if reply["rcode"] != "NOERROR" or acked is None:
            for label, _ in browsers:
                part1["registrar"][label].append(None)
            continue
        part1["registrar_ack_ms"].append((acked - reply["sent"]) * 1000)
        wait_seen([s for _, s in browsers], [name], 10)
        for label, seen in browsers:
            when = seen.when(name)
            part1["registrar"][label].append(None if when is None else when - acked)
    for i in range(1, TRIALS + 1):
        name = f"Pub {run} {i}"
        publisher = Child(f"avahi-publish-{i}", ["avahi", "exec", "h4", "--", "stdbuf", "-oL", "avahi-publish", "-s", name, TYPE,
                                                 str(9500 + i), "bench=1"])
        established = publisher.wait_for("Established", 15)
        if established is None:
            for label, _ in browsers:
                part1["avahi-publish"][label].append(None)
        else:
            wait_seen([s for _, s in browsers], [name], 10)
            for label, seen in browsers:
                when = seen.when(name)
                part1["avahi-publish"][label].append(None if when is None else when - established[0])
        publisher.stop()
    mem["registrar_after_part1"] = memory(registrar_pid)
    rows1 = []
    for who in ("registrar", "avahi-publish"):
        for label, _ in browsers:
            s = stats(part1[who][label], TRIALS)
            part1.setdefault("summary", {})[f"{who} / {label}"] = s
            rows1.append((f"{'nearby registrar (from NOERROR)' if who == 'registrar' else 'avahi-publish in h4 (from Established)'} → {label}", s))
    say(f"  {'':<72} {'median':>8} {'p95':>8} {'max':>8} {'misses':>7}")
    for label, s in rows1:
        say(f"  {label:<72} {ms(s['median']):>8} {ms(s['p95']):>8} {ms(s['max']):>8} {s['misses']:>7}")
    if part1["registrar_ack_ms"]:
        say(f"  registrar replies: {part1['registrar_rcodes']}; update sent to NOERROR (the probing the reply waits for): median "
            f"{statistics.median(part1['registrar_ack_ms']):.0f} ms, max {max(part1['registrar_ack_ms']):.0f} ms")

    # 2. COUNT registrations from SOURCES addresses as fast as the registrar answers.
    say(f"\n2. {COUNT:,} registrations (a host and a service each) from {SOURCES} addresses of h6, at most {WINDOW} unanswered")
    sources = [f"198.18.2.{100 + k}" for k in range(SOURCES)]
    lab("exec", "h6", "--", "sh", "-c", " ; ".join(f"ip addr add {a}/24 dev lan2" for a in sources))
    time.sleep(1)
    mem["registrar_before_mass"] = memory(registrar_pid)
    mass_names = [f"Mass {run} {i}" for i in range(1, COUNT + 1)]
    drops_before = port53_drops()
    mass = mass_register(f"Mass {run}", sources, WINDOW, 5)
    drops = None if drops_before is None else (port53_drops() or 0) - drops_before
    mass["port53_drops"] = drops
    last = mass["lastAcked"] or time.monotonic()
    say(f"  replies {mass['replies']}, retransmissions {mass['retransmits']} (updates the kernel dropped at the registrar's "
        f"full UDP receive buffer: {drops}); wall {mass['wall']:.2f} s (first send to last reply): "
        f"{mass['perSecond']} accepted per second; send to reply median {mass['ackMs']['median']} ms, p95 {mass['ackMs']['p95']} ms, "
        f"max {mass['ackMs']['max']} ms (signing all {COUNT} beforehand: {mass['buildSeconds']} s, not counted)")
    checkpoints = [1, 5, 10, SEE_SECONDS]
    seen_counts = {label: {} for label, _ in browsers}
    for point in checkpoints:
        while time.monotonic() < last + point:
            if all(seen.count(mass_names) == COUNT for _, seen in browsers):
                break
            time.sleep(0.05)
        for label, seen in browsers:
            seen_counts[label][str(point)] = seen.count(mass_names, before=last + point)
    all_seen = {}
    for label, seen in browsers:
        times = [seen.when(n) for n in mass_names]
        all_seen[label] = (max(times) - last) if all(t is not None for t in times) else None
        counts = ", ".join(f"{seen_counts[label][str(p)]:,} by +{p:g} s" for p in checkpoints)
        tail = f"all {COUNT:,} {all_seen[label]:+.1f} s after the last reply" if all_seen[label] is not None else f"{COUNT - seen.count(mass_names):,} never within {SEE_SECONDS:g} s"
        say(f"  {label}: {counts}; {tail}")
    time.sleep(2)
    mem["registrar_with_mass"] = memory(registrar_pid)

    # The same again all at once (no window), once the memory is taken: what a burst costs.
    burst = None
    if BURST:
        drops_before = port53_drops()
        burst = mass_register(f"Burst {run}", sources, COUNT, 3)
        burst["port53_drops"] = None if drops_before is None else (port53_drops() or 0) - drops_before
        say(f"  then {COUNT:,} more all at once (no window; an unanswered update sent again after 3 s, 3 tries): replies "
            f"{burst['replies']}, retransmissions {burst['retransmits']}, dropped at the registrar's receive buffer "
            f"{burst['port53_drops']}; wall {burst['wall']:.2f} s, {burst['perSecond']} accepted per second")

    # The registrar stops (its goodbyes take its services off the link) before avahi's turn,
    # and both avahi-daemons start afresh: avahi caches every record it hears (at most 4,096,
    # cache-entries-max), so the registrar's services would count in avahi's memory and crowd
    # its cache. The registrar's own count, from its "stopped" line.
    registrar.stop(signal.SIGTERM, seconds=15)
    counts = {}
    for _, text in registrar.lines:
        if '"stopped"' in text:
            counts = json.loads(text)
    say(f"  the registrar's own count at exit (status {registrar.process.returncode}): accepted {counts.get('accepted')}, "
        f"refused {counts.get('refused')}, name held {counts.get('nameHeld')}, link conflicts {counts.get('linkConflicts')}")
    time.sleep(3)
    av.stop()
    lab("avahi", "stop", "h2")
    lab("avahi", "start", "h2")
    av = Child("avahi-browse-2", ["avahi", "exec", "h2", "--", "stdbuf", "-oL", "avahi-browse", "-rp", TYPE], avahi_line)
    time.sleep(1)

    # The same number of services from avahi-daemon in h4 (one D-Bus client, a host each),
    # the daemon started afresh so that its memory starts where the registrar's did.
    lab("avahi", "stop", "h4")
    lab("avahi", "start", "h4")
    zc_seen.forget(list(zc_seen.first))
    with open(os.path.join(STATE, "h4", "avahi.pid")) as f:
        avahi_pid = int(f.read().strip())
    time.sleep(2)
    mem["avahi_started"] = memory(avahi_pid)
    bulk_names = [f"Bulk {run} {i}" for i in range(1, COUNT + 1)]
    begun = time.monotonic()
    bulk = Child("avahi-mass-publish", ["avahi", "exec", "h4", "--", "/usr/bin/python3", MASS_PUBLISH, str(COUNT), TYPE,
                                        "--prefix", f"Bulk {run} ", "--hosts", DEVICE])
    committed = bulk.wait_for("committed", 120)
    committed_at = committed[0] if committed else time.monotonic()
    bulk_counts = {label: {} for label, _ in browsers}
    for point in checkpoints:
        while time.monotonic() < committed_at + point:
            if all(seen.count(bulk_names) == COUNT for _, seen in browsers):
                break
            time.sleep(0.05)
        for label, seen in browsers:
            bulk_counts[label][str(point)] = seen.count(bulk_names, before=committed_at + point)
    say(f"  beside it, avahi-daemon in h4 given {COUNT:,} services, a host each, by one D-Bus client "
        f"({'committed in %.1f s' % (committed_at - begun) if committed else 'NOT all committed within 120 s'}):")
    bulk_all = {}
    for label, seen in browsers:
        times = [seen.when(n) for n in bulk_names]
        bulk_all[label] = (max(times) - committed_at) if all(t is not None for t in times) else None
        counts = ", ".join(f"{bulk_counts[label][str(p)]:,} by +{p:g} s" for p in checkpoints)
        tail = f"all {COUNT:,} {bulk_all[label]:+.1f} s after the last commit" if bulk_all[label] is not None else f"{COUNT - seen.count(bulk_names):,} never within {SEE_SECONDS:g} s"
        say(f"  {label}: {counts}; {tail}")
    time.sleep(2)
    mem["avahi_with_mass"] = memory(avahi_pid)

    # 3. Memory.
    say("\n3. resident memory (VmRSS; RssAnon in brackets)")
    def line(label, m):
        return f"  {label:<52} {mib(m.get('VmRSS', 0)):7.1f} MiB  ({mib(m.get('RssAnon', 0)):.1f} MiB anonymous)"
    say(line("registrar, started", mem["registrar_started"]))
    say(line(f"registrar, after part 1 ({TRIALS} registrations)", mem["registrar_after_part1"]))
    say(line(f"registrar, with {TRIALS + COUNT:,} registrations", mem["registrar_with_mass"]))
    accepted = mass["replies"].get("NOERROR", 0)
    def per(key, before, after, n):
        return (mem[after].get(key, 0) - mem[before].get(key, 0)) / n if n else float("nan")
    reg_per = per("VmRSS", "registrar_before_mass", "registrar_with_mass", accepted)
    reg_per_anon = per("RssAnon", "registrar_before_mass", "registrar_with_mass", accepted)
    say(f"  {'registrar, per registration (part 2)':<52} {reg_per:7.1f} KiB  ({reg_per_anon:.1f} KiB anonymous)")
    say(line("avahi-daemon (h4), started", mem["avahi_started"]))
    say(line(f"avahi-daemon (h4), with {COUNT:,} services and hosts", mem["avahi_with_mass"]))
    avahi_per = per("VmRSS", "avahi_started", "avahi_with_mass", COUNT)
    avahi_per_anon = per("RssAnon", "avahi_started", "avahi_with_mass", COUNT)
    say(f"  {'avahi-daemon, per service and host':<52} {avahi_per:7.1f} KiB  ({avahi_per_anon:.1f} KiB anonymous)")


    # Summary.
    zc_label, av_label = browsers[0][0], browsers[1][0]
    r1, a1 = part1["summary"][f"registrar / {zc_label}"], part1["summary"][f"avahi-publish / {zc_label}"]
    r1b, a1b = part1["summary"][f"registrar / {av_label}"], part1["summary"][f"avahi-publish / {av_label}"]
    say("\nsummary                                          nearby registrar          avahi (h4)")
    say(f"  to resolvable, python-zeroconf: median / p95   {ms(r1['median']):>8} / {ms(r1['p95']):<12} {ms(a1['median']):>8} / {ms(a1['p95'])}")
    say(f"  to resolvable, avahi-browse:    median / p95   {ms(r1b['median']):>8} / {ms(r1b['p95']):<12} {ms(a1b['median']):>8} / {ms(a1b['p95'])}")
    say(f"  {COUNT:,} registrations: accepted per second       {mass['perSecond']!s:>12}              (not an SRP server)")
    def all_text(value):
        return "—" if value is None else f"{value:+.1f} s"
    say(f"  {COUNT:,}: all resolved (zeroconf / avahi-browse)  {all_text(all_seen[zc_label]):>8} / {all_text(all_seen[av_label]):<12} "
        f"{all_text(bulk_all[zc_label]):>8} / {all_text(bulk_all[av_label])}")
    say(f"  memory with {COUNT:,} (VmRSS)                     {mib(mem['registrar_with_mass'].get('VmRSS', 0)):>8.1f} MiB              "
        f"{mib(mem['avahi_with_mass'].get('VmRSS', 0)):.1f} MiB")
    say(f"  memory per registration (anonymous)            {reg_per:>8.1f} KiB ({reg_per_anon:.1f})       {avahi_per:.1f} KiB ({avahi_per_anon:.1f})")

    out = {"date": time.strftime("%Y-%m-%d"), "trials": TRIALS, "registrations": COUNT, "sources": SOURCES, "window": WINDOW,
           "part1": part1, "mass": mass, "burst": burst, "mass_seen": seen_counts, "mass_all_seen_after_s": all_seen,
           "avahi_mass_seen": bulk_counts, "avahi_mass_all_seen_after_s": bulk_all,
           "avahi_commit_s": (committed_at - begun) if committed else None, "memory_kib": mem,
           "registrar_per_registration_kib": reg_per, "avahi_per_service_kib": avahi_per,
           "registrar_per_registration_anon_kib": reg_per_anon, "avahi_per_service_anon_kib": avahi_per_anon, "registrar_counts": counts}
    with open(os.path.join(ROOT, ".build", "bench", "registrar.json"), "w") as f:
        json.dump(out, f, indent=1)


try:
    main()
finally:
    for child in reversed(children):
        child.stop()
    for host in ("h2", "h4"):
        try:
            shutil.copy(os.path.join(STATE, host, "avahi.log"), os.path.join(LOGS, f"avahi-daemon-{host}.log"))
        except OSError:
            pass
    shutil.rmtree(WORK, ignore_errors=True)
