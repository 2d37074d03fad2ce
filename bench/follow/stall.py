#!/usr/bin/env python3
"""bench/follow/stall.py [SCENARIO...] — what new keys see while commits stall (issue 42), measured from outside.

Starts a throwaway PostgreSQL (scripts/pg.sh) and two --ack=filter instances A and B following each other
(SCANGATE_BIN, default build/release/server/scangate; extra flags in SCANGATE_ARGS), then for each scenario
(default: lock kill):
  lock  one transaction holds LOCK TABLE scan_keys IN SHARE ROW EXCLUSIVE MODE for LOCK_S (10) seconds;
  kill  A's write-behind waits behind that lock while A answers fresh keys from its journal for 0.5 s; A is killed
        (kill -9) with them uncommitted, the lock ends 0.5 s later, and A is started again with the same journal
        RESTART_S (3) seconds after the kill (a supervisor's restart).
Throughout, 4 threads send fresh keys to B and 4 to A (all new), and every key A answered 201 is sent to B 2.5 s
later (past the window W = --max-commit-lag + --follow-max-lag, 2 s by default: a 201 there is a key new twice). Prints, per 0.5 s bucket from the event, B's and A's fresh-key answers (201/200/503) and slowest
latency, and a summary: the first and last moment B did not answer its fresh keys 201, and the cross-check.
Run it under `flock -x /work/machine.lock` when its figures are to be reported."""
import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BIN = os.environ.get("SCANGATE_BIN", os.path.join(ROOT, "build/release/server/scangate"))
ARGS = os.environ.get("SCANGATE_ARGS", "").split()
LOCK_S = float(os.environ.get("LOCK_S", "10"))
RESTART_S = float(os.environ.get("RESTART_S", "3"))
CROSS_DELAY_S = 2.5
BUCKET_S = 0.5


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


class Instance:
    def __init__(self, name, url, work):
        self.name, self.url, self.work = name, url, work
        self.port = free_port()
        self.proc = None

    def start(self):
        log = open(os.path.join(self.work, self.name + ".log"), "a")
        self.proc = subprocess.Popen(
            [BIN, "--port", str(self.port), "--threads", "2", "--database-url", self.url, "--ack", "filter",
             "--journal-dir", os.path.join(self.work, "j-" + self.name)] + ARGS, stdout=log, stderr=log)
        for _ in range(300):
            try:
                c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=2)
                c.request("GET", "/readyz")
                if c.getresponse().status == 200:
                    return
            except OSError:
                pass
            time.sleep(0.1)
        raise SystemExit(f"{self.name} never became ready")

    def kill(self):
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(30)


def observe(conn_box, port, key):
    """One POST /observe: (status, seconds). Reconnects on a broken connection."""
    t = time.monotonic()
    try:
        if conn_box[0] is None:
            conn_box[0] = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        conn_box[0].request("POST", "/observe", json.dumps({"key": key}), {"Content-Type": "application/json"})
        r = conn_box[0].getresponse()
        r.read()
        return r.status, time.monotonic() - t
    except OSError:
        conn_box[0] = None
        return 0, time.monotonic() - t


class Load:
    """Fresh keys to one instance from 4 threads; every answer kept as (end time, status, latency, key)."""

    def __init__(self, inst, tag):
        self.inst, self.tag, self.stop_flag, self.answers = inst, tag, False, []
        self.lock = threading.Lock()
        self.threads = [threading.Thread(target=self.run, args=(i,)) for i in range(4)]

    def run(self, i):
        box, n = [None], 0
        while not self.stop_flag:
            key = f"stall-{self.tag}-{i}-{n}-{uuid.uuid4().hex[:8]}"
            n += 1
            status, lat = observe(box, self.inst.port, key)
            with self.lock:
                self.answers.append((time.monotonic(), status, lat, key))
            if status != 201:
                time.sleep(0.02)

    def start(self):
        for t in self.threads:
            t.start()

    def stop(self):
        self.stop_flag = True
        for t in self.threads:
            t.join()


class Cross:
    """Every key A answered 201 sent to B CROSS_DELAY_S later."""

    def __init__(self, load_a, b):
        self.load_a, self.b, self.stop_flag, self.result = load_a, b, False, {}
        self.thread = threading.Thread(target=self.run)

    def run(self):
        box, done = [None], 0
        while not self.stop_flag:
            with self.load_a.lock:
                due = [a for a in self.load_a.answers[done:] if a[1] == 201]
                todo = [a for a in due if time.monotonic() - a[0] >= CROSS_DELAY_S]
            if not todo:
                time.sleep(0.05)
                continue
            for a in todo[:20]:
                status, _ = observe(box, self.b.port, a[3])
                self.result[status] = self.result.get(status, 0) + 1
            with self.load_a.lock:  # advance past what was sent (answers are appended in time order)
                sent = set(a[3] for a in todo[:20])
                while done < len(self.load_a.answers) and (self.load_a.answers[done][1] != 201 or
                                                           self.load_a.answers[done][3] in sent):
                    done += 1

    def start(self):
        self.thread.start()

    def stop(self):
        self.stop_flag = True
        self.thread.join()


def buckets(answers, t0, until):
    rows = {}
    for end, status, lat, _ in answers:
        if end < t0 - 1 or end > until:
            continue
        b = int((end - t0) // BUCKET_S)
        r = rows.setdefault(b, {"201": 0, "200": 0, "503": 0, "other": 0, "max": 0.0})
        r[str(status) if status in (200, 201, 503) else "other"] += 1
        r["max"] = max(r["max"], lat)
    return rows


def report(name, t0, until, load_a, load_b, cross):
    ra, rb = buckets(load_a.answers, t0, until), buckets(load_b.answers, t0, until)
    print(f"== {name}: fresh keys, per {BUCKET_S} s from the event (201/200/503 slowest-s)")
    print("| t (s) | at B | at A |")
    print("|---|---|---|")
    for b in sorted(set(ra) | set(rb)):
        def cell(r):
            return f"{r['201']}/{r['200']}/{r['503']} {r['max']:.2f}" if r else "-"
        print(f"| {b * BUCKET_S:+.1f} | {cell(rb.get(b))} | {cell(ra.get(b))} |")
    not_new = [end - t0 for end, status, _, _ in load_b.answers if t0 <= end <= until and status != 201]
    n503 = sum(1 for end, status, _, _ in load_b.answers if t0 <= end <= until and status == 503)
    if not_new:
        print(f"{name}: B's fresh keys not answered 201 from {min(not_new):.2f} s to {max(not_new):.2f} s after the "
              f"event ({len(not_new)} answers, {n503} of them 503)")
    else:
        print(f"{name}: B answered every fresh key 201")
    print(f"{name}: keys A answered 201, sent to B {CROSS_DELAY_S} s later: "
          + ", ".join(f"{k}: {v}" for k, v in sorted(cross.result.items())) + " (a 201 is a key new twice)")


def psql(url, sql):
    return subprocess.Popen(["psql", url, "-v", "ON_ERROR_STOP=1", "-q", "-c", sql],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def scenario_lock(url, a, b):
    la, lb = Load(a, "lock-a"), Load(b, "lock-b")
    la.start(), lb.start()
    cross = Cross(la, b)
    cross.start()
    time.sleep(3)
    t0 = time.monotonic()
    locker = psql(url, f"BEGIN; LOCK TABLE scan_keys IN SHARE ROW EXCLUSIVE MODE; SELECT pg_sleep({LOCK_S}); COMMIT")
    locker.wait()
    time.sleep(6)
    la.stop(), lb.stop(), cross.stop()
    report(f"lock {LOCK_S:.0f} s", t0, time.monotonic(), la, lb, cross)


def scenario_kill(url, a, b):
    lb = Load(b, "kill-b")
    lb.start()
    la = Load(a, "kill-a")  # A's answers before the kill feed the cross-check
    cross = Cross(la, b)
    time.sleep(3)
    # The lock ends by itself 0.5 s after the kill (a killed client would not end a backend in pg_sleep).
    blocker = psql(url, "BEGIN; LOCK TABLE scan_keys IN SHARE ROW EXCLUSIVE MODE; SELECT pg_sleep(1.5); COMMIT")
    time.sleep(0.5)
    la.start()
    cross.start()
    time.sleep(0.5)  # A answers from its journal; its writers wait behind the lock
    la.stop()
    t0 = time.monotonic()
    a.kill()
    blocker.wait()
    time.sleep(max(0.0, RESTART_S - (time.monotonic() - t0)))
    a.start()
    time.sleep(6)
    lb.stop(), cross.stop()
    held = sum(1 for _, s, _, _ in la.answers if s == 201)
    print(f"kill: A answered {held} keys 201 from its journal behind the lock, then was killed; restarted "
          f"{RESTART_S} s later with the same journal")
    report("kill -9 with a backlog", t0, time.monotonic(), la, lb, cross)


def main():
    work = tempfile.mkdtemp(prefix="scangate-stall.")
    os.chmod(work, 0o755)
    pg_port = free_port()
    subprocess.run(["bash", os.path.join(ROOT, "scripts/pg.sh"), "start", os.path.join(work, "pg"), str(pg_port)],
                   check=True, stdout=subprocess.DEVNULL)
    url = subprocess.run(["bash", os.path.join(ROOT, "scripts/pg.sh"), "url", os.path.join(work, "pg"), str(pg_port)],
                         check=True, capture_output=True, text=True).stdout.strip()
    a, b = Instance("a", url, work), Instance("b", url, work)
    try:
        a.start()
        b.start()
        for s in sys.argv[1:] or ["lock", "kill"]:
            {"lock": scenario_lock, "kill": scenario_kill}[s](url, a, b)
    finally:
        a.stop()
        b.stop()
        subprocess.run(["bash", os.path.join(ROOT, "scripts/pg.sh"), "stop", os.path.join(work, "pg")],
                       stdout=subprocess.DEVNULL)
        print(f"logs in {work}")


if __name__ == "__main__":
    main()
