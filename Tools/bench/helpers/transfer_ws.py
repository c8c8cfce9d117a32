#!/usr/bin/env python3
"""The Python peer of Tools/bench/transfer: one file over WebSockets (the `websockets` package)
and Python's ssl, mutual TLS 1.3, in binary frames, written independently of Nearby.

  transfer_ws.py receive --host ADDR [--port P] --out FILE --identity PEM --trust PEM [--fsync]
      listens on ADDR:P (0: any free port), prints {"event":"listening","port":P}, takes one
      connection (the client certificate must chain to --trust), writes every binary frame to
      FILE while hashing it with SHA-256, and on the sender's closing text message
      {"end":true,"size":N,"sha256":H} answers {"ok":true|false,...}; --fsync: FILE goes to
      the disk before the answer (as Nearby's receiver does before it renames NAME.part).
      Prints {"event":"done","bytes":N,"sha256":H,"seconds":S,"ok":B} and exits (0 when ok).
  transfer_ws.py send URL --file FILE --identity PEM --trust PEM [--frame BYTES]
      reads FILE in frames of --frame bytes (default 65536, the size of Nearby's DATA frames),
      hashing as it reads, sends each as one binary frame, then the closing text message, and
      waits for the receiver's answer. Prints {"event":"done","bytes":N,"sha256":H,
      "seconds":S,"rate":B_PER_S,"ok":B} and exits 0 when the receiver got the same bytes.

--identity: a PEM file with a certificate and its private key; --trust: the peer's certificate
(a self-signed leaf is its own anchor). No compression (compression=None); seconds run from
the first frame to the receiver's answer (sender) or to the last byte written (receiver).
"""
import argparse
import asyncio
import hashlib
import json
import os
import ssl
import sys
import time

from websockets.asyncio.client import connect
from websockets.asyncio.server import serve

MAX_SIZE = 16 * 2**20  # a frame may be up to 16 MiB: --frame stays well below


def say(**fields):
    sys.stdout.write(json.dumps(fields) + "\n")
    sys.stdout.flush()


def context(server, identity, trust):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER if server else ssl.PROTOCOL_TLS_CLIENT)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_3
    ctx.load_cert_chain(identity)
    ctx.load_verify_locations(trust)
    # A pinned self-signed certificate is its own trust anchor; no host names are involved.
    ctx.verify_flags |= ssl.VERIFY_X509_PARTIAL_CHAIN
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_REQUIRED
    return ctx


async def receive(args):
    ctx = context(True, args.identity, args.trust)
    finished = asyncio.get_running_loop().create_future()

    async def handle(ws):
        hasher = hashlib.sha256()
        count = 0
        started = None
        result = {"event": "done", "bytes": 0, "sha256": None, "seconds": None, "ok": False}
        try:
            with open(args.out, "wb") as out:
                async for message in ws:
                    if isinstance(message, bytes):
                        if started is None:
                            started = time.monotonic()
                        out.write(message)
                        hasher.update(message)
                        count += len(message)
                        continue
                    end = json.loads(message)
                    out.flush()
                    if args.fsync:
                        os.fsync(out.fileno())
                    digest = hasher.hexdigest()
                    ok = bool(end.get("end")) and end.get("size") == count and end.get("sha256") == digest
                    seconds = time.monotonic() - (started or time.monotonic())
                    result = {"event": "done", "bytes": count, "sha256": digest, "seconds": round(seconds, 4), "ok": ok}
                    await ws.send(json.dumps({"ok": ok, "bytes": count, "sha256": digest}))
                    break
        except Exception as error:  # a figure, not a crash: the script reports it
            result["error"] = repr(error)
        if not finished.done():
            finished.set_result(result)

    async with serve(handle, args.host, args.port, ssl=ctx, max_size=MAX_SIZE, compression=None, ping_interval=None) as server:
        say(event="listening", port=server.sockets[0].getsockname()[1])
        result = await finished
    say(**result)
    return 0 if result["ok"] else 1


async def send(args):
    ctx = context(False, args.identity, args.trust)
    hasher = hashlib.sha256()
    count = 0
    async with connect(args.url, ssl=ctx, max_size=MAX_SIZE, compression=None, ping_interval=None) as ws:
        started = time.monotonic()
        with open(args.file, "rb", buffering=0) as source:
            while True:
                chunk = source.read(args.frame)
                if not chunk:
                    break
                hasher.update(chunk)
                count += len(chunk)
                await ws.send(chunk)
        digest = hasher.hexdigest()
        await ws.send(json.dumps({"end": True, "size": count, "sha256": digest}))
        answer = json.loads(await ws.recv())
        seconds = time.monotonic() - started
    ok = bool(answer.get("ok"))
    say(event="done", bytes=count, sha256=digest, seconds=round(seconds, 4), rate=round(count / seconds) if seconds > 0 else None, ok=ok)
    return 0 if ok else 1


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    r = commands.add_parser("receive")
    r.add_argument("--host", required=True)
    r.add_argument("--port", type=int, default=0)
    r.add_argument("--out", required=True)
    r.add_argument("--fsync", action="store_true")
    s = commands.add_parser("send")
    s.add_argument("url")
    s.add_argument("--file", required=True)
    s.add_argument("--frame", type=int, default=65536)
    for p in (r, s):
        p.add_argument("--identity", required=True)
        p.add_argument("--trust", required=True)
    args = parser.parse_args()
    return asyncio.run(receive(args) if args.command == "receive" else send(args))


if __name__ == "__main__":
    sys.exit(main())
