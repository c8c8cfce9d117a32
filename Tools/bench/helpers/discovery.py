"""Discovery benchmarks in the lab: figures and ratios, never assertions.

Run through Tools/bench/discovery, which builds the lab (3 hosts) and sets NEARBY_LAB and
NEARBY_BIN. Every packet stays inside the lab's namespaces.

1. Cold time-to-resolve of an already-published service (avahi-publish in h1), from h2:
   `nearby resolve`, python-zeroconf (zeroconf_peer.py resolve), and `avahi-browse -r` and
   `nearby resolve --backend system` against a freshly started avahi-daemon in h3 (its
   start-up is not counted). Each trial is a new process
   (a cold cache); the figure is the wall time from spawning the command to the resolved
   answer, so start-up costs count, as a user feels them; the start-up of each tool alone is
   measured too and shown.
1b. Cold browse-and-resolve of a python-zeroconf service (zeroconf_peer.py register in h3), from
   h2: `nearby browse --resolve` and `nearby resolve`, each a new process timed from spawning it
   inside h2 (process start included; the lab's own wrapper is not), against python-zeroconf's
   own browse + resolve timed inside its process (zeroconf_peer.py browse --resolve prints "ms":
   from before its Zeroconf instance exists to the resolved service) and from spawning it (a
   separate run); median, p95, max and misses.
2. Time until a new advertisement is visible to an already-running browser (`nearby browse`
   in h2): advertised by `nearby advertise`, `avahi-publish`, python-zeroconf and
   `nearby advertise --backend system` (through avahi-daemon) in h1, from
   spawning the advertiser to the browser's line.
3. Resident memory (VmRSS, and its anonymous and file-backed parts) of an idle advertiser, 5 s
   after it started: `nearby advertise` vs a python-zeroconf responder (zeroconf_peer.py
   register); and of a server 5 s after five peers connected: `nearby serve` (advertised) in
   h1 vs a Python websockets + ssl server (ws_peer.py), each holding five connections that one
   Python websockets client in h2 opened (ws_peer.py bench idle).
4. 1,000 instances published by one process (nearby-mass-advertise, or one D-Bus client of
   avahi-daemon): time until a running `nearby browse --resolve` in h2 has found and
   resolved all of them, and the mDNS packets and bytes on the wire meanwhile (tcpdump in h2),
   BENCH_MASS_ROUNDS rounds (default 5); NEARBY_MASS_BIN measures another nearby-mass-advertise.
5. A renumbered advertiser: h1's IPv4 address changes on the same link (the new one added, then
   the old one removed), 10 times (BENCH_RENUMBER_TRIALS), while `nearby browse --resolve` runs in
   h2: the time until a line has the new address, and until a line lacks the old one, for nearby
   advertise, avahi-publish (avahi-daemon) and python-zeroconf in h1; median, p95, misses.
"""
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

LAB = os.environ["NEARBY_LAB"]
NEARBY = os.environ["NEARBY_BIN"]
PYTHON = os.environ.get("NEARBY_LAB_PYTHON", "python3")
PEER = os.path.join(os.path.dirname(LAB), "lab.d", "peers", "zeroconf_peer.py")
TRIALS = int(os.environ.get("BENCH_TRIALS", "20"))
TYPE = "_benchmark._tcp"


def lab(*args, **kwargs):
    return subprocess.run([LAB, *args], check=True, capture_output=True, text=True, **kwargs)


def spawn(*args):
    process = subprocess.Popen([LAB, *args], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    os.set_blocking(process.stdout.fileno(), False)
    process.seen_text = ""
    return process


def wait_line(process, needle, timeout):
    """Reads output until needle appears (in output not yet matched); returns the arrival time."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if needle in process.seen_text:
            process.seen_text = process.seen_text.split(needle, 1)[1]
            return time.monotonic()
        # Only the end of its output is the end: a process that printed the needle and exited
        # at once (nearby resolve, --version) has it in what is read last. (Giving up as soon as
        # the process had exited counted such runs as misses.)
        if read_more(process) == b"":
            if needle in process.seen_text:
                continue
            return None
    return None


def stop(process, sig="TERM"):
    if process.poll() is None:
        process.send_signal({"TERM": 15, "INT": 2, "KILL": 9}[sig])
        try:
            process.wait(5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def timed_command(args, needle, timeout=10):
    start = time.monotonic()
    process = spawn(*args)
    seen = wait_line(process, needle, timeout)
    stop(process)
    return None if seen is None else seen - start


def median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else float("nan")


def report(title, rows):
    print(f"\n{title}")
    best = min((r[1] for r in rows if r[1] == r[1]), default=float("nan"))
    print(f"  {'':<48} {'median':>9} {'min':>8} {'max':>8} {'ok':>6}  {'vs nearby':>9}")
    ours = next((r[1] for r in rows if r[0].startswith("nearby")), float("nan"))
    for name, med, low, high, ok in rows:
        ratio = med / ours if ours == ours and ours > 0 else float("nan")
        print(f"  {name:<48} {med * 1000:>7.0f}ms {low * 1000:>6.0f}ms {high * 1000:>6.0f}ms {ok:>6}  {ratio:>8.2f}x")
    return best


def summary(samples):
    ok = [s for s in samples if s is not None]
    return (median(ok), min(ok) if ok else float("nan"), max(ok) if ok else float("nan"), f"{len(ok)}/{len(samples)}")


def time_to_resolve():
    lab("avahi", "start", "h1")
    publisher = spawn("avahi", "exec", "h1", "--", "avahi-publish", "-s", "Bench Box", TYPE, "9900", "k=v")
    time.sleep(2)
    results = {"nearby resolve": [], "python-zeroconf resolve": [], "avahi-browse -r (fresh daemon)": [],
               "nearby resolve --backend system (fresh daemon)": []}
    startup = {"nearby --version": [], "python -c 'import zeroconf'": []}
    # Each tool asks cold, and more than a second after the last one: a responder multicasts a
    # record at most once a second (RFC 6762 §6), so a resolve right after another tool's is
    # answered late by some responders (avahi), which would measure the order of the tools.
    settle = lambda: time.sleep(1.1)
    for _ in range(TRIALS):
        settle()
        results["nearby resolve"].append(timed_command(
            ["exec", "h2", "--", NEARBY, "resolve", "Bench Box", TYPE, "--json"], '"resolved"'))
        settle()
        results["python-zeroconf resolve"].append(timed_command(
            ["exec", "h2", "--", PYTHON, "-u", PEER, "resolve", "Bench Box", TYPE, "--timeout", "5"], '"resolved"'))
        lab("avahi", "start", "h3")
        settle()
        results["avahi-browse -r (fresh daemon)"].append(timed_command(
            ["avahi", "exec", "h3", "--", "stdbuf", "-oL", "avahi-browse", "-rp", TYPE], "=;"))
        lab("avahi", "stop", "h3")
        lab("avahi", "start", "h3")
        settle()
        results["nearby resolve --backend system (fresh daemon)"].append(timed_command(
            ["avahi", "exec", "h3", "--", NEARBY, "resolve", "Bench Box", TYPE, "--json", "--backend", "system"], '"resolved"'))
        lab("avahi", "stop", "h3")
        startup["nearby --version"].append(timed_command(["exec", "h2", "--", NEARBY, "--version"], "."))
        startup["python -c 'import zeroconf'"].append(timed_command(
            ["exec", "h2", "--", PYTHON, "-c", "import zeroconf, zeroconf.asyncio; print('ready')"], "ready"))
    stop(publisher, "INT")
    lab("avahi", "stop", "h1")
    report(f"1. cold time-to-resolve, {TRIALS} trials each (same avahi-published service)",
           [(name, *summary(samples)) for name, samples in results.items()])
    report("   process start-up alone (included above)",
           [(name, *summary(samples)) for name, samples in startup.items()])


def read_more(process):
    """Appends what the process wrote since to its unmatched text, or waits a moment; returns
    what was read (b"" at the end of its output, None when nothing was waiting)."""
    try:
        chunk = os.read(process.stdout.fileno(), 65536)
    except BlockingIOError:
        chunk = None
    if chunk:
        process.seen_text += chunk.decode(errors="replace")
    elif chunk is None:
        time.sleep(0.002)
    return chunk


def read_until(process, text, timeout):
    """Reads more output until `text` is in what wait_line left unmatched; False on timeout."""
    deadline = time.monotonic() + timeout
    while text not in process.seen_text:
        if time.monotonic() > deadline or process.poll() is not None:
            return text in process.seen_text
        read_more(process)
    return True


def percentile(values, q):
    values = sorted(v for v in values if v is not None)
    return values[min(len(values) - 1, int(len(values) * q))] if values else float("nan")


# Times a command from inside the lab host: the lab's own wrapper (a shell script, then `ip netns
# exec`, about 20 ms) is not the command's start-up, so the clock starts just before the spawn.
# Prints the seconds until NEEDLE appeared on the command's stdout, or "missed".
INSIDE_TIMER = r"""
import os, subprocess, sys, time
needle, args = sys.argv[1].encode(), sys.argv[2:]
start = time.monotonic()
child = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
seen, result = b"", "missed"
while True:
    chunk = os.read(child.stdout.fileno(), 65536)
    if not chunk:
        break
    seen += chunk
    if needle in seen:
        result = "%.6f" % (time.monotonic() - start)
        break
child.terminate()
child.wait()
print(result, flush=True)
"""


def timed_inside(host, args, needle):
    """Seconds from spawning `args` in `host` (timed there) to `needle` on its stdout; None if missed."""
    out = subprocess.run([LAB, "exec", host, "--", PYTHON, "-c", INSIDE_TIMER, needle, *args],
                         capture_output=True, text=True, timeout=30).stdout.strip().splitlines()
    return float(out[-1]) if out and out[-1] != "missed" else None


def cold_resolve():
    """A python-zeroconf service resolved by a process that starts cold, each trial a new
    process: nearby (process start included, as a user feels it) against python-zeroconf's
    own browse-and-resolve measured inside its process (from before its Zeroconf instance
    exists: the interpreter's start and imports left out), and its wall time too."""
    cold_type = "_coldresolve._tcp"
    publisher = spawn("exec", "h3", "--", PYTHON, "-u", PEER, "register", "Cold Box", cold_type, "9905", "k=v")
    if wait_line(publisher, '"registered"', 15) is None:
        raise SystemExit("bench/discovery: the python-zeroconf publisher did not register")
    time.sleep(1.5)
    rows = {"nearby browse --resolve (process start included)": [], "nearby resolve (process start included)": [],
            "python-zeroconf browse + resolve, in its process": [], "python-zeroconf browse + resolve, wall time": []}
    settle = lambda: time.sleep(1.1)
    for _ in range(TRIALS):
        settle()
        rows["nearby browse --resolve (process start included)"].append(timed_inside(
            "h2", [NEARBY, "browse", cold_type, "--resolve", "--json", "--timeout", "5"], '"addresses"'))
        settle()
        rows["nearby resolve (process start included)"].append(timed_inside(
            "h2", [NEARBY, "resolve", "Cold Box", cold_type, "--json", "--timeout", "5"], '"resolved"'))
        settle()
        rows["python-zeroconf browse + resolve, wall time"].append(timed_inside(
            "h2", [PYTHON, "-u", PEER, "browse", cold_type, "--resolve", "--timeout", "5"], '"resolved": true'))
        settle()
        process = spawn("exec", "h2", "--", PYTHON, "-u", PEER, "browse", cold_type, "--resolve", "--timeout", "5")
        seen = wait_line(process, '"resolved": true', 6)
        inside = None
        # The rest of that line carries the in-process time: ..., "ms": 41.5}
        if seen is not None and read_until(process, '"ms": ', 1):
            after = process.seen_text.split('"ms": ', 1)[1]
            process.seen_text = after
            if read_until(process, "}", 1):
                inside = float(process.seen_text.split("}", 1)[0]) / 1000
        stop(process)
        rows["python-zeroconf browse + resolve, in its process"].append(inside)
    stop(publisher, "INT")
    print(f"\n1b. cold browse-and-resolve of a python-zeroconf service (h3), from h2; {TRIALS} trials each, 1.1 s apart")
    print(f"  {'':<52} {'median':>8} {'p95':>8} {'max':>8} {'missed':>7}")
    for name, samples in rows.items():
        missed = sum(1 for v in samples if v is None)
        print(f"  {name:<52} {median(samples) * 1000:>6.0f}ms {percentile(samples, 0.95) * 1000:>6.0f}ms "
              f"{percentile(samples, 1.0) * 1000:>6.0f}ms {missed:>7}")
    ours = median(rows["nearby browse --resolve (process start included)"])
    theirs = median(rows["python-zeroconf browse + resolve, in its process"])
    print(f"  nearby browse --resolve / python-zeroconf in its process: {ours / theirs:.2f}x (medians)")


def wait_json_line(process, wanted, timeout):
    """Reads whole JSON lines until one satisfies `wanted`; returns its arrival time, or None."""
    deadline = time.monotonic() + timeout
    while True:
        while "\n" in process.seen_text:
            line, process.seen_text = process.seen_text.split("\n", 1)
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if wanted(event):
                return time.monotonic()
        if time.monotonic() > deadline or process.poll() is not None:
            return None
        read_more(process)


def renumber():
    """h1 is renumbered on its link (198.18.1.1 <-> 198.18.1.101, the new address added before
    the old one goes, as a DHCP renewal or a moved VM does); a running `nearby browse --resolve`
    in h2 is timed from the change to the first line with the new address, and to the first
    line without the old one. The advertiser in h1 is each kind in turn: nearby (the embedded
    engine, which hears the change over netlink), avahi-publish through avahi-daemon, and
    python-zeroconf (which publishes the addresses it was given at registration)."""
    trials = int(os.environ.get("BENCH_RENUMBER_TRIALS", "10"))
    limit = 5.0
    lab("exec", "h1", "--", "sysctl", "-qw", "net.ipv4.conf.lan1.promote_secondaries=1")
    lab("avahi", "start", "h1")
    browser = spawn("exec", "h2", "--", NEARBY, "browse", TYPE, "--resolve", "--json")
    kinds = {
        "nearby advertise": lambda name: spawn("exec", "h1", "--", NEARBY, "advertise", "--host", "renumbered", name, TYPE, "9906"),
        "avahi-publish (avahi-daemon)": lambda name: spawn("avahi", "exec", "h1", "--", "avahi-publish", "-s", name, TYPE, "9907"),
        "python-zeroconf register": lambda name: spawn("exec", "h1", "--", PYTHON, "-u", PEER, "register", name, TYPE, "9908"),
    }
    addresses = ["198.18.1.1", "198.18.1.101"]
    results = {}
    for kind, start in kinds.items():
        name = f"Renumbered {kind.split()[0]}"
        advertiser = start(name)
        ours = lambda event: event.get("name") == name and "addresses" in event
        if wait_json_line(browser, lambda e: ours(e) and "198.18.1.1" in e["addresses"], 15) is None:
            print(f"  {kind}: not found by the browser; skipped")
            stop(advertiser, "INT")
            continue
        heard, gone = [], []
        current = 0
        for _ in range(trials):
            time.sleep(1.5)
            old, new = addresses[current], addresses[1 - current]
            changed = time.monotonic()
            lab("exec", "h1", "--", "sh", "-c", f"ip addr add {new}/24 dev lan1 && ip addr del {old}/24 dev lan1")
            current = 1 - current
            got = wait_json_line(browser, lambda e: ours(e) and new in e["addresses"], limit)
            heard.append(None if got is None else got - changed)
            left = wait_json_line(browser, lambda e: ours(e) and new in e["addresses"] and old not in e["addresses"],
                                  max(0.1, limit - (time.monotonic() - changed)))
            gone.append(None if left is None else left - changed)
        if current == 1:
            lab("exec", "h1", "--", "sh", "-c", "ip addr add 198.18.1.1/24 dev lan1 && ip addr del 198.18.1.101/24 dev lan1")
        stop(advertiser, "INT")
        results[kind] = (heard, gone)
        time.sleep(1)
    stop(browser, "INT")
    lab("avahi", "stop", "h1")
    print(f"\n5. a renumbered advertiser (h1), seen by a running nearby browse --resolve (h2); {trials} changes each, "
          f"misses: not within {limit:.0f} s")
    print(f"  {'':<30} {'new address heard':>32}   {'old address gone':>32}")
    print(f"  {'':<30} {'median':>10} {'p95':>10} {'missed':>10}   {'median':>10} {'p95':>10} {'missed':>10}")

    def cells(values):
        missed = sum(1 for v in values if v is None)
        if missed == len(values):
            return f"{'-':>10} {'-':>10} {missed:>10}"
        return f"{median(values) * 1000:>8.0f}ms {percentile(values, 0.95) * 1000:>8.0f}ms {missed:>10}"

    for kind, (heard, gone) in results.items():
        print(f"  {kind:<30} {cells(heard)}   {cells(gone)}")


def time_to_visible():
    browser = spawn("exec", "h2", "--", NEARBY, "browse", TYPE, "--json")
    time.sleep(1)
    results = {"nearby advertise": [], "avahi-publish": [], "python-zeroconf register": [],
               "nearby advertise --backend system": []}
    lab("avahi", "start", "h1")
    for trial in range(TRIALS):
        for name in results:
            instance = f"Visible {name.split()[0]}{'-system' if 'system' in name else ''} {trial}"
            start = time.monotonic()
            if name == "nearby advertise":
                advertiser = spawn("exec", "h1", "--", NEARBY, "advertise", "--host", "bench", instance, TYPE, "9901")
            elif name == "nearby advertise --backend system":
                advertiser = spawn("avahi", "exec", "h1", "--", NEARBY, "advertise", "--backend", "system", instance, TYPE, "9904")
            elif name == "avahi-publish":
                advertiser = spawn("avahi", "exec", "h1", "--", "avahi-publish", "-s", instance, TYPE, "9902")
            else:
                advertiser = spawn("exec", "h1", "--", PYTHON, "-u", PEER, "register", instance, TYPE, "9903")
            seen = wait_line(browser, f'"name":"{instance}"', 10)
            results[name].append(None if seen is None else seen - start)
            stop(advertiser, "INT")
            time.sleep(0.3)
    stop(browser, "INT")
    lab("avahi", "stop", "h1")
    report(f"2. time until a new advertisement is visible to a running nearby browse, {TRIALS} trials each",
           [(name, *summary(samples)) for name, samples in results.items()])


def memory_kib(root_pid):
    """VmRSS, RssAnon, RssFile and Pss (KiB) of the process tree's biggest member (the
    advertiser or server itself, not its wrappers). Anonymous: what the process made; file:
    pages of its executable and libraries, which other processes mapping the same files share
    (Pss divides each shared page among the processes that map it)."""
    best = {"VmRSS": 0, "RssAnon": 0, "RssFile": 0, "Pss": 0}
    pending = [root_pid]
    while pending:
        pid = pending.pop()
        try:
            fields = {}
            with open(f"/proc/{pid}/status") as status:
                for line in status:
                    key = line.split(":", 1)[0]
                    if key in best:
                        fields[key] = int(line.split()[1])
            if fields.get("VmRSS", 0) > best["VmRSS"]:
                with open(f"/proc/{pid}/smaps_rollup") as rollup:
                    for line in rollup:
                        if line.startswith("Pss:"):
                            fields["Pss"] = int(line.split()[1])
                best = {key: fields.get(key, 0) for key in best}
            with open(f"/proc/{pid}/task/{pid}/children") as children:
                pending += [int(child) for child in children.read().split()]
        except OSError:
            continue
    return best


def lab_address(host):
    """The host's IPv4 address on the lab's first LAN."""
    text = lab("exec", host, "--", "ip", "-4", "-o", "addr", "show", "dev", "lan1").stdout
    return text.split(" inet ", 1)[1].split("/", 1)[0]


def identities(work):
    """A server and a client identity that pin each other; returns the client's trust PEM path."""
    for side in ("server", "client"):
        subprocess.run([NEARBY, "identity", "create", "--name", f"memory {side}", "--state-dir", f"{work}/{side}"],
                       check=True, capture_output=True)
        with open(f"{work}/{side}.crt", "w") as out:
            subprocess.run([NEARBY, "identity", "export", "--state-dir", f"{work}/{side}"], check=True, stdout=out)
    ids = {side: subprocess.run([NEARBY, "identity", "show", "--id", "--state-dir", f"{work}/{side}"],
                                check=True, capture_output=True, text=True).stdout.strip() for side in ("server", "client")}
    subprocess.run([NEARBY, "trust", "pin", ids["client"], "--state-dir", f"{work}/server"], check=True, capture_output=True)
    subprocess.run([NEARBY, "trust", "pin", ids["server"], "--state-dir", f"{work}/client"], check=True, capture_output=True)


def serving(server_args, client_args, ready):
    """Starts a server in h1 and a client in h2 that opens its connections and holds them;
    returns the server's memory 5 s and 30 s after the client said they were open (the
    websockets client pings every 20 s), or None if it never did."""
    server = spawn("exec", "h1", "--", *server_args)
    time.sleep(1.0)
    client = subprocess.Popen([LAB, "exec", "h2", "--", *client_args], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    os.set_blocking(client.stdout.fileno(), False)
    client.seen_text = ""
    result = None
    if wait_line(client, ready, 30) is not None:
        time.sleep(5)
        early = memory_kib(server.pid)
        time.sleep(25)
        result = (early, memory_kib(server.pid))
    client.stdin.close()
    stop(client, "TERM")
    stop(server, "INT")
    return result


def memory():
    rows = []
    for name, args in (
        ("nearby advertise", ["exec", "h1", "--", NEARBY, "advertise", "--host", "memory", "Memory Box", TYPE, "9910", "k=v"]),
        ("python-zeroconf register", ["exec", "h1", "--", PYTHON, "-u", PEER, "register", "Memory Zero", TYPE, "9911", "k=v"]),
    ):
        samples = []
        for _ in range(3):
            process = spawn(*args)
            time.sleep(5)
            samples.append(memory_kib(process.pid))
            stop(process, "INT")
        samples.sort(key=lambda sample: sample["VmRSS"])
        rows.append((name, samples[len(samples) // 2]))
    # A server with five peers connected and quiet: `nearby serve` (advertised over mDNS too)
    # and a Python websockets + ssl server, each holding five connections from one Python
    # websockets client in h2 (a client of another program, as a peer on another machine is:
    # nearby clients on this machine would share the server's executable pages).
    work = tempfile.mkdtemp()
    identities(work)
    address = lab_address("h1")
    ws_peer = os.path.join(os.path.dirname(LAB), "lab.d", "peers", "ws_peer.py")
    tls_client = ["--identity", f"{work}/client/identity.pem", "--trust", f"{work}/server.crt"]
    for name, server_args, port in (
        ("nearby serve, 5 peers connected",
         [NEARBY, "serve", "--host", "memserve", "Memory Serve", TYPE, "9920", "--state-dir", f"{work}/server"], 9920),
        ("python websockets server, 5 peers connected",
         [PYTHON, "-u", ws_peer, "server", "9921", "--identity", f"{work}/server/identity.pem", "--trust", f"{work}/client.crt"], 9921),
    ):
        client_args = [PYTHON, "-u", ws_peer, "bench", "idle", f"wss://{address}:{port}/", "5", *tls_client]
        samples = [sample for sample in (serving(server_args, client_args, '"open": 5,') for _ in range(3)) if sample]
        for index, when in enumerate(("5 s", "30 s")):
            ordered = sorted((sample[index] for sample in samples), key=lambda sample: sample["VmRSS"])
            rows.append((f"{name}, {when}", ordered[len(ordered) // 2] if ordered else None))
    shutil.rmtree(work, ignore_errors=True)
    print("\n3. resident memory (median of 3): an idle advertiser 5 s after it started; a server 5 s and 30 s")
    print("   after five peers connected. Anonymous: what the process made; file: pages of its executable and")
    print("   libraries; PSS: shared pages divided among the processes that map them")
    ours = rows[0][1]["VmRSS"]
    print(f"  {'':<50} {'RSS':>9} {'anonymous':>10} {'file':>8} {'PSS':>9}  {'vs nearby advertise':>9}")
    for name, kib in rows:
        if kib is None:
            print(f"  {name:<50} not measured: a client did not connect")
            continue
        print(f"  {name:<50} {kib['VmRSS'] / 1024:>5.1f} MiB {kib['RssAnon'] / 1024:>6.1f} MiB {kib['RssFile'] / 1024:>4.1f} MiB"
              f" {kib['Pss'] / 1024:>5.1f} MiB  {kib['VmRSS'] / ours:>6.2f}x")


def count_found(process, wanted, timeout):
    deadline = time.monotonic() + timeout
    text = ""
    while time.monotonic() < deadline:
        try:
            chunk = os.read(process.stdout.fileno(), 1 << 20)
        except BlockingIOError:
            chunk = None
        if chunk:
            text += chunk.decode(errors="replace")
            if text.count('"event":"found"') >= wanted:
                return time.monotonic()
        elif chunk == b"":
            return None
        else:
            time.sleep(0.005)
    return None


def wire_totals(pcap):
    lines = subprocess.run([NEARBY, "decode", "--json", pcap], capture_output=True, text=True).stdout.splitlines()
    sizes = [json.loads(line).get("size", 0) for line in lines if line.strip()]
    return len(sizes), sum(sizes)


def mass(count=int(os.environ.get("BENCH_INSTANCES", "1000")), rounds=int(os.environ.get("BENCH_MASS_ROUNDS", "5"))):
    mass_binary = os.environ.get("NEARBY_MASS_BIN") or os.path.join(os.path.dirname(NEARBY), "nearby-mass-advertise")
    publisher_script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "avahi_mass_publish.py")
    tools = ("nearby (one process)", "avahi-daemon (one client)")
    if os.environ.get("BENCH_MASS_NEARBY_ONLY"):
        tools = tools[:1]
    results = {name: [] for name in tools}
    # Rounds alternate the tools, so that a slow moment of the machine does not land on one.
    for _ in range(rounds):
        for name in tools:
            pcap = f"/tmp/nearby-bench-mass-{os.getpid()}.pcap"
            if name.startswith("avahi"):
                lab("avahi", "start", "h1")
            lab("capture", "start", "h2", pcap)
            browser = spawn("exec", "h2", "--", NEARBY, "browse", TYPE, "--resolve", "--json")
            time.sleep(1)
            start = time.monotonic()
            if name.startswith("nearby"):
                advertiser = spawn("exec", "h1", "--", mass_binary, str(count), TYPE, "--host", "mass")
            else:
                advertiser = spawn("avahi", "exec", "h1", "--", "/usr/bin/python3", publisher_script, str(count), TYPE)
            done = count_found(browser, count, 120)
            elapsed = None if done is None else done - start
            time.sleep(0.5)
            lab("capture", "stop", "h2", pcap)
            packets, size = wire_totals(pcap)
            stop(browser, "INT")
            stop(advertiser, "INT")
            if name.startswith("avahi"):
                lab("avahi", "stop", "h1")
            os.unlink(pcap)
            results[name].append((elapsed, packets, size))
            time.sleep(2)
    print(f"\n4. {count} instances from one process, found and resolved by a running nearby browse in h2 "
          f"({rounds} rounds; packets and bytes until all were resolved, plus 0.5 s)")
    ours = statistics.median(size for _, _, size in results[tools[0]])
    for name in tools:
        rows = results[name]
        times = sorted(t for t, _, _ in rows if t is not None)
        missed = sum(1 for t, _, _ in rows if t is None)
        if times:
            p95 = times[min(len(times) - 1, int(len(times) * 0.95))]
            shown = f"median {statistics.median(times):.2f} s, p95 {p95:.2f} s, max {times[-1]:.2f} s"
        else:
            shown = "no round finished"
        packets = statistics.median(p for _, p, _ in rows)
        size = statistics.median(b for _, _, b in rows)
        print(f"  {name:<28} {shown}, {missed} of {rounds} timed out; {packets:.0f} packets, {size / 1024:.1f} KiB "
              f"(median), bytes {size / ours:.2f}x")


if __name__ == "__main__":
    which = sys.argv[1:] or ["resolve", "cold", "visible", "memory", "mass", "renumber"]
    if "resolve" in which:
        time_to_resolve()
    if "cold" in which:
        cold_resolve()
    if "visible" in which:
        time_to_visible()
    if "memory" in which:
        memory()
    if "mass" in which:
        mass()
    if "renumber" in which:
        renumber()
