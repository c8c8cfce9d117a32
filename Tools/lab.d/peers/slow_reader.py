#!/usr/bin/env python3
"""Reads a `nearby serve --json` stdout the way a stalled application would, for the lab's
back-pressure test: passes the first line ("listening") through, then reads nothing for
STALL seconds (the pipe fills and serve's printing stalls), then reads everything until a
"disconnected" event and prints one JSON summary: how many "flood" messages serve printed,
whether their params.i ran 0, 1, 2, ... with nothing lost, repeated or reordered, and the
serve process's peak resident memory seen while stalled (sampled from /proc every 0.1 s).

  nearby serve ... --json | slow_reader.py STALL_SECONDS
"""
import json
import os
import sys
import time


def rss_kib(pid):
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("VmRSS"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def writer_pid():
    """The process writing our stdin: the other end of the same pipe."""
    ours = os.readlink("/proc/self/fd/0")
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            if os.readlink(f"/proc/{entry}/fd/1") == ours:
                return int(entry)
        except OSError:
            continue
    return None


def main():
    stall = float(sys.argv[1])
    stdin = sys.stdin.buffer
    first = stdin.readline()
    sys.stdout.write(first.decode())
    sys.stdout.flush()
    pid = writer_pid()
    before = rss_kib(pid) if pid else 0
    peak = before
    end = time.monotonic() + stall
    while time.monotonic() < end:
        if pid:
            peak = max(peak, rss_kib(pid))
        time.sleep(0.1)
    printed, expected, in_order, first_wrong = 0, 0, True, None
    for line in stdin:
        event = json.loads(line)
        if event.get("event") == "message" and event["message"].get("method") == "flood":
            index = event["message"]["params"]["i"]
            if index != expected and first_wrong is None:
                # got < expected: repeated (or reordered); got > expected: lost.
                first_wrong = {"at": printed, "expected": expected, "got": index}
            in_order = in_order and index == expected
            expected = index + 1
            printed += 1
        elif event.get("event") == "disconnected":
            break
    print(json.dumps({"printed": printed, "inOrder": in_order, "firstWrong": first_wrong, "rssBeforeKib": before, "rssPeakKib": peak, "pid": pid}), flush=True)


if __name__ == "__main__":
    main()
