#!/usr/bin/env python3
"""bench/retention/soak_summary.py DIR — the summary of one bench/retention/soak.sh run (issue 22 items 4, 5).

Reads DIR/{run.txt,cells.csv,samples.csv,metrics.csv,cgroup_max.txt} and prints the figures the issue judges:
the empty-table rate, the first and last minute's 2xx/s (target: last >= 0.9x first), the last minute against
the empty-table rate (target in the cgroup run: >= 0.8x), table + index bytes over the last 3 minutes (target:
every sample within +-15 % of their median), dead tuples (bounded), CPU-us per request of scangate and
PostgreSQL, and the cgroup's peak memory. Safe to re-run on a finished DIR.
"""
import csv
import math
import os
import statistics
import sys


def read_csv(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def num(v):
    try:
        return float(v)
    except (TypeError, ValueError):
        return None


def mib(b):
    return f"{b / 2**20:.1f} MiB"


def rate(cells):
    ok = sum(num(c["requests"]) - num(c["non2xx"]) for c in cells)
    secs = sum(num(c["duration_s"]) for c in cells)
    return ok / secs if secs else 0.0


def mean_of(cells, key):
    vals = [num(c[key]) for c in cells if num(c[key]) is not None]
    return statistics.mean(vals) if vals else float("nan")


def verdict(ok):
    return "PASS" if ok else "FAIL"


def main(out):
    run = {}
    if os.path.exists(f"{out}/run.txt"):
        for line in open(f"{out}/run.txt"):
            k, _, v = line.rstrip("\n").partition("=")
            run[k] = v
    cells = read_csv(f"{out}/cells.csv")
    samples = read_csv(f"{out}/samples.csv")
    cell_s = int(run.get("cell_s", "30"))
    empty = [c for c in cells if c["phase"] == "empty"]
    soak = [c for c in cells if c["phase"] == "soak"]
    if not soak:
        print("no soak cells")
        return 1
    per_min = max(1, math.ceil(60 / cell_s))
    first, last = soak[:per_min], soak[-per_min:]
    r_empty, r_first, r_last = rate(empty), rate(first), rate(last)
    cg = run.get("cgroup_mib", "none")
    print(f"soak: {run.get('version', '?')}")
    print(f"  scangate {run.get('args', '?')}")
    print(f"  retention={run.get('retention')} cgroup={cg} MiB shared_buffers={run.get('shared_buffers')} "
          f"soak={len(soak)} cells x {cell_s} s, wrk -t1 -c256 all-new keys")
    print(f"rates (2xx/s): empty table {r_empty:.0f} | first minute {r_first:.0f} | last minute {r_last:.0f}")
    print(f"  last/first  = {r_last / r_first if r_first else float('nan'):.2f}  (target >= 0.90: "
          f"{verdict(r_first and r_last / r_first >= 0.9)})")
    print(f"  last/empty  = {r_last / r_empty if r_empty else float('nan'):.2f}  (target >= 0.80 in the cgroup run: "
          f"{verdict(r_empty and r_last / r_empty >= 0.8)}{'' if cg != 'none' else ', no cgroup in this run'})")
    print("  per cell: " + " ".join(f"{float(c['rate_2xx']):.0f}" for c in cells))
    non2xx = sum(int(c["non2xx"]) for c in cells)
    sock = sum(int(c["socket_errors"]) for c in cells)
    print(f"  non-2xx {non2xx}, socket errors {sock}")
    print(f"CPU-us per request, scangate / PostgreSQL: empty {mean_of(empty, 'sg_cpu_us_per_req'):.1f} / "
          f"{mean_of(empty, 'pg_cpu_us_per_req'):.1f} | first minute {mean_of(first, 'sg_cpu_us_per_req'):.1f} / "
          f"{mean_of(first, 'pg_cpu_us_per_req'):.1f} | last minute {mean_of(last, 'sg_cpu_us_per_req'):.1f} / "
          f"{mean_of(last, 'pg_cpu_us_per_req'):.1f}")

    soak_end = num(soak[-1]["start_s"]) + num(soak[-1]["duration_s"])
    good = [s for s in samples if num(s["total_bytes"]) is not None]
    window = [s for s in good if num(s["t_s"]) >= soak_end - 180]
    if window:
        tot = [num(s["total_bytes"]) for s in window]
        med = statistics.median(tot)
        lo, hi = min(tot), max(tot)
        ok = lo >= 0.85 * med and hi <= 1.15 * med
        t = [num(s["t_s"]) for s in window]
        slope = 0.0
        if len(window) > 1 and max(t) > min(t):
            tm, ym = statistics.mean(t), statistics.mean(tot)
            slope = sum((a - tm) * (b - ym) for a, b in zip(t, tot)) / sum((a - tm) ** 2 for a in t)
        print(f"table + index bytes, last 3 minutes ({len(window)} samples): min {mib(lo)} median {mib(med)} "
              f"max {mib(hi)} (max/min {hi / lo:.2f}; slope {slope * 60 / 2**20:+.1f} MiB/min) "
              f"(target: within +-15 % of the median: {verdict(ok)})")
        end = window[-1]
        live = num(end["n_live_tup"]) or 0
        print(f"  at the end: table {mib(num(end['table_bytes']))}, indexes {mib(num(end['index_bytes']))}, "
              f"live rows ~{live:.0f}" + (f", {num(end['total_bytes']) / live:.0f} bytes per live row" if live else ""))
    else:
        print("table + index bytes: no samples in the last 3 minutes")
    if good:
        dead = [num(s["n_dead_tup"]) or 0 for s in good]
        ratio = [(num(s["n_dead_tup"]) or 0) / max(1, (num(s["n_live_tup"]) or 0) + (num(s["n_dead_tup"]) or 0))
                 for s in good]
        dead_last = [num(s["n_dead_tup"]) or 0 for s in window] or [0]
        print(f"dead tuples: max {max(dead):.0f} (max share of all tuples {100 * max(ratio):.1f} %), "
              f"max in the last 3 minutes {max(dead_last):.0f}; autovacuum runs {good[-1]['autovacuum_count']}")
        ages = [num(s["oldest_age_s"]) for s in good if num(s["oldest_age_s"]) is not None]
        if ages:
            age_last = [num(s["oldest_age_s"]) for s in window if num(s["oldest_age_s"]) is not None] or [0]
            print(f"oldest row age: max {max(ages):.0f} s, max in the last 3 minutes {max(age_last):.0f} s, "
                  f"at the end {ages[-1]:.0f} s")
        wal = [num(s["wal_bytes"]) for s in good if num(s["wal_bytes"]) is not None]
        keys = sum(num(c["requests"]) - num(c["non2xx"]) for c in cells)
        if len(wal) > 1 and keys:
            print(f"WAL: {mib(wal[-1] - wal[0])} between the first and last sample, ~{(wal[-1] - wal[0]) / keys:.0f} "
                  f"bytes per answered key (approximate: samples and cells are not aligned)")
        cgu = [num(s["cgroup_usage_bytes"]) for s in good if num(s["cgroup_usage_bytes"]) is not None]
        if cgu:
            print(f"cgroup usage (sampled): max {mib(max(cgu))}, at the end {mib(cgu[-1])}")
    if os.path.exists(f"{out}/cgroup_max.txt"):
        v = open(f"{out}/cgroup_max.txt").read().split()
        print(f"cgroup memory.max_usage_in_bytes: {mib(int(v[-1]))} (limit {cg} MiB)")
    if os.path.exists(f"{out}/metrics.csv"):
        rows = read_csv(f"{out}/metrics.csv")
        if rows:
            lastv = {}
            for r in rows:
                lastv[r["name"]] = r["value"]
            print("scangate metrics (last sample): " + ", ".join(f"{k} {v}" for k, v in sorted(lastv.items())))
        else:
            print("scangate metrics: no scangate_expiry* / scangate_scan_keys* lines in /metrics")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "."))
