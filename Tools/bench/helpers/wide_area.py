"""DNS-SD over unicast DNS (RFC 6763 §11) in the lab: figures, never assertions.

Run through Tools/bench/wide-area, which builds the lab (6 hosts, two LANs, h5 the router) and
sets NEARBY_LAB and NEARBY_BIN. BIND runs in h4 (198.18.1.4, LAN 1), registrations are made
from h1 (LAN 1), every browser runs in h6 (LAN 2, across the router). Every packet stays inside
the lab's namespaces. avahi-daemon 0.8 with enable-wide-area=yes in h6 is the peer, measured in
the same run.

1. visible: a new registration until a browser shows it.
   a. Running browsers in h6 for the whole measurement (rounds begin after nearby's first
      10 s): `nearby browse --json`, `nearby browse --resolve --json`, and `avahi-browse -rp
      -d ...`. Each round registers a new instance with nsupdate from h1 (timed from nsupdate's
      return; one every 0.4-2 s, so rounds fall anywhere in the browser's 5 s poll), then a few
      rounds with `nearby advertise --domain --tsig --host bench-h1` (timed from its
      "advertising" line; also its removal on SIGINT until the running browse says "lost").
      The running avahi-browse is only counted: avahi asks once per browse and never again.
   b. Fresh processes, after a restart of avahi-daemon (empty cache), the running browsers
      stopped and the type emptied: per round one registration, then a new `avahi-browse -rpt`
      until its "=" line for it; another registration, then a new `nearby browse --resolve
      --json --timeout` until its "found"; both instances removed again. Start-up included in
      both. avahi-daemon keeps what a browse learnt for the records' TTL (30 s) and a new
      avahi-browse within that time is answered from that cache without asking: those rounds
      are misses, reported as such.
2. mass: 1,000 instances of _mass._tcp (PTR, SRV, TXT; SRVs point at 4 host names with A
   records) registered by one nsupdate session with a `send` every 50 instances; then per round
   a fresh `nearby browse --resolve` until 1,000 resolved "found", a fresh `nearby browse` until
   1,000 "found", and a fresh `avahi-browse -rpt` (daemon restarted: a cold cache) until 1,000
   "=" lines or its exit. tcpdump in h4 (lan1, port 53) counts the DNS messages each needed.
   avahi asks over UDP without EDNS and does not retry a truncated answer over TCP, so it sees
   the ~20 PTRs that fit in 512 bytes.
   BIND >= 9.18.28 refuses more than 100 records in one RRset (max-records-per-type 100, the
   fix for CVE-2024-1737) and Tools/lab's named.conf keeps that default, so this benchmark
   adds `max-records-per-type 0;` to the generated named.conf and reloads named (SIGHUP).
3. idle: one registered service; a running `nearby browse --resolve` and a running
   `avahi-browse -rp` in h6 (side by side: avahi's queries come from its one fixed UDP port,
   nearby uses a fresh socket per query), then `nearby browse` without --resolve alone; DNS
   messages from h6 to h4 counted (tcpdump in h4) over BENCH_IDLE_SECONDS (60) after the
   first 10 s (nearby asks the PTR every second during its first 10 s).

Environment: BENCH_ROUNDS (20), BENCH_ADVERTISE_ROUNDS (3), BENCH_MASS (1000),
BENCH_MASS_ROUNDS (3), BENCH_IDLE_SECONDS (60). Arguments pick sections: visible, mass, idle.
Raw values go to .build/bench/wide-area.json, every child's output and the pcaps to
.build/bench/wide-area-logs/. NEARBY_BIN is copied first, so a build that relinks it meanwhile
does not change binaries in the middle of a run.
"""
import json
import math
import os
import random
import shutil
import signal
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time

LAB = os.environ["NEARBY_LAB"]
NEARBY_GIVEN = os.environ["NEARBY_BIN"]
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))  # Tools/bench/helpers/ -> the repository
ROUNDS = int(os.environ.get("BENCH_ROUNDS", "20"))
ADVERTISE_ROUNDS = int(os.environ.get("BENCH_ADVERTISE_ROUNDS", "3"))
MASS = int(os.environ.get("BENCH_MASS", "1000"))
MASS_ROUNDS = int(os.environ.get("BENCH_MASS_ROUNDS", "3"))
IDLE_SECONDS = int(os.environ.get("BENCH_IDLE_SECONDS", "60"))
IDLE_WARMUP = 10

ZONE = "lab.example.test"
SERVER = "198.18.1.4"      # h4
REGISTRANT = "h1"
SERVER_HOST = "h4"
BROWSER = "h6"
BROWSER_ADDRESSES = {"198.18.2.6", "fd6e:6272:2::6"}
TYPE = "_bench._tcp"
MASS_TYPE = "_mass._tcp"
TTL = 30
RUN_ID = f"{random.randrange(16 ** 4):04x}"

WORK = tempfile.mkdtemp(prefix="nearby-bench-wide-area-")
# A private copy: a build in the same tree may relink NEARBY_BIN while this runs, and one run
# should measure one binary.
NEARBY = os.path.join(tempfile.mkdtemp(prefix="nearby-bench-bin-"), "nearby")
shutil.copy2(NEARBY_GIVEN, NEARBY)
PROCESSES = []
RESULTS = {"nearby": NEARBY_GIVEN, "rounds": ROUNDS}
SUMMARY = []   # (section, label, unit, samples or scalar text)


def log(text):
    print(text, file=sys.stderr, flush=True)


def lab(*args, check=True, input=None, timeout=60):
    result = subprocess.run([LAB, *args], capture_output=True, text=True, input=input, timeout=timeout)
    if check and result.returncode != 0:
        raise RuntimeError(f"Tools/lab {' '.join(args)} failed ({result.returncode}): {result.stderr.strip()}")
    return result


# ---- Child processes: stdout to a file, read with os.read by one poller thread ------------

class Child:
    """A process started through Tools/lab (which execs into it, so its pid is the process's
    own); its stdout lines, each with the monotonic time the poller first saw it."""

    def __init__(self, label, args):
        self.label = label
        safe = "".join(c if c.isalnum() else "-" for c in label)
        self.out_path = os.path.join(WORK, f"{safe}-{len(PROCESSES)}.out")
        self.err_path = self.out_path[:-4] + ".err"
        with open(self.out_path, "wb") as out, open(self.err_path, "wb") as err:
            self.started = time.monotonic()
            self.started_wall = time.time()
            self.process = subprocess.Popen([LAB, *args], stdout=out, stderr=err, stdin=subprocess.DEVNULL)
        self.fd = os.open(self.out_path, os.O_RDONLY)
        self.partial = b""
        self.lines = []          # [(monotonic time, text)]
        self.exited = None       # monotonic time the poller saw it gone
        self.lock = threading.Lock()
        PROCESSES.append(self)

    def poll(self):
        with self.lock:
            if self.fd is None:
                return
            gone = self.process.poll() is not None
            while True:
                chunk = os.read(self.fd, 1 << 16)
                if not chunk:
                    break
                now = time.monotonic()
                data = self.partial + chunk
                *complete, self.partial = data.split(b"\n")
                self.lines.extend((now, line.decode(errors="replace")) for line in complete)
            if gone and self.exited is None:
                self.exited = time.monotonic()

    def close(self):
        with self.lock:
            if self.fd is not None:
                os.close(self.fd)
                self.fd = None

    def stderr_tail(self, limit=400):
        try:
            with open(self.err_path, errors="replace") as err:
                return err.read()[-limit:].strip()
        except OSError:
            return ""

    def stop(self, sig=signal.SIGINT, grace=5.0):
        if self.process.poll() is None:
            try:
                self.process.send_signal(sig)
                self.process.wait(grace)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)
            except ProcessLookupError:
                pass
        self.poll()
        if self.exited is None:
            self.exited = time.monotonic()
        self.close()


def poller():
    while True:
        for child in list(PROCESSES):
            try:
                child.poll()
            except OSError:
                pass
        time.sleep(0.002)


threading.Thread(target=poller, daemon=True).start()


def wait_for(check, timeout, step=0.005):
    """Calls check() until it returns something other than None, or timeout seconds pass."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value is not None:
            return value
        if time.monotonic() >= deadline:
            return None
        time.sleep(step)


def line_or_exit(child, find):
    """For wait_for: find()'s time, False once the child has exited without it, else None."""
    def check():
        exited = child.exited     # read first: once it is set, every line has been read
        seen = find()
        if seen is not None:
            return seen
        return False if exited else None
    return check


def json_lines(child, start=0):
    for index, (seen, line) in enumerate(child.lines[start:], start):
        if line.startswith("{"):
            try:
                yield index, seen, json.loads(line)
            except ValueError:
                continue


def first_event(child, event, name, since_index=0):
    """Time of the first `event` line about instance `name`, or None."""
    for _, seen, item in json_lines(child, since_index):
        if item.get("event") == event and item.get("name") == name:
            return seen
    return None


def avahi_fields(line):
    parts = line.split(";")
    return parts if len(parts) >= 6 and parts[0] in "+-=" else None


def first_avahi(child, kind, name):
    for seen, line in child.lines:
        fields = avahi_fields(line)
        if fields and fields[0] == kind and fields[3] == name:
            return seen
    return None


def nearby_browse(*extra):
    return ["exec", BROWSER, "--", NEARBY, "browse", *extra, "--domain", ZONE, "--json"]


def avahi_browse(service_type, *flags):
    return ["avahi", "exec", BROWSER, "--", "stdbuf", "-oL", "avahi-browse", *flags, "-d", ZONE, service_type]


def restart_avahi():
    lab("avahi", "stop", BROWSER, check=False)
    lab("avahi", "start", "--wide-area", BROWSER)


# ---- DNS: nsupdate and the named set-up ----------------------------------------------------

def nsupdate(lines, timeout=60):
    """Runs one nsupdate session from the registrant; returns (seconds, error or None)."""
    script = "\n".join([f"server {SERVER}", f"zone {ZONE}", *lines]) + "\n"
    start = time.monotonic()
    result = lab("exec", REGISTRANT, "--", "nsupdate", "-k", KEYFILE, check=False, input=script, timeout=timeout)
    elapsed = time.monotonic() - start
    problem = None
    if result.returncode != 0 or result.stderr.strip():
        problem = (result.stderr.strip() or f"exit {result.returncode}").splitlines()[0]
    return elapsed, problem


def fqdn(label):
    return f"{label}.{ZONE}."


def instance_records(name, service_type, port, host, txt):
    owner = f"{name}.{service_type}.{ZONE}."
    return [f"update add {service_type}.{ZONE}. {TTL} PTR {owner}",
            f"update add {owner} {TTL} SRV 0 0 {port} {fqdn(host)}",
            f'update add {owner} {TTL} TXT "{txt}"']


def register(name, port, service_type=TYPE, host="bench-ns"):
    """Registers one instance; returns (monotonic time nsupdate returned, error)."""
    _, problem = nsupdate(instance_records(name, service_type, port, host, f"round={name}") + ["send"])
    return time.monotonic(), problem


def raise_rrset_limit(state):
    """BIND >= 9.18.28 keeps at most max-records-per-type (default 100) records in an RRset;
    lift it in the lab's generated named.conf and reload."""
    conf = os.path.join(state, "named.conf")
    with open(conf) as handle:
        text = handle.read()
    if "max-records-per-type" not in text:
        text = text.replace("options {\n", "options {\n\tmax-records-per-type 0;\t// Tools/bench/helpers/wide_area.py\n", 1)
        with open(conf, "w") as handle:
            handle.write(text)
    check = subprocess.run(["named-checkconf", conf], capture_output=True, text=True)
    if check.returncode != 0:
        raise RuntimeError(f"named-checkconf: {check.stdout}{check.stderr}")
    with open(os.path.join(state, "named.pid")) as handle:
        pid = int(handle.read().split()[0])
    log_path = os.path.join(state, "named.log")
    before = os.path.getsize(log_path)
    os.kill(pid, signal.SIGHUP)

    def reloaded():
        with open(log_path, errors="replace") as handle:
            handle.seek(before)
            tail = handle.read()
        return True if "all zones loaded" in tail or "reloading zones succeeded" in tail else None

    if not wait_for(reloaded, 10, 0.05):
        raise RuntimeError("named did not reload its configuration after SIGHUP")


# ---- tcpdump in h4 and a small pcap reader -------------------------------------------------

class Capture:
    def __init__(self, label):
        self.path = os.path.join(WORK, f"{label}.pcap")
        self.child = Child(f"tcpdump-{label}", ["exec", SERVER_HOST, "--", "tcpdump", "-Z", "root", "-U",
                                                "--immediate-mode", "-n", "-s", "0", "-i", "lan1", "-w", self.path,
                                                "port", "53"])

        def listening():
            if self.child.process.poll() is not None:
                return False
            with open(self.child.err_path, errors="replace") as err:
                return True if "listening on" in err.read() else None

        if not wait_for(listening, 10, 0.02):
            raise RuntimeError(f"tcpdump did not start: {self.child.stderr_tail()}")

    def stop(self):
        time.sleep(0.3)
        self.child.stop(signal.SIGINT)
        return read_dns_messages(self.path)


QTYPES = {1: "A", 2: "NS", 5: "CNAME", 6: "SOA", 12: "PTR", 16: "TXT", 28: "AAAA", 33: "SRV", 255: "ANY"}


def dns_summary(payload):
    """(is_response, question type) of a DNS message, or None."""
    if len(payload) < 12:
        return None
    flags, qdcount = struct.unpack("!H", payload[2:4])[0], struct.unpack("!H", payload[4:6])[0]
    qtype = "?"
    if qdcount:
        offset = 12
        while offset < len(payload):
            length = payload[offset]
            if length == 0:
                offset += 1
                break
            if length & 0xC0:
                offset += 2
                break
            offset += 1 + length
        if offset + 2 <= len(payload):
            code = struct.unpack("!H", payload[offset:offset + 2])[0]
            qtype = QTYPES.get(code, str(code))
    return bool(flags & 0x8000), qtype


def read_dns_messages(path):
    """Every DNS message in a pcap of port 53 (UDP datagrams, and TCP streams reassembled and
    split at their 2-byte lengths): dicts with time, src, sport, dst, dport, transport,
    response, qtype, size."""
    messages = []
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except OSError:
        return messages
    if len(data) < 24:
        return messages
    magic = data[:4]
    if magic in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1"):
        endian = "<"
    elif magic in (b"\xa1\xb2\xc3\xd4", b"\xa1\xb2\x3c\x4d"):
        endian = ">"
    else:
        raise RuntimeError(f"{path}: not a pcap file")
    nano = magic in (b"\x4d\x3c\xb2\xa1", b"\xa1\xb2\x3c\x4d")
    linktype = struct.unpack(endian + "I", data[20:24])[0]
    streams = {}   # (src, sport, dst, dport) -> {"isn": seq or None, "segments": [(seq, time, bytes)]}
    offset = 24
    while offset + 16 <= len(data):
        seconds, fraction, captured, _ = struct.unpack(endian + "IIII", data[offset:offset + 16])
        frame = data[offset + 16:offset + 16 + captured]
        offset += 16 + captured
        stamp = seconds + fraction / (1e9 if nano else 1e6)
        if linktype == 1:        # Ethernet
            if len(frame) < 14:
                continue
            ethertype, packet = struct.unpack("!H", frame[12:14])[0], frame[14:]
        elif linktype == 113:    # Linux cooked
            ethertype, packet = struct.unpack("!H", frame[14:16])[0], frame[16:]
        else:
            continue
        if ethertype == 0x0800 and len(packet) >= 20:
            header = (packet[0] & 0x0F) * 4
            protocol = packet[9]
            src, dst = ".".join(map(str, packet[12:16])), ".".join(map(str, packet[16:20]))
            total = struct.unpack("!H", packet[2:4])[0]
            body = packet[header:total]
        elif ethertype == 0x86DD and len(packet) >= 40:
            protocol = packet[6]
            src, dst = ipv6_text(packet[8:24]), ipv6_text(packet[24:40])
            body = packet[40:40 + struct.unpack("!H", packet[4:6])[0]]
        else:
            continue
        if protocol == 17 and len(body) >= 8:
            sport, dport = struct.unpack("!HH", body[:4])
            summary = dns_summary(body[8:])
            if summary:
                messages.append(dict(time=stamp, src=src, sport=sport, dst=dst, dport=dport, transport="udp",
                                     response=summary[0], qtype=summary[1], size=len(body) - 8))
        elif protocol == 6 and len(body) >= 20:
            sport, dport, seq = struct.unpack("!HHI", body[:8])
            flags = body[13]
            payload = body[(body[12] >> 4) * 4:]
            stream = streams.setdefault((src, sport, dst, dport), {"isn": None, "segments": []})
            if flags & 0x02:
                stream["isn"] = seq
            if payload:
                stream["segments"].append((seq, stamp, payload))
    for (src, sport, dst, dport), stream in streams.items():
        segments = stream["segments"]
        if not segments:
            continue
        base = (stream["isn"] + 1) if stream["isn"] is not None else min(s[0] for s in segments)
        joined = bytearray()
        starts = []    # (offset in joined, time)
        for seq, stamp, payload in sorted(segments, key=lambda s: (s[0] - base) % (1 << 32)):
            position = (seq - base) % (1 << 32)
            if position + len(payload) <= len(joined):
                continue                          # a retransmission
            if position > len(joined):
                break                             # a hole: stop here
            starts.append((len(joined), stamp))
            joined += payload[len(joined) - position:]
        cursor = 0
        while cursor + 2 <= len(joined):
            length = struct.unpack("!H", joined[cursor:cursor + 2])[0]
            if cursor + 2 + length > len(joined):
                break
            summary = dns_summary(bytes(joined[cursor + 2:cursor + 2 + length]))
            stamp = max((t for start, t in starts if start <= cursor), default=starts[0][1])
            if summary:
                messages.append(dict(time=stamp, src=src, sport=sport, dst=dst, dport=dport, transport="tcp",
                                     response=summary[0], qtype=summary[1], size=length))
            cursor += 2 + length
    messages.sort(key=lambda m: m["time"])
    return messages


def ipv6_text(raw):
    groups = [f"{g:x}" for g in struct.unpack("!8H", raw)]
    text = ":".join(groups)
    # The longest run of zero groups becomes "::" (enough for comparing lab addresses).
    best, best_len, run_start = None, 0, None
    for index, group in enumerate(groups + ["x"]):
        if group == "0":
            run_start = index if run_start is None else run_start
        else:
            if run_start is not None and index - run_start > best_len:
                best, best_len = run_start, index - run_start
            run_start = None
    if best is not None and best_len > 1:
        text = ":".join(groups[:best]) + "::" + ":".join(groups[best + best_len:])
    return text


def from_browser(messages, ports=None, exclude_ports=None, start=None, end=None):
    """Queries sent by h6 to a DNS server, optionally only from or not from some source ports,
    within [start, end) in wall-clock time."""
    picked = []
    for m in messages:
        if m["response"] or m["src"] not in BROWSER_ADDRESSES or m["dport"] != 53:
            continue
        if ports is not None and m["sport"] not in ports:
            continue
        if exclude_ports is not None and m["sport"] in exclude_ports:
            continue
        if start is not None and m["time"] < start:
            continue
        if end is not None and m["time"] >= end:
            continue
        picked.append(m)
    return picked


def traffic(messages, queries):
    """Totals of a list of queries and of every message to or from h6 in the capture."""
    both = [m for m in messages if m["src"] in BROWSER_ADDRESSES or m["dst"] in BROWSER_ADDRESSES]
    by_type = {}
    for m in queries:
        by_type[m["qtype"]] = by_type.get(m["qtype"], 0) + 1
    connections = len({(m["sport"]) for m in queries if m["transport"] == "tcp"})
    return dict(queries=len(queries), udp=sum(m["transport"] == "udp" for m in queries),
                tcp=sum(m["transport"] == "tcp" for m in queries), tcp_connections=connections,
                by_type=by_type, messages_both_ways=len(both), bytes_both_ways=sum(m["size"] for m in both))


# ---- Statistics and the table ---------------------------------------------------------------

def stats(samples):
    ok = sorted(s for s in samples if s is not None)
    n = len(samples)
    if not ok:
        return dict(n=n, ok=0, median=None, p95=None, max=None, misses=n)
    p95 = ok[max(0, math.ceil(0.95 * len(ok)) - 1)]
    return dict(n=n, ok=len(ok), median=statistics.median(ok), p95=p95, max=ok[-1], min=ok[0], misses=n - len(ok))


def seconds(value):
    return "-" if value is None else f"{value:.3f}"


def add_row(section, label, samples, note=""):
    SUMMARY.append((section, label, stats(samples), note))


def print_section_rows(section):
    for sec, label, s, note in SUMMARY:
        if sec == section:
            log(f"    {label:<58} n={s['n']:<3} median {seconds(s['median'])} s  p95 {seconds(s['p95'])} s  "
                f"max {seconds(s['max'])} s  misses {s['misses']}  {note}")


# ---- 1. a new registration until a browser shows it -----------------------------------------

def visible():
    log(f"1a. running browsers in {BROWSER}; {ROUNDS} nsupdate rounds, {ADVERTISE_ROUNDS} nearby advertise rounds")
    plain = Child("nearby-browse-running", nearby_browse(TYPE))
    resolving = Child("nearby-browse-resolve-running", nearby_browse(TYPE, "--resolve"))
    avahi = Child("avahi-browse-running", avahi_browse(TYPE, "-rp"))
    # nearby asks a browse's PTR every second for its first 10 s, then every 5 s: measure the
    # steady state.
    time.sleep(IDLE_WARMUP + 1)
    raw = {"nsupdate": [], "advertise": []}
    plain_times, resolve_times, nsupdate_seconds = [], [], []
    names = []
    registered_at = {}   # name -> monotonic time the registration was done
    # One registration every 0.4-2 s, without waiting for the browser in between: a round that
    # began right after the browser's last answer would always wait almost a whole poll period.
    for round_index in range(ROUNDS):
        name = f"Run{round_index:02d}-{RUN_ID}"
        before = time.monotonic()
        registered, problem = register(name, 9200 + round_index)
        nsupdate_seconds.append(registered - before)
        if problem:
            log(f"    round {round_index}: nsupdate failed: {problem}")
        else:
            names.append(name)
            registered_at[name] = registered
        time.sleep(random.uniform(0.4, 2.0))
    wait_for(lambda: True if all(first_event(plain, "found", n) and first_event(resolving, "found", n)
                                 for n in names) else None, 15, 0.05)
    for round_index in range(ROUNDS):
        name = f"Run{round_index:02d}-{RUN_ID}"
        if name not in registered_at:
            plain_times.append(None)
            resolve_times.append(None)
            continue
        seen_plain, seen_resolve = first_event(plain, "found", name), first_event(resolving, "found", name)
        plain_times.append(None if seen_plain is None else seen_plain - registered_at[name])
        resolve_times.append(None if seen_resolve is None else seen_resolve - registered_at[name])
        raw["nsupdate"].append(dict(name=name, nsupdate_s=nsupdate_seconds[round_index], browse_s=plain_times[-1],
                                    browse_resolve_s=resolve_times[-1]))
    adv_plain, adv_resolve, adv_startup, adv_lost = [], [], [], []
    for round_index in range(ADVERTISE_ROUNDS):
        name = f"Adv{round_index:02d}-{RUN_ID}"
        names.append(name)
        # Sequential (each uses --host bench-h1), so each waits a random part of a poll period
        # before registering and before removing, for the same reason as above.
        time.sleep(random.uniform(0, 5))
        advertiser = Child(f"nearby-advertise-{round_index}", [
            "exec", REGISTRANT, "--", NEARBY, "advertise", name, TYPE, str(9300 + round_index), f"round={round_index}",
            "--domain", ZONE, "--tsig", KEYFILE, "--host", "bench-h1", "--json"])
        advertising = wait_for(lambda: next((t for _, t, item in json_lines(advertiser)
                                             if item.get("event") == "advertising"), None), 15)
        if advertising is None:
            log(f"    advertise round {round_index}: no \"advertising\" line; stderr: {advertiser.stderr_tail()}")
            advertiser.stop()
            adv_plain.append(None)
            adv_resolve.append(None)
            adv_startup.append(None)
            adv_lost.append(None)
            continue
        adv_startup.append(advertising - advertiser.started)
        registered_at[name] = advertising
        seen_plain = wait_for(lambda: first_event(plain, "found", name), 15)
        seen_resolve = wait_for(lambda: first_event(resolving, "found", name), 5 if seen_plain else 1)
        adv_plain.append(None if seen_plain is None else seen_plain - advertising)
        adv_resolve.append(None if seen_resolve is None else seen_resolve - advertising)
        time.sleep(random.uniform(0, 5))
        advertiser.stop(signal.SIGINT, grace=10)
        gone = advertiser.exited
        lost = wait_for(lambda: first_event(plain, "lost", name), 15)
        adv_lost.append(None if lost is None else lost - gone)
        raw["advertise"].append(dict(name=name, spawn_to_advertising_s=adv_startup[-1], browse_s=adv_plain[-1],
                                     browse_resolve_s=adv_resolve[-1], exit_to_lost_s=adv_lost[-1],
                                     exit_status=advertiser.process.returncode))
    time.sleep(1)
    avahi_added = [first_avahi(avahi, "+", name) for name in names]
    avahi_resolved = [first_avahi(avahi, "=", name) for name in names]
    avahi_total = len({avahi_fields(line)[3] for _, line in avahi.lines if avahi_fields(line)})
    for child in (plain, resolving, avahi):
        child.stop()
    raw["avahi_running"] = dict(instances_registered=len(names), seen_added=sum(t is not None for t in avahi_added),
                                seen_resolved=sum(t is not None for t in avahi_resolved), lines=len(avahi.lines),
                                instances_listed=avahi_total)
    add_row("1", "nearby browse (running), after nsupdate", plain_times)
    add_row("1", "nearby browse --resolve (running), after nsupdate", resolve_times)
    add_row("1", "nearby browse (running), after nearby advertise", adv_plain)
    add_row("1", "nearby browse --resolve (running), after advertise", adv_resolve)
    add_row("1", "  (nearby advertise: spawn -> \"advertising\")", adv_startup)
    add_row("1", "  (nearby advertise SIGINT: exit -> \"lost\")", adv_lost)
    add_row("1", "  (nsupdate of one instance, from h1)", nsupdate_seconds)
    # The running avahi-browse: a sample per registration, a miss when it never showed it.
    avahi_samples = [None if seen is None or name not in registered_at else seen - registered_at[name]
                     for name, seen in zip(names, avahi_resolved)]
    raw["avahi_running"]["samples_s"] = avahi_samples
    add_row("1", "avahi-browse -rp (running)", avahi_samples,
            note=f"(showed {raw['avahi_running']['seen_resolved']} of {len(names)} new instances)")
    print_section_rows("1")

    log(f"1b. fresh processes per round, avahi-daemon restarted first; {ROUNDS} rounds")
    # avahi asks over UDP without EDNS and ignores a truncated answer's TC bit: it sees only the
    # ~20 PTRs that fit in 512 bytes. Each round starts from an empty type so that a miss here
    # is the cache's doing, not truncation's.
    remove_instances([row["name"] for row in raw["nsupdate"] + raw["advertise"]])
    restart_avahi()
    fresh_avahi, fresh_nearby, avahi_listed = [], [], []
    raw["fresh"] = []
    for round_index in range(ROUNDS):
        name = f"Fav{round_index:02d}-{RUN_ID}"
        registered, problem = register(name, 9400 + round_index)
        browse = Child(f"avahi-browse-fresh-{round_index}", avahi_browse(TYPE, "-rpt"))
        seen = wait_for(line_or_exit(browse, lambda: first_avahi(browse, "=", name)), 15)
        browse.stop()
        listed = len({avahi_fields(line)[3] for _, line in browse.lines if avahi_fields(line) and avahi_fields(line)[0] == "="})
        fresh_avahi.append(seen - registered if seen and not problem else None)
        avahi_listed.append(listed)
        name2 = f"Fnb{round_index:02d}-{RUN_ID}"
        registered2, problem2 = register(name2, 9500 + round_index)
        browse2 = Child(f"nearby-browse-fresh-{round_index}", nearby_browse(TYPE, "--resolve", "--timeout", "15"))
        seen2 = wait_for(line_or_exit(browse2, lambda: first_event(browse2, "found", name2)), 16)
        browse2.stop()
        fresh_nearby.append(seen2 - registered2 if seen2 and not problem2 else None)
        raw["fresh"].append(dict(avahi_name=name, avahi_s=fresh_avahi[-1], avahi_listed=listed,
                                 nearby_name=name2, nearby_s=fresh_nearby[-1]))
        remove_instances([name, name2])
        time.sleep(random.uniform(0.8, 2.5))   # 20 rounds span more than one 30 s TTL
    add_row("1b", "fresh avahi-browse -rpt (start-up included)", fresh_avahi,
            note="(a miss: answered from avahi's cache)")
    add_row("1b", "fresh nearby browse --resolve (start-up included)", fresh_nearby)
    startup = []
    for _ in range(5):
        start = time.monotonic()
        lab("exec", BROWSER, "--", NEARBY, "--version")
        startup.append(time.monotonic() - start)
    add_row("1b", "  (start-up alone: lab exec h6 -- nearby --version)", startup)
    print_section_rows("1b")
    RESULTS["visible"] = raw
    # Leave _bench._tcp empty for the idle measurement.
    nsupdate([f"update delete {TYPE}.{ZONE}. PTR", "send"])


def remove_instances(names):
    lines = []
    for name in names:
        owner = f"{name}.{TYPE}.{ZONE}."
        lines += [f"update delete {TYPE}.{ZONE}. PTR {owner}", f"update delete {owner}"]
    _, problem = nsupdate(lines + ["send"])
    if problem:
        log(f"    removing {len(names)} instance(s) failed: {problem}")


# ---- 2. 1,000 registrations in one zone -----------------------------------------------------

def mass():
    hosts = 4
    lines = [f"update add {fqdn(f'mass-h{h}')} {TTL} A 198.18.1.{h + 1}" for h in range(hosts)] + ["send"]
    for index in range(MASS):
        lines += instance_records(f"M{index:04d}", MASS_TYPE, 10000 + index, f"mass-h{index % hosts}", f"i={index}")
        if index % 50 == 49 or index == MASS - 1:
            lines.append("send")
    elapsed, problem = nsupdate(lines, timeout=120)
    check = lab("exec", BROWSER, "--", "dig", f"@{SERVER}", "+tcp", "+short", f"{MASS_TYPE}.{ZONE}", "PTR", check=False)
    in_zone = len(check.stdout.split())
    log(f"2. {MASS} instances of {MASS_TYPE}: one nsupdate session, {math.ceil(MASS / 50) + 1} sends, "
        f"{elapsed:.2f} s; {in_zone} PTR records in the zone{'; nsupdate: ' + problem if problem else ''}")
    RESULTS["mass"] = dict(register_s=elapsed, register_error=problem, ptr_in_zone=in_zone, runs=[])
    wanted = in_zone

    def run(label, args, count_line, timeout, avahi=False):
        if avahi:
            restart_avahi()
        capture = Capture(f"mass-{label.split()[0]}-{len(RESULTS['mass']['runs'])}")
        child = Child(f"mass-{label}", args)
        names = set()
        cursor = [0]
        first = []      # the time of the first line that counted

        def done():
            exited = child.exited
            lines_now = child.lines
            for seen, line in lines_now[cursor[0]:]:
                name = count_line(line)
                if name:
                    names.add(name)
                    first[:] = first or [seen]
            cursor[0] = len(lines_now)
            if len(names) >= wanted:
                return time.monotonic()
            return False if exited else None

        finished = wait_for(done, timeout, 0.01)
        elapsed = finished - child.started if finished else None
        last_line = child.lines[-1][0] - child.started if child.lines else None
        child.stop()
        messages = capture.stop()
        queries = from_browser(messages)
        first_s = first[0] - child.started if first else None
        result = dict(tool=label, seconds=elapsed, seen=len(names), wanted=wanted, first_s=first_s, last_line_s=last_line,
                      exit_status=child.process.returncode, **traffic(messages, queries))
        if len(names) < wanted and not avahi:
            result["missing"] = sorted({f"M{i:04d}" for i in range(MASS)} - names)[:30]
            result["output"] = os.path.basename(child.out_path)
        RESULTS["mass"]["runs"].append(result)
        shown = "incomplete" if elapsed is None else f"{elapsed:.2f} s"
        log(f"    {label:<40} {shown:>10}  {len(names)}/{wanted} seen, the first at {seconds(first_s)} s  {result['queries']} queries "
            f"({result['udp']} UDP, {result['tcp']} TCP on {result['tcp_connections']} connections) {result['by_type']}")
        return result

    def nearby_found(resolved):
        def count(line):
            if not line.startswith("{"):
                return None
            try:
                item = json.loads(line)
            except ValueError:
                return None
            if item.get("event") != "found":
                return None
            if resolved and not (item.get("port") and item.get("addresses")):
                return None
            return item.get("name")
        return count

    def avahi_resolved(line):
        fields = avahi_fields(line)
        return fields[3] if fields and fields[0] == "=" else None

    # Bounds: nearby --resolve needs ~40 s for 1,000 in a debug build; the others well under 1 s.
    limit, short = 90, 20
    for round_index in range(MASS_ROUNDS):
        run("nearby browse --resolve", nearby_browse(MASS_TYPE, "--resolve", "--timeout", str(limit)),
            nearby_found(True), limit + 2)
        run("nearby browse", nearby_browse(MASS_TYPE, "--timeout", str(short)), nearby_found(False), short + 2)
        run("avahi-browse -rpt (cold daemon)", avahi_browse(MASS_TYPE, "-rpt"), avahi_resolved, short, avahi=True)
    for label in ("nearby browse --resolve", "nearby browse", "avahi-browse -rpt (cold daemon)"):
        runs = [r for r in RESULTS["mass"]["runs"] if r["tool"] == label]
        seen = "/".join(str(r["seen"]) for r in runs)
        queries = "/".join(str(r["queries"]) for r in runs)
        tcp = "/".join(str(r["tcp"]) for r in runs)
        note = f"(seen {seen} of {wanted}; queries {queries}, of them TCP {tcp})"
        if label.startswith("nearby"):
            note += f"; first at {'/'.join(seconds(r['first_s']) for r in runs)} s"
        if label.startswith("avahi"):
            note = f"(seen {seen}: UDP without EDNS, TC ignored; queries {queries})"
        if any(r["seconds"] is None for r in runs):
            ends = "/".join(seconds(r["last_line_s"]) for r in runs)
            note += f" last line at {ends} s"
        add_row("2", f"{label}: all {wanted}", [r["seconds"] for r in runs], note)
    print_section_rows("2")


# ---- 3. idle browse traffic ----------------------------------------------------------------

def avahi_ports():
    listing = lab("exec", BROWSER, "--", "ss", "-Huanp", check=False).stdout
    ports = set()
    for line in listing.splitlines():
        if "avahi-daemon" not in line:
            continue
        local = line.split()[3]
        port = int(local.rsplit(":", 1)[1])
        if port != 5353:
            ports.add(port)
    return ports


def idle():
    _, problem = nsupdate([f"update add {fqdn('bench-idle')} {TTL} A 198.18.1.1"]
                          + instance_records(f"Idle-{RUN_ID}", TYPE, 9600, "bench-idle", "idle=1") + ["send"])
    if problem:
        log(f"3. nsupdate failed: {problem}")
    window = IDLE_WARMUP + IDLE_SECONDS
    RESULTS["idle"] = {}
    log(f"3. idle traffic, {IDLE_SECONDS} s after the first {IDLE_WARMUP} s; a: nearby --resolve and avahi side by side")
    restart_avahi()
    capture = Capture("idle-a")
    start = time.time()
    nearby = Child("idle-nearby-resolve", nearby_browse(TYPE, "--resolve"))
    avahi = Child("idle-avahi", avahi_browse(TYPE, "-rp"))
    time.sleep(window + 0.5)
    ports = avahi_ports()     # its unicast DNS socket(s), open once it has asked
    nearby_found = first_event(nearby, "found", f"Idle-{RUN_ID}") is not None
    avahi_found = first_avahi(avahi, "=", f"Idle-{RUN_ID}") is not None
    nearby.stop()
    avahi.stop()
    messages = capture.stop()
    rows = {}
    rows["nearby browse --resolve"] = (from_browser(messages, exclude_ports=ports, start=start, end=start + IDLE_WARMUP),
                                       from_browser(messages, exclude_ports=ports, start=start + IDLE_WARMUP, end=start + window),
                                       nearby_found)
    rows["avahi-browse -rp"] = (from_browser(messages, ports=ports, start=start, end=start + IDLE_WARMUP),
                                from_browser(messages, ports=ports, start=start + IDLE_WARMUP, end=start + window),
                                avahi_found)
    log(f"    b: nearby browse without --resolve")
    capture = Capture("idle-b")
    start = time.time()
    nearby = Child("idle-nearby", nearby_browse(TYPE))
    time.sleep(window + 0.5)
    nearby_found = first_event(nearby, "found", f"Idle-{RUN_ID}") is not None
    nearby.stop()
    messages = capture.stop()
    rows["nearby browse"] = (from_browser(messages, start=start, end=start + IDLE_WARMUP),
                             from_browser(messages, start=start + IDLE_WARMUP, end=start + window), nearby_found)
    for label, (first, steady, found) in rows.items():
        per_minute = len(steady) * 60 / IDLE_SECONDS
        by_type = traffic([], steady)["by_type"]
        RESULTS["idle"][label] = dict(first_10s=len(first), steady=len(steady), per_minute=per_minute,
                                      steady_by_type=by_type, found_it=found, avahi_ports=sorted(ports))
        SUMMARY.append(("3", label, dict(per_minute=per_minute, first=len(first), by_type=by_type, found=found), ""))
        log(f"    {label:<28} {per_minute:6.1f} queries/min  (first {IDLE_WARMUP} s: {len(first)}; "
            f"by type {by_type}; showed the service: {'yes' if found else 'NO'})")


# ---- The table ------------------------------------------------------------------------------

def print_table():
    print()
    print(f"Wide-area DNS-SD benchmark (RFC 6763 §11): BIND in h4, registrant h1, browsers h6 across the router")
    debug = "/debug/" in NEARBY_GIVEN
    print(f"nearby {RESULTS.get('nearby_version', '?')}: {NEARBY_GIVEN}"
          f"{'  (DEBUG build: CPU-bound figures are pessimistic)' if debug else ''}")
    titles = {"1": "1. new registration -> seen by a running browser (s)",
              "1b": "1b. new registration -> seen by a fresh process (s)",
              "2": f"2. fresh browse of {MASS} instances of one type, time until all seen (s)",
              "3": f"3. idle browse, one service: DNS queries from h6 per minute (after the first {IDLE_WARMUP} s)"}
    current = None
    for section, label, s, note in SUMMARY:
        if section != current:
            current = section
            print(f"\n{titles[section]}")
            if section != "3":
                print(f"  {'':<54} {'n':>3} {'median':>8} {'p95':>8} {'max':>8} {'misses':>7}")
            else:
                print(f"  {'':<54} {'per min':>8} {'first 10 s':>11}   steady state by type")
        if section == "3":
            types = ", ".join(f"{k} {v * 60 / IDLE_SECONDS:.1f}" for k, v in sorted(s["by_type"].items())) or "none"
            print(f"  {label:<54} {s['per_minute']:>8.1f} {s['first']:>11}   {types}")
        else:
            print(f"  {label:<54} {s['n']:>3} {seconds(s['median']):>8} {seconds(s['p95']):>8} "
                  f"{seconds(s['max']):>8} {s['misses']:>7}  {note}")
    if "3" in {row[0] for row in SUMMARY}:
        print("  (nearby: the PTR every 5 s; SRV, TXT, A at 80 % of their 30 s TTL; the AAAA, which the host")
        print("   lacks, after the negative TTL, min(SOA TTL, SOA minimum) = 5 s in the lab's zone.")
        print("   avahi 0.8 asks once per browse and never refreshes: a running avahi-browse sends nothing after")
        print("   its first queries, and shows nothing registered or removed later.)")


def stop_everything(*_):
    for child in PROCESSES:
        try:
            child.stop(signal.SIGTERM, grace=3)
        except Exception:
            pass


def main():
    global KEYFILE
    which = [a for a in sys.argv[1:]] or ["visible", "mass", "idle"]
    unknown = set(which) - {"visible", "mass", "idle"}
    if unknown:
        sys.exit(f"unknown section(s): {', '.join(sorted(unknown))} (visible, mass, idle)")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    began = time.monotonic()
    try:
        state = lab("dns", "start", SERVER_HOST).stdout.strip().splitlines()[-1]
        KEYFILE = os.path.join(state, "nearby.key")
        raise_rrset_limit(state)
        for host in (REGISTRANT, BROWSER):
            lab("dns", "resolv", host, "--nameserver", SERVER, "--search", ZONE)
        lab("avahi", "start", "--wide-area", BROWSER)
        version = subprocess.run([NEARBY, "--version"], capture_output=True, text=True).stdout.strip()
        RESULTS["nearby_version"] = version
        log(f"nearby {version} ({NEARBY_GIVEN}, copied to {NEARBY}); named in {SERVER_HOST}, state {state}")
        _, problem = nsupdate([f"update add {fqdn('bench-ns')} {TTL} A 198.18.1.1",
                               f"update add _services._dns-sd._udp.{ZONE}. {TTL} PTR {TYPE}.{ZONE}.", "send"])
        if problem:
            raise RuntimeError(f"the first nsupdate failed: {problem}")
        if "visible" in which:
            visible()
        if "mass" in which:
            mass()
        if "idle" in which:
            idle()
    finally:
        stop_everything()
        RESULTS["summary"] = [dict(section=s, label=l, stats=st, note=n) for s, l, st, n in SUMMARY]
        RESULTS["total_s"] = time.monotonic() - began
        os.makedirs(os.path.join(ROOT, ".build", "bench"), exist_ok=True)
        out = os.path.join(ROOT, ".build", "bench", "wide-area.json")
        with open(out, "w") as handle:
            json.dump(RESULTS, handle, indent=1, default=str)
        print_table()
        print(f"\nraw values: {out}; total {RESULTS['total_s']:.0f} s")
        # Every child's stdout/stderr and every pcap, for a second look at odd figures.
        logs = os.path.join(ROOT, ".build", "bench", "wide-area-logs")
        shutil.rmtree(logs, ignore_errors=True)
        shutil.move(WORK, logs)
        shutil.rmtree(os.path.dirname(NEARBY), ignore_errors=True)
        print(f"logs: {logs}")


if __name__ == "__main__":
    main()
