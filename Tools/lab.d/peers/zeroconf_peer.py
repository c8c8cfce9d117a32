#!/usr/bin/env python3
"""A python-zeroconf peer for the Nearby lab. Run it inside a lab host:

    Tools/lab zeroconf h3 -- register "Zero Conf" _http._tcp 8080 path=/ flag
    Tools/lab zeroconf h2 -- browse _http._tcp --resolve --timeout 5
    Tools/lab zeroconf h2 -- resolve "Zero Conf" _http._tcp

Every event is one JSON object on its own line on stdout, flushed at once:
    {"event": "registered", "name": "Zero Conf._http._tcp.local.", ...}
    {"event": "found"|"updated"|"lost", "name": ..., "type": ..., [resolved fields]}
    {"event": "resolved", "name": ..., "host": ..., "port": ..., "addresses": [...], "txt": {...}}
    {"event": "unregistered"} / {"event": "timeout"} / {"event": "error", "message": ...}
Resolved fields: host, port, addresses (IPv4 and IPv6 text), txt (key -> string, or null for a
key without "="), priority, weight.

It binds to the addresses of the host's lan interfaces (not lo); this is meant to run only in a
lab namespace, never in the root namespace.
"""

from __future__ import annotations

import argparse
import asyncio
import ipaddress
import json
import os
import signal
import sys
import time
from typing import Any

import ifaddr
from zeroconf import IPVersion, ServiceStateChange, Zeroconf
from zeroconf.asyncio import AsyncServiceBrowser, AsyncServiceInfo, AsyncZeroconf


def emit(obj: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(obj, sort_keys=False) + "\n")
    sys.stdout.flush()


def full_type(t: str) -> str:
    t = t.rstrip(".")
    if not t.endswith(".local"):
        t += ".local"
    return t + "."


def lab_interfaces() -> tuple[list[str], list[str], list[str]]:
    """(interfaces for Zeroconf(), IPv4 addresses, IPv6 non-link-local addresses) of non-lo NICs."""
    choice: list[str] = []
    v4: list[str] = []
    v6: list[str] = []
    for adapter in ifaddr.get_adapters():
        if adapter.nice_name == "lo":
            continue
        link_local = None
        for ip in adapter.ips:
            if ip.is_IPv4:
                v4.append(ip.ip)
                choice.append(ip.ip)
            else:
                addr = ipaddress.IPv6Address(ip.ip[0])
                if addr.is_link_local:
                    link_local = ip.ip[0]
                else:
                    v6.append(str(addr))
        if link_local is not None:  # IPv6 joins need one address (index) per interface
            choice.append(link_local)
    return choice, v4, v6


def make_zeroconf() -> AsyncZeroconf:
    choice, _, _ = lab_interfaces()
    if not choice:
        raise SystemExit("zeroconf_peer: no non-loopback interface here (run it in a lab host)")
    return AsyncZeroconf(interfaces=choice, ip_version=IPVersion.All)


def txt_of(info: AsyncServiceInfo) -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for k, v in info.properties.items():
        key = k.decode("utf-8", "backslashreplace") if isinstance(k, bytes) else str(k)
        if v is None:
            out[key] = None
        else:
            out[key] = v.decode("utf-8", "backslashreplace") if isinstance(v, bytes) else str(v)
    return out


def info_fields(info: AsyncServiceInfo) -> dict[str, Any]:
    return {
        "host": info.server,
        "port": info.port,
        "addresses": info.parsed_addresses(IPVersion.All),
        "txt": txt_of(info),
        "priority": info.priority,
        "weight": info.weight,
    }


def parse_txt(items: list[str]) -> dict[str, str | None]:
    props: dict[str, str | None] = {}
    for item in items:
        if "=" in item:
            k, v = item.split("=", 1)
            props[k] = v
        else:
            props[item] = None
    return props


def stop_event() -> asyncio.Event:
    ev = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, ev.set)
    return ev


async def register(args: argparse.Namespace) -> int:
    stype = full_type(args.type)
    name = f"{args.name}.{stype}"
    lab, host = os.environ.get("NEARBY_LAB_NAME"), os.environ.get("NEARBY_LAB_HOST")
    server = args.host or (f"{lab}-{host}-zc" if lab and host else f"zc-{os.getpid()}")
    if not server.endswith("."):
        server = server if server.endswith(".local") else server + ".local"
        server += "."
    _, v4, v6 = lab_interfaces()
    addresses = args.address or (v4 + v6)
    info = AsyncServiceInfo(
        stype,
        name,
        port=args.port,
        properties=parse_txt(args.txt),
        server=server,
        parsed_addresses=addresses,
    )
    stop = stop_event()
    aiozc = make_zeroconf()
    try:
        # async_register_service returns a task that must be awaited itself: only then have
        # the probes and the announcements been sent.
        task = await aiozc.async_register_service(info, allow_name_change=args.allow_name_change)
        await task
        emit({"event": "registered", "name": info.name, "type": stype, "host": server,
              "port": args.port, "addresses": addresses, "txt": parse_txt(args.txt)})
        if args.update_txt:
            # Replace the TXT record after a while, as a service does when its state changes.
            try:
                await asyncio.wait_for(stop.wait(), timeout=args.update_after)
            except asyncio.TimeoutError:
                info = AsyncServiceInfo(stype, name, port=args.port, properties=parse_txt(args.update_txt),
                                        server=server, parsed_addresses=addresses)
                task = await aiozc.async_update_service(info)
                await task
                emit({"event": "updated", "name": info.name, "txt": parse_txt(args.update_txt)})
        await stop.wait()
        task = await aiozc.async_unregister_service(info)
        await task
        emit({"event": "unregistered", "name": info.name})
    finally:
        await aiozc.async_close()
    return 0


async def browse(args: argparse.Namespace) -> int:
    # In-process time of each event ("ms"): from before the Zeroconf instance exists.
    began = time.perf_counter()
    stype = full_type(args.type)
    stop = stop_event()
    aiozc = make_zeroconf()
    pending: set[asyncio.Task] = set()

    async def resolve_and_emit(event: str, name: str) -> None:
        info = AsyncServiceInfo(stype, name)
        ok = await info.async_request(aiozc.zeroconf, 3000)
        out: dict[str, Any] = {"event": event, "name": name, "type": stype, "resolved": bool(ok)}
        if ok:
            out.update(info_fields(info))
        out["ms"] = round((time.perf_counter() - began) * 1000, 1)
        emit(out)

    def on_change(zeroconf: Zeroconf, service_type: str, name: str,
                  state_change: ServiceStateChange) -> None:
        event = {ServiceStateChange.Added: "found", ServiceStateChange.Updated: "updated",
                 ServiceStateChange.Removed: "lost"}[state_change]
        if args.resolve and state_change is not ServiceStateChange.Removed:
            t = asyncio.ensure_future(resolve_and_emit(event, name))
            pending.add(t)
            t.add_done_callback(pending.discard)
        else:
            emit({"event": event, "name": name, "type": service_type})

    browser = AsyncServiceBrowser(aiozc.zeroconf, [stype], handlers=[on_change])
    try:
        if args.timeout is None:
            await stop.wait()
        else:
            try:
                await asyncio.wait_for(stop.wait(), args.timeout)
            except asyncio.TimeoutError:
                pass
    finally:
        await browser.async_cancel()
        for t in list(pending):
            t.cancel()
        await aiozc.async_close()
    return 0


async def resolve(args: argparse.Namespace) -> int:
    # In-process time: from before the Zeroconf instance exists (its sockets, its threads) to
    # the answer, leaving out the interpreter's start and the imports ("ms" in the output).
    began = time.perf_counter()
    stype = full_type(args.type)
    name = f"{args.name}.{stype}"
    aiozc = make_zeroconf()
    try:
        info = AsyncServiceInfo(stype, name)
        ok = await info.async_request(aiozc.zeroconf, int(args.timeout * 1000))
        if not ok:
            emit({"event": "timeout", "name": name})
            return 1
        emit({"event": "resolved", "name": name, "type": stype, **info_fields(info),
              "ms": round((time.perf_counter() - began) * 1000, 1)})
        return 0
    finally:
        await aiozc.async_close()


def main() -> int:
    p = argparse.ArgumentParser(prog="zeroconf_peer.py", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)

    r = sub.add_parser("register", help="register a service until SIGTERM/SIGINT, then unregister")
    r.add_argument("name", help='instance name, e.g. "My Service"')
    r.add_argument("type", help="service type, e.g. _http._tcp")
    r.add_argument("port", type=int)
    r.add_argument("txt", nargs="*", help="TXT entries key=value, or key alone for a boolean")
    r.add_argument("--host", help="target host name (default LAB-hN-zc.local.)")
    r.add_argument("--address", action="append", help="address to publish (repeatable; "
                   "default: every IPv4 and non-link-local IPv6 address of the lan interfaces)")
    r.add_argument("--allow-name-change", action="store_true",
                   help="pick another name on conflict instead of failing")
    r.add_argument("--update-txt", action="append", default=[], metavar="ENTRY",
                   help="after --update-after seconds, replace the TXT with these entries (repeatable)")
    r.add_argument("--update-after", type=float, default=3.0, metavar="SECONDS")

    b = sub.add_parser("browse", help="browse TYPE and print found/updated/lost events")
    b.add_argument("type")
    b.add_argument("--resolve", action="store_true", help="resolve each service found")
    b.add_argument("--timeout", type=float, help="stop after S seconds (default: on signal)")

    s = sub.add_parser("resolve", help="resolve one instance and print it")
    s.add_argument("name")
    s.add_argument("type")
    s.add_argument("--timeout", type=float, default=3.0)

    args = p.parse_args()
    fn = {"register": register, "browse": browse, "resolve": resolve}[args.cmd]
    try:
        return asyncio.run(fn(args))
    except Exception as exc:  # report as an event, keep the traceback on stderr
        import traceback
        traceback.print_exc()
        emit({"event": "error", "message": f"{type(exc).__name__}: {exc}"})
        return 1


if __name__ == "__main__":
    sys.exit(main())
