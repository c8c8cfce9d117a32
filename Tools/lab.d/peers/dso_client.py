"""A DNS Push client (RFC 8765 over DSO, RFC 8490) written from the RFCs, not from Nearby's
code: the messages are built here byte by byte and the pushed records read with dnspython, so
the lab checks the proxy's wire format against a second reading of the RFCs.

    dso_client.py SERVER PORT NAME TYPE SECONDS [TRIGGER RECONFIRM]

Opens TLS to SERVER:PORT (the certificate is not checked: the proxy's is self-signed), sends a
Keepalive request, then SUBSCRIBE to NAME TYPE (class IN), and prints one JSON line per thing
heard for SECONDS, then closes. With TRIGGER and RECONFIRM: once the file TRIGGER exists, sends a
RECONFIRM (RFC 8765 §6.5) for each record it was pushed whose data contains RECONFIRM, and
prints {"event": "reconfirmed", "data": ..}. Lines printed:
  {"event": "keepalive", "id": N, "rcode": R, "inactivity_ms": .., "interval_ms": ..}
  {"event": "response", "id": N, "rcode": R}           the SUBSCRIBE's answer
  {"event": "add", "name": .., "type": .., "ttl": .., "data": ..}        from a PUSH
  {"event": "remove", "name": .., "type": .., "data": ..}                TTL 0xFFFFFFFF
  {"event": "remove-set", "name": .., "type": ..}                        TTL 0xFFFFFFFE
  {"event": "error", "message": ..}
"""
import json
import os
import socket
import ssl
import struct
import sys
import time

import dns.name
import dns.rdata
import dns.rdataclass
import dns.rdatatype

DSO_OPCODE = 6
KEEPALIVE, SUBSCRIBE, PUSH, RECONFIRM = 0x0001, 0x0040, 0x0041, 0x0043
held = {}  # data text -> (name wire, type, rdata wire), of records pushed and not removed


def say(**fields):
    print(json.dumps(fields), flush=True)


def message(message_id, tlvs):
    # Header: ID, flags with QR=0 and OPCODE=6 (bits 11-14), and four zero counts.
    header = struct.pack("!HHHHHH", message_id, DSO_OPCODE << 11, 0, 0, 0, 0)
    body = b"".join(struct.pack("!HH", kind, len(data)) + data for kind, data in tlvs)
    whole = header + body
    return struct.pack("!H", len(whole)) + whole


def tlvs_of(whole, start=12):
    """The TLVs of a DSO message: (kind, data, where the data begins in the whole message)."""
    offset = start
    while offset + 4 <= len(whole):
        kind, length = struct.unpack_from("!HH", whole, offset)
        yield kind, whole[offset + 4: offset + 4 + length], offset + 4
        offset += 4 + length


def read_push(whole, begin, end):
    """A PUSH TLV's records, which lie from begin to end in the whole DSO message: names may be
    compressed, and a pointer's offset counts from the start of the message (RFC 8765 §6.3.1;
    Apple's dnssd-proxy compresses, Nearby's proxy does not)."""
    data = whole[:end]
    offset = begin
    while offset < len(data):
        name, used = dns.name.from_wire(data, offset)
        offset += used
        rtype, rclass, ttl = struct.unpack_from("!HHI", data, offset)
        offset += 8
        type_text = dns.rdatatype.to_text(rtype)
        (length,) = struct.unpack_from("!H", data, offset)
        offset += 2
        if ttl == 0xFFFFFFFE:
            # A whole record set (or name) removed: RDLENGTH 0, no data (RFC 8765 §6.3.1).
            offset += length
            say(event="remove-set", name=name.to_text(), type=type_text)
            continue
        rdata = dns.rdata.from_wire(dns.rdataclass.IN, rtype, data, offset, length)
        offset += length
        if ttl == 0xFFFFFFFF:
            held.pop(rdata.to_text(), None)
            say(event="remove", name=name.to_text(), type=type_text, data=rdata.to_text())
        else:
            held[rdata.to_text()] = (name.to_wire(), rtype, rdata.to_wire())
            say(event="add", name=name.to_text(), type=type_text, ttl=ttl, data=rdata.to_text())


def main():
    server, port, name, rtype, seconds = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], float(sys.argv[5])
    trigger, pattern = (sys.argv[6], sys.argv[7]) if len(sys.argv) > 7 else (None, None)
    reconfirmed = False
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    # The test may start this client beside the proxy: until the proxy listens, the port refuses
    # the connection, so try again for up to 10 s (0.1 s apart) before giving up.
    deadline = time.monotonic() + 10
    while True:
        try:
            raw = socket.create_connection((server, port), timeout=5)
            break
        except ConnectionRefusedError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)
    sock = context.wrap_socket(raw)
    # Keepalive: our inactivity timeout and interval (ms); a client's values are advice only.
    sock.sendall(message(1, [(KEEPALIVE, struct.pack("!II", 15000, 15000))]))
    qname = dns.name.from_text(name).to_wire()
    sock.sendall(message(2, [(SUBSCRIBE, qname + struct.pack("!HH", dns.rdatatype.from_text(rtype), dns.rdataclass.IN))]))
    end = time.monotonic() + seconds
    pending = b""
    while time.monotonic() < end:
        if trigger and not reconfirmed and os.path.exists(trigger):
            reconfirmed = True
            for text, (owner, kind, rdata) in list(held.items()):
                if pattern in text:
                    # RECONFIRM: name, type, class, then the RDATA (its length is the TLV's rest).
                    sock.sendall(message(0, [(RECONFIRM, owner + struct.pack("!HH", kind, dns.rdataclass.IN) + rdata)]))
                    say(event="reconfirmed", data=text)
        if len(pending) < 2 or len(pending) < 2 + struct.unpack_from("!H", pending)[0]:
            sock.settimeout(max(0.05, min(0.2, end - time.monotonic())))
            try:
                chunk = sock.recv(65536)
            except socket.timeout:
                continue
            except (ssl.SSLError, OSError) as error:
                say(event="error", message=str(error))
                return 1
            if not chunk:
                say(event="error", message="the server closed the connection")
                return 1
            pending += chunk
            continue
        (length,) = struct.unpack_from("!H", pending)
        whole, pending = pending[2:2 + length], pending[2 + length:]
        message_id, flags = struct.unpack_from("!HH", whole, 0)
        opcode, is_response, rcode = (flags >> 11) & 0xF, bool(flags & 0x8000), flags & 0xF
        if opcode != DSO_OPCODE or any(struct.unpack_from("!HHHH", whole, 4)):
            say(event="error", message=f"not a DSO message: opcode {opcode}")
            return 1
        tlvs = list(tlvs_of(whole))
        if is_response and message_id == 1:
            values = next((struct.unpack("!II", data) for kind, data, _ in tlvs if kind == KEEPALIVE and len(data) == 8), (None, None))
            say(event="keepalive", id=message_id, rcode=rcode, inactivity_ms=values[0], interval_ms=values[1])
        elif is_response:
            say(event="response", id=message_id, rcode=rcode)
        elif message_id == 0 and tlvs and tlvs[0][0] == PUSH:
            read_push(whole, tlvs[0][2], tlvs[0][2] + len(tlvs[0][1]))
        else:
            say(event="error", message=f"unexpected message id {message_id} tlvs {[kind for kind, _, _ in tlvs]}")
    sock.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
