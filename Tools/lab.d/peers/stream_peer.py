#!/usr/bin/env python3
"""A second implementation of Nearby's byte streams and file exchange, written from Documentation/Protocols.md
alone ("Connecting" for the handshake, "Streams and files: moving things to the peer" with
"Streams: the wire format" and "Files: the exchange"), with Python's ssl and hashlib and the
`websockets` package; nothing of Nearby's Swift code is used or imitated.

  stream_peer.py send HOST PORT FILE --identity PEM --trust CERT [--resume] [--timeout S]
      connects (mutual TLS 1.3, WebSocket on path /), sends initialize offering streams,
      opens a stream labelled nearby.file/1 and sends FILE with the file exchange, never
      more DATA than the receiver's credit, then half-closes and reads the receiver's answer.
      Prints one JSON line: {"saved": ..., "sha256": ..., "transferred": N} (exit 0) or
      {"error": ...} (exit 1).
  stream_peer.py echo-server PORT --identity PEM --trust CERT [--host H] [--timeout S]
      accepts one connection, answers initialize as the accepting side, and echoes every
      stream the peer opens back on the same stream (credit granted as it reads; FIN after
      the peer's FIN). Prints {"event":"listening","port":P}, one line per stream, and a
      summary; exit 0 when every stream ended cleanly and the peer broke no rule.

--identity: a PEM file with our certificate and private key (Nearby's identity.pem).
--trust: PEM certificates to trust (the peer's `nearby identity export`).
--window / --max-streams / --max-frame: the limits this side offers in initialize.
--verbose: one line per frame event on stderr.

Whatever the peer does against the rules (DATA over its credit or over our max_frame, a frame
for a stream that never existed, an OPEN with the wrong parity or an old ID, data after FIN,
a second FIN, a zero WINDOW, a malformed frame, a binary message before streams were agreed)
is reported on stderr as {"event":"violation",...}, counted in the result, and closes the
connection with the code Documentation/Protocols.md gives (1008 for credit, 1002 for the rest, 1003 for binary
messages without streams).
"""
import argparse
import asyncio
import hashlib
import json
import os
import ssl
import struct
import sys
import time

import websockets
from websockets.asyncio.client import connect as ws_connect
from websockets.asyncio.server import serve as ws_serve
from websockets.exceptions import ConnectionClosed

PROTOCOL_VERSION = "0.2.2"
FILE_LABEL = "nearby.file/1"
DATA, OPEN, WINDOW, FIN, RESET = 0, 1, 2, 3, 4
TYPE_NAMES = {DATA: "DATA", OPEN: "OPEN", WINDOW: "WINDOW", FIN: "FIN", RESET: "RESET"}
CANCELLED, REFUSED, PROTOCOL_ERROR, FAILED = 1, 2, 3, 4
MAX_CONTROL = 64 * 1024
MAX_JSON_MESSAGE = 2**20
VERBOSE = False


def say(**members):
    print(json.dumps(members), flush=True)


def note(**members):
    print(json.dumps(members), file=sys.stderr, flush=True)


def debug(**members):
    if VERBOSE:
        note(**members)


# --- peer IDs (Documentation/Protocols.md, "Invitations: the protocol") ------------------------------

ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"


def _der_element(data, at):
    """(tag, start of content, end of element) of the DER element at `at`."""
    tag = data[at]
    length = data[at + 1]
    at += 2
    if length & 0x80:
        count = length & 0x7F
        length = int.from_bytes(data[at:at + count], "big")
        at += count
    return tag, at, at + length


def spki_of_certificate(der):
    """The DER SubjectPublicKeyInfo of an X.509 certificate (the 7th field of
    tbsCertificate, or the 6th when the optional [0] version is absent)."""
    _, cert_body, _ = _der_element(der, 0)
    _, tbs_body, tbs_end = _der_element(der, cert_body)
    fields, at = [], tbs_body
    while at < tbs_end:
        tag, _, end = _der_element(der, at)
        fields.append((tag, at, end))
        at = end
    if fields[0][0] == 0xA0:
        fields = fields[1:]
    _, start, end = fields[5]  # serial, signature, issuer, validity, subject, SPKI
    return der[start:end]


def luhn32(chars):
    total = 0
    for i, ch in enumerate(reversed(chars)):
        value = ALPHABET.index(ch) * (2 if i % 2 == 0 else 1)
        total += value // 32 + value % 32
    return ALPHABET[(32 - total % 32) % 32]


def peer_id_text(digest):
    bits = int.from_bytes(digest, "big") << 4  # 256 bits + 4 zero bits = 52 characters
    chars = "".join(ALPHABET[(bits >> (5 * (51 - i))) & 31] for i in range(52))
    text = chars[:26] + luhn32(chars[:26]) + chars[26:] + luhn32(chars[26:])
    return "-".join(text[i:i + 6] for i in range(0, 54, 6))


def peer_id_of_certificate(der):
    return peer_id_text(hashlib.sha256(spki_of_certificate(der)).digest())


def own_certificate_der(identity_pem):
    text = open(identity_pem).read()
    begin = text.index("-----BEGIN CERTIFICATE-----")
    end = text.index("-----END CERTIFICATE-----", begin) + len("-----END CERTIFICATE-----")
    return ssl.PEM_cert_to_DER_cert(text[begin:end])


def common_name(der):
    # Good enough for a display name: the first CN in the certificate (the subject's for
    # Nearby's self-signed ones; issuer and subject are the same).
    marker = bytes([0x06, 0x03, 0x55, 0x04, 0x03])
    at = der.find(marker)
    if at < 0:
        return "Python Stream Peer"
    _, start, end = _der_element(der, at + len(marker))
    return der[start:end].decode("utf-8", "replace")


def tls_context(server, identity, trust):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER if server else ssl.PROTOCOL_TLS_CLIENT)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_3
    ctx.load_cert_chain(identity)
    ctx.load_verify_locations(trust)
    ctx.verify_flags |= ssl.VERIFY_X509_PARTIAL_CHAIN  # a pinned self-signed leaf is its own anchor
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_REQUIRED
    return ctx


# --- streams ---------------------------------------------------------------------------------

class Violation(Exception):
    def __init__(self, close_code, rule):
        super().__init__(rule)
        self.close_code, self.rule = close_code, rule


class StreamReset(Exception):
    def __init__(self, code, reason, by_peer):
        who = "the peer" if by_peer else "we"
        super().__init__(f"{who} reset the stream (code {code}: {reason})")
        self.code, self.reason, self.by_peer = code, reason, by_peer


class ConnectionGone(Exception):
    pass


class Stream:
    def __init__(self, peer, sid, label):
        self.peer, self.id, self.label = peer, sid, label
        self.send_credit = peer.their["window"]   # what we may still send
        self.granted = peer.ours["window"]        # total the peer may send us
        self.received = 0                         # DATA bytes the peer sent us
        self.taken_since_grant = 0                # read by our reader, not yet granted back
        self.buffer = bytearray()
        self.local_fin = self.remote_fin = False
        self.reset_info = None                    # (code, reason, by_peer)
        self.changed = asyncio.Event()            # data, FIN, RESET, credit, connection gone
        self.sent_data = 0
        self.window_frames = 0
        self.window_total = 0
        self.window_sizes = []
        self.max_data_frame_seen = 0
        self.opened_at = time.monotonic()

    @property
    def over(self):
        return self.reset_info is not None or (self.local_fin and self.remote_fin)

    def _check(self):
        if self.reset_info is not None:
            code, reason, by_peer = self.reset_info
            raise StreamReset(code, reason, by_peer)
        if self.peer.gone is not None:
            raise ConnectionGone(self.peer.gone)

    async def _wait(self):
        self.changed.clear()
        await self.changed.wait()

    async def write(self, data):
        """Sends `data` as DATA frames, never more than the peer's credit, each at most its max_frame."""
        view = memoryview(data)
        while view:
            self._check()
            if self.local_fin:
                raise RuntimeError("write after our FIN")
            if self.send_credit <= 0:
                await self._wait()
                continue
            n = min(len(view), self.send_credit, self.peer.their["max_frame"])
            assert 0 < n <= self.send_credit
            self.send_credit -= n
            self.sent_data += n
            await self.peer.send_frame(DATA, self.id, bytes(view[:n]))
            view = view[n:]

    async def finish(self):
        self._check()
        if not self.local_fin:
            self.local_fin = True
            await self.peer.send_frame(FIN, self.id)
            self.peer.maybe_forget(self)

    async def reset(self, code, reason):
        if self.over:
            return
        self.reset_info = (code, reason, False)
        self.buffer.clear()
        reason_bytes = reason.encode()[:123]
        await self.peer.send_frame(RESET, self.id, struct.pack(">H", code) + reason_bytes)
        self.peer.maybe_forget(self)
        self.changed.set()

    async def read(self, limit=1 << 20):
        """Up to `limit` bytes; b"" once the peer has half-closed and everything was read."""
        while True:
            if self.reset_info is not None:
                self._check()
            if self.buffer:
                n = min(limit, len(self.buffer))
                chunk = bytes(self.buffer[:n])
                del self.buffer[:n]
                await self._taken(n)
                return chunk
            if self.remote_fin:
                return b""
            self._check()
            await self._wait()

    async def read_exactly(self, n):
        out = bytearray()
        while len(out) < n:
            chunk = await self.read(n - len(out))
            if not chunk:
                raise EOFError(f"the peer half-closed after {len(out)} of {n} bytes")
            out += chunk
        return bytes(out)

    async def _taken(self, n):
        # Documentation/Protocols.md: "Nearby sends WINDOW once its reader has taken half a window." We do the same.
        self.taken_since_grant += n
        if self.taken_since_grant >= self.peer.ours["window"] // 2 and not self.remote_fin and not self.over:
            increment, self.taken_since_grant = self.taken_since_grant, 0
            self.granted += increment
            await self.peer.send_frame(WINDOW, self.id, struct.pack(">I", increment))

    async def write_control(self, message):
        body = json.dumps(message).encode()
        if len(body) > MAX_CONTROL:
            raise ValueError("control message over 64 KiB")
        await self.write(struct.pack(">I", len(body)) + body)

    async def read_control(self):
        length = struct.unpack(">I", await self.read_exactly(4))[0]
        if length > MAX_CONTROL:
            raise Violation(None, f"control message of {length} bytes (over 64 KiB)")
        body = await self.read_exactly(length)
        return json.loads(body)

    def stats(self):
        return {"id": self.id, "label": self.label, "sent": self.sent_data, "received": self.received,
                "windowFrames": self.window_frames, "windowTotal": self.window_total,
                "windowSizes": sorted(set(self.window_sizes))[:8],
                "maxDataFrameReceived": self.max_data_frame_seen}


class Peer:
    """One WebSocket connection with Nearby's streams on it."""

    def __init__(self, ws, connecting, ours):
        self.ws, self.connecting = ws, connecting
        self.ours = ours
        self.their = None                 # the peer's streams capability, once known
        self.streams_on = False
        self.streams = {}                 # live streams by ID
        self.last_local = 0               # the last ID we opened
        self.last_remote = 0              # the last ID the peer opened
        self.incoming = asyncio.Queue()
        self.violations = []
        self.dropped = 0
        self.refusals = 0
        self.gone = None                  # why the connection ended, once it has
        self.rpc_waiters = {}
        self.notifications = []
        self.on_request = None            # async (message) -> None, for requests from the peer
        self.reader_task = None
        self.send_lock = asyncio.Lock()
        self.remote_open = 0

    # - sending -
    async def send_frame(self, kind, sid, payload=b""):
        debug(event="send", type=TYPE_NAMES[kind], stream=sid, bytes=len(payload))
        if self.gone is not None:
            raise ConnectionGone(self.gone)
        try:
            await self.ws.send(bytes([kind]) + struct.pack(">I", sid) + payload)
        except ConnectionClosed as error:
            self._lost(f"closed while sending: {error}")
            raise ConnectionGone(self.gone)

    async def send_json(self, message):
        await self.ws.send(json.dumps(message))

    async def open_stream(self, label):
        if not self.streams_on:
            raise RuntimeError("streams were not agreed in initialize")
        label_bytes = label.encode()
        if len(label_bytes) > 255:
            raise ValueError("label over 255 bytes")
        sid = self.last_local + 2 if self.last_local else (1 if self.connecting else 2)
        self.last_local = sid
        stream = Stream(self, sid, label)
        self.streams[sid] = stream
        await self.send_frame(OPEN, sid, label_bytes)
        return stream

    def maybe_forget(self, stream):
        if stream.over and self.streams.pop(stream.id, None) is not None and self._is_remote(stream.id):
            self.remote_open -= 1

    def _is_remote(self, sid):
        return sid % 2 == (0 if self.connecting else 1)

    # - reading -
    def start(self):
        self.reader_task = asyncio.create_task(self._reader())

    async def _reader(self):
        try:
            async for message in self.ws:
                if isinstance(message, str):
                    await self._text(message)
                else:
                    await self._binary(message)
            self._lost(f"closed ({self.ws.close_code}, {self.ws.close_reason!r})")
        except Violation as violation:
            self.violations.append(violation.rule)
            note(event="violation", rule=violation.rule, closeCode=violation.close_code)
            self._lost(f"we closed it ({violation.close_code}): {violation.rule}")
            try:
                await asyncio.wait_for(self.ws.close(violation.close_code, violation.rule[:120]), 5)
            except Exception:
                pass
        except ConnectionClosed as error:
            self._lost(f"closed: {error}")
        except Exception as error:  # a bug here must not hang the waiters
            self._lost(f"reader failed: {error!r}")
            raise

    def _lost(self, why):
        if self.gone is None:
            self.gone = why
            debug(event="connection", gone=why)
        for stream in list(self.streams.values()):
            stream.changed.set()
        for future in self.rpc_waiters.values():
            if not future.done():
                future.set_exception(ConnectionGone(why))
        self.incoming.put_nowait(None)

    async def _text(self, text):
        try:
            message = json.loads(text)
        except ValueError:
            note(event="peer-sent-malformed-json", text=text[:200])
            return
        if isinstance(message, dict) and "method" not in message and "id" in message:
            future = self.rpc_waiters.pop(message.get("id"), None)
            if future is not None and not future.done():
                future.set_result(message)
            else:
                note(event="unexpected-response", message=message)
            return
        if isinstance(message, dict) and "id" not in message:
            self.notifications.append(message)
            debug(event="notification", message=message)
            if message.get("method") == "initialize/waiting":
                timeout_ms = (message.get("params") or {}).get("timeout_ms", 0)
                note(event="waiting", timeoutMs=timeout_ms)
            return
        if self.on_request is not None:
            await self.on_request(message)
        elif isinstance(message, dict) and message.get("method") == "ping":
            await self.send_json({"jsonrpc": "2.0", "id": message["id"], "result": {}})
        else:
            await self.send_json({"jsonrpc": "2.0", "id": message.get("id") if isinstance(message, dict) else None,
                                  "error": {"code": -32601, "message": "method not found"}})

    async def _binary(self, frame):
        if not self.streams_on:
            raise Violation(1003, f"a binary message ({len(frame)} bytes) although streams were not agreed")
        if len(frame) < 5:
            raise Violation(1002, f"a stream frame of {len(frame)} bytes (shorter than type and ID)")
        kind, sid, payload = frame[0], struct.unpack(">I", frame[1:5])[0], frame[5:]
        debug(event="recv", type=TYPE_NAMES.get(kind, kind), stream=sid, bytes=len(payload))
        if kind not in TYPE_NAMES:
            raise Violation(1002, f"unknown frame type {kind} on stream {sid}")
        if sid == 0:
            raise Violation(1002, f"{TYPE_NAMES[kind]} for stream ID 0")
        if kind == OPEN:
            await self._open(sid, payload)
            return
        stream = self.streams.get(sid)
        if stream is None:
            existed = sid <= (self.last_remote if self._is_remote(sid) else self.last_local)
            if existed:
                self.dropped += 1  # "Frames for a stream that is over ... are dropped and counted."
                debug(event="dropped", type=TYPE_NAMES[kind], stream=sid)
                return
            raise Violation(1002, f"{TYPE_NAMES[kind]} for stream {sid}, which never existed")
        if kind == DATA:
            if stream.remote_fin:
                raise Violation(1002, f"DATA on stream {sid} after the peer's FIN")
            if len(payload) > self.ours["max_frame"]:
                raise Violation(1002, f"a DATA frame of {len(payload)} bytes on stream {sid}, over our max_frame {self.ours['max_frame']}")
            stream.received += len(payload)
            stream.max_data_frame_seen = max(stream.max_data_frame_seen, len(payload))
            if stream.received > stream.granted:
                raise Violation(1008, f"DATA beyond the window on stream {sid}: {stream.received} bytes received, {stream.granted} granted")
            stream.buffer += payload
        elif kind == WINDOW:
            if len(payload) != 4:
                raise Violation(1002, f"a WINDOW of {len(payload)} bytes on stream {sid} (must be 4)")
            increment = struct.unpack(">I", payload)[0]
            if increment == 0:
                raise Violation(1002, f"a WINDOW with increment 0 on stream {sid}")
            stream.send_credit += increment
            stream.window_frames += 1
            stream.window_total += increment
            stream.window_sizes.append(increment)
        elif kind == FIN:
            if payload:
                raise Violation(1002, f"a FIN with {len(payload)} bytes of payload on stream {sid}")
            if stream.remote_fin:
                raise Violation(1002, f"a second FIN on stream {sid}")
            stream.remote_fin = True
            self.maybe_forget(stream)
        elif kind == RESET:
            if len(payload) < 2:
                raise Violation(1002, f"a RESET of {len(payload)} bytes on stream {sid}")
            code = struct.unpack(">H", payload[:2])[0]
            reason_bytes = payload[2:]
            if len(reason_bytes) > 123:
                note(event="peer-rule", rule=f"RESET reason of {len(reason_bytes)} bytes (over 123)", stream=sid)
            reason = reason_bytes.decode("utf-8", "replace")
            stream.reset_info = (code, reason, True)
            stream.buffer.clear()
            self.maybe_forget(stream)
        stream.changed.set()

    async def _open(self, sid, payload):
        if not self._is_remote(sid):
            raise Violation(1002, f"OPEN of stream {sid}: the parity of our own streams")
        if sid <= self.last_remote:
            raise Violation(1002, f"OPEN of stream {sid}, not higher than the peer's last ({self.last_remote})")
        if len(payload) > 255:
            raise Violation(1002, f"OPEN of stream {sid} with a label of {len(payload)} bytes (over 255)")
        try:
            label = payload.decode("utf-8")
        except UnicodeDecodeError:
            raise Violation(1002, f"OPEN of stream {sid} with a label that is not UTF-8")
        self.last_remote = sid
        stream = Stream(self, sid, label)
        if self.remote_open >= self.ours["max_streams"]:
            # Over our max_streams: refuse this one (Documentation/Security.md, the limits: "too many streams at once").
            self.refusals += 1
            stream.reset_info = (REFUSED, "too many streams at once", False)
            await self.send_frame(RESET, sid, struct.pack(">H", REFUSED) + b"too many streams at once")
            note(event="refused", stream=sid, label=label, reason="too many streams at once")
            if self.refusals >= 1000:
                raise Violation(1008, "1,000 refused streams")
            return
        self.remote_open += 1
        self.streams[sid] = stream
        self.incoming.put_nowait(stream)

    async def request(self, method, params, rid, timeout=5.0):
        future = asyncio.get_running_loop().create_future()
        self.rpc_waiters[rid] = future
        await self.send_json({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
        # Documentation/Protocols.md: while the accepting side asks a person it sends initialize/waiting; a Nearby
        # peer then waits timeout_ms more (plus 2 s), instead of 5 s.
        deadline = time.monotonic() + timeout
        seen = 0
        while True:
            for message in self.notifications[seen:]:
                if message.get("method") == "initialize/waiting":
                    wait_ms = (message.get("params") or {}).get("timeout_ms", 0)
                    deadline = max(deadline, time.monotonic() + min(wait_ms / 1000 + 2, 120))
            seen = len(self.notifications)
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"no answer to {method}")
            try:
                return await asyncio.wait_for(asyncio.shield(future), min(left, 0.5))
            except asyncio.TimeoutError:
                continue


def streams_capability(args):
    return {"version": 1, "window": args.window, "max_streams": args.max_streams, "max_frame": args.max_frame}


def check_their_streams(offer):
    """The peer's streams capability, or a reason it is not usable."""
    if not isinstance(offer, dict):
        return None, "offered no streams"
    if offer.get("version") != 1:
        return None, f"offered streams version {offer.get('version')!r}, not 1"
    for key in ("window", "max_streams", "max_frame"):
        value = offer.get(key)
        if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
            return None, f"streams.{key} is {value!r}, not a positive integer"
    return offer, None


# --- send ------------------------------------------------------------------------------------

async def send(args):
    ctx = tls_context(False, args.identity, args.trust)
    own_der = own_certificate_der(args.identity)
    host = f"[{args.host}]" if ":" in args.host else args.host
    url = f"wss://{host}:{args.port}/"
    ours = streams_capability(args)
    try:
        ws = await ws_connect(url, ssl=ctx, max_size=MAX_JSON_MESSAGE + 16, compression=None,
                              open_timeout=args.timeout, ping_interval=None, max_queue=64)
    except Exception as error:
        return {"error": f"cannot connect to {url}: {error}"}
    peer = Peer(ws, connecting=True, ours=ours)
    peer.start()
    try:
        their_der = ws.transport.get_extra_info("ssl_object").getpeercert(binary_form=True)
        note(event="tls", peerID=peer_id_of_certificate(their_der), name=common_name(their_der),
             version=ws.transport.get_extra_info("ssl_object").version())
        answer = await peer.request("initialize", {
            "protocol_version": PROTOCOL_VERSION,
            "client_capabilities": {"streams": ours},
            "client_info": {"name": "stream_peer.py", "title": "Python stream peer", "version": websockets.__version__},
            "_meta": {"peer_id": peer_id_of_certificate(own_der), "display_name": common_name(own_der)},
        }, rid=1)
        if "result" not in answer:
            return {"error": f"initialize refused: {answer.get('error')}"}
        result = answer["result"]
        offer = (result.get("agent_capabilities") or {}).get("streams")
        note(event="initialized", protocolVersion=result.get("protocol_version"), streams=offer,
             agentInfo=result.get("agent_info"), meta=result.get("_meta"))
        their, why = check_their_streams(offer)
        if their is None:
            return {"error": f"the receiver {why}"}
        peer.their, peer.streams_on = their, True
        outcome = await send_file(peer, args.file, args.resume, args.timeout)
        outcome_stats = outcome.pop("_stats", None)
        if outcome_stats is not None:
            note(event="stream", **outcome_stats)
        if peer.violations:
            outcome = {"error": "the receiver broke the stream rules: " + "; ".join(peer.violations), **outcome}
            outcome.pop("saved", None)
        return outcome
    except (ConnectionGone, ConnectionClosed) as error:
        return {"error": f"connection lost: {peer.gone or error}", "violations": peer.violations}
    except StreamReset as error:
        return {"error": str(error)}
    except Violation as violation:
        return {"error": f"the receiver broke the file exchange: {violation.rule}"}
    except (TimeoutError, asyncio.TimeoutError):
        return {"error": "timed out"}
    finally:
        try:
            await asyncio.wait_for(ws.close(1000, "done"), 5)
        except Exception:
            pass
        if peer.reader_task:
            peer.reader_task.cancel()
        if peer.dropped:
            note(event="dropped", frames=peer.dropped)


async def send_file(peer, path, resume, timeout):
    size = os.path.getsize(path)
    info = os.stat(path)
    stream = await peer.open_stream(FILE_LABEL)
    started = time.monotonic()
    try:
        await stream.write_control({"name": os.path.basename(path), "folders": [], "size": size,
                                    "modified": info.st_mtime, "resume": bool(resume)})
        answer = await asyncio.wait_for(stream.read_control(), timeout)
        note(event="answer", answer=answer, initialCredit=peer.their["window"],
             creditNow=stream.send_credit)
        if answer.get("accept") is not True:
            # Documentation/Protocols.md does not say how a declined stream ends; we half-close and see what the
            # receiver does (FIN or RESET), for the record.
            ending = "nothing within 2 s"
            try:
                await stream.finish()
                tail = await asyncio.wait_for(stream.read(), 2)
                ending = "FIN" if not tail else f"{len(tail)} more bytes"
            except StreamReset as reset:
                ending = f"RESET {reset.code} ({reset.reason})"
            except (asyncio.TimeoutError, ConnectionGone) as error:
                ending = f"{type(error).__name__}: {error}"
            note(event="declined", reason=answer.get("reason"), streamEnded=ending)
            return {"error": f"declined: {answer.get('reason')}", "_stats": stream.stats()}
        offset = answer.get("offset", 0) or 0
        prefix = answer.get("prefix_sha256")
        digest = hashlib.sha256()
        start = 0
        with open(path, "rb") as file:
            if resume and 0 < offset <= size and isinstance(prefix, str):
                left = offset
                while left:
                    chunk = file.read(min(left, 1 << 20))
                    if not chunk:
                        break
                    digest.update(chunk)
                    left -= len(chunk)
                if digest.hexdigest() == prefix.lower():
                    start = offset
                else:
                    note(event="prefix-differs", offset=offset)
                    digest = hashlib.sha256()
                    file.seek(0)
            elif offset:
                note(event="peer-rule", rule=f"offset {offset} offered although resume was "
                     f"{bool(resume)} and the file has {size} bytes", prefix=prefix)
            await stream.write_control({"start": start})
            file.seek(start)
            sent = 0
            while True:
                chunk = file.read(1 << 18)
                if not chunk:
                    break
                digest.update(chunk)
                await stream.write(chunk)
                sent += len(chunk)
        whole = digest.hexdigest()
        await stream.write_control({"sha256": whole})
        await stream.finish()
        result = await asyncio.wait_for(stream.read_control(), timeout)
        tail = await asyncio.wait_for(stream.read(), timeout)
        if tail:
            note(event="peer-rule", rule=f"{len(tail)} bytes after the receiver's answer, before its FIN")
        elapsed = time.monotonic() - started
        stats = stream.stats()
        stats.update(seconds=round(elapsed, 3), start=start, size=size)
        if "saved" in result:
            return {"saved": result["saved"], "sha256": whole, "transferred": sent, "_stats": stats}
        return {"error": f"failed: {result.get('failed')}", "kind": result.get("kind"), "sha256": whole,
                "transferred": sent, "_stats": stats}
    except asyncio.CancelledError:
        raise
    except (StreamReset, ConnectionGone, Violation):
        raise
    except Exception as error:
        try:
            await stream.reset(FAILED, f"sender failed: {error}"[:123])
        except Exception:
            pass
        raise


# --- echo-server -----------------------------------------------------------------------------

async def echo_server(args):
    ctx = tls_context(True, args.identity, args.trust)
    own_der = own_certificate_der(args.identity)
    ours = streams_capability(args)
    finished = asyncio.get_running_loop().create_future()
    summary = {}

    async def handle(ws):
        if finished.done() or summary:
            await ws.close(1013, "this echo server takes one connection")
            return
        summary["busy"] = True
        path = ws.request.path if ws.request is not None else None
        their_der = ws.transport.get_extra_info("ssl_object").getpeercert(binary_form=True)
        note(event="accepted", path=path, peerID=peer_id_of_certificate(their_der), name=common_name(their_der))
        peer = Peer(ws, connecting=False, ours=ours)
        initialized = asyncio.Event()
        problems = []

        async def on_request(message):
            mid = message.get("id") if isinstance(message, dict) else None
            method = message.get("method") if isinstance(message, dict) else None
            if method == "initialize":
                params = message.get("params") or {}
                claimed = (params.get("_meta") or {}).get("peer_id")
                if claimed is not None and claimed.replace("-", "").upper() != peer_id_of_certificate(their_der).replace("-", ""):
                    await peer.send_json({"jsonrpc": "2.0", "id": mid, "error": {"code": -32602, "message": "_meta.peer_id is not the certificate's"}})
                    return
                offer = (params.get("client_capabilities") or {}).get("streams")
                their, why = check_their_streams(offer)
                note(event="initialize", protocolVersion=params.get("protocol_version"), streams=offer,
                     clientInfo=params.get("client_info"), meta=params.get("_meta"))
                if their is not None:
                    peer.their, peer.streams_on = their, True
                else:
                    problems.append(f"the peer {why}")
                await peer.send_json({"jsonrpc": "2.0", "id": mid, "result": {
                    "protocol_version": PROTOCOL_VERSION,
                    "agent_capabilities": {"streams": ours},
                    "auth_methods": [],
                    "agent_info": {"name": "stream_peer.py", "title": "Python stream peer", "version": websockets.__version__},
                    "_meta": {"peer_id": peer_id_of_certificate(own_der), "display_name": common_name(own_der)},
                }})
                initialized.set()
            elif not initialized.is_set():
                if mid is not None:
                    await peer.send_json({"jsonrpc": "2.0", "id": mid, "error": {"code": -32002, "message": "not initialized"}})
            elif method == "ping":
                await peer.send_json({"jsonrpc": "2.0", "id": mid, "result": {}})
            elif mid is not None:
                await peer.send_json({"jsonrpc": "2.0", "id": mid, "error": {"code": -32601, "message": "method not found"}})

        peer.on_request = on_request
        peer.start()
        results = []

        async def echo(stream):
            began = time.monotonic()
            outcome = "echoed"
            try:
                while True:
                    chunk = await stream.read(1 << 18)
                    if not chunk:
                        break
                    await stream.write(chunk)
                await stream.finish()
            except StreamReset as error:
                outcome = str(error)
            except ConnectionGone as error:
                outcome = f"connection lost: {error}"
            stats = stream.stats()
            stats.update(outcome=outcome, seconds=round(time.monotonic() - began, 3))
            say(event="stream", **stats)
            results.append(stats)

        tasks = []
        try:
            await asyncio.wait_for(initialized.wait(), 5)
            while True:
                stream = await peer.incoming.get()
                if stream is None:
                    break
                say(event="opened", id=stream.id, label=stream.label)
                tasks.append(asyncio.create_task(echo(stream)))
        except asyncio.TimeoutError:
            problems.append("no initialize within 5 s")
            await ws.close(1008, "no initialize")
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        summary.pop("busy", None)
        summary.update(streams=len(results), violations=peer.violations + problems, dropped=peer.dropped,
                       end=peer.gone, closeCode=ws.close_code,
                       ok=bool(results) and not peer.violations and not problems and all(r["outcome"] == "echoed" for r in results))
        if not finished.done():
            finished.set_result(True)

    async with ws_serve(handle, args.host, args.port, ssl=ctx, max_size=MAX_JSON_MESSAGE + 16,
                        compression=None, ping_interval=None, max_queue=64) as running:
        say(event="listening", port=running.sockets[0].getsockname()[1])
        try:
            await asyncio.wait_for(finished, args.timeout)
        except asyncio.TimeoutError:
            summary.update(ok=False, error=f"no connection ended within {args.timeout} s")
    say(event="done", **summary)
    return 0 if summary.get("ok") else 1


def main():
    global VERBOSE
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="mode", required=True)
    s = sub.add_parser("send")
    s.add_argument("host")
    s.add_argument("port", type=int)
    s.add_argument("file")
    s.add_argument("--resume", action="store_true")
    e = sub.add_parser("echo-server")
    e.add_argument("port", type=int)
    e.add_argument("--host", default="127.0.0.1")
    for p in (s, e):
        p.add_argument("--identity", required=True)
        p.add_argument("--trust", required=True)
        p.add_argument("--window", type=int, default=262144)
        p.add_argument("--max-streams", type=int, default=32)
        p.add_argument("--max-frame", type=int, default=65536)
        p.add_argument("--timeout", type=float, default=120)
        p.add_argument("--verbose", action="store_true")
    args = parser.parse_args()
    VERBOSE = args.verbose
    if args.mode == "send":
        async def run():
            return await asyncio.wait_for(send(args), args.timeout + 10)
        try:
            outcome = asyncio.run(run())
        except asyncio.TimeoutError:
            outcome = {"error": "timed out"}
        print(json.dumps(outcome), flush=True)
        sys.exit(0 if "saved" in outcome else 1)
    sys.exit(asyncio.run(echo_server(args)))


if __name__ == "__main__":
    main()
