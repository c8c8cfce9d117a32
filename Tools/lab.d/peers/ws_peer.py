#!/usr/bin/env python3
"""A JSON-RPC 2.0 peer over WebSockets (the `websockets` package and Python's ssl), written
independently of Nearby, for interoperability tests and the connection benchmark.

  ws_peer.py client URL --identity PEM --trust PEM [--version V] [--count N]
      connects (wss:// with a client certificate, or ws://), sends initialize, ping and echo,
      prints one JSON line per answer and exits 0 when all came back right.
  ws_peer.py bench setup|roundtrips|pipelined|idle URL N --identity PEM --trust PEM
      the figures of Tools/bench/connection, from this side: N set-ups (TCP, TLS, WebSocket,
      initialize), round trips for N seconds on one connection (one at a time, or 32 in
      flight with "pipelined"), or N idle connections held
      until stdin closes. One JSON line per figure.
  ws_peer.py server PORT [--identity PEM --trust PEM] [--version V] [--stall]
      serves initialize, ping and echo; with --identity it requires a client certificate
      that chains to --trust. Prints {"event":"listening","port":P} when ready. --stall: after
      initialize the app reads nothing more (websockets then stops reading at max_queue).
  ws_peer.py bench flood URL SECONDS --identity PEM --trust PEM
      after initialize, sends 1 KiB notifications as fast as the connection takes them for
      SECONDS; prints {"figure":"flood","sent":N,"per_second":[...]} (messages sent each second).

  ws_peer.py relay PORT UPSTREAM_URL --identity PEM
      a man in the middle: accepts wss:// with its own certificate (asking for none), dials
      UPSTREAM_URL with the same certificate as its client certificate (believing any
      server), and relays every text message both ways unchanged. Pairing tests use it to
      show that the two sides' codes differ. Prints {"event":"listening","port":P}.

--identity: a PEM file with our certificate and private key (Nearby's identity.pem).
--trust: PEM certificates to trust; a self-signed leaf is its own anchor.
"""
import argparse
import asyncio
import json
import ssl
import sys

import websockets


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


def say(**members):
    print(json.dumps(members), flush=True)


async def client(args):
    ctx = context(False, args.identity, args.trust) if args.url.startswith("wss:") else None
    async with websockets.connect(args.url, ssl=ctx, max_size=2**20) as ws:
        next_id = 0

        async def call(method, params=None):
            nonlocal next_id
            next_id += 1
            message = {"jsonrpc": "2.0", "id": next_id, "method": method}
            if params is not None:
                message["params"] = params
            await ws.send(json.dumps(message))
            answer = json.loads(await ws.recv())
            if answer.get("id") != next_id:
                raise SystemExit(f"answer to {method} has id {answer.get('id')}, not {next_id}")
            return answer

        init = await call("initialize", {
            "protocol_version": args.version,
            "client_capabilities": {},
            "client_info": {"name": "ws_peer.py", "title": "Python websockets peer", "version": websockets.__version__},
            "_meta": {"display_name": "Python Peer"},
        })
        say(method="initialize", answer=init)
        if "result" not in init:
            return 1
        ok = True
        for _ in range(args.count):
            ping = await call("ping")
            echo = await call("echo", {"text": "héllo", "n": [1, 2, 3]})
            ok = ok and ping.get("result") == {} and echo.get("result") == {"text": "héllo", "n": [1, 2, 3]}
        say(method="ping", answer=ping)
        say(method="echo", answer=echo)
        return 0 if ok else 1


INITIALIZE = {
    "protocol_version": "0.2.2", "client_capabilities": {},
    "client_info": {"name": "ws_peer.py", "title": "Python websockets peer", "version": websockets.__version__},
}


async def open_initialized(url, ctx, **options):
    ws = await websockets.connect(url, ssl=ctx, max_size=2**20, ping_interval=None, **options)
    await ws.send(json.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": INITIALIZE}))
    answer = json.loads(await ws.recv())
    if "result" not in answer:
        raise RuntimeError(f"initialize refused: {answer}")
    return ws


async def bench(args):
    import time
    ctx = context(False, args.identity, args.trust) if args.url.startswith("wss:") else None
    if args.figure == "setup":
        times, failures = [], 0
        for _ in range(args.n):
            start = time.perf_counter()
            try:
                ws = await open_initialized(args.url, ctx)
                times.append((time.perf_counter() - start) * 1e3)
                await ws.close()
            except Exception:
                failures += 1
        times.sort()
        pick = lambda q: times[min(len(times) - 1, int(len(times) * q))] if times else 0
        say(figure="setup", count=len(times), failures=failures, median_ms=pick(0.5), p95_ms=pick(0.95), p99_ms=pick(0.99))
    elif args.figure == "roundtrips":
        ws = await open_initialized(args.url, ctx)
        params = {"text": "hello", "n": [1, 2, 3]}
        done, start = 0, time.perf_counter()
        end = start + args.n
        while time.perf_counter() < end:
            done += 1
            await ws.send(json.dumps({"jsonrpc": "2.0", "id": done, "method": "echo", "params": params}))
            json.loads(await ws.recv())
        say(figure="roundtrips", count=done, failures=0, per_second=done / (time.perf_counter() - start))
        await ws.close()
    elif args.figure == "pipelined":
        # 32 requests in flight on one connection; one reader hands each answer to its caller.
        ws = await open_initialized(args.url, ctx)
        params = {"text": "hello", "n": [1, 2, 3]}
        waiting, next_id = {}, [0]

        async def reader():
            async for text in ws:
                answer = json.loads(text)
                future = waiting.pop(answer.get("id"), None)
                if future is not None:
                    future.set_result(answer)

        async def lane(end):
            done = 0
            while time.perf_counter() < end:
                next_id[0] += 1
                future = asyncio.get_running_loop().create_future()
                waiting[next_id[0]] = future
                await ws.send(json.dumps({"jsonrpc": "2.0", "id": next_id[0], "method": "echo", "params": params}))
                await future
                done += 1
            return done

        reading = asyncio.create_task(reader())
        start = time.perf_counter()
        counts = await asyncio.gather(*(lane(start + args.n) for _ in range(32)))
        done = sum(counts)
        say(figure="pipelined", count=done, failures=0, per_second=done / (time.perf_counter() - start))
        reading.cancel()
        await ws.close()
    elif args.figure == "flood":
        # No permessage-deflate (websockets offers it by default, Nearby does not accept it):
        # 1 KiB of padding would shrink to a few bytes and the two servers would not see the same load.
        ws = await open_initialized(args.url, ctx, compression=None)
        rss_start = next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmRSS"))
        pad = "x" * 960
        sent, per_second = 0, []
        start = time.perf_counter()
        mark = start + 1
        end = start + args.n
        sending = None
        while True:
            now = time.perf_counter()
            if now >= mark:
                per_second.append(sent - sum(per_second))
                mark += 1
                if now >= end:
                    break
            # send() waits while websockets' write buffer is over its high-water mark: a
            # server that stopped reading holds it here until the time is up. It is waited for,
            # never cancelled: send() hands the frame to the transport before it waits, so a
            # cancelled send went out all the same, and sending its index again repeated it.
            if sending is None:
                text = '{"jsonrpc":"2.0","method":"flood","params":{"i":%d,"pad":"%s"}}' % (sent, pad)
                sending = asyncio.ensure_future(ws.send(text))
            done, _ = await asyncio.wait({sending}, timeout=max(0.001, min(mark, end) - now))
            if done:
                sending.result()
                sending = None
                sent += 1
        if sending is not None:
            # Its frame may reach the server before the abort: counted, so nothing printed is
            # beyond what "sent" says.
            sending.cancel()
            sent += 1
        import resource
        say(figure="flood", sent=sent, per_second=per_second, rss_start_kib=rss_start,
            rss_peak_kib=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
        ws.transport.abort()
    else:
        opened, failures = [], 0
        for batch in range(0, args.n, 50):
            results = await asyncio.gather(*(open_initialized(args.url, ctx) for _ in range(batch, min(args.n, batch + 50))), return_exceptions=True)
            opened += [r for r in results if not isinstance(r, Exception)]
            failures += sum(1 for r in results if isinstance(r, Exception))
        say(figure="idle", open=len(opened), failures=failures)
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
        for ws in opened:
            await ws.close()
    return 0


async def server(args):
    ctx = context(True, args.identity, args.trust) if args.identity else None

    async def handle(ws):
        initialized = False
        async for text in ws:
            try:
                message = json.loads(text)
            except ValueError:
                await ws.send(json.dumps({"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "parse error"}}))
                continue
            method, mid = message.get("method"), message.get("id")
            if method == "initialize":
                initialized = True
                result = {
                    "protocol_version": args.version, "agent_capabilities": {}, "auth_methods": [],
                    "agent_info": {"name": "ws_peer.py", "title": "Python websockets peer", "version": websockets.__version__},
                    "_meta": {"display_name": "Python Peer"},
                }
                await ws.send(json.dumps({"jsonrpc": "2.0", "id": mid, "result": result}))
                if args.stall:
                    await asyncio.Future()  # an app that stopped reading; the connection stays open
            elif not initialized:
                await ws.send(json.dumps({"jsonrpc": "2.0", "id": mid, "error": {"code": -32002, "message": "not initialized"}}))
            elif method == "ping":
                await ws.send(json.dumps({"jsonrpc": "2.0", "id": mid, "result": {}}))
            elif method == "echo":
                await ws.send(json.dumps({"jsonrpc": "2.0", "id": mid, "result": message.get("params")}))
            elif mid is not None:
                await ws.send(json.dumps({"jsonrpc": "2.0", "id": mid, "error": {"code": -32601, "message": "no such method"}}))

    async with websockets.serve(handle, args.host, args.port, ssl=ctx, max_size=2**20) as running:
        port = running.sockets[0].getsockname()[1]
        say(event="listening", port=port)
        await asyncio.Future()


async def relay(args):
    downstream = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    downstream.minimum_version = ssl.TLSVersion.TLSv1_3
    downstream.load_cert_chain(args.identity)
    upstream = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    upstream.minimum_version = ssl.TLSVersion.TLSv1_3
    upstream.load_cert_chain(args.identity)
    upstream.check_hostname = False
    upstream.verify_mode = ssl.CERT_NONE

    async def pump(source, sink, name):
        async for text in source:
            say(event="relayed", direction=name, message=json.loads(text))
            await sink.send(text)
        await sink.close()

    async def handle(ws):
        async with websockets.connect(args.upstream, ssl=upstream, max_size=2**20) as up:
            await asyncio.gather(pump(ws, up, "up"), pump(up, ws, "down"), return_exceptions=True)

    async with websockets.serve(handle, args.host, args.port, ssl=downstream, max_size=2**20) as running:
        say(event="listening", port=running.sockets[0].getsockname()[1])
        await asyncio.Future()


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="mode", required=True)
    c = sub.add_parser("client")
    c.add_argument("url")
    c.add_argument("--count", type=int, default=1)
    b = sub.add_parser("bench")
    b.add_argument("figure", choices=["setup", "roundtrips", "pipelined", "idle", "flood"])
    b.add_argument("url")
    b.add_argument("n", type=int)
    s = sub.add_parser("server")
    s.add_argument("port", type=int)
    s.add_argument("--host", default="0.0.0.0")
    s.add_argument("--stall", action="store_true")
    r = sub.add_parser("relay")
    r.add_argument("port", type=int)
    r.add_argument("upstream")
    r.add_argument("--host", default="0.0.0.0")
    for p in (c, s, b, r):
        p.add_argument("--identity")
        p.add_argument("--trust")
        p.add_argument("--version", default="0.2.2")
    args = parser.parse_args()
    try:
        run = {"client": client, "server": server, "bench": bench, "relay": relay}[args.mode]
        sys.exit(asyncio.run(run(args)))
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
