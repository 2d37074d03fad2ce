#!/usr/bin/env python3
"""bench/follow/window.py A_PORT B_PORT [KEYS] — the follower's window (issue 32), measured from outside.

For each delay D in 0, 10, 25, 50, 100, 200 ms (and 500, 1000, 2000 ms with at most 10 keys each: the promise,
--max-commit-lag + --follow-max-lag, is 2 s): KEYS fresh keys are each sent to instance A (answered new), then,
D ms later, to instance B. A key B answers `new` too was not yet in B's filter (nor in PostgreSQL) D ms after A
answered it: the share of such keys per D is the window. Meanwhile B's /stats follower lag is sampled. Prints one
line per delay and one summary line of the lag samples (p50 / p99 / max, seconds)."""
import http.client
import json
import sys
import threading
import time
import uuid

a_port, b_port = int(sys.argv[1]), int(sys.argv[2])
keys_per_delay = int(sys.argv[3]) if len(sys.argv) > 3 else 200


def client(port):
    return http.client.HTTPConnection("127.0.0.1", port, timeout=10)


def observe(conn, key):
    conn.request("POST", "/observe", json.dumps({"key": key}), {"Content-Type": "application/json"})
    r = conn.getresponse()
    r.read()
    return r.status


lags, stop = [], False


def sample():
    c = client(b_port)
    while not stop:
        c.request("GET", "/stats")
        s = json.loads(c.getresponse().read())
        for db in s.get("follower", {}).get("databases", []):
            lags.append(db["lag_seconds"])
        time.sleep(0.05)


t = threading.Thread(target=sample)
t.start()
ca, cb = client(a_port), client(b_port)
run = uuid.uuid4().hex[:12]
for delay_ms in (0, 10, 25, 50, 100, 200, 500, 1000, 2000):
    new_at_b = 0
    n = keys_per_delay if delay_ms < 500 else min(keys_per_delay, 10)
    for i in range(n):
        key = f"window-{run}-{delay_ms}-{i}"
        if observe(ca, key) != 201:
            raise SystemExit(f"A did not answer 201 for a fresh key")
        time.sleep(delay_ms / 1000)
        new_at_b += observe(cb, key) == 201
    print(f"delay {delay_ms:4d} ms: {new_at_b}/{n} new again at B")
stop = True
t.join()
lags.sort()
if lags:
    q = lambda p: lags[min(len(lags) - 1, int(p * len(lags)))]
    print(f"B's follower lag over {len(lags)} samples: p50 {q(0.5):.3f} s, p99 {q(0.99):.3f} s, max {lags[-1]:.3f} s")
