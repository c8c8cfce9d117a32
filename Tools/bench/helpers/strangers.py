#!/usr/bin/env python3
"""The parts of Tools/bench/strangers that run inside the lab (and its sampler and report).

  strangers.py attack --host H --port P --kind tls|ssh --seconds S [--idle N] [--half N]
                      [--loops N] [--sources A-B] [--half-bytes N] [--cert PEM] [--ssh-key KEY]
                      [--fresh-keys] [--tls-loops PROGRAM]
      The strangers, from one host: N idle TCP connections (connect, then send nothing; read
      and discard whatever the server says) and N half-sent hellos (TLS: the first --half-bytes
      bytes of a real TLS 1.3 ClientHello record made by this Python's OpenSSL; SSH: a complete
      client banner line, then the first --half-bytes bytes of a real-shaped SSH_MSG_KEXINIT
      packet), each re-opened 0.1-0.3 s after the server closes it or a connect fails (a connect
      that has not completed in 5 s is given up and tried again), until S seconds are over;
      plus --loops threads that complete handshakes as fast as they can (TLS: a full TLS 1.3
      handshake with a self-signed certificate the server has not pinned, then a read of up to
      5 s for the server's verdict; SSH: `ssh -i KEY` with a key the server does not know,
      BatchMode, so one key exchange and one refused public-key login per run). With
      --fresh-keys every one of those handshakes has an identity of its own, made just before
      it (TLS: a new P-256 key and a self-signed certificate for it; SSH: a new ed25519 key
      from ssh-keygen), as an attacker who wants to cost the server most would do; without
      it, every handshake shows the same one (--cert, --ssh-key). TLS loops run in
      --tls-loops PROGRAM (Tools/bench/helpers/tls_strangers.c, built), whose own cost per handshake is
      a fraction of Python's, else in Python threads (--cert only). Every socket is bound to
      the next of the --sources addresses in turn. At the end everything is closed and one
      JSON object is printed.
  strangers.py peer --attempts N [--every S] --timeout T [--expect TEXT] -- CMD...
      Runs CMD (stdin /dev/null) N times: one after another (--every 0), or the i-th started at
      i*S seconds whether or not the ones before have ended. An attempt succeeds when CMD exits
      0 within T seconds (and its stdout has TEXT); CMD should give up by itself at T (it is
      killed at T+2). Prints one JSON object.
  strangers.py sample --pid PID --port P --out FILE --stop FILE [--interval S] [--max-seconds S]
      Every S seconds, one JSON line about PID (seen from the root namespace): VmRSS, open
      descriptors, descendants and their total PSS, CPU time (own + reaped children), and from its
      namespace's /proc/PID/net/tcp{,6}: established connections and SYN_RECV on port P, and
      the listening socket's accept queue. Ends when FILE exists, PID is gone or after
      --max-seconds.
  strangers.py listening --pid PID --port P [--timeout S]
      Waits until PID's namespace has a listening socket on port P.
  strangers.py report DIR...
      The table, from the files bench/strangers left in each DIR (one per server).
"""
import argparse
import asyncio
import errno
import json
import os
import random
import resource
import socket
import ssl
import statistics
import struct
import subprocess
import sys
import threading
import time

TICKS = os.sysconf("SC_CLK_TCK")
CONNECT_TIMEOUT = 5.0  # a TCP connect not done by then is given up and tried again
REOPEN_PAUSE = 0.2  # seconds between a slot's connection ending and its next connect (on average)
VERDICT_WAIT = 5.0  # seconds to wait for the server's answer after a completed TLS handshake


# ---------------------------------------------------------------------------- attack


def pause():
    """REOPEN_PAUSE, give or take half of it: slots closed at once do not all come back at once."""
    return random.uniform(0.5 * REOPEN_PAUSE, 1.5 * REOPEN_PAUSE)


def address_range(spec):
    """'198.18.1.50-198.18.1.249' or 'a,b,c' -> list of addresses."""
    if "-" in spec and "," not in spec and ":" not in spec:
        first, last = spec.split("-")
        a = struct.unpack("!I", socket.inet_aton(first))[0]
        b = struct.unpack("!I", socket.inet_aton(last))[0]
        return [socket.inet_ntoa(struct.pack("!I", n)) for n in range(a, b + 1)]
    return [s for s in spec.split(",") if s]


def error_name(error):
    if isinstance(error, (asyncio.TimeoutError, TimeoutError, socket.timeout)):
        return "timeout"
    if isinstance(error, ssl.SSLError):
        return "TLS " + (error.reason or type(error).__name__)
    if isinstance(error, OSError) and error.errno:
        return errno.errorcode.get(error.errno, str(error.errno))
    return type(error).__name__


def tls_context(cert):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE  # we do not judge the server: we are here to be judged
    ctx.minimum_version = ssl.TLSVersion.TLSv1_3
    if cert:
        ctx.load_cert_chain(cert)
    return ctx


def client_hello(cert):
    """A real TLS 1.3 ClientHello record, as this OpenSSL sends it first."""
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    tls = tls_context(cert).wrap_bio(incoming, outgoing, server_side=False)
    try:
        tls.do_handshake()
    except ssl.SSLWantReadError:
        pass
    hello = outgoing.read()
    assert hello[:1] == b"\x16", "not a TLS handshake record"
    return hello


SSH_BANNER = b"SSH-2.0-OpenSSH_9.2p1 Debian-2+deb12u10\r\n"


def ssh_kexinit():
    """An SSH_MSG_KEXINIT binary packet (RFC 4253 7.1) with OpenSSH 9.2's client algorithm lists."""
    lists = [
        "sntrup761x25519-sha512@openssh.com,curve25519-sha256,curve25519-sha256@libssh.org,"
        "ecdh-sha2-nistp256,ecdh-sha2-nistp384,ecdh-sha2-nistp521,diffie-hellman-group-exchange-sha256,"
        "diffie-hellman-group16-sha512,diffie-hellman-group18-sha512,diffie-hellman-group14-sha256,ext-info-c",
        "ssh-ed25519-cert-v01@openssh.com,ecdsa-sha2-nistp256-cert-v01@openssh.com,ssh-ed25519,"
        "ecdsa-sha2-nistp256,rsa-sha2-512,rsa-sha2-256",
    ]
    ciphers = "chacha20-poly1305@openssh.com,aes128-ctr,aes192-ctr,aes256-ctr,aes128-gcm@openssh.com,aes256-gcm@openssh.com"
    macs = "umac-64-etm@openssh.com,umac-128-etm@openssh.com,hmac-sha2-256-etm@openssh.com,hmac-sha2-512-etm@openssh.com,hmac-sha1-etm@openssh.com"
    lists += [ciphers, ciphers, macs, macs, "none,zlib@openssh.com", "none,zlib@openssh.com", "", ""]
    payload = bytes([20]) + os.urandom(16)
    for item in lists:
        payload += struct.pack("!I", len(item)) + item.encode()
    payload += b"\x00" + struct.pack("!I", 0)  # first_kex_packet_follows, reserved
    padding = 8 - (5 + len(payload)) % 8
    if padding < 4:
        padding += 8
    return struct.pack("!IB", 1 + len(payload) + padding, padding) + payload + os.urandom(padding)


class Attack:
    def __init__(self, args):
        self.args = args
        self.sources = address_range(args.sources) if args.sources else [None]
        self.next_source = 0
        self.lock = threading.Lock()
        self.opened = {"idle": 0, "half": 0}
        self.closed_by_server = {"idle": 0, "half": 0}
        self.connect_errors = {}
        self.open_now = 0
        self.peak_open = 0
        self.peak_at = None
        self.full_at = None
        self.bytes_received = 0
        self.series = []
        self.handshakes = {"attempted": 0, "completed": 0, "outcomes": {}, "examples": {}}
        self.keys_made = 0  # --fresh-keys: identities made, one per handshake

    def source(self):
        with self.lock:
            address = self.sources[self.next_source % len(self.sources)]
            self.next_source += 1
        return address

    def count(self, table, key, example=None):
        with self.lock:
            table[key] = table.get(key, 0) + 1
            if example is not None:
                self.handshakes["examples"].setdefault(key, example[:300])

    # -- idle and half-sent connections, in one asyncio loop

    async def slot(self, kind, payload, deadline):
        loop = asyncio.get_running_loop()
        host, port = self.args.host, self.args.port
        while (left := deadline - loop.time()) > 0:
            source = self.source()
            try:
                reader, writer = await asyncio.wait_for(
                    asyncio.open_connection(host, port, local_addr=(source, 0) if source else None),
                    min(CONNECT_TIMEOUT, left))
            except Exception as error:  # noqa: BLE001 - every failure is counted, then tried again
                self.count(self.connect_errors, error_name(error))
                if not isinstance(error, asyncio.TimeoutError):
                    await asyncio.sleep(min(pause(), max(0.0, deadline - loop.time())))
                continue
            self.opened[kind] += 1
            self.open_now += 1
            if self.open_now > self.peak_open:
                self.peak_open = self.open_now
                self.peak_at = round(loop.time() - self.started, 2)
            if self.full_at is None and self.open_now >= self.args.idle + self.args.half:
                self.full_at = round(loop.time() - self.started, 2)
            try:
                if payload:
                    writer.write(payload)
                while (left := deadline - loop.time()) > 0:
                    data = await asyncio.wait_for(reader.read(4096), left)
                    if not data:
                        self.closed_by_server[kind] += 1
                        break
                    self.bytes_received += len(data)
            except asyncio.TimeoutError:
                pass  # the attack is over: ours to close
            except OSError:
                self.closed_by_server[kind] += 1
            finally:
                self.open_now -= 1
                writer.transport.abort()
            await asyncio.sleep(min(pause(), max(0.0, deadline - loop.time())))

    async def watch(self, deadline):
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(1)
            if loop.time() >= deadline:
                return
            self.series.append(self.open_now)

    async def connections(self, payload):
        loop = asyncio.get_running_loop()
        loop.set_exception_handler(lambda loop, context: None)  # counted, not logged
        self.started = loop.time()
        deadline = self.started + self.args.seconds
        tasks = [asyncio.create_task(self.slot("idle", b"", deadline)) for _ in range(self.args.idle)]
        tasks += [asyncio.create_task(self.slot("half", payload, deadline)) for _ in range(self.args.half)]
        tasks.append(asyncio.create_task(self.watch(deadline)))
        await asyncio.gather(*tasks)

    # -- handshake loops, one thread each

    def tls_program(self, seconds):
        """The TLS loops in Tools/bench/helpers/tls_strangers.c: its counts become ours."""
        args = self.args
        first, count = self.sources[0], len(self.sources)
        command = [args.tls_loops, args.host, str(args.port), str(seconds), str(args.loops), first, str(count),
                   str(int(VERDICT_WAIT * 1000)), "fresh" if args.fresh_keys else args.cert]
        done = subprocess.run(command, stdin=subprocess.DEVNULL, capture_output=True, text=True)
        try:
            counts = json.loads(done.stdout)
        except ValueError:
            # A thread's exception would vanish: say it where the bench shows the attacker's log.
            why = f"{args.tls_loops} failed (exit {done.returncode}): {done.stderr.strip()[-500:]}"
            print(f"strangers.py: {why}", file=sys.stderr)
            self.count(self.handshakes["outcomes"], "the loops did not run", why)
            return
        with self.lock:
            self.handshakes["attempted"] += counts["attempted"]
            self.handshakes["completed"] += counts["completed"]
            self.keys_made += counts["keys_made"]
            for outcome, n in counts["outcomes"].items():
                self.handshakes["outcomes"][outcome] = self.handshakes["outcomes"].get(outcome, 0) + n

    def tls_loop(self, deadline, context):
        host, port = self.args.host, self.args.port
        while time.monotonic() < deadline:
            source = self.source()
            with self.lock:
                self.handshakes["attempted"] += 1
            try:
                raw = socket.create_connection((host, port), timeout=CONNECT_TIMEOUT,
                                               source_address=(source, 0) if source else None)
            except OSError as error:
                self.count(self.handshakes["outcomes"], "TCP connect failed: " + error_name(error), str(error))
                time.sleep(pause())
                continue
            try:
                raw.settimeout(10)
                tls = context.wrap_socket(raw, server_side=False)
            except (OSError, ssl.SSLError) as error:
                self.count(self.handshakes["outcomes"], "handshake failed: " + error_name(error), str(error))
                raw.close()
                continue
            with self.lock:
                self.handshakes["completed"] += 1
            try:
                tls.settimeout(VERDICT_WAIT)
                data = tls.recv(1)
                outcome = "handshake done, server said something" if data else "handshake done, then closed (EOF)"
                self.count(self.handshakes["outcomes"], outcome)
            except (OSError, ssl.SSLError) as error:
                self.count(self.handshakes["outcomes"], "handshake done, then refused: " + error_name(error), str(error))
            finally:
                tls.close()

    def ssh_loop(self, deadline, loop):
        host, port = self.args.host, self.args.port
        key = self.args.ssh_key
        while time.monotonic() < deadline:
            if self.args.fresh_keys:
                key = os.path.join(self.args.key_dir, f"fresh-ssh-{os.getpid()}-{loop}")
                for old in (key, key + ".pub"):
                    if os.path.exists(old):
                        os.unlink(old)
                subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "stranger", "-f", key],
                               stdin=subprocess.DEVNULL, capture_output=True, check=True)
                with self.lock:
                    self.keys_made += 1
            source = self.source()
            with self.lock:
                self.handshakes["attempted"] += 1
            command = ["ssh", "-F", "/dev/null", "-i", key, "-o", "IdentitiesOnly=yes",
                       "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
                       "-o", "ConnectTimeout=10", "-p", str(port)]
            if source:
                command += ["-o", f"BindAddress={source}"]
            command += [f"root@{host}", "true"]
            try:
                done = subprocess.run(command, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                                      timeout=max(1.0, min(15.0, deadline - time.monotonic() + 5)))
            except subprocess.TimeoutExpired:
                self.count(self.handshakes["outcomes"], "timeout")
                continue
            text = done.stderr.strip().replace("Warning: Permanently added", "").strip()
            if "Permission denied" in text:
                with self.lock:
                    self.handshakes["completed"] += 1
                self.count(self.handshakes["outcomes"], "key exchange done, then login refused (Permission denied)", text)
            elif done.returncode == 0:
                self.count(self.handshakes["outcomes"], "logged in (?!)")
            elif "kex_exchange_identification" in text or "banner exchange" in text:
                self.count(self.handshakes["outcomes"], "dropped before key exchange", text)
            elif "Connection reset" in text or "Connection closed" in text:
                self.count(self.handshakes["outcomes"], "closed during key exchange", text)
            elif "timed out" in text:
                self.count(self.handshakes["outcomes"], "TCP connect timed out", text)
            else:
                self.count(self.handshakes["outcomes"], f"other (ssh exit {done.returncode})", text)

    def run(self):
        args = self.args
        hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        if args.kind == "tls":
            hello = client_hello(args.cert)  # the certificate is not in a ClientHello: any will do
            payload = hello[:args.half_bytes]
            hello_note = {"client_hello_bytes": len(hello), "half_sent_bytes": len(payload),
                          "half_sent_hex_start": payload[:16].hex()}
            if args.tls_loops and args.loops and (self.sources[0] is None or
                                                  address_range(f"{self.sources[0]}-{self.sources[-1]}") != self.sources):
                sys.exit("strangers.py: --tls-loops needs --sources as one range of IPv4 addresses (A-B)")
            if args.tls_loops:
                loop_targets = [lambda: self.tls_program(args.seconds)] if args.loops else []
            else:
                context = tls_context(args.cert)
                loop_targets = [lambda: self.tls_loop(deadline, context)] * args.loops
        else:
            kexinit = ssh_kexinit()
            payload = SSH_BANNER + kexinit[:args.half_bytes]
            hello_note = {"banner": SSH_BANNER.decode().strip(), "kexinit_bytes": len(kexinit),
                          "half_sent_bytes": len(payload), "kexinit_bytes_sent": len(kexinit[:args.half_bytes])}
            loop_targets = [(lambda i=i: self.ssh_loop(deadline, i)) for i in range(args.loops)]
        start_cpu = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
        wall = time.monotonic()
        deadline = wall + args.seconds
        threads = [threading.Thread(target=target, daemon=True) for target in loop_targets]
        for thread in threads:
            thread.start()
        asyncio.run(self.connections(payload))
        for thread in threads:
            thread.join(timeout=30)
        wall = time.monotonic() - wall
        end_cpu = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = sum(e.ru_utime + e.ru_stime - (s.ru_utime + s.ru_stime) for s, e in zip(start_cpu, end_cpu))
        print(json.dumps({
            "kind": args.kind, "seconds": round(wall, 1), "idle_slots": args.idle, "half_slots": args.half,
            "loops": args.loops, "sources": len(self.sources),
            "opened": self.opened, "opened_total": sum(self.opened.values()),
            "closed_by_server": self.closed_by_server, "connect_errors": self.connect_errors,
            "peak_open": self.peak_open, "peak_at_s": self.peak_at, "all_open_at_s": self.full_at,
            "open_each_second": self.series, "bytes_received": self.bytes_received,
            "handshakes": self.handshakes, "fresh_keys": bool(args.fresh_keys), "keys_made": self.keys_made,
            "cpu_seconds": round(cpu, 1), **hello_note,
        }))


# ---------------------------------------------------------------------------- pinned peer


async def attempt(command, timeout, expect):
    started = time.monotonic()
    process = await asyncio.create_subprocess_exec(*command, stdin=subprocess.DEVNULL,
                                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        # CMD has its own timeout (nearby connect --timeout, ssh ConnectTimeout): give it the
        # chance to say why it gave up, and kill it only if it has not 2 s later.
        out, err = await asyncio.wait_for(process.communicate(), timeout + 2)
    except asyncio.TimeoutError:
        process.kill()
        await process.wait()
        return {"ok": False, "seconds": round(time.monotonic() - started, 3), "why": f"still running after {timeout + 2:g} s (killed)"}
    seconds = round(time.monotonic() - started, 3)
    text = out.decode(errors="replace")
    if process.returncode == 0 and (not expect or expect in text):
        if seconds <= timeout:
            return {"ok": True, "seconds": seconds}
        return {"ok": False, "seconds": seconds, "why": f"got in, but after the {timeout:g} s timeout"}
    lines = [line for line in (err.decode(errors="replace") + text).splitlines()
             if line.strip() and not line.startswith("Warning: Permanently added")]
    return {"ok": False, "seconds": seconds, "why": f"exit {process.returncode}: " + (lines[-1][:200] if lines else "(no output)")}


async def peer_main(args):
    started = time.monotonic()
    if args.every <= 0:
        results = [await attempt(args.cmd, args.timeout, args.expect) for _ in range(args.attempts)]
    else:
        async def at(i):
            await asyncio.sleep(max(0.0, started + i * args.every - time.monotonic()))
            result = await attempt(args.cmd, args.timeout, args.expect)
            result["started_s"] = round(i * args.every, 2)
            return result
        results = await asyncio.gather(*(at(i) for i in range(args.attempts)))
    print(json.dumps({"attempts": len(results), "ok": sum(r["ok"] for r in results), "timeout": args.timeout,
                      "results": results}))


# ---------------------------------------------------------------------------- sampler


def status_kib(pid, field="VmRSS"):
    try:
        for line in open(f"/proc/{pid}/status"):
            if line.startswith(field + ":"):
                return int(line.split()[1])
    except OSError:
        return None
    return 0


def pss_kib(pid):
    """Proportional set size: shared pages split among the processes that share them."""
    try:
        for line in open(f"/proc/{pid}/smaps_rollup"):
            if line.startswith("Pss:"):
                return int(line.split()[1])
    except OSError:
        return None
    return 0


def descendants(pid):
    parents = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = open(f"/proc/{entry}/stat").read()
            except OSError:
                continue
            parents.setdefault(int(stat.rsplit(")", 1)[1].split()[1]), []).append(int(entry))
    found, todo = [], [pid]
    while todo:
        for child in parents.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def cpu_seconds(pid):
    try:
        fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return sum(int(f) for f in fields[11:15]) / TICKS  # utime stime cutime cstime


def sockets(pid, port):
    """(established, syn_recv, accept_queue) for local port PORT in PID's network namespace."""
    established = syn_recv = queue = 0
    for name in ("tcp", "tcp6"):
        try:
            lines = open(f"/proc/{pid}/net/{name}").read().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if int(fields[1].rsplit(":", 1)[1], 16) != port:
                continue
            state = fields[3]
            if state == "01":
                established += 1
            elif state == "03":
                syn_recv += 1
            elif state == "0A":
                queue += int(fields[4].split(":")[1], 16)
    return established, syn_recv, queue


LISTEN_COUNTERS = ("ListenOverflows", "ListenDrops", "SyncookiesSent", "SyncookiesRecv", "TCPReqQFullDrop")


def listen_counters(pid):
    """The kernel's counters of PID's namespace for a full listen queue (all ports): SYNs dropped
    for a full accept queue (ListenOverflows, ListenDrops), answered with a SYN cookie because the
    SYN queue was full, dropped because it was full and cookies are off (TCPReqQFullDrop)."""
    try:
        lines = [line.split() for line in open(f"/proc/{pid}/net/netstat") if line.startswith("TcpExt:")]
    except OSError:
        return {}
    if len(lines) < 2:
        return {}
    values = dict(zip(lines[0][1:], lines[1][1:]))
    return {name: int(values[name]) for name in LISTEN_COUNTERS if name in values}


def listening(pid, port):
    for name in ("tcp", "tcp6"):
        try:
            for line in open(f"/proc/{pid}/net/{name}").read().splitlines()[1:]:
                fields = line.split()
                if fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) == port:
                    return True
        except OSError:
            pass
    return False


def sample_once(pid, port):
    rss = status_kib(pid)
    if rss is None or not os.path.exists(f"/proc/{pid}/fd"):
        return {"t": time.time(), "alive": False}
    try:
        fds = len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        fds = None
    children = descendants(pid)
    children_pss = sum(pss_kib(c) or 0 for c in children)
    established, syn_recv, queue = sockets(pid, port)
    return {"t": time.time(), "alive": True, "rss_kib": rss, "fds": fds, "children": len(children),
            "children_pss_kib": children_pss, "cpu_s": cpu_seconds(pid), "established": established,
            "syn_recv": syn_recv, "accept_queue": queue, "kernel": listen_counters(pid)}


def sample_main(args):
    end = time.monotonic() + args.max_seconds
    with open(args.out, "a") as out:
        while time.monotonic() < end:
            row = sample_once(args.pid, args.port)
            out.write(json.dumps(row) + "\n")
            out.flush()
            if not row["alive"] or os.path.exists(args.stop):
                return
            time.sleep(args.interval)


# ---------------------------------------------------------------------------- report


def load(path, default=None):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return default


def quantile(values, q):
    values = sorted(values)
    if not values:
        return None
    index = min(len(values) - 1, max(0, int(round(q * (len(values) - 1)))))
    return values[index]


def peer_figures(peer):
    """ok/attempts, median and p95 (a failure counts as the timeout), median of successes."""
    if not peer or not peer.get("results"):
        return None
    results = peer["results"]
    timeout = peer["timeout"]
    counted = [r["seconds"] if r["ok"] else timeout for r in results]
    good = [r["seconds"] for r in results if r["ok"]]
    whys = {}
    for r in results:
        if not r["ok"]:
            whys[r["why"]] = whys.get(r["why"], 0) + 1
    return {"ok": peer["ok"], "attempts": peer["attempts"], "timeout": timeout, "median": statistics.median(counted),
            "p95": quantile(counted, 0.95), "median_ok": statistics.median(good) if good else None, "whys": whys}


def load_timeout(column):
    return column["during"]["timeout"]


def report_main(args):
    columns = []
    for directory in args.dirs:
        meta = load(os.path.join(directory, "meta.json"), {})
        samples = []
        try:
            samples = [json.loads(line) for line in open(os.path.join(directory, "samples.jsonl")) if line.strip()]
        except OSError:
            pass
        start, stop = meta.get("attack_start", 0), meta.get("attack_end", 0)
        alive = [s for s in samples if s.get("alive")]
        before = [s for s in alive if s["t"] < start]
        during = [s for s in alive if start <= s["t"] <= stop]
        after = [s for s in alive if s["t"] > stop]
        columns.append({
            "meta": meta, "alone": peer_figures(load(os.path.join(directory, "alone.json"))),
            "during": peer_figures(load(os.path.join(directory, "during.json"))),
            "after": peer_figures(load(os.path.join(directory, "after.json"))),
            "attack": load(os.path.join(directory, "attack.json"), {}),
            "before": before[-1] if before else None, "after_sample": after[-1] if after else None,
            "during_samples": during, "died": any(not s.get("alive") for s in samples),
            "samples": samples,
        })
    if not columns:
        return

    def fmt_s(value):
        return "-" if value is None else f"{value:.3f}"

    def peak(col, key):
        values = [s[key] for s in col["during_samples"] if s.get(key) is not None]
        return max(values) if values else None

    def mib(kib):
        return "-" if kib is None else f"{kib / 1024:.1f}"

    width = 38
    names = [c["meta"].get("label", "?") for c in columns]
    colw = max(24, *(len(n) + 2 for n in names))
    rows = []

    def row(title, values):
        rows.append(f"{title:<{width}}" + "".join(f"{v:>{colw}}" for v in values))

    row("", names)
    for phase, title in (("alone", "pinned peer alone"), ("during", "pinned peer under attack"), ("after", "pinned peer after (+10 s)")):
        figures = [c[phase] for c in columns]
        row(f"{title}: ok/attempts", [f"{f['ok']}/{f['attempts']}" if f else "-" for f in figures])
        row("  median / p95 (s)", [f"{fmt_s(f['median'])} / {fmt_s(f['p95'])}" if f else "-" for f in figures])
        row("  median of successes (s)", [fmt_s(f["median_ok"]) if f else "-" for f in figures])
    ratios = []
    for c in columns:
        if c["alone"] and c["during"] and c["alone"]["median"]:
            # A median that is a failure is the timeout, a floor of what it would have taken.
            floor = ">=" if c["during"]["median"] >= load_timeout(c) else ""
            ratios.append(f"{floor}{c['during']['median'] / c['alone']['median']:.1f}x")
        else:
            ratios.append("-")
    row("median ratio attack/alone", ratios)
    row("server RSS MiB before/peak/after", [
        f"{mib(c['before'] and c['before']['rss_kib'])} / {mib(peak(c, 'rss_kib'))} / {mib(c['after_sample'] and c['after_sample']['rss_kib'])}"
        for c in columns])
    row("server fds before/peak/after", [
        f"{(c['before'] or {}).get('fds', '-')} / {peak(c, 'fds') if peak(c, 'fds') is not None else '-'} / {(c['after_sample'] or {}).get('fds', '-')}"
        for c in columns])
    row("  descriptor limit soft/hard", [c["meta"].get("nofile", "-") for c in columns])
    row("child processes before/peak/after", [
        f"{(c['before'] or {}).get('children', '-')} / {peak(c, 'children') if peak(c, 'children') is not None else '-'} / {(c['after_sample'] or {}).get('children', '-')}"
        for c in columns])
    row("  their PSS MiB, total (peak)", [mib(peak(c, "children_pss_kib")) for c in columns])
    cpu = []
    for c in columns:
        during = [s["cpu_s"] for s in c["during_samples"] if s.get("cpu_s") is not None]
        cpu.append(f"{during[-1] - c['before']['cpu_s']:.1f}" if during and c["before"] else "-")
    row("server CPU s during attack", cpu)
    row("TCP established at port (peak)", [str(peak(c, "established") or 0) for c in columns])
    row("  SYN_RECV (peak)", [str(peak(c, "syn_recv") or 0) for c in columns])
    row("  accept queue (peak)", [str(peak(c, "accept_queue") or 0) for c in columns])
    row("  listen backlog (ss Send-Q)", [c["meta"].get("backlog", "-") for c in columns])

    def kernel_delta(c, name):
        """How much a kernel counter grew from the last sample before the attack to the last during it."""
        first = (c["before"] or {}).get("kernel", {}).get(name)
        last = ([s.get("kernel", {}).get(name) for s in c["during_samples"] if s.get("kernel")] or [None])[-1]
        return "-" if first is None or last is None else str(last - first)
    row("  SYNs dropped, accept queue full", [kernel_delta(c, "ListenOverflows") for c in columns])
    row("  SYN cookies sent / SYN queue drops", [f"{kernel_delta(c, 'SyncookiesSent')} / {kernel_delta(c, 'TCPReqQFullDrop')}" for c in columns])
    row("attacker: open at peak", [f"{c['attack'].get('peak_open', '-')} of {c['attack'].get('idle_slots', 0) + c['attack'].get('half_slots', 0)}" for c in columns])
    row("  open, median of 1 s samples", [str(int(statistics.median(c["attack"]["open_each_second"]))) if c["attack"].get("open_each_second") else "-" for c in columns])
    row("  all open after (s)", [str(c["attack"].get("all_open_at_s")) if c["attack"].get("all_open_at_s") is not None else "never" for c in columns])
    row("  TCP connections made", [str(c["attack"].get("opened_total", "-")) for c in columns])
    row("  closed by the server", [str(sum(c["attack"].get("closed_by_server", {}).values())) for c in columns])
    row("  connects failed/timed out", [str(sum(c["attack"].get("connect_errors", {}).values())) for c in columns])
    row("  handshakes tried/completed", [
        f"{c['attack'].get('handshakes', {}).get('attempted', '-')} / {c['attack'].get('handshakes', {}).get('completed', '-')}" for c in columns])
    row("  identities used by the handshakes", [
        (f"{c['attack'].get('keys_made', 0)} (one each)" if c["attack"].get("fresh_keys") else "1") if c["attack"] else "-"
        for c in columns])
    row("  attacker CPU s", [str(c["attack"].get("cpu_seconds", "-")) for c in columns])
    row("server alive at the end", ["no (died)" if c["died"] else "yes" for c in columns])
    print("\n".join(rows))
    print()
    for c in columns:
        label = c["meta"].get("label", "?")
        attack = c["attack"]
        print(f"{label}:")
        for phase in ("alone", "during", "after"):
            f = c[phase]
            if f and f["whys"]:
                for why, n in sorted(f["whys"].items(), key=lambda kv: -kv[1]):
                    print(f"  peer {phase} failed {n}x: {why}")
        if attack:
            print(f"  attacker connect errors: {json.dumps(attack.get('connect_errors', {}))}")
            print(f"  attacker connections closed by the server: {json.dumps(attack.get('closed_by_server', {}))}")
            for outcome, n in sorted(attack.get("handshakes", {}).get("outcomes", {}).items(), key=lambda kv: -kv[1]):
                example = attack["handshakes"].get("examples", {}).get(outcome)
                print(f"  handshake loop: {n} x {outcome}" + (f"  [e.g. {example.splitlines()[-1][:120]}]" if example else ""))
            print(f"  attacker open connections, each second: {attack.get('open_each_second')}")
        else:
            print("  (no attacker summary: see attack.log)")
    if args.json:
        for c in columns:
            print(json.dumps({"server": c["meta"].get("label"), "meta": c["meta"], "alone": c["alone"], "during": c["during"],
                              "after": c["after"], "before_sample": c["before"], "after_sample": c["after_sample"],
                              "peak": {k: peak(c, k) for k in ("rss_kib", "fds", "children", "children_pss_kib", "established", "syn_recv", "accept_queue")},
                              "attack": {k: v for k, v in c["attack"].items() if k != "open_each_second"}}))


# ---------------------------------------------------------------------------- main


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    a = sub.add_parser("attack")
    a.add_argument("--host", required=True)
    a.add_argument("--port", type=int, required=True)
    a.add_argument("--kind", choices=["tls", "ssh"], required=True)
    a.add_argument("--seconds", type=float, required=True)
    a.add_argument("--idle", type=int, default=2000)
    a.add_argument("--half", type=int, default=500)
    a.add_argument("--loops", type=int, default=4)
    a.add_argument("--sources", default="")
    a.add_argument("--half-bytes", type=int, default=64)
    a.add_argument("--cert", help="PEM with a certificate and its key (tls)")
    a.add_argument("--ssh-key", help="a private key the server does not know (ssh)")
    a.add_argument("--fresh-keys", action="store_true",
                   help="a new identity (TLS: P-256 key and self-signed certificate; SSH: ed25519 key) for every handshake")
    a.add_argument("--key-dir", default=os.environ.get("TMPDIR", "/tmp"), help="where --fresh-keys writes ssh keys")
    a.add_argument("--tls-loops", help="the built Tools/bench/helpers/tls_strangers.c, to run the TLS handshake loops")
    p = sub.add_parser("peer")
    p.add_argument("--attempts", type=int, required=True)
    p.add_argument("--every", type=float, default=0)
    p.add_argument("--timeout", type=float, required=True)
    p.add_argument("--expect", default="")
    p.add_argument("cmd", nargs=argparse.REMAINDER)
    s = sub.add_parser("sample")
    s.add_argument("--pid", type=int, required=True)
    s.add_argument("--port", type=int, required=True)
    s.add_argument("--out", required=True)
    s.add_argument("--stop", required=True)
    s.add_argument("--interval", type=float, default=0.5)
    s.add_argument("--max-seconds", type=float, default=600)
    w = sub.add_parser("listening")
    w.add_argument("--pid", type=int, required=True)
    w.add_argument("--port", type=int, required=True)
    w.add_argument("--timeout", type=float, default=30)
    r = sub.add_parser("report")
    r.add_argument("--json", action="store_true")
    r.add_argument("dirs", nargs="+")
    args = parser.parse_args()
    if args.command == "attack":
        if args.loops and not args.fresh_keys and not (args.ssh_key if args.kind == "ssh" else args.cert):
            parser.error("attack: handshake loops need --fresh-keys, or one identity (--cert for tls, --ssh-key for ssh)")
        if args.loops and args.kind == "tls" and args.fresh_keys and not args.tls_loops:
            parser.error("attack: --fresh-keys for tls needs --tls-loops (Python's ssl makes no keys)")
        Attack(args).run()
    elif args.command == "peer":
        args.cmd = args.cmd[1:] if args.cmd[:1] == ["--"] else args.cmd
        if not args.cmd:
            parser.error("peer: no command after --")
        asyncio.run(peer_main(args))
    elif args.command == "sample":
        sample_main(args)
    elif args.command == "listening":
        end = time.monotonic() + args.timeout
        while time.monotonic() < end:
            if listening(args.pid, args.port):
                return
            if not os.path.exists(f"/proc/{args.pid}"):
                sys.exit(f"strangers.py: process {args.pid} is gone")
            time.sleep(0.1)
        sys.exit(f"strangers.py: nothing listens on port {args.port} after {args.timeout:g} s")
    elif args.command == "report":
        report_main(args)


if __name__ == "__main__":
    main()
