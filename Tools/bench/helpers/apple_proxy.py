"""Apple's discovery proxy (mDNSResponder's dnssd-proxy on mdnsd) beside `nearby proxy`, both
serving the same link in one lab run: their answers, queries per second, time to a first answer
for a new name, DNS Push and memory. Figures, never assertions.

Run through Tools/bench/apple-proxy, which builds a one-LAN lab of four hosts and sets
NEARBY_LAB, NEARBY_BIN, NEARBY_MASS_BIN and APPLE_MDNS. Every packet stays inside the lab's
namespaces; nothing of Apple's is built or copied here, only run from APPLE_MDNS.

- h1 advertises BENCH_SERVICES (200) instances "mass-N" of _bench._tcp with Nearby's engine, in
  one process (host mass.local, port 10000+N, an empty TXT), as Tools/bench/helpers/proxy.py does.
- h2 runs Apple's stack under `unshare -m -u`: a tmpfs on /run (mdnsd's socket /var/run/mdnsd
  and its pid file), an overlay on /etc holding /etc/dnssd-proxy.cf (the file's path is fixed
  in dnssd-proxy) and an empty resolv.conf, host name apple-h2; then `mdnsd -debug` and
  `dnssd-proxy` serving lan1 as apple.bench.test on ports 53 and 853 (DNS Push over TLS, a
  P-256 certificate made here with openssl). dnssd-proxy logs about 50 lines per question
  (this tag forces DEBUG_VERBOSE on). BENCH_APPLE_LOG=syslog (default, as it ships): to
  syslog, which has no socket in the lab, so each line costs a failed socket()+connect();
  stderr: --log-stderr into the log directory; off: syslog() preloaded as a no-op (a shim
  compiled here with cc), to show what the logging costs.
- h3 runs `nearby proxy lan1=nearby.bench.test --listen 198.18.1.3 --rate 0 --link-rate 5000`
  (no per-source limit: dnsperf is one source), DNS Push on 853 with a self-signed certificate.
  Both name proxy.bench.test as their name server.
- h4 is the client: dnspython (the lab's venv) for single questions, dnsperf for load,
  DNS Push subscribers.

(a) Answers. The same questions to both, once to warm them up and again 3 s later: the type's
PTR, every instance's SRV and TXT, the host's A and AAAA, _services._dns-sd._udp PTR,
b._dns-sd._udp PTR, SOA and NS at the apex, a name nobody has, and a few administrative ones
(RFC 8766 section 6: SOA below the apex, _dns-update._udp and _dns-push-tls._tcp SRV) and a name
outside both zones. Compared: rcode and the answer RRset with the zone written as ZONE (owner,
type, data; TTLs shown apart), then authority and additional sections in short.
(b) dnsperf, the query file of proxy.py (the PTR once, every SRV and TXT, the host's A) per
zone, BENCH_ROUNDS (3) rounds of BENCH_SECONDS (10) against each, the order alternating:
queries per second, lost queries, latency, CPU of the server processes (mdnsd + dnssd-proxy
together, and apart; nearby) as user+system seconds over wall time, RSS.
(c) A first answer for a new name: BENCH_NEW (20) times, two fresh services appear on h1
(`nearby advertise`, one for each proxy, so that neither proxy's mDNS question warms the other),
and as soon as both are advertising each proxy is asked for its service's SRV: time from query to
answer, median, p95, and misses (no SRV in the answer, or no answer in 10 s).
(d) DNS Push. First Tools/lab.d/peers/dso_client.py as it is (Keepalive and SUBSCRIBE sent back to
back, as RFC 8490 section 6.1 says a client SHOULD) against both, for 8 s; then, for the delays,
a client that writes each message's two-byte length and its body in two TLS records (the way
Apple's reader can take them, see below) subscribes to _benchpush._tcp PTR on both at once while
BENCH_PUSH (6) services come (`nearby advertise`, "advertising" printed) and go (SIGINT, goodbye)
on h1, BENCH_HOLD (4) s each: delay of each add and remove pushed, median/p95/max, misses. That
client reads PUSH names with compression offsets from the start of the DNS message (RFC 8765
section 6.3.1) and counts the records a client that read them from the start of the TLV (as
dso_client.py did until 2026-11-29) would misread.
(e) RSS of both after the load and at the end.

Raw values: .build/bench/apple-proxy.json; every child's output under
.build/bench/apple-proxy-logs/.

The file also holds the two small clients that run inside h4 with the venv's python:
`apple_proxy.py ask` (JSON questions on stdin, JSON answers on stdout, dnspython, UDP then TCP
on TC) and `apple_proxy.py subscribe SERVER PORT NAME TYPE SECONDS` (dso_client.py's message
and record code, each message written as two TLS records).
"""
import hashlib
import json
import os
import re
import shutil
import signal
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time

TYPE = "_bench._tcp"
PUSH_TYPE = "_benchpush._tcp"
ZONES = {"apple": "apple.bench.test", "nearby": "nearby.bench.test"}
SERVERS = {"apple": "198.18.1.2", "nearby": "198.18.1.3"}
NAME_SERVER = "proxy.bench.test"
CLIENT = "h4"
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))  # Tools/bench/helpers/ -> the repository
PEERS = os.path.join(ROOT, "Tools", "lab.d", "peers")


# ------------------------------------------------------------------------------------------
# Clients that run in h4 (the lab's venv: dnspython).

def ask_main():
    """Reads one JSON question a line ({"tag", "server", "name", "type", "timeout"}), asks each
    in a thread of its own (UDP with EDNS(0) 1232 and no RD, TCP when truncated) and prints one
    JSON line per answer, with the time from sending to the answer."""
    import dns.flags
    import dns.message
    import dns.query
    import dns.rcode
    import dns.rdatatype

    lock = threading.Lock()

    def rrs(section):
        out = []
        for rrset in section:
            for rdata in rrset:
                out.append([rrset.name.to_text(), dns.rdatatype.to_text(rrset.rdtype), rrset.ttl, rdata.to_text()])
        return out

    def one(question):
        result = {"tag": question["tag"]}
        query = dns.message.make_query(question["name"], question["type"], use_edns=0, payload=1232)
        query.flags &= ~dns.flags.RD
        started = time.monotonic()
        try:
            response, tcp = dns.query.udp_with_fallback(query, question["server"], timeout=question.get("timeout", 8.0))
            result.update(elapsed=time.monotonic() - started, tcp=tcp, rcode=dns.rcode.to_text(response.rcode()),
                          flags=dns.flags.to_text(response.flags).split(), answer=rrs(response.answer),
                          authority=rrs(response.authority), additional=rrs(response.additional))
        except Exception as error:  # a timeout is a result here, not a failure of the tool
            result.update(elapsed=time.monotonic() - started, error=f"{type(error).__name__}: {error}")
        with lock:
            print(json.dumps(result), flush=True)

    for line in sys.stdin:
        if line.strip():
            threading.Thread(target=one, args=(json.loads(line),), daemon=True).start()
    # stdin closed: let the last questions finish.
    deadline = time.monotonic() + 12
    while threading.active_count() > 1 and time.monotonic() < deadline:
        time.sleep(0.05)
    return 0


def subscribe_main(argv):
    """dso_client.py's Keepalive + SUBSCRIBE and its PUSH reading, but each message goes out as
    two TLS records (its length, then its body, 20 ms apart) and the SUBSCRIBE only after the
    Keepalive's answer. Prints dso_client.py's lines."""
    sys.path.insert(0, PEERS)
    import ssl
    import dns.name
    import dns.rdataclass
    import dns.rdatatype
    import dso_client as dso

    server, port, name, rtype, seconds = argv[0], int(argv[1]), argv[2], argv[3], float(argv[4])
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    sock = context.wrap_socket(socket.create_connection((server, port), timeout=5))

    def send(message):
        sock.sendall(message[:2])
        time.sleep(0.02)
        sock.sendall(message[2:])

    end = time.monotonic() + seconds
    pending = b""
    subscribed = False
    send(dso.message(1, [(dso.KEEPALIVE, struct.pack("!II", 15000, 15000))]))
    keepalive_sent = time.monotonic()
    while time.monotonic() < end:
        if not subscribed and time.monotonic() - keepalive_sent > 2:
            dso.say(event="error", message="no answer to the Keepalive in 2 s; subscribing anyway")
            subscribed = True
            send(dso.message(2, [(dso.SUBSCRIBE, dns.name.from_text(name).to_wire() + struct.pack("!HH", dns.rdatatype.from_text(rtype), dns.rdataclass.IN))]))
        if len(pending) < 2 or len(pending) < 2 + struct.unpack_from("!H", pending)[0]:
            sock.settimeout(max(0.05, min(0.2, end - time.monotonic())))
            try:
                chunk = sock.recv(65536)
            except socket.timeout:
                continue
            except OSError as error:
                dso.say(event="error", message=str(error))
                return 1
            if not chunk:
                dso.say(event="error", message="the server closed the connection")
                return 1
            pending += chunk
            continue
        (length,) = struct.unpack_from("!H", pending)
        whole, pending = pending[2:2 + length], pending[2 + length:]
        message_id, flags = struct.unpack_from("!HH", whole, 0)
        is_response, rcode = bool(flags & 0x8000), flags & 0xF
        tlvs = [(kind, data) for kind, data, _ in dso.tlvs_of(whole)]
        if is_response and message_id == 1:
            values = next((struct.unpack("!II", data) for kind, data in tlvs if kind == dso.KEEPALIVE and len(data) == 8), (None, None))
            dso.say(event="keepalive", id=1, rcode=rcode, inactivity_ms=values[0], interval_ms=values[1], tlvs=[kind for kind, _ in tlvs])
            if not subscribed:
                subscribed = True
                send(dso.message(2, [(dso.SUBSCRIBE, dns.name.from_text(name).to_wire() + struct.pack("!HH", dns.rdatatype.from_text(rtype), dns.rdataclass.IN))]))
        elif is_response:
            dso.say(event="response", id=message_id, rcode=rcode)
        elif message_id == 0 and tlvs and tlvs[0][0] == dso.PUSH:
            read_push(whole, dso)
        else:
            dso.say(event="error", message=f"unexpected message id {message_id} tlvs {[kind for kind, _ in tlvs]}")
    sock.close()
    return 0


def read_push(whole, dso):
    """The records of a PUSH message's primary TLV, its names read with compression offsets from
    the start of the DNS message (RFC 8765 section 6.3.1: 'offsets relative to the beginning of
    the DNS message'). A client that reads them from the start of the TLV's data instead (as
    dso_client.py did until 2026-11-29) reads other names; where it would, the line also carries
    what it would have read."""
    import dns.name
    import dns.rdata
    import dns.rdataclass
    import dns.rdatatype

    (length,) = struct.unpack_from("!H", whole, 14)
    start, end = 16, 16 + length
    tlv = whole[start:end]
    offset = start
    while offset < end:
        name, used = dns.name.from_wire(whole, offset)
        offset += used
        rtype, _, ttl = struct.unpack_from("!HHI", whole, offset)
        offset += 8
        (rdlength,) = struct.unpack_from("!H", whole, offset)
        offset += 2
        type_text = dns.rdatatype.to_text(rtype)
        if ttl == 0xFFFFFFFE:
            offset += rdlength
            dso.say(event="remove-set", name=name.to_text(), type=type_text)
            continue
        rdata = dns.rdata.from_wire(dns.rdataclass.IN, rtype, whole, offset, rdlength)
        fields = {}
        try:
            other = dns.rdata.from_wire(dns.rdataclass.IN, rtype, tlv, offset - start, rdlength).to_text()
        except Exception as error:
            other = f"unreadable: {type(error).__name__}"
        if other != rdata.to_text():
            fields["data_read_from_tlv_start"] = other
        offset += rdlength
        if ttl == 0xFFFFFFFF:
            dso.say(event="remove", name=name.to_text(), type=type_text, data=rdata.to_text(), **fields)
        else:
            dso.say(event="add", name=name.to_text(), type=type_text, ttl=ttl, data=rdata.to_text(), **fields)


# ------------------------------------------------------------------------------------------
# The run, from the root namespace.

LOGS = os.path.join(ROOT, ".build", "bench", "apple-proxy-logs")
children = []


def say(text=""):
    print(text, flush=True)


class Child:
    """A process in a lab host whose output lines are kept with the time each arrived (read from
    the descriptor and split here: see DESIGN.md on select() and readline())."""

    def __init__(self, name, host, *command, stdin=False, stop_signal=signal.SIGINT):
        self.name = name
        self.lines = []
        self.lock = threading.Lock()
        self.stop_signal = stop_signal
        self.log = open(os.path.join(LOGS, f"{name}.log"), "w")
        self.process = subprocess.Popen([os.environ["NEARBY_LAB"], "exec", host, "--", *command], stdout=subprocess.PIPE,
                                        stderr=subprocess.STDOUT, stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
                                        start_new_session=True)
        children.append(self)
        self.reader = threading.Thread(target=self.read, daemon=True)
        self.reader.start()

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

    def wait(self, predicate, seconds, what="what was awaited"):
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            at = self.first(predicate)
            if at is not None:
                return at
            if self.process.poll() is not None:
                time.sleep(0.2)
                at = self.first(predicate)
                if at is not None:
                    return at
                raise SystemExit(f"bench/apple-proxy: {self.name} ended before saying {what} (see {self.log.name})")
            time.sleep(0.02)
        raise SystemExit(f"bench/apple-proxy: {self.name} did not say {what} within {seconds} s (see {self.log.name})")

    def json_lines(self):
        with self.lock:
            lines = list(self.lines)
        out = []
        for at, line in lines:
            if line.startswith("{"):
                try:
                    out.append((at, json.loads(line)))
                except ValueError:
                    pass
        return out

    def stop(self, sig=None):
        try:
            os.killpg(self.process.pid, sig or self.stop_signal)
        except ProcessLookupError:
            pass


def lab(*args, timeout=120):
    result = subprocess.run([os.environ["NEARBY_LAB"], *args], capture_output=True, text=True, timeout=timeout)
    if result.returncode != 0:
        raise SystemExit(f"bench/apple-proxy: Tools/lab {' '.join(args)} failed: {result.stdout}{result.stderr}")
    return result.stdout


class Asker:
    """The `ask` client running in h4: questions go in as JSON lines, answers come back by tag."""

    def __init__(self, python, me):
        self.child = Child("asker", CLIENT, python, me, "ask", stdin=True)
        self.counter = 0
        self.read_up_to = 0
        self.results = {}

    def collect(self):
        with self.child.lock:
            fresh = self.child.lines[self.read_up_to:]
            self.read_up_to = len(self.child.lines)
        for _, line in fresh:
            if line.startswith("{"):
                try:
                    value = json.loads(line)
                except ValueError:
                    continue
                if "tag" in value:
                    self.results[value["tag"]] = value

    def ask(self, questions, timeout=10.0):
        """questions: list of (server, name, type). Returns the answers in the same order."""
        tags = []
        text = ""
        for server, name, rtype in questions:
            self.counter += 1
            tag = f"q{self.counter}"
            tags.append(tag)
            text += json.dumps({"tag": tag, "server": server, "name": name, "type": rtype, "timeout": timeout}) + "\n"
        sent = time.monotonic()
        self.child.process.stdin.write(text.encode())
        self.child.process.stdin.flush()
        deadline = sent + timeout * 2 + 5
        while time.monotonic() < deadline:
            self.collect()
            if all(tag in self.results for tag in tags):
                break
            if self.child.process.poll() is not None:
                raise SystemExit(f"bench/apple-proxy: the asker in h4 ended (see {self.child.log.name})")
            time.sleep(0.02)
        return [self.results.pop(tag, {"tag": tag, "error": "no line from the asker"}) for tag in tags]

    def ask_many(self, questions, batch=20, timeout=10.0):
        out = []
        for start in range(0, len(questions), batch):
            out += self.ask(questions[start:start + batch], timeout=timeout)
        return out

    def close(self):
        try:
            self.child.process.stdin.close()
        except OSError:
            pass


def netns_inode(host):
    lab_name = os.environ["NEARBY_LAB_NAME"]
    return os.stat(f"/run/netns/{lab_name}-{host}").st_ino


def pids_in(host, match):
    """Processes in HOST's network namespace whose argv satisfies match(argv)."""
    want = netns_inode(host)
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            if os.stat(f"/proc/{entry}/ns/net").st_ino != want:
                continue
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                argv = [a.decode(errors="replace") for a in f.read().split(b"\0") if a]
        except OSError:
            continue
        if argv and match(argv):
            found.append(int(entry))
    return found


def cpu_seconds(pids):
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / ticks
        except OSError:
            pass
    return total


def rss_mib(pids):
    total = 0.0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1]) / 1024
        except OSError:
            pass
    return total


def loadavg():
    with open("/proc/loadavg") as f:
        return float(f.read().split()[0])


def summary(values, misses):
    if not values:
        return {"n": 0, "missed": misses}
    ordered = sorted(values)
    p95 = ordered[min(len(ordered) - 1, int(round(0.95 * (len(ordered) - 1))))]
    return {"n": len(ordered), "missed": misses, "median_s": statistics.median(ordered), "p95_s": p95, "max_s": ordered[-1],
            "min_s": ordered[0]}


def fmt_ms(s):
    return f"{s * 1000:.0f} ms" if s < 10 else f"{s:.1f} s"


NO_SYSLOG = """#include <stdarg.h>
void openlog(const char *ident, int option, int facility) { (void)ident; (void)option; (void)facility; }
void closelog(void) {}
void syslog(int priority, const char *format, ...) { (void)priority; (void)format; }
void vsyslog(int priority, const char *format, va_list ap) { (void)priority; (void)format; (void)ap; }
void __syslog_chk(int priority, int flag, const char *format, ...) { (void)priority; (void)flag; (void)format; }
void __vsyslog_chk(int priority, int flag, const char *format, va_list ap) { (void)priority; (void)flag; (void)format; (void)ap; }
"""


# ---- (a) answers -----------------------------------------------------------------------------

def canon(zone, text):
    """A name or record data with the proxy's zone written as ZONE, so both can be compared."""
    return re.sub(re.escape(zone) + r"\.", "ZONE.", text, flags=re.IGNORECASE)


def answer_key(who, result, section="answer"):
    zone = ZONES[who]
    return sorted((canon(zone, owner), rtype, canon(zone, data)) for owner, rtype, _, data in result.get(section, []))


def ttls(result, section="answer"):
    return sorted({ttl for _, _, ttl, _ in result.get(section, [])})


def short(who, result):
    if "error" in result:
        return result["error"].split(":")[0]
    answers = answer_key(who, result)
    head = result["rcode"] + (" aa" if "AA" in result.get("flags", []) else "")
    if not answers:
        return f"{head}, no records"
    if len(answers) > 2:
        return f"{head}, {len(answers)} {answers[0][1]}"
    return f"{head}, " + "; ".join(f"{rtype} {data}" for _, rtype, data in answers)


def section_text(who, result, section):
    zone = ZONES[who]
    rows = result.get(section, [])
    if not rows:
        return "-"
    kinds = {}
    for owner, rtype, ttl, data in rows:
        kinds.setdefault(rtype, []).append(ttl)
    parts = []
    for rtype, values in kinds.items():
        parts.append(f"{len(values)} {rtype} (TTL {'/'.join(str(v) for v in sorted(set(values)))})")
    if section == "authority" and rows and rows[0][1] == "SOA":
        parts.append(canon(zone, rows[0][3]))
    return ", ".join(parts)


def compare_answers(asker, services):
    rows = [("the type's PTR", f"{TYPE}.{{}}", "PTR"),
            ("host A", "mass.{}", "A"),
            ("host AAAA", "mass.{}", "AAAA"),
            ("service types (_services._dns-sd._udp PTR)", "_services._dns-sd._udp.{}", "PTR"),
            ("browse domains (b._dns-sd._udp PTR)", "b._dns-sd._udp.{}", "PTR"),
            ("apex SOA", "{}", "SOA"),
            ("apex NS", "{}", "NS"),
            ("a name nobody has (A)", "nothing-here.{}", "A"),
            ("SOA below the apex (§6.3)", f"mass-1.{TYPE}.{{}}", "SOA"),
            ("_dns-update._udp SRV (§6.4)", "_dns-update._udp.{}", "SRV"),
            ("_dns-push-tls._tcp SRV (§6.4)", "_dns-push-tls._tcp.{}", "SRV"),
            ("a name outside the zone (A)", "www.example.test", "A")]
    instance_rows = []
    for n in range(1, services + 1):
        instance_rows.append((f"mass-{n} SRV", f"mass-{n}.{TYPE}.{{}}", "SRV"))
        instance_rows.append((f"mass-{n} TXT", f"mass-{n}.{TYPE}.{{}}", "TXT"))
    everything = rows + instance_rows
    questions = []
    for _, template, rtype in everything:
        for who in ("apple", "nearby"):
            questions.append((SERVERS[who], template.format(ZONES[who]) if "{}" in template else template, rtype))
    say("(a) answers: the same questions to both, a first time, then again 3 s later (compared)")
    first = asker.ask_many(questions, batch=40, timeout=10.0)
    time.sleep(3)
    second = asker.ask_many(questions, batch=40, timeout=10.0)
    results = []
    for index, (label, template, rtype) in enumerate(everything):
        a1, n1 = first[2 * index], first[2 * index + 1]
        a2, n2 = second[2 * index], second[2 * index + 1]
        same_rcode = a2.get("rcode", a2.get("error")) == n2.get("rcode", n2.get("error"))
        same_set = answer_key("apple", a2) == answer_key("nearby", n2)
        results.append({"label": label, "type": rtype, "name": template.replace("{}", "ZONE") if "{}" in template else template,
                        "apple": a2, "nearby": n2, "apple_first": a1, "nearby_first": n1,
                        "same_rcode": same_rcode, "same_rrset": same_set})
    # The table: the single rows, then the instances folded into one row per type.
    width = 44
    say(f"  {'question':{width}} {'Apple dnssd-proxy':34} {'nearby proxy':34} same")
    for row in results[:len(rows)]:
        verdict = "yes" if row["same_rcode"] and row["same_rrset"] else ("rcode" if not row["same_rcode"] else "rrset")
        say(f"  {row['label']:{width}} {short('apple', row['apple'])[:34]:34} {short('nearby', row['nearby'])[:34]:34} {verdict}")
    for rtype in ("SRV", "TXT"):
        part = [r for r in results[len(rows):] if r["type"] == rtype]
        same = sum(1 for r in part if r["same_rcode"] and r["same_rrset"])
        a_ok = sum(1 for r in part if answer_key("apple", r["apple"]))
        n_ok = sum(1 for r in part if answer_key("nearby", r["nearby"]))
        say(f"  {'each instance ' + rtype + f' (x{len(part)})':{width}} {f'{a_ok} answered':34} {f'{n_ok} answered':34} {same}/{len(part)}")
    # TTLs and the other sections, for the rows that have records.
    say("  TTLs (answer) and the other sections, Apple | nearby:")
    for row in results[:len(rows)] + [r for r in results[len(rows):] if r["label"] in ("mass-1 SRV", "mass-1 TXT")]:
        a, n = row["apple"], row["nearby"]
        if "error" in a and "error" in n:
            continue
        say(f"    {row['label']:{width - 2}} TTL {ttls(a) or '-'} | {ttls(n) or '-'};  authority {section_text('apple', a, 'authority')} | "
            f"{section_text('nearby', n, 'authority')};  additional {section_text('apple', a, 'additional')} | {section_text('nearby', n, 'additional')};  "
            f"time (first ask, then again) {fmt_ms(row['apple_first'].get('elapsed', 0))}, {fmt_ms(a.get('elapsed', 0))} | "
            f"{fmt_ms(row['nearby_first'].get('elapsed', 0))}, {fmt_ms(n.get('elapsed', 0))}")
    # The first ask of each: how complete was the type's PTR, and how long did each take.
    ptr = results[0]
    say(f"  first ask of the type's PTR: Apple {len(answer_key('apple', ptr['apple_first']))} records in {fmt_ms(ptr['apple_first'].get('elapsed', 0))}, "
        f"nearby {len(answer_key('nearby', ptr['nearby_first']))} in {fmt_ms(ptr['nearby_first'].get('elapsed', 0))} (of {services})")
    differences = []
    for row in results:
        if row["same_rcode"] and row["same_rrset"]:
            continue
        a, n = answer_key("apple", row["apple"]), answer_key("nearby", row["nearby"])
        differences.append({"question": row["label"], "apple": {"rcode": row["apple"].get("rcode", row["apple"].get("error")), "only_here": [x for x in a if x not in n]},
                            "nearby": {"rcode": row["nearby"].get("rcode", row["nearby"].get("error")), "only_here": [x for x in n if x not in a]}})
    if differences:
        say("  differences (records only one of them gives, zone written as ZONE):")
        for d in differences[:40]:
            say(f"    {d['question']}: Apple {d['apple']['rcode']} {d['apple']['only_here'][:3]}{' ...' if len(d['apple']['only_here']) > 3 else ''}; "
                f"nearby {d['nearby']['rcode']} {d['nearby']['only_here'][:3]}{' ...' if len(d['nearby']['only_here']) > 3 else ''}")
        if len(differences) > 40:
            say(f"    ... {len(differences) - 40} more in the JSON")
    return {"rows": results, "differences": differences}


# ---- (b) dnsperf ------------------------------------------------------------------------------

def write_query_files(work, services):
    for who, zone in ZONES.items():
        with open(os.path.join(work, f"queries-{who}.txt"), "w") as f:
            f.write(f"{TYPE}.{zone} PTR\n")
            for n in range(1, services + 1):
                f.write(f"mass-{n}.{TYPE}.{zone} SRV\nmass-{n}.{TYPE}.{zone} TXT\n")
            f.write(f"mass.{zone} A\n")


def dnsperf(work, who, seconds, rate=None):
    args = ["dnsperf", "-s", SERVERS[who], "-d", os.path.join(work, f"queries-{who}.txt"), "-l", str(seconds), "-c", "10", "-q", "100", "-T", "2"]
    if rate:
        args += ["-Q", str(rate)]
    out = lab("exec", CLIENT, "--", *args, timeout=seconds + 60)

    def number(label):
        match = re.search(label + r"\s+([0-9.]+)", out)
        return float(match.group(1)) if match else float("nan")
    lost = re.search(r"Queries lost:\s+(\d+)", out)
    completed = re.search(r"Queries completed:\s+(\d+)", out)
    return {"qps": number("Queries per second:"), "lost": int(lost.group(1)) if lost else -1,
            "completed": int(completed.group(1)) if completed else -1,
            "latency_ms": number(r"Average Latency \(s\):") * 1000, "raw": out}


# ---- the run ----------------------------------------------------------------------------------

def main():
    apple = os.path.realpath(os.environ["APPLE_MDNS"])
    services = int(os.environ.get("BENCH_SERVICES", "200"))
    rounds = int(os.environ.get("BENCH_ROUNDS", "3"))
    seconds = int(os.environ.get("BENCH_SECONDS", "10"))
    new_trials = int(os.environ.get("BENCH_NEW", "20"))
    push_services = int(os.environ.get("BENCH_PUSH", "6"))
    hold = float(os.environ.get("BENCH_HOLD", "4"))
    apple_log = {"0": "syslog", "1": "stderr"}.get(os.environ.get("BENCH_APPLE_LOG", "syslog"), os.environ.get("BENCH_APPLE_LOG", "syslog"))
    if apple_log not in ("syslog", "stderr", "off"):
        raise SystemExit(f"bench/apple-proxy: BENCH_APPLE_LOG is syslog (default), stderr or off, not {apple_log!r}")
    os.makedirs(LOGS, exist_ok=True)
    work = tempfile.mkdtemp(prefix="nearby-bench-apple-")
    os.chmod(work, 0o755)
    try:
        run(apple, services, rounds, seconds, new_trials, push_services, hold, apple_log, work)
    finally:
        for child in children:
            child.stop()
        for child in children:
            try:
                child.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                child.stop(signal.SIGKILL)
        shutil.rmtree(work, ignore_errors=True)


def run(apple, services, rounds, seconds, new_trials, push_services, hold, apple_log, work):
    nearby = shutil.copy(os.environ["NEARBY_BIN"], os.path.join(work, "nearby"))
    mass = shutil.copy(os.environ["NEARBY_MASS_BIN"], os.path.join(work, "nearby-mass-advertise"))
    python = os.environ.get("NEARBY_LAB_PYTHON") or os.path.join(ROOT, ".build-venv", "bin", "python")
    me = os.path.abspath(__file__)
    mdnsd = os.path.join(apple, "mDNSPosix", "build", "prod", "mdnsd")
    dnssd_proxy = os.path.join(apple, "ServiceRegistration", "build", "dnssd-proxy")
    commit = subprocess.run(["git", "-C", apple, "describe", "--tags", "--always"], capture_output=True, text=True).stdout.strip()

    # Apple's TLS identity (dnssd-proxy would otherwise run /usr/local/bin/mbedtls_gen_key).
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                    "-keyout", os.path.join(work, "apple.key"), "-out", os.path.join(work, "apple.crt"), "-days", "7",
                    "-subj", f"/CN={NAME_SERVER}"], check=True, capture_output=True)
    config = (f"interface lan1 {ZONES['apple']}\nudp-port 53\ntcp-port 53\ntls-port 853\nmy-name {NAME_SERVER}\n"
              f"listen-addr {SERVERS['apple']}\ntls-key {work}/apple.key\ntls-cert {work}/apple.crt\n")
    with open(os.path.join(work, "dnssd-proxy.cf"), "w") as f:
        f.write(config)
    with open(os.path.join(LOGS, "dnssd-proxy.cf"), "w") as f:
        f.write(config)
    prefix = ""
    if apple_log == "off":
        # dnssd-proxy logs some 50 lines per question (DEBUG_VERBOSE is on in this tag); on Linux
        # each is a syslog() call. A preloaded syslog() that does nothing shows what the logging costs.
        with open(os.path.join(work, "nosyslog.c"), "w") as f:
            f.write(NO_SYSLOG)
        subprocess.run(["cc", "-shared", "-fPIC", "-O2", "-o", os.path.join(work, "nosyslog.so"), os.path.join(work, "nosyslog.c")], check=True)
        prefix = f"env LD_PRELOAD={work}/nosyslog.so "
    # Runs inside h2 under `unshare -m -u`: every mount below is this mount namespace's only.
    script = f"""set -eu
mount -t tmpfs -o mode=0755 tmpfs /run
mkdir -p /run/etc-overlay/upper /run/etc-overlay/work
mount -t overlay overlay -o lowerdir=/etc,upperdir=/run/etc-overlay/upper,workdir=/run/etc-overlay/work /etc
cp {work}/dnssd-proxy.cf /etc/dnssd-proxy.cf
rm -f /etc/resolv.conf; : > /etc/resolv.conf
if [ -e /dev/log ]; then mount --bind /dev/null /dev/log; fi
hostname apple-h2
echo "h2: /run private, /etc/dnssd-proxy.cf:"; cat /etc/dnssd-proxy.cf
{mdnsd} -debug > {LOGS}/mdnsd.log 2>&1 &
for i in $(seq 100); do [ -S /var/run/mdnsd ] && break; sleep 0.1; done
[ -S /var/run/mdnsd ] || {{ echo "h2: mdnsd made no socket"; exit 1; }}
echo "h2: mdnsd is up"
{prefix}{dnssd_proxy} {'--log-stderr' if apple_log == 'stderr' else ''} > {LOGS}/dnssd-proxy.log 2>&1 &
echo "h2: dnssd-proxy started"
wait
"""
    write_query_files(work, services)
    say(f"bench/apple-proxy: {services} services of {TYPE} on lan1 (h1); Apple's dnssd-proxy + mdnsd ({commit}, {apple}) in h2 as "
        f"{ZONES['apple']}, its log {'to syslog (no socket in the lab)' if apple_log == 'syslog' else 'to stderr' if apple_log == 'stderr' else 'off (syslog() preloaded as a no-op)'}; "
        f"nearby proxy in h3 as {ZONES['nearby']}; clients in h4")
    others = subprocess.run(["pgrep", "-f", "swift-build|swift-test|xctest"], capture_output=True, text=True).stdout.split()
    if others:
        say(f"  note: {len(others)} Swift build or test process(es) running beside this benchmark (load {loadavg():.1f})")
    with open(nearby, "rb") as f:
        nearby_sha = hashlib.sha256(f.read()).hexdigest()[:16]
    head = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    dirty = subprocess.run(["git", "-C", ROOT, "status", "--porcelain", "--untracked-files=no", "--", "Sources", "Package.swift"],
                           capture_output=True, text=True).stdout.split("\n")
    dirty = [line[3:] for line in dirty if line.strip()]
    built = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(os.stat(os.environ["NEARBY_BIN"]).st_mtime))
    say(f"  nearby: {os.environ['NEARBY_BIN']} (built {built}, sha256 {nearby_sha}); repository at {head}"
        f"{', with uncommitted changes in ' + ', '.join(dirty) if dirty else ''}")
    out = {"date": time.strftime("%Y-%m-%d"), "services": services, "nearby_bin": os.environ["NEARBY_BIN"], "nearby_built": built,
           "nearby_sha256_16": nearby_sha, "repo_head": head, "repo_dirty_sources": dirty, "other_builds_running": len(others), "cpus": os.cpu_count(), "apple_tag": commit, "apple_log": apple_log,
           "apple_config": config}

    massp = Child("mass", "h1", mass, str(services), TYPE, "--host", "mass", "--prefix", "mass-")
    massp.wait(lambda line: f"advertised {services}" in line, 120, f"advertised {services}")
    # SIGTERM for Apple's group: mdnsd and dnssd-proxy are background jobs of a non-interactive
    # shell, which ignore SIGINT.
    applep = Child("apple", "h2", "unshare", "-m", "-u", "bash", "-c", script, stop_signal=signal.SIGTERM)
    applep.wait(lambda line: "dnssd-proxy started" in line, 30, "dnssd-proxy started")
    nearbyp = Child("nearby-proxy", "h3", nearby, "proxy", f"lan1={ZONES['nearby']}", "--listen", SERVERS["nearby"],
                    "--name-server", NAME_SERVER, "--rate", "0", "--link-rate", "5000", "--json")
    nearbyp.wait(lambda line: '"proxying"' in line, 60, "proxying")
    asker = Asker(python, me)
    # Ready when each answers its apex SOA.
    for who in ("apple", "nearby"):
        deadline = time.monotonic() + 30
        while True:
            (r,) = asker.ask([(SERVERS[who], ZONES[who], "SOA")], timeout=2)
            if r.get("rcode") == "NOERROR":
                break
            if time.monotonic() > deadline:
                raise SystemExit(f"bench/apple-proxy: the {who} proxy does not answer its SOA: {r}")
            time.sleep(0.5)
    apple_pids = {"mdnsd": pids_in("h2", lambda argv: argv[0] == mdnsd),
                  "dnssd-proxy": pids_in("h2", lambda argv: argv[0] == dnssd_proxy)}
    nearby_pids = pids_in("h3", lambda argv: argv[0] == nearby and argv[1:2] == ["proxy"])
    if not apple_pids["mdnsd"] or not apple_pids["dnssd-proxy"] or not nearby_pids:
        raise SystemExit(f"bench/apple-proxy: server processes not found: {apple_pids} {nearby_pids}")
    all_apple = apple_pids["mdnsd"] + apple_pids["dnssd-proxy"]
    rss_start = {"apple": rss_mib(all_apple), "apple_mdnsd": rss_mib(apple_pids["mdnsd"]),
                 "apple_dnssd_proxy": rss_mib(apple_pids["dnssd-proxy"]), "nearby": rss_mib(nearby_pids)}

    # (a)
    out["answers"] = compare_answers(asker, services)
    say()

    # (b)
    say(f"(b) dnsperf from h4: {2 * services + 2} questions in order (PTR, every SRV and TXT, A), -c 10 -q 100, {rounds} x {seconds} s each")
    for who in ("apple", "nearby"):
        for _ in range(2):
            dnsperf(work, who, 5, rate=2000)
        time.sleep(1)
    load = []
    for r in range(1, rounds + 1):
        row = {}
        for who in (("apple", "nearby") if r % 2 else ("nearby", "apple")):
            pids = all_apple if who == "apple" else nearby_pids
            cpu0 = cpu_seconds(pids)
            parts0 = {k: cpu_seconds(v) for k, v in apple_pids.items()}
            t0 = time.monotonic()
            result = dnsperf(work, who, seconds)
            wall = time.monotonic() - t0
            result["cpu_share"] = (cpu_seconds(pids) - cpu0) / wall
            if who == "apple":
                result["cpu_share_parts"] = {k: (cpu_seconds(v) - parts0[k]) / wall for k, v in apple_pids.items()}
            result["rss_mib"] = rss_mib(pids)
            result["loadavg_1min"] = loadavg()
            with open(os.path.join(LOGS, f"dnsperf-{who}-{r}.txt"), "w") as f:
                f.write(result.pop("raw"))
            row[who] = result
        row["ratio_nearby_to_apple"] = row["nearby"]["qps"] / row["apple"]["qps"] if row["apple"]["qps"] else float("nan")
        load.append(row)
        a, n = row["apple"], row["nearby"]
        parts = a["cpu_share_parts"]
        say(f"  round {r}: Apple {a['qps']:,.0f} q/s (lost {a['lost']}, {a['latency_ms']:.2f} ms, CPU {a['cpu_share']:.0%} = mdnsd "
            f"{parts['mdnsd']:.0%} + dnssd-proxy {parts['dnssd-proxy']:.0%}, {a['rss_mib']:.1f} MiB); nearby {n['qps']:,.0f} q/s "
            f"(lost {n['lost']}, {n['latency_ms']:.2f} ms, CPU {n['cpu_share']:.0%}, {n['rss_mib']:.1f} MiB); nearby/Apple {row['ratio_nearby_to_apple']:.2f}; "
            f"load {a['loadavg_1min']:.1f}/{n['loadavg_1min']:.1f}")
    med = {who: statistics.median(row[who]["qps"] for row in load) for who in ("apple", "nearby")}
    say(f"  median: Apple {med['apple']:,.0f} q/s, nearby {med['nearby']:,.0f} q/s, nearby/Apple {med['nearby'] / med['apple']:.2f}")
    rss_load = {"apple": rss_mib(all_apple), "apple_mdnsd": rss_mib(apple_pids["mdnsd"]),
                "apple_dnssd_proxy": rss_mib(apple_pids["dnssd-proxy"]), "nearby": rss_mib(nearby_pids)}
    out["load"] = {"rounds": load, "median_qps": med, "seconds": seconds}
    say()

    # (c)
    say(f"(c) first answer for a new name: {new_trials} times, two fresh services on h1 (one per proxy), then each proxy asked its SRV")
    trials = []
    for t in range(1, new_trials + 1):
        names = {who: f"new-{t}-{who}" for who in ("apple", "nearby")}
        ads = {who: Child(f"new-{t}-{who}", "h1", nearby, "advertise", names[who], TYPE, str(20000 + 2 * t + (who == "nearby")),
                          "--backend", "embedded", "--json") for who in ("apple", "nearby")}
        advertised = {who: ads[who].wait(lambda line: '"advertising"' in line, 30, "advertising") for who in ads}
        asked = time.monotonic()
        answers = asker.ask([(SERVERS[who], f"{names[who]}.{TYPE}.{ZONES[who]}", "SRV") for who in ("apple", "nearby")], timeout=10.0)
        trial = {"trial": t}
        for who, answer in zip(("apple", "nearby"), answers):
            srv = [row for row in answer.get("answer", []) if row[1] == "SRV"]
            trial[who] = {"elapsed_s": answer.get("elapsed"), "hit": bool(srv), "rcode": answer.get("rcode", answer.get("error")),
                          "since_advertising_s": asked - advertised[who] + (answer.get("elapsed") or 0)}
        trials.append(trial)
        for child in ads.values():
            child.stop()
        for child in ads.values():
            try:
                child.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                child.stop(signal.SIGKILL)
            children.remove(child)
        time.sleep(0.3)
    first_answer = {}
    for who in ("apple", "nearby"):
        hits = [tr[who]["elapsed_s"] for tr in trials if tr[who]["hit"]]
        misses = sum(1 for tr in trials if not tr[who]["hit"])
        first_answer[who] = summary(hits, misses)
        s = first_answer[who]
        if s["n"]:
            say(f"  {'Apple' if who == 'apple' else 'nearby':7} answered {s['n']}/{new_trials}, missed {misses}: median {fmt_ms(s['median_s'])}, "
                f"p95 {fmt_ms(s['p95_s'])}, min {fmt_ms(s['min_s'])}, max {fmt_ms(s['max_s'])}")
        else:
            say(f"  {'Apple' if who == 'apple' else 'nearby':7} answered 0/{new_trials}")
        empties = [tr[who]["elapsed_s"] for tr in trials if not tr[who]["hit"] and tr[who]["elapsed_s"]]
        if empties:
            say(f"          its empty answers took {', '.join(fmt_ms(e) for e in empties[:8])}")
    out["first_answer"] = {"trials": trials, "summary": first_answer}
    say()

    # (d)
    say(f"(d) DNS Push on port 853 ({PUSH_TYPE} PTR)")
    push = {}
    srv = asker.ask([(SERVERS[who], f"_dns-push-tls._tcp.{ZONES[who]}", "SRV") for who in ("apple", "nearby")], timeout=5)
    for who, answer in zip(("apple", "nearby"), srv):
        push[f"{who}_push_srv"] = answer.get("answer", [])
    seed = Child("push-0", "h1", nearby, "advertise", "push-0", PUSH_TYPE, "30000", "--backend", "embedded", "--json")
    seed.wait(lambda line: '"advertising"' in line, 30, "advertising")
    plain = {who: Child(f"dso-client-{who}", CLIENT, python, os.path.join(PEERS, "dso_client.py"), SERVERS[who], "853",
                        f"{PUSH_TYPE}.{ZONES[who]}", "PTR", "8") for who in ("apple", "nearby")}
    for child in plain.values():
        child.process.wait(timeout=30)
    compat = {}
    for who, child in plain.items():
        events = [v for _, v in child.json_lines()]
        keepalive = next((e for e in events if e.get("event") == "keepalive"), None)
        response = next((e for e in events if e.get("event") == "response" and e.get("id") == 2), None)
        adds = [e for e in events if e.get("event") == "add"]
        compat[who] = {"keepalive": keepalive, "subscribe_response": response, "adds": len(adds),
                       "errors": [e for e in events if e.get("event") == "error"]}
        ka = "no answer" if keepalive is None else f"rcode {keepalive['rcode']}, timeouts {keepalive['inactivity_ms']}/{keepalive['interval_ms']} ms"
        sub = "no answer in 8 s" if response is None else f"rcode {response['rcode']}"
        say(f"  dso_client.py as it is, {'Apple' if who == 'apple' else 'nearby':6}: Keepalive {ka}; SUBSCRIBE {sub}; records pushed {len(adds)}")
    push["dso_client_as_is"] = compat
    push["apple_push_srv_text"] = [canon(ZONES["apple"], r[3]) for r in push["apple_push_srv"]]
    say(f"  _dns-push-tls._tcp SRV: Apple {push['apple_push_srv_text'] or 'no records'}; "
        f"nearby {[canon(ZONES['nearby'], r[3]) for r in push['nearby_push_srv']] or 'no records'}")
    seed.stop()
    seed.process.wait(timeout=10)
    time.sleep(2)
    duration = push_services * (hold + 5) + 20
    subs = {who: Child(f"subscriber-{who}", CLIENT, python, me, "subscribe", SERVERS[who], "853", f"{PUSH_TYPE}.{ZONES[who]}", "PTR", str(duration))
            for who in ("apple", "nearby")}
    for who, child in subs.items():
        try:
            child.wait(lambda line: '"response"' in line, 10, "a SUBSCRIBE answer")
        except SystemExit as error:
            say(f"  {who}: {error}")
    for who, child in subs.items():
        events = [v for _, v in child.json_lines()]
        keepalive = next((e for e in events if e.get("event") == "keepalive"), None)
        response = next((e for e in events if e.get("event") == "response"), None)
        push[f"{who}_split_session"] = {"keepalive": keepalive, "subscribe_response": response}
        say(f"  split-write client, {'Apple' if who == 'apple' else 'nearby':6}: Keepalive answer "
            f"{'none' if keepalive is None else 'rcode %s, TLVs %s, timeouts %s/%s ms' % (keepalive['rcode'], keepalive.get('tlvs'), keepalive['inactivity_ms'], keepalive['interval_ms'])}; "
            f"SUBSCRIBE {'no answer' if response is None else 'rcode %s' % response['rcode']}")
    time.sleep(1)
    changes = []  # (kind, instance, time)
    for i in range(1, push_services + 1):
        name = f"push-{i}"
        child = Child(f"push-{i}", "h1", nearby, "advertise", name, PUSH_TYPE, str(30000 + i), "--backend", "embedded", "--json")
        changes.append(("add", name, child.wait(lambda line: '"advertising"' in line, 30, "advertising")))
        time.sleep(hold)
        child.stop()
        changes.append(("remove", name, time.monotonic()))
        child.process.wait(timeout=10)
        time.sleep(4)
    time.sleep(3)
    for child in subs.values():
        child.stop()
    timing = {}
    for who, child in subs.items():
        events = child.json_lines()
        delays = {"add": [], "remove": []}
        missed = {"add": 0, "remove": 0}
        for kind, name, at in changes:
            def matches(value, kind=kind, name=name):
                return value.get("event") == kind and value.get("data", "").split(".")[0].lower() == name.lower()
            seen = next((t for t, v in events if t >= at - 2 and matches(v)), None)
            if seen is None:
                missed[kind] += 1
            else:
                delays[kind].append(seen - at)
        expected = {f"{name}.{PUSH_TYPE}.{ZONES[who]}.".lower() for _, name, _ in changes}
        records = [v for _, v in events if v.get("event") in ("add", "remove")]
        # Negative: pushed before `nearby advertise` printed "advertising" (the line is the clock).
        timing[who] = {kind: summary([max(0.0, d) for d in delays[kind]], missed[kind]) for kind in delays}
        timing[who]["raw_signed_s"] = delays
        timing[who]["records"] = len(records)
        timing[who]["wrong_data"] = [v["data"] for v in records if v["data"].lower() not in expected]
        timing[who]["compressed_misread_by_dso_client"] = sum(1 for v in records if "data_read_from_tlv_start" in v)
        timing[who]["examples"] = records[:2]
        for kind, label in (("add", "arrivals"), ("remove", "goodbyes")):
            s = timing[who][kind]
            head = f"  pushed {label} ({'Apple' if who == 'apple' else 'nearby'}, split writes):"
            if s["n"]:
                say(f"{head:42} {s['n']}/{push_services}, missed {s['missed']}: median {fmt_ms(s['median_s'])}, p95 {fmt_ms(s['p95_s'])}, max {fmt_ms(s['max_s'])}")
            else:
                say(f"{head:42} 0/{push_services}")
        t = timing[who]
        misread = t["compressed_misread_by_dso_client"]
        say(f"    {t['records']} records pushed, {len(t['wrong_data'])} with other data than the instance's name"
            f"{'' if not misread else f'; {misread} use compression pointers that a reader counting from the TLV start would misread (e.g. ' + next(v['data_read_from_tlv_start'] for _, v in events if 'data_read_from_tlv_start' in v) + ')'}")
    push["timing"] = timing
    push["changes"] = [[kind, name, round(at, 3)] for kind, name, at in changes]
    out["push"] = push
    say()

    # (e)
    rss_end = {"apple": rss_mib(all_apple), "apple_mdnsd": rss_mib(apple_pids["mdnsd"]),
               "apple_dnssd_proxy": rss_mib(apple_pids["dnssd-proxy"]), "nearby": rss_mib(nearby_pids)}
    out["rss_mib"] = {"start": rss_start, "after_load": rss_load, "end": rss_end}
    say("(e) resident memory (MiB): Apple = mdnsd + dnssd-proxy")
    for label, values in (("after start", rss_start), ("after dnsperf", rss_load), ("at the end", rss_end)):
        say(f"  {label:14} Apple {values['apple']:.1f} ({values['apple_mdnsd']:.1f} + {values['apple_dnssd_proxy']:.1f}); nearby {values['nearby']:.1f}")
    asker.close()
    nearbyp.stop()
    try:
        nearbyp.process.wait(timeout=15)
    except subprocess.TimeoutExpired:
        pass
    stopped = next((v for _, v in nearbyp.json_lines() if v.get("event") == "stopped"), {})
    out["nearby_counts"] = stopped
    with open(os.path.join(ROOT, ".build", "bench", "apple-proxy.json"), "w") as f:
        json.dump(out, f, indent=1)
    say(f"\nraw values: .build/bench/apple-proxy.json; logs: .build/bench/apple-proxy-logs/")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "ask":
        sys.exit(ask_main())
    if len(sys.argv) > 1 and sys.argv[1] == "subscribe":
        sys.exit(subscribe_main(sys.argv[2:]))
    main()
