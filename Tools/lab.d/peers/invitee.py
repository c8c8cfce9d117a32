#!/usr/bin/env python3
"""A second invitee for Nearby's invitations, written from Documentation/Protocols.md's section
"Invitations: the protocol" (and "Connecting") alone, with Python's ssl, hmac and hashlib
and the sans-I/O part of `websockets`; nothing of Nearby's Swift code is used or imitated.

  invitee.py LINK --identity-dir DIR [--name CN] [--replay-record FILE | --replay-use FILE]
             [--skip-expiry-check] [--pause S] [--timeout S] [--json]

It makes (or reuses) a self-signed EC P-256 key and certificate in DIR (`openssl` CLI, common
name --name, default "Python Invitee"), parses the link (case-insensitively; it may sit inside
other text), dials its addresses (a new one every 250 ms, or at once when one fails, at most 8
at a time; the first that proves the link's key wins), refuses a server whose certificate key
does not hash to the link's peer ID before it sends a single byte of the application, runs
invitation/open and invitation/prove, then initialize and a ping.

  --replay-record FILE  take the challenge, compute the proof, write it to FILE, and hang up
                        without sending it (for a replay test)
  --replay-use FILE     send the proof in FILE instead of computing one (made for another
                        challenge: the inviter must refuse it as a wrong proof)
  --skip-expiry-check   dial even after the link's expiry, to see the inviter refuse it too
  --pause S             wait S seconds between the accepted proof and initialize, as a slow
                        device or a long round trip does (the inviter must wait for it)

Output: one line per step (JSON with --json): identity, link, tls, wrongPeer, challenge |
trusted, replaying, accepted, initialized, notification, ping, recorded, refused, malformed,
done. Peer IDs are printed in Nearby's text form (54 characters, groups of six with dashes).

Exit status: 0 accepted (or trusted already, or the proof recorded), 1 refused, unreachable
or another peer at the addresses, 2 a link that does not parse or bad arguments.
"""
import argparse
import asyncio
import hashlib
import hmac
import ipaddress
import json
import os
import re
import ssl
import subprocess
import sys
import time

from websockets.client import ClientProtocol
from websockets.frames import Opcode
from websockets.http11 import Response
from websockets.uri import parse_uri

PROTOCOL_VERSION = "0.2.2"
ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"  # Crockford's base32
PROOF_LABEL = b"nearby invitation proof 1"
REFUSAL = -32005

JSON_OUTPUT = False


def say(event, **members):
    """One line per step: JSON with --json, else `event: key=value ...`."""
    if JSON_OUTPUT:
        print(json.dumps({"event": event, **members}), flush=True)
    else:
        details = " ".join(f"{k}={json.dumps(v) if not isinstance(v, str) else v}" for k, v in members.items())
        print(f"{event}: {details}" if details else event, flush=True)


class LinkError(Exception):
    """The link does not parse (exit 2)."""


class Refused(Exception):
    """The invitation was refused, or the inviter could not be reached (exit 1)."""

    def __init__(self, reason, message, code=None):
        super().__init__(message)
        self.reason, self.message, self.code = reason, message, code


# --- base32, Luhn mod 32, peer IDs ---------------------------------------------------------

def base32_encode(data):
    """Most significant bit first; the last character is padded with zero bits."""
    bits = len(data) * 8
    count = (bits + 4) // 5
    value = int.from_bytes(data, "big") << (count * 5 - bits)
    return "".join(ALPHABET[(value >> (5 * (count - 1 - i))) & 31] for i in range(count))


def base32_decode(text, size, field):
    if len(text) != (size * 8 + 4) // 5:
        raise LinkError(f"the {field} has {len(text)} characters, not {(size * 8 + 4) // 5}")
    value = 0
    for character in text:
        index = ALPHABET.find(character)
        if index < 0:
            raise LinkError(f"the {field} has a character that is not base32: {character!r}")
        value = value * 32 + index
    extra = len(text) * 5 - size * 8
    if value & ((1 << extra) - 1):
        raise LinkError(f"the {field} ends in bits that should be zero")
    return (value >> extra).to_bytes(size, "big")


def luhn32(characters):
    """Luhn mod 32: from the right, every second character doubled starting with the
    rightmost, each product's quotient and remainder by 32 summed; (32 - sum % 32) % 32."""
    total = 0
    for position, character in enumerate(reversed(characters)):
        value = ALPHABET.index(character) * (2 if position % 2 == 0 else 1)
        total += value // 32 + value % 32
    return ALPHABET[(32 - total % 32) % 32]


def peer_id_text(digest, dashes=True):
    encoded = base32_encode(digest)  # 52 characters
    first, second = encoded[:26], encoded[26:]
    full = first + luhn32(first) + second + luhn32(second)
    return "-".join(full[i:i + 6] for i in range(0, 54, 6)) if dashes else full


def parse_peer_id(text):
    if len(text) != 54:
        raise LinkError(f"the peer ID has {len(text)} characters, not 54")
    first, second = text[:26], text[27:53]
    for half, check in ((first, text[26]), (second, text[53])):
        for character in half + check:
            if character not in ALPHABET:
                raise LinkError(f"the peer ID has a character that is not base32: {character!r}")
        if luhn32(half) != check:
            raise LinkError("the peer ID's check character does not match (a typo?)")
    return base32_decode(first + second, 32, "peer ID")


# --- a small DER walk -------------------------------------------------------------------

def der_item(data, offset):
    """(tag, start of the item, start of its content, end of the item)."""
    tag = data[offset]
    length = data[offset + 1]
    content = offset + 2
    if length & 0x80:
        count = length & 0x7F
        length = int.from_bytes(data[content:content + count], "big")
        content += count
    return tag, offset, content, content + length


def der_children(data, item):
    _, _, offset, end = item
    children = []
    while offset < end:
        child = der_item(data, offset)
        children.append(child)
        offset = child[3]
    return children


def certificate_parts(der):
    """The DER SubjectPublicKeyInfo and the subject's common name of a certificate."""
    certificate = der_item(der, 0)
    tbs = der_children(der, certificate)[0]
    fields = der_children(der, tbs)
    if fields[0][0] == 0xA0:  # [0] version
        fields = fields[1:]
    # serialNumber, signature, issuer, validity, subject, subjectPublicKeyInfo
    subject, spki = fields[4], fields[5]
    name = None
    for rdn in der_children(der, subject):  # SET OF AttributeTypeAndValue
        for attribute in der_children(der, rdn):
            oid, value = der_children(der, attribute)
            if der[oid[2]:oid[3]] == bytes([0x55, 0x04, 0x03]):  # 2.5.4.3 commonName
                name = der[value[2]:value[3]].decode("utf-8", "replace")
    return der[spki[1]:spki[3]], name


def peer_id_of(der):
    return hashlib.sha256(certificate_parts(der)[0]).digest()


# --- the link -------------------------------------------------------------------------

class Link:
    def __init__(self, text):
        found = re.search(r"nearby:[0-9a-z:/.\-]*", text, re.IGNORECASE)
        if not found:
            raise LinkError("this is not a Nearby invitation (no NEARBY: in it)")
        fields = found.group(0).upper().split("/")
        version = fields[0][len("NEARBY:"):]
        if version != "1":
            raise LinkError(f"this invitation is of version {version or '(none)'}, not version 1")
        if len(fields) < 6:
            raise LinkError("the invitation is cut short: it needs a peer ID, an invitation ID, a secret, an expiry and an address")
        self.text = found.group(0)
        self.peer_id = parse_peer_id(fields[1])
        base32_decode(fields[2], 5, "invitation ID")  # checks it; it is sent as written (upper case)
        self.invitation_id = fields[2]
        self.secret = base32_decode(fields[3], 16, "secret")
        if not fields[4].isdigit():
            raise LinkError(f"the expiry {fields[4]!r} is not a number of seconds")
        self.expires = int(fields[4])
        if len(fields) - 5 > 16:
            raise LinkError(f"the invitation has {len(fields) - 5} addresses, more than 16")
        self.addresses = [self.address(field) for field in fields[5:]]

    @staticmethod
    def address(field):
        host, colon, port = field.rpartition(":")
        if not colon or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise LinkError(f"the address {field!r} is not HOST:PORT")
        host = host.lower()
        if ":" in host:
            try:
                ipaddress.IPv6Address(host)
            except ValueError:
                raise LinkError(f"the address {field!r} has an IPv6 address that does not parse") from None
        elif not re.fullmatch(r"[0-9a-z]([0-9a-z.\-]*[0-9a-z.])?", host):
            raise LinkError(f"the address {field!r} has a host name that does not parse")
        return host, int(port)

    def proof(self, invitee_id, challenge):
        return hmac.new(self.secret, PROOF_LABEL + self.peer_id + invitee_id + challenge, hashlib.sha256).hexdigest()


# --- identity -------------------------------------------------------------------------

def identity(directory, name):
    """(certificate file, key file, DER, created) of a self-signed P-256 identity in directory."""
    os.makedirs(directory, mode=0o700, exist_ok=True)
    certificate, key = os.path.join(directory, "invitee.crt"), os.path.join(directory, "invitee.key")
    created = False
    if not (os.path.exists(certificate) and os.path.exists(key)):
        subject = "/CN=" + name.replace("\\", "\\\\").replace("/", "\\/").replace("=", "\\=").replace("+", "\\+")
        subprocess.run(
            ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-sha256",
             "-days", "3650", "-utf8", "-subj", subject, "-keyout", key, "-out", certificate],
            check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        os.chmod(key, 0o600)
        created = True
    with open(certificate) as file:
        der = ssl.PEM_cert_to_DER_cert(file.read())
    return certificate, key, der, created


# --- dialing ---------------------------------------------------------------------------

def tls_context(certificate, key):
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.minimum_version = ssl.TLSVersion.TLSv1_3
    context.load_cert_chain(certificate, key)
    # No chain to check: the inviter's key is judged against the link's peer ID below,
    # before anything is sent.
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    return context


def describe(error):
    if isinstance(error, asyncio.TimeoutError):
        return "timed out"
    if isinstance(error, OSError) and error.errno:
        return os.strerror(error.errno).lower()
    if isinstance(error, OSError) and error.strerror:
        return error.strerror.lower()
    return str(error) or type(error).__name__


async def dial(link, context, timeout):
    """Happy eyeballs over the link's addresses; returns (reader, writer, host, port, der) of
    the first connection whose TLS peer proves the link's key."""
    loop = asyncio.get_running_loop()
    winner = loop.create_future()
    failures, wrong = [], []

    async def attempt(host, port):
        try:
            reader, writer = await asyncio.wait_for(
                asyncio.open_connection(host, port, ssl=context, server_hostname="" if ":" in host or host[0].isdigit() else host),
                timeout)
        except Exception as error:  # noqa: BLE001 - every failure of one address is a report
            failures.append(f"{host} port {port}: {describe(error)}")
            return
        der = writer.get_extra_info("ssl_object").getpeercert(binary_form=True)
        found = peer_id_of(der) if der else b""
        if not hmac.compare_digest(found, link.peer_id):
            writer.transport.abort()  # nothing of the application was sent
            shown = peer_id_text(found) if der else "(none)"
            wrong.append((host, port, shown))
            say("wrongPeer", address=host, port=port, peerID=shown)
            return
        if winner.done():
            writer.transport.abort()
            return
        winner.set_result((reader, writer, host, port, der))

    tasks = []
    for host, port in link.addresses:
        if winner.done():
            break
        while sum(not task.done() for task in tasks) >= 8:
            await asyncio.wait([winner, *(task for task in tasks if not task.done())], return_when=asyncio.FIRST_COMPLETED)
        tasks.append(asyncio.create_task(attempt(host, port)))
        # The next address after 250 ms, or at once when an attempt ends (failed, or won).
        await asyncio.wait([winner, *(task for task in tasks if not task.done())], timeout=0.25, return_when=asyncio.FIRST_COMPLETED)
    while not winner.done() and any(not task.done() for task in tasks):
        await asyncio.wait([winner, *(task for task in tasks if not task.done())], return_when=asyncio.FIRST_COMPLETED)
    for task in tasks:
        task.cancel()
    if winner.done():
        return winner.result()
    if wrong:
        host, port, shown = wrong[0]
        raise Refused("notInviter", f"the peer at {host} port {port} is not the inviter: its key is {shown}, "
                                    f"the invitation is for {peer_id_text(link.peer_id)}; nothing was sent to it")
    raise Refused("unreachable", f"no address of the invitation answered ({'; '.join(failures)})")


# --- WebSocket and JSON-RPC over the TLS stream ---------------------------------------

class Closed(Exception):
    pass


class Channel:
    """JSON-RPC 2.0 over a WebSocket (websockets' sans-I/O client) on an asyncio stream."""

    def __init__(self, reader, writer, host, port):
        self.reader, self.writer = reader, writer
        self.protocol = ClientProtocol(parse_uri(f"wss://{f'[{host}]' if ':' in host else host}:{port}/"), max_size=2**20)
        self.events = []
        self.fragments = None

    async def flush(self):
        for data in self.protocol.data_to_send():
            if data:
                self.writer.write(data)
        await self.writer.drain()

    async def fill(self):
        data = await self.reader.read(65536)
        if data:
            self.protocol.receive_data(data)
        else:
            self.protocol.receive_eof()
        await self.flush()  # pongs and close answers
        self.events += self.protocol.events_received()
        if not data and not self.events:
            raise Closed(self.close_text())

    def close_text(self):
        close = self.protocol.close_rcvd
        return f"the inviter closed the connection ({close.code}{', ' + close.reason if close.reason else ''})" if close \
            else "the inviter closed the connection"

    async def upgrade(self):
        self.protocol.send_request(self.protocol.connect())
        await self.flush()
        while True:
            while self.events:
                event = self.events.pop(0)
                if isinstance(event, Response):
                    if self.protocol.handshake_exc is not None:
                        raise Closed(f"the WebSocket upgrade failed: {self.protocol.handshake_exc}")
                    return
            await self.fill()

    async def send(self, message):
        self.protocol.send_text(json.dumps(message).encode())
        await self.flush()

    async def receive(self):
        while True:
            while self.events:
                frame = self.events.pop(0)
                if frame.opcode == Opcode.TEXT:
                    self.fragments = [frame.data]
                elif frame.opcode == Opcode.CONT and self.fragments is not None:
                    self.fragments.append(frame.data)
                elif frame.opcode == Opcode.CLOSE:
                    raise Closed(self.close_text())
                else:
                    continue
                if frame.fin:
                    text, self.fragments = b"".join(self.fragments), None
                    return json.loads(text)
            await self.fill()

    async def call(self, identifier, method, params=None):
        message = {"jsonrpc": "2.0", "id": identifier, "method": method}
        if params is not None:
            message["params"] = params
        await self.send(message)
        while True:
            answer = await self.receive()
            if "id" not in answer and "method" in answer:
                say("notification", method=answer["method"], params=answer.get("params"))
                continue
            if answer.get("id") != identifier:
                raise Closed(f"an answer with id {answer.get('id')!r} came while waiting for {identifier!r}")
            return answer

    async def close(self):
        try:
            self.protocol.send_close(1000, "done")
            await self.flush()
            await asyncio.wait_for(self._closing(), 2)
        except Exception:  # noqa: BLE001 - the connection ends either way
            pass
        self.writer.transport.abort()

    async def _closing(self):
        while self.protocol.close_rcvd is None:
            await self.fill()


def refusal(answer):
    error = answer["error"]
    data = error.get("data") if isinstance(error.get("data"), dict) else {}
    return Refused(data.get("reason"), error.get("message", ""), error.get("code"))


# --- the whole acceptance -------------------------------------------------------------

async def accept(args, link, own_certificate, own_key, own_der):
    own_id = peer_id_of(own_der)
    own_text = peer_id_text(own_id)
    if time.time() >= link.expires and not args.skip_expiry_check:
        expired = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(link.expires))
        raise Refused("expired", f"this invitation expired at {expired} (checked here; nothing was dialed)")
    reader, writer, host, port, der = await dial(link, tls_context(own_certificate, own_key), args.timeout)
    inviter_text = peer_id_text(link.peer_id)
    _, inviter_name = certificate_parts(der)
    say("tls", address=host, port=port, peerID=inviter_text, name=inviter_name)
    channel = Channel(reader, writer, host, port)
    try:
        # The inviter allows 10 s for the exchange; initialize and ping come on top.
        return await asyncio.wait_for(exchange(args, link, channel, own_id, own_text, inviter_text, inviter_name), 20)
    finally:
        writer.transport.abort()


async def exchange(args, link, channel, own_id, own_text, inviter_text, inviter_name):
    await channel.upgrade()
    opened = await channel.call("invitation-open", "invitation/open", {"invitation": link.invitation_id})
    if "error" in opened:
        raise refusal(opened)
    result = opened.get("result") or {}
    if result.get("trusted") is True:
        say("trusted", inviter=inviter_text, self=own_text, name=inviter_name)
    else:
        challenge = bytes.fromhex(result["challenge"])
        if len(challenge) != 32:
            raise Refused("failed", f"the challenge has {len(challenge)} bytes, not 32")
        say("challenge", challenge=challenge.hex())
        proof = link.proof(own_id, challenge)
        if args.replay_record:
            with open(args.replay_record, "w") as file:
                json.dump({"proof": proof, "challenge": challenge.hex(), "invitation": link.invitation_id, "self": own_text}, file)
            say("recorded", file=args.replay_record, proof=proof)
            await channel.close()
            return 0
        if args.replay_use:
            with open(args.replay_use) as file:
                proof = json.load(file)["proof"]
            say("replaying", file=args.replay_use, proof=proof)
        proved = await channel.call("invitation-prove", "invitation/prove", {"proof": proof})
        if "error" in proved:
            raise refusal(proved)
        if proved.get("result") != {}:
            raise Refused("failed", f"invitation/prove answered {json.dumps(proved.get('result'))}, not {{}}")
        say("accepted", inviter=inviter_text, self=own_text, name=inviter_name)
        if args.pause > 0:
            await asyncio.sleep(args.pause)
    initialized = await channel.call(1, "initialize", {
        "protocol_version": PROTOCOL_VERSION,
        "client_capabilities": {},
        "client_info": {"name": "invitee.py", "title": "Python invitee", "version": "1"},
        "_meta": {"display_name": args.name, "peer_id": own_text},
    })
    if "error" in initialized:
        error = initialized["error"]
        raise Refused("initialize", f"initialize failed: {error.get('message')} ({error.get('code')})", error.get("code"))
    result = initialized["result"]
    say("initialized", protocolVersion=result.get("protocol_version"), agentInfo=result.get("agent_info"),
        meta=result.get("_meta"))
    pinged = await channel.call(2, "ping")
    if pinged.get("result") != {}:
        raise Refused("failed", f"ping answered {json.dumps(pinged)}, not {{}}")
    say("ping", result=pinged["result"])
    await channel.close()
    say("done")
    return 0


def main():
    global JSON_OUTPUT
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("link")
    parser.add_argument("--identity-dir", required=True)
    parser.add_argument("--name", default="Python Invitee")
    replay = parser.add_mutually_exclusive_group()
    replay.add_argument("--replay-record", metavar="FILE")
    replay.add_argument("--replay-use", metavar="FILE")
    parser.add_argument("--skip-expiry-check", action="store_true",
                        help="dial even after the link's expiry (to see the inviter's own check)")
    parser.add_argument("--pause", type=float, default=0.0, help="seconds between the accepted proof and initialize (default 0)")
    parser.add_argument("--timeout", type=float, default=10.0, help="seconds to reach the inviter (default 10)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    JSON_OUTPUT = args.json
    try:
        link = Link(args.link)
    except LinkError as error:
        say("malformed", message=f"invitee.py: not a usable invitation: {error}")
        return 2
    certificate, key, der, created = identity(args.identity_dir, args.name)
    say("identity", self=peer_id_text(peer_id_of(der)), name=certificate_parts(der)[1], created=created)
    say("link", inviter=peer_id_text(link.peer_id), invitation=link.invitation_id, expires=link.expires, addresses=[f"{h}:{p}" for h, p in link.addresses])
    try:
        return asyncio.run(accept(args, link, certificate, key, der))
    except Refused as refused:
        say("refused", code=refused.code, reason=refused.reason, message=refused.message)
        return 1
    except (Closed, OSError, asyncio.TimeoutError, ValueError, KeyError) as error:
        say("refused", code=None, reason="failed", message=describe(error) if not isinstance(error, Closed) else str(error))
        return 1


if __name__ == "__main__":
    sys.exit(main())
