#!/usr/bin/env python3
"""A site's resolver meeting the discovery proxy's UDP rate limit, for ProxyLabTests.

  udp_burst.py SERVER ZONE COUNT

Asks ZONE's SOA over UDP COUNT times in a row (0.1 s for each answer), then once over TCP, then
COUNT times over UDP again, and prints one JSON object: how many UDP questions of each burst
got the answer (records, no TC). A proxy that tells a resolver from a forged flood limits the
first burst and answers all of the second: the TCP question proved the address.
"""
import json
import sys

import dns.flags
import dns.message
import dns.query


def burst(server, zone, count):
    answered = 0
    for _ in range(count):
        query = dns.message.make_query(zone, "SOA")
        try:
            reply = dns.query.udp(query, server, timeout=0.1, ignore_unexpected=True)
        except Exception:
            continue
        if reply.answer and not reply.flags & dns.flags.TC:
            answered += 1
    return answered


def main():
    server, zone, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
    before = burst(server, zone, count)
    tcp = dns.query.tcp(dns.message.make_query(zone, "SOA"), server, timeout=3)
    after = burst(server, zone, count)
    print(json.dumps({"count": count, "before": before, "tcp": bool(tcp.answer), "after": after}), flush=True)


if __name__ == "__main__":
    main()
