#!/usr/bin/env python3
"""bench/follow/commit_repeats.py [REPS] — what a follower could save --ack=commit (issue 32), measured from outside.

Two --ack=commit instances A and B on one throwaway PostgreSQL (scripts/pg.sh), --follow=off. Per repetition, with
a fresh wrk run id (bench/observe.lua BENCH_RUN_ID): wrk records two sets of new keys at A for RECORD_S seconds each
(10: within A's recent set); then each set is sent again for REPEAT_S seconds (4: fewer keys than were recorded) —
one to A (repeats of its own keys: answered from its filter + recent set,
no PostgreSQL round trip), the other to B (repeats recorded by another instance:
B's filter says definitely new, so each is an INSERT ... ON CONFLICT in PostgreSQL answered duplicate). The
difference per repeat is the most a follower feeding B's filter and recent set with A's commits could save
(it would add its own cost per key written: bench/RESULTS.md "Issue 32: logical decoding or polling").
BENCH_FOLLOW=poll: both instances run --follow=poll, which with --ack=commit feeds the recent set with every
instance's commits — the same phases then show what it saves (B's phase) and costs (the recording phases).
Prints per phase: 2xx/s, statuses, and CPU-µs per request of the instance, PostgreSQL (all its processes) and
wrk. Needs build/release/server/scangate and wrk."""
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.environ.get("SCANGATE_BIN", os.path.join(ROOT, "build/release/server/scangate"))
REPS = int(sys.argv[1]) if len(sys.argv) > 1 else 3
RECORD_S, REPEAT_S = int(os.environ.get("RECORD_S", "10")), int(os.environ.get("REPEAT_S", "4"))
TICK = os.sysconf("SC_CLK_TCK")
FOLLOW = os.environ.get("BENCH_FOLLOW", "")  # e.g. poll: both instances --follow poll (the recent set learns)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cpu_s(pids):
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])  # utime, stime (after the command's parenthesis)
        except (FileNotFoundError, ProcessLookupError):
            pass
    return total / TICK


def postgres_pids():
    out = subprocess.run(["pgrep", "-u", "postgres"], capture_output=True, text=True).stdout
    return [int(p) for p in out.split()]


def wrk(port, run_id, seconds):
    env = dict(os.environ, BENCH_RUN_ID=run_id)
    r = subprocess.run(["wrk", "-t2", "-c256", f"-d{seconds}s", "--timeout", "5s", "-s",
                        os.path.join(ROOT, "bench/observe.lua"), f"http://127.0.0.1:{port}", "--", "0", "1"],
                       capture_output=True, text=True, env=env)
    line = [l for l in r.stdout.splitlines() if l.startswith("BENCH_SUMMARY")]
    return json.loads(line[0].split(" ", 1)[1]) if line else {"rps": 0, "status": {}, "requests": 0}


def phase(name, port, server_pid, run_id, seconds):
    pg = postgres_pids()
    before = (cpu_s([server_pid]), cpu_s(pg), time.time())
    w = wrk(port, run_id, seconds)
    after = (cpu_s([server_pid]), cpu_s(pg))
    n = max(w["requests"], 1)
    per = lambda a, b: (b - a) / n * 1e6
    print(f"{name:34s} {w['rps']:9.0f} req/s  statuses {json.dumps(w['status'])}  CPU-us/request scangate "
          f"{per(before[0], after[0]):.1f} / PostgreSQL {per(before[1], after[1]):.1f}", flush=True)
    return w


def main():
    d = tempfile.mkdtemp(prefix="scangate-commit-repeats.")
    os.chmod(d, 0o755)
    pg_port, a_port, b_port = free_port(), free_port(), free_port()
    subprocess.run(["bash", os.path.join(ROOT, "scripts/pg.sh"), "start", d + "/pg", str(pg_port)], check=True,
                   stdout=subprocess.DEVNULL)
    url = subprocess.run(["bash", os.path.join(ROOT, "scripts/pg.sh"), "url", d + "/pg", str(pg_port)],
                         capture_output=True, text=True, check=True).stdout.strip()
    procs = []
    try:
        for port in (a_port, b_port):
            follow = ["--follow", FOLLOW] if FOLLOW else []
            procs.append(subprocess.Popen([BIN, "--port", str(port), "--threads", "2", "--database-url", url,
                                           "--ack", "commit"] + follow, stdout=subprocess.DEVNULL,
                                          stderr=subprocess.DEVNULL))
        for port in (a_port, b_port):
            for _ in range(200):
                try:
                    if urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=1).status == 200:
                        break
                except OSError:
                    time.sleep(0.05)
        for rep in range(1, REPS + 1):
            own, other = uuid.uuid4().hex[:16], uuid.uuid4().hex[:16]
            print(f"== repetition {rep}", flush=True)
            # B's set first, then A's own, so that A's recent set (--recent-keys, 1 Mi) still holds every key of
            # its own set when they are repeated.
            phase("record at A (all-new, B's set)", a_port, procs[0].pid, other, RECORD_S)
            phase("record at A (all-new, A's set)", a_port, procs[0].pid, own, RECORD_S)
            phase("repeats of its own keys, at A", a_port, procs[0].pid, own, REPEAT_S)
            phase("repeats recorded by A, at B", b_port, procs[1].pid, other, REPEAT_S)
    finally:
        for p in procs:
            p.terminate()
            p.wait()
        subprocess.run(["bash", os.path.join(ROOT, "scripts/pg.sh"), "stop", d + "/pg"], stdout=subprocess.DEVNULL)
        subprocess.run(["rm", "-rf", d])


main()
