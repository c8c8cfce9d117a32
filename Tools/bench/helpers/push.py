"""Live changes across the router: how soon a service that appears or says goodbye on LAN 1 is
seen on LAN 2 through the discovery proxy, by a DNS Push subscriber, by a polling client, and
by a plain DNS client asking BIND every second. Figures, never assertions.

Run through Tools/bench/push, which builds the router lab (h1-h5 on LAN 1, h5 the router,
h6 on LAN 2) and sets NEARBY_LAB and NEARBY_BIN. Every packet stays inside the lab.

- h4 runs BIND 9, delegating lan1.lab.example.test to the proxy in h5 and resolving for the lab;
  h6 asks it (its resolv.conf).
- h5 runs `nearby proxy lan1=lan1.lab.example.test` with DNS Push on port 853.
- h6 runs three clients for the whole run:
  push:  `nearby browse _openagents._tcp --domain lan1.lab.example.test --json` (finds the Push
         server through `_dns-push-tls._tcp` SRV and subscribes);
  poll:  the same with `--push off` (asks again as the 10 s TTLs run out, every 5 s for a
         browse's list);
  dig:   `dig @BIND _openagents._tcp.lan1.lab.example.test PTR` once a second (BIND caches
         each answer for its TTL, 10 s).
- h1 makes the changes: BENCH_CHANGES (20) changes = half as many instances "Live N" of
  _openagents._tcp, each started BENCH_SPACING (3) s after the last and stopped (its goodbye)
  BENCH_LIFETIME (25) s after it was advertised, so that even the slowest client sees it.

The time of a change is when `nearby advertise` printed "advertising" (its probes won; the
announcement goes out then) or when it was sent SIGINT (the goodbye goes out then); the time it
was seen is when a client's line arrived. A change not seen within BENCH_LIFETIME is a miss.
Printed per client, for all changes and for arrivals and goodbyes apart: seen/missed, median,
p95 and maximum delay. A goodbye reaches the proxy's cache as a record with TTL 0, which mDNS
keeps for 1 s before deleting it (RFC 6762 §10.1), so goodbyes take about a second more. Raw values:
.build/bench/push.json; every child's output under .build/bench/push-logs/.
"""
import json
import os
import shutil
import signal
import statistics
import subprocess
import tempfile
import threading
import time

LAB = os.environ["NEARBY_LAB"]
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))  # Tools/bench/helpers/ -> the repository
CHANGES = int(os.environ.get("BENCH_CHANGES", "20"))
SPACING = float(os.environ.get("BENCH_SPACING", "3"))
LIFETIME = float(os.environ.get("BENCH_LIFETIME", "25"))
ZONE = "lan1.lab.example.test"
RESOLVER, PROXY = "198.18.1.4", "198.18.1.5"
LOGS = os.path.join(ROOT, ".build", "bench", "push-logs")
os.makedirs(LOGS, exist_ok=True)
WORK = tempfile.mkdtemp(prefix="nearby-bench-push-")
os.chmod(WORK, 0o755)
NEARBY = shutil.copy(os.environ["NEARBY_BIN"], os.path.join(WORK, "nearby"))
children = []


def say(text):
    print(text, flush=True)


def lab(*args):
    result = subprocess.run([LAB, *args], capture_output=True, text=True, timeout=120)
    if result.returncode != 0:
        raise SystemExit(f"bench/push: Tools/lab {' '.join(args)} failed: {result.stdout}{result.stderr}")
    return result.stdout


class Child:
    """A process in a lab host whose output lines are kept with the time each arrived (read
    from the descriptor, split here: see DESIGN.md on select() and readline())."""

    def __init__(self, name, host, *command):
        self.name = name
        self.lines = []
        self.lock = threading.Lock()
        self.log = open(os.path.join(LOGS, f"{name}.log"), "w")
        self.process = subprocess.Popen([LAB, "exec", host, "--", *command], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                        stdin=subprocess.DEVNULL, start_new_session=True)
        children.append(self)
        threading.Thread(target=self.read, daemon=True).start()

    def read(self):
        pending = b""
        fd = self.process.stdout.fileno()
        while True:
            chunk = os.read(fd, 65536)
            if not chunk:
                return
            now = time.monotonic()
            pending += chunk
            *whole, pending = pending.split(b"\n")
            with self.lock:
                for line in whole:
                    text = line.decode(errors="replace")
                    self.lines.append((now, text))
                    self.log.write(f"{now:.3f} {text}\n")
                self.log.flush()

    def first(self, predicate, after=0.0):
        with self.lock:
            for at, line in self.lines:
                if at >= after and predicate(line):
                    return at
        return None

    def wait(self, predicate, seconds):
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            at = self.first(predicate)
            if at is not None:
                return at
            time.sleep(0.02)
        raise SystemExit(f"bench/push: {self.name} did not say what was awaited within {seconds} s (see {self.log.name})")

    def stop(self):
        try:
            os.killpg(self.process.pid, signal.SIGINT)
        except ProcessLookupError:
            pass


def event(kind, name):
    def match(line):
        if not line.startswith("{"):
            return False
        try:
            value = json.loads(line)
        except ValueError:
            return False
        return value.get("event") == kind and value.get("name") == name
    return match


def dig_loop(stop, seen):
    """A plain DNS client: asks BIND every second; notes when each name appears and leaves."""
    present = set()
    while not stop.is_set():
        started = time.monotonic()
        out = subprocess.run([LAB, "exec", "h6", "--", "dig", f"@{RESOLVER}", f"_openagents._tcp.{ZONE}", "PTR", "+short", "+time=2", "+tries=1"],
                             capture_output=True, text=True).stdout
        now = time.monotonic()
        names = {line.split("._openagents")[0].replace("\\032", " ") for line in out.splitlines() if line.strip()}
        for name in names - present:
            seen.setdefault(("found", name), now)
        for name in present - names:
            seen.setdefault(("lost", name), now)
        present = names
        time.sleep(max(0.0, 1.0 - (time.monotonic() - started)))


def summary(delays, misses):
    if not delays:
        return {"seen": 0, "missed": misses}
    ordered = sorted(delays)
    p95 = ordered[min(len(ordered) - 1, int(round(0.95 * (len(ordered) - 1))))]
    return {"seen": len(delays), "missed": misses, "median_s": statistics.median(ordered), "p95_s": p95, "max_s": ordered[-1]}


def main():
    lab("dns", "start", "h4", "--delegate", f"lan1={PROXY}")
    lab("dns", "resolv", "h6", "--nameserver", RESOLVER, "--search", "lab.example.test")
    proxy = Child("proxy", "h5", NEARBY, "proxy", f"lan1={ZONE}", "--listen", PROXY, "--name-server", "proxy-lan1.lab.example.test",
                  "--json", "--verbose")
    proxy.wait(lambda line: '"proxying"' in line, 30)
    push = Child("push", "h6", NEARBY, "browse", "_openagents._tcp", "--domain", ZONE, "--json", "--verbose")
    poll = Child("poll", "h6", NEARBY, "browse", "_openagents._tcp", "--domain", ZONE, "--json", "--push", "off")
    push.wait(lambda line: "DNS Push from" in line, 30)
    dig_seen = {}
    stop = threading.Event()
    digger = threading.Thread(target=dig_loop, args=(stop, dig_seen), daemon=True)
    digger.start()
    time.sleep(2)
    instances = CHANGES // 2
    say(f"bench/push: {CHANGES} changes ({instances} services of _openagents._tcp in h1, {SPACING:g} s apart, each for {LIFETIME:g} s); "
        f"clients in h6 behind the router: Nearby with DNS Push, Nearby polling (--push off), dig through BIND every second")
    changes = []  # (kind, name, time)
    running = []  # (name, child, stop_at)
    for n in range(1, instances + 1):
        name = f"Live {n}"
        child = Child(f"advertise-{n}", "h1", NEARBY, "advertise", name, "_openagents._tcp", str(9800 + n), "--backend", "embedded", "--json")
        at = child.wait(lambda line: '"advertising"' in line, 20)
        changes.append(("found", name, at))
        running.append((name, child, at + LIFETIME))
        next_start = time.monotonic() + SPACING
        while time.monotonic() < next_start or (n == instances and running):
            for item in list(running):
                if time.monotonic() >= item[2]:
                    item[1].stop()
                    changes.append(("lost", item[0], time.monotonic()))
                    running.remove(item)
            time.sleep(0.02)
    time.sleep(LIFETIME)
    stop.set()
    digger.join(timeout=10)
    results = {}
    for label, find in (
        ("push", lambda kind, name, after: push.first(event(kind, name), after)),
        ("poll", lambda kind, name, after: poll.first(event(kind, name), after)),
        ("dig", lambda kind, name, after: dig_seen.get((kind, name))),
    ):
        delays, misses = {"found": [], "lost": []}, {"found": 0, "lost": 0}
        for kind, name, at in changes:
            seen = find(kind, name, at - 5)
            if seen is None or seen - at > LIFETIME:
                misses[kind] += 1
            else:
                delays[kind].append(max(0.0, seen - at))
        results[label] = {"all": summary(delays["found"] + delays["lost"], misses["found"] + misses["lost"]),
                          "arrivals": summary(delays["found"], misses["found"]), "goodbyes": summary(delays["lost"], misses["lost"])}
    for label, title in (("push", "Nearby, DNS Push"), ("poll", "Nearby, polling"), ("dig", "dig via BIND, 1/s")):
        for part in ("all", "arrivals", "goodbyes"):
            r = results[label][part]
            heading = title if part == "all" else f"  {part}"
            if r["seen"]:
                say(f"  {heading:20} seen {r['seen']}, missed {r['missed']}: median {r['median_s']:.2f} s, p95 {r['p95_s']:.2f} s, max {r['max_s']:.2f} s")
            else:
                say(f"  {heading:20} seen 0, missed {r['missed']}")
    sessions = proxy.first(lambda line: "DNS Push session 1" in line)
    say(f"  the Push client's session on the proxy: {'seen in its log' if sessions else 'NOT seen'}")
    with open(os.path.join(ROOT, ".build", "bench", "push.json"), "w") as f:
        json.dump({"changes": CHANGES, "spacing_s": SPACING, "lifetime_s": LIFETIME, "results": results,
                   "raw": [[kind, name, round(at, 3)] for kind, name, at in changes], "date": time.strftime("%Y-%m-%d")}, f, indent=1)


try:
    main()
finally:
    for child in children:
        child.stop()
    for child in children:
        try:
            child.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(child.process.pid, signal.SIGKILL)
    subprocess.run([LAB, "dns", "stop", "h4"], capture_output=True)
    subprocess.run([LAB, "dns", "resolv", "h6"], capture_output=True)
    shutil.rmtree(WORK, ignore_errors=True)
