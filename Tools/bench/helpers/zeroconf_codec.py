"""Times python-zeroconf's own parser (DNSIncoming) and builder (DNSOutgoing) on packet files.

Usage: zeroconf_codec.py [--pure] PACKET.bin ...   (one JSON object per packet and operation)

python-zeroconf's wheels ship its parser and builder compiled with Cython; --pure times the
same library's plain-Python modules instead (a copy of the package without the compiled ones).

The packets are the ones nearby-codec-bench wrote, so both sides work on the same bytes.
Decoding means a full parse: DNSIncoming(...) plus reading every section. Encoding means what
a zeroconf responder does per send: a new DNSOutgoing, add the (already built) questions and
records, and produce the packet bytes.
"""
import json
import os
import shutil
import statistics
import sys
import tempfile
import time

if len(sys.argv) > 1 and sys.argv[1] == "--pure":
    sys.argv.pop(1)
    import importlib.util
    origin = os.path.dirname(importlib.util.find_spec("zeroconf").origin)
    pure_root = tempfile.mkdtemp()
    shutil.copytree(origin, os.path.join(pure_root, "zeroconf"),
                    ignore=shutil.ignore_patterns("*.so", "__pycache__"))
    sys.path.insert(0, pure_root)

import zeroconf
from zeroconf._protocol import incoming as incoming_module
from zeroconf._protocol.incoming import DNSIncoming
from zeroconf._protocol.outgoing import DNSOutgoing


def measure(body, iterations, rounds=21):
    """Median and 95th percentile of the rounds' ns per call."""
    samples = []
    for _ in range(rounds):
        start = time.perf_counter_ns()
        for _ in range(iterations):
            body()
        samples.append((time.perf_counter_ns() - start) / iterations)
    ordered = sorted(samples)
    p95 = ordered[min(len(ordered) - 1, -(-len(ordered) * 95 // 100) - 1)]
    return statistics.median(samples), p95


def main(paths):
    compiled = incoming_module.__file__.endswith(".so")
    for path in paths:
        data = open(path, "rb").read()
        label = os.path.basename(path).rsplit(".", 1)[0]
        parsed = DNSIncoming(data)
        records = parsed.answers()
        questions = parsed.questions
        if len(records) + len(questions) == 0:
            raise SystemExit(f"{path}: zeroconf parsed nothing")

        def decode():
            message = DNSIncoming(data)
            return len(message.answers()) + len(message.questions)

        def encode():
            out = DNSOutgoing(parsed.flags, multicast=True)
            for question in questions:
                out.add_question(question)
            for record in records:
                out.add_answer_at_time(record, 0)
            return out.packets()

        iterations = 5000
        for operation, body in (("decode", decode), ("encode", encode)):
            ns, p95 = measure(body, iterations)
            print(json.dumps({
                "peer": "python-zeroconf",
                "version": zeroconf.__version__,
                "compiled": compiled,
                "packet": label,
                "operation": operation,
                "bytes": len(data),
                "records": len(records),
                "nanosecondsPerPacket": ns,
                "nanosecondsPerPacketP95": p95,
                "packetsPerSecond": 1e9 / ns,
            }), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
