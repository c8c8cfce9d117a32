#!/usr/bin/env python3
"""An SRP requestor (RFC 9665) written from the RFCs, independent of Nearby's Swift code: the lab's
second client for `nearby registrar`, beside `nearby advertise --registrar`.

It builds one DNS UPDATE with dnspython (service discovery, service description and host
description instructions, the KEY, the EDNS(0) Update Lease option of RFC 9664), signs it with
SIG(0) (RFC 2931) using an ECDSA P-256 key from `cryptography` (RFC 6605: r and s, 32 bytes each),
sends it over UDP, and prints the registrar's answer as one JSON line:
{"rcode": "NOERROR", "lease": 7200, "keyLease": 604800}.

  srp_client.py --registrar 198.18.2.5 --host boxed --instance Boxed --address 198.18.2.6
                [--port 53] [--type _openagents._tcp] [--service-port 9099] [--txt k=v ...]
                [--lease 7200] [--key-lease 604800] [--key FILE] [--remove] [--tamper]
                [--zone default.service.arpa.] [--burst N] [--source ADDRESS] [--timing]
  srp_client.py --registrar 198.18.2.5 --host mass --instance Mass --mass 1000
                [--source 198.18.2.100 --source 198.18.2.101 ...] [--window 64]

--key keeps the private key in FILE (PEM; made when missing), so a second run is the same key.
--tamper flips one byte of the signed message (the registrar must refuse it: NOTAUTH).
--remove sends the same registration with lease 0 (goodbyes on the link).
--burst N sends N updates as fast as it can (one JSON line with the rcodes counted).
--write FILE writes the update to FILE instead of sending it; with --fake-signature its SIG(0)
carries 64 bytes of 0x01 (the fuzz target's stand-in verifier accepts exactly that): how
Tools/fuzz/seeds-registrar/ was made.
--source ADDRESS binds the socket to ADDRESS (one of this host's); --timing adds "sent" and
"acked" (time.monotonic(), seconds) to the answer's JSON line.
--mass N registers N hosts HOST-1 .. HOST-N, each with its own new key and one service
"INSTANCE i", as fast as the registrar answers: all updates are built and signed first, then
sent with at most --window unanswered at once, registration i from source i mod S (the
--source addresses, each its own socket; default: one unbound socket) and with that source as
its address unless --address is given; an unanswered update is sent again after --timeout,
at most 3 times. One JSON line: the rcodes counted, wall time, retransmissions, the send to
reply times (median, p95, max, ms) and "firstSent"/"lastAcked" (time.monotonic()).
"""

import argparse
import json
import os
import selectors
import socket
import struct
import sys
import time

import dns.edns
import dns.message
import dns.name
import dns.opcode
import dns.rdata
import dns.rcode
import dns.rdataclass
import dns.rdatatype
import dns.update
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature

UPDATE_LEASE = 2  # EDNS(0) option code (RFC 9664)
ECDSAP256SHA256 = 13


def load_key(path):
    if path and os.path.exists(path):
        with open(path, "rb") as f:
            return serialization.load_pem_private_key(f.read(), password=None)
    key = ec.generate_private_key(ec.SECP256R1())
    if path:
        with open(path, "wb") as f:
            f.write(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    return key


def key_rdata(key):
    numbers = key.public_key().public_numbers()
    point = numbers.x.to_bytes(32, "big") + numbers.y.to_bytes(32, "big")
    # Flags 0 (a key that may sign), protocol 3 (DNSSEC), algorithm 13, then x and y (RFC 6605 §4).
    return struct.pack("!HBB", 0, 3, ECDSAP256SHA256) + point


def key_tag(rdata):
    # RFC 4034 appendix B.
    total = 0
    for index, byte in enumerate(rdata):
        total += byte if index & 1 else byte << 8
    total += (total >> 16) & 0xFFFF
    return total & 0xFFFF


FAKE_SIGNATURE = False


def build(args, key, message_id=None):
    zone = dns.name.from_text(args.zone)
    host = dns.name.from_text(args.host, zone)
    stype = dns.name.from_text(args.type, zone)
    instance = dns.name.Name((args.instance.encode(),) + stype.labels)
    removing = args.lease == 0
    if message_id is None:
        message_id = int.from_bytes(os.urandom(2), "big")
    update = dns.update.UpdateMessage(zone, id=message_id)
    ttl = min(args.lease or 7200, 7200)
    # Service discovery instruction: add (or, removing, delete) the PTR.
    if removing:
        update.delete(stype, dns.rdatatype.PTR, instance.to_text())
    else:
        update.add(stype, ttl, dns.rdatatype.PTR, instance.to_text())
    # Service description instruction: delete all RRsets of the instance, add SRV and TXT.
    update.delete(instance)
    if not removing:
        update.add(instance, ttl, dns.rdatatype.SRV, f"0 0 {args.service_port} {host.to_text()}")
        txt = " ".join('"%s"' % entry.replace('"', '\\"') for entry in (args.txt or [""]))
        update.add(instance, ttl, dns.rdatatype.TXT, txt)
    # Host description instruction: delete all RRsets of the host, add its addresses and KEY.
    update.delete(host)
    if not removing:
        for address in args.address:
            rdtype = dns.rdatatype.AAAA if ":" in address else dns.rdatatype.A
            update.add(host, ttl, rdtype, address)
    rdata = key_rdata(key)
    key_record = dns.rdata.from_wire(dns.rdataclass.IN, dns.rdatatype.KEY, rdata, 0, len(rdata))
    update.add(host, 0 if removing else ttl, key_record)
    lease = struct.pack("!II", args.lease, args.key_lease)
    update.use_edns(0, payload=1232, options=[dns.edns.GenericOption(UPDATE_LEASE, lease)])
    wire = update.to_wire()
    return sign(wire, key, host, rdata)


def sign(wire, key, signer, keyrdata):
    now = int(time.time())
    # SIG RDATA without the signature (RFC 2931 §3; RFC 2535 §4.1): type covered 0, algorithm,
    # labels 0, original TTL 0, expiration, inception, key tag, signer's name (uncompressed).
    sig_fixed = struct.pack("!HBBIIIH", 0, ECDSAP256SHA256, 0, 0, now + 300, now - 300, key_tag(keyrdata))
    sig_fixed += signer.canonicalize().to_wire()
    # Signed: that RDATA, then the message as it is without the SIG record (RFC 2931 §3.1).
    if FAKE_SIGNATURE:
        signature = b"\x01" * 64
    else:
        der = key.sign(sig_fixed + wire, ec.ECDSA(hashes.SHA256()))
        r, s = decode_dss_signature(der)
        signature = r.to_bytes(32, "big") + s.to_bytes(32, "big")
    sig_rdata = sig_fixed + signature
    # The SIG record: owner the root, type SIG, class ANY, TTL 0; appended last, ARCOUNT + 1.
    record = b"\x00" + struct.pack("!HHIH", dns.rdatatype.SIG, dns.rdataclass.ANY, 0, len(sig_rdata)) + sig_rdata
    header = bytearray(wire[:12])
    arcount = struct.unpack("!H", header[10:12])[0] + 1
    header[10:12] = struct.pack("!H", arcount)
    return bytes(header) + wire[12:] + record


def open_socket(args, source=None):
    family = socket.AF_INET6 if ":" in args.registrar else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_DGRAM)
    if source:
        sock.bind((source, 0))
    return sock


def exchange(args, payload, timing=None):
    with open_socket(args, args.source[0] if args.source else None) as sock:
        sock.settimeout(args.timeout)
        for _ in range(3):
            if timing is not None:
                timing.setdefault("sent", time.monotonic())
            sock.sendto(payload, (args.registrar, args.port))
            try:
                reply, _ = sock.recvfrom(65535)
                if timing is not None:
                    timing["acked"] = time.monotonic()
                return reply
            except socket.timeout:
                continue
    return None


def mass(args):
    """Registers args.mass hosts, each with its own key, as fast as the registrar answers."""
    sources = args.source or [None]
    sockets = [open_socket(args, source) for source in sources]
    base_host, base_instance, fixed_addresses = args.host, args.instance, list(args.address)
    built_at = time.monotonic()
    payloads = []
    for index in range(1, args.mass + 1):
        source = sources[(index - 1) % len(sources)]
        args.host, args.instance = f"{base_host}-{index}", f"{base_instance} {index}"
        args.address = fixed_addresses or [source]
        payloads.append(build(args, ec.generate_private_key(ec.SECP256R1()), message_id=index & 0xFFFF))
    args.host, args.instance, args.address = base_host, base_instance, fixed_addresses
    build_seconds = time.monotonic() - built_at
    selector = selectors.DefaultSelector()
    for number, sock in enumerate(sockets):
        sock.setblocking(False)
        selector.register(sock, selectors.EVENT_READ, number)
    pending = {}  # (socket number, id) -> [index, first sent, last sent, tries]
    latencies, counts, retransmits = [], {}, 0
    next_index, done = 0, 0
    first_sent = time.monotonic()
    last_acked = None
    destination = (args.registrar, args.port)
    while done < len(payloads):
        while next_index < len(payloads) and len(pending) < args.window:
            number = next_index % len(sockets)
            now = time.monotonic()
            sockets[number].sendto(payloads[next_index], destination)
            pending[(number, (next_index + 1) & 0xFFFF)] = [next_index, now, now, 1]
            next_index += 1
        for key, _ in selector.select(timeout=0.05):
            while True:
                try:
                    reply = key.fileobj.recv(65535)
                except BlockingIOError:
                    break
                if len(reply) < 12:
                    continue
                entry = pending.pop((key.data, int.from_bytes(reply[:2], "big")), None)
                if entry is None:
                    continue  # an answer to a retransmission already answered
                now = time.monotonic()
                last_acked = now
                latencies.append(now - entry[1])
                code = describe(reply)["rcode"]
                counts[code] = counts.get(code, 0) + 1
                done += 1
        now = time.monotonic()
        for (number, message_id), entry in list(pending.items()):
            if now - entry[2] < args.timeout:
                continue
            if entry[3] >= 3:
                del pending[(number, message_id)]
                counts["TIMEOUT"] = counts.get("TIMEOUT", 0) + 1
                done += 1
                continue
            sockets[number].sendto(payloads[entry[0]], destination)
            entry[2], entry[3] = now, entry[3] + 1
            retransmits += 1
    wall = (last_acked or time.monotonic()) - first_sent
    for sock in sockets:
        sock.close()
    latencies.sort()

    def ms(q):
        return round(latencies[min(len(latencies) - 1, int(len(latencies) * q))] * 1000, 1) if latencies else None
    print(json.dumps({"mass": args.mass, "sources": len(sources), "window": args.window, "replies": counts,
                      "wall": round(wall, 3), "perSecond": round(counts.get("NOERROR", 0) / wall, 1) if wall > 0 else None,
                      "retransmits": retransmits, "buildSeconds": round(build_seconds, 3),
                      "ackMs": {"median": ms(0.5), "p95": ms(0.95), "max": round(latencies[-1] * 1000, 1) if latencies else None},
                      "firstSent": first_sent, "lastAcked": last_acked}), flush=True)
    return 0


def describe(reply):
    if reply is None:
        return {"rcode": "TIMEOUT"}
    message = dns.message.from_wire(reply)
    result = {"rcode": dns.rcode.to_text(message.rcode())}
    for option in message.options:
        if option.otype == UPDATE_LEASE:
            data = option.to_wire() if hasattr(option, "to_wire") else option.data
            if len(data) >= 4:
                result["lease"] = struct.unpack("!I", data[:4])[0]
            if len(data) >= 8:
                result["keyLease"] = struct.unpack("!I", data[4:8])[0]
    return result


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--registrar", required=True)
    parser.add_argument("--port", type=int, default=53)
    parser.add_argument("--zone", default="default.service.arpa.")
    parser.add_argument("--host", required=True)
    parser.add_argument("--instance", required=True)
    parser.add_argument("--type", default="_openagents._tcp")
    parser.add_argument("--service-port", type=int, default=9099)
    parser.add_argument("--address", action="append", default=[])
    parser.add_argument("--txt", action="append", default=[])
    parser.add_argument("--lease", type=int, default=7200)
    parser.add_argument("--key-lease", type=int, default=604800)
    parser.add_argument("--key")
    parser.add_argument("--remove", action="store_true")
    parser.add_argument("--tamper", action="store_true")
    parser.add_argument("--burst", type=int, default=0)
    parser.add_argument("--timeout", type=float, default=3.0)
    parser.add_argument("--write")
    parser.add_argument("--fake-signature", action="store_true")
    parser.add_argument("--source", action="append", default=[])
    parser.add_argument("--timing", action="store_true")
    parser.add_argument("--mass", type=int, default=0)
    parser.add_argument("--window", type=int, default=64)
    args = parser.parse_args()
    global FAKE_SIGNATURE
    FAKE_SIGNATURE = args.fake_signature
    if args.remove:
        args.lease = 0
    if args.mass:
        if args.key or args.remove or args.tamper or args.burst or args.mass > 65535:
            parser.error("--mass makes its own keys: not with --key, --remove, --tamper, --burst; at most 65535")
        return mass(args)
    key = load_key(args.key)
    if args.burst:
        counts = {}
        with open_socket(args, args.source[0] if args.source else None) as sock:
            sock.settimeout(args.timeout)
            for _ in range(args.burst):
                sock.sendto(build(args, key), (args.registrar, args.port))
            deadline = time.time() + args.timeout
            while time.time() < deadline:
                try:
                    reply, _ = sock.recvfrom(65535)
                except socket.timeout:
                    break
                code = describe(reply)["rcode"]
                counts[code] = counts.get(code, 0) + 1
        print(json.dumps({"burst": args.burst, "replies": counts}), flush=True)
        return 0
    payload = build(args, key)
    if args.write:
        with open(args.write, "wb") as f:
            f.write(payload)
        return 0
    if args.tamper:
        # A byte of the signed part changed after signing: the port in the SRV record's data.
        index = payload.find(struct.pack("!H", args.service_port))
        payload = payload[:index] + bytes([payload[index] ^ 0x01]) + payload[index + 1:]
    timing = {} if args.timing else None
    result = describe(exchange(args, payload, timing))
    if timing is not None:
        result.update(timing)
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
