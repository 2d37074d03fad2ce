#!/usr/bin/env bash
# bench/cpu_per_request.sh — CPU-µs per answered request of one scangate process under wrk (issue 8, item 4).
#   bench/cpu_per_request.sh BIN MODE CONNS SECONDS [PERF_DATA]
#     BIN   scangate binary;  MODE commit | filter (ack=filter, journal on) | filternj (ack=filter
#           --journal=off);  CONNS wrk connections;  env SG_EXTRA: more scangate flags (e.g. --queue-wait=0ms);
#           env REPEAT: share of repeated keys (observe.lua; default 0 = all new)
#     PERF_DATA  optional: also `perf record -e cpu-clock -g` the server during the cell into this file
#           env SG_TRUNCATE=1: empty scan_keys before the server starts (cells then compare like with like:
#           a table grown by earlier cells warm-loads into the filter and slows inserts)
#           env SG_DB_ARGS: the database flags instead of `--database-url $SG_URL` (issue 23: `--partitions URL`)
#           env SG_POSTMASTERS: the postmaster PIDs whose process trees count as PostgreSQL (issue 23: the proxy's
#           and every partition server's); default: the one listening on SG_URL's port
# Needs a running PostgreSQL at $SG_URL (scripts/pg.sh start DIR PORT; scripts/pg.sh url DIR PORT).
# Prints one line: mode conns rps non2xx cpu_s requests cpu_us_per_request pg_us_per_request
# wrk_us_per_request rows_per_batch records_per_fsync fsync_us idle_pct p99 loadavg, then the server's CPU-µs
# per request by thread name (sg-io-N, sg-journal, ...). The server's CPU is utime+stime from /proc/<pid>/stat
# over the measured cell (after a 2 s warm-up), divided by the requests wrk counted (bench/observe.lua's BENCH_SUMMARY; status counting off). PostgreSQL's
# is the same over the postmaster (the process listening on the URL's port, so the cluster must be on this
# host) and all its children. rows_per_batch / records_per_fsync: requests per PostgreSQL transaction / per
# journal fdatasync over the cell, from /metrics; fsync_us: the journal's mean fdatasync time (/metrics);
# idle_pct: the machine's idle + iowait share of all CPU time over the cell (/proc/stat): CPU the closed loop
# left unused (with the journal, requests parked on a group commit).
set -euo pipefail
BIN=${1:?BIN}; MODE=${2:?MODE}; CONNS=${3:?CONNS}; DUR=${4:?SECONDS}; PERF_DATA=${5:-}
: "${SG_URL:?set SG_URL to the PostgreSQL URL}"
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
WORK=$(mktemp -d /tmp/scangate-cpu.XXXXXX)
PORT=$((20000 + RANDOM % 20000))
case "$MODE" in
  commit) ARGS=(--ack commit) ;;
  filter) ARGS=(--ack filter --journal-dir "$WORK/journal") ;;
  filternj) ARGS=(--ack filter --journal off) ;;
  *) echo "MODE: commit | filter | filternj" >&2; exit 2 ;;
esac
# shellcheck disable=SC2206
ARGS+=(${SG_EXTRA:-})
if [[ ${SG_TRUNCATE:-0} == 1 ]]; then psql -qX "$SG_URL" -c "TRUNCATE scan_keys" >/dev/null; fi
# shellcheck disable=SC2206
DB_ARGS=(${SG_DB_ARGS:-})
[[ ${#DB_ARGS[@]} == 0 ]] && DB_ARGS=(--database-url "$SG_URL")
"$BIN" --port "$PORT" --threads 2 "${DB_ARGS[@]}" "${ARGS[@]}" >"$WORK/server.log" 2>&1 &
PID=$!
trap 'kill $PID 2>/dev/null; wait $PID 2>/dev/null; rm -rf "$WORK"' EXIT
for _ in $(seq 300); do
  curl -fs "http://127.0.0.1:$PORT/readyz" >/dev/null 2>&1 && break
  sleep 0.1
done
curl -fs "http://127.0.0.1:$PORT/readyz" >/dev/null || { echo "scangate did not become ready:" >&2; tail -3 "$WORK/server.log" >&2; exit 1; }
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
# The postmaster: the process listening on the URL's port (a psql backend's parent would race its exit).
PG_PORT=$(sed -E 's|^[a-z]+://[^/]*:([0-9]+)/.*|\1|' <<<"$SG_URL")
PM=$(ss -Hltnp "sport = :$PG_PORT" 2>/dev/null | grep -o 'pid=[0-9]*' | head -1 | cut -d= -f2)
PM=${SG_POSTMASTERS:-${PM:-0}}
pg_ticks() {
  local sum=0 p m
  [[ $PM == 0 ]] && { echo 0; return; }
  for m in $PM; do
    for p in $m $(pgrep -P "$m"); do sum=$((sum + $(awk '{print $14 + $15}' "/proc/$p/stat" 2>/dev/null || echo 0))); done
  done
  echo "$sum"
}
child_ticks() {  # CPU of this shell's waited-for children (`times` output in $1, second line), in clock ticks
  tail -1 "$1" | awk -v hz="$(getconf CLK_TCK)" '{
    split($1, u, /[ms]/); split($2, s, /[ms]/); printf "%d\n", ((u[1] * 60 + u[2]) + (s[1] * 60 + s[2])) * hz }'
}
threads() {  # "name ticks" per scangate thread (core/thread_name.h names them)
  local t
  for t in /proc/"$PID"/task/*; do
    echo "$(cat "$t/comm" 2>/dev/null) $(awk '{print $14 + $15}' "$t/stat" 2>/dev/null)"
  done
}
counts() {  # PostgreSQL transactions, journal fdatasyncs
  curl -fs "http://127.0.0.1:$PORT/metrics" | awk '/^scangate_pg_batch_size_count/ {b = $2}
    /^scangate_journal_fsync_seconds_count/ {f = $2} /^scangate_journal_fsync_seconds_sum/ {fs = $2}
    END {printf "%d %d %.6f\n", b, f, fs}'
}
idle_ticks() {  # machine-wide "idle iowait" and total jiffies (/proc/stat's cpu line)
  awk '/^cpu / {t = 0; for (i = 2; i <= NF; i++) t += $i; print $5 + $6, t}' /proc/stat
}
wrk_cell() {
  BENCH_COUNT_STATUS=0 wrk -t2 -c"$CONNS" -d"${1}s" --timeout 5s -s "$ROOT/bench/observe.lua" \
    "http://127.0.0.1:$PORT" -- "${REPEAT:-0}" 0 | grep '^BENCH_SUMMARY ' | sed 's/^BENCH_SUMMARY //'
}
wrk_cell 2 >/dev/null
read -r b0 f0 fs0 < <(counts)
read -r i0 j0 < <(idle_ticks)
g0=$(pg_ticks)
threads >"$WORK/threads0"
t0=$(ticks $PID)
times >"$WORK/times0"  # in this shell: a $(...) subshell's `times` would see only its own children
if [[ -n $PERF_DATA ]]; then
  perf record -q -e cpu-clock -g -p "$PID" -o "$PERF_DATA" -- sleep "$DUR" >/dev/null 2>&1 &
  PERF_PID=$!
fi
line=$(wrk_cell "$DUR")
times >"$WORK/times1"  # the difference is wrk (grep and sed beside it are noise); perf is waited for later
t1=$(ticks $PID)
threads >"$WORK/threads1"
g1=$(pg_ticks)
read -r i1 j1 < <(idle_ticks)
read -r b1 f1 fs1 < <(counts)
[[ -n $PERF_DATA ]] && wait "$PERF_PID"
hz=$(getconf CLK_TCK)
python3 - "$MODE" "$CONNS" "$line" "$t0" "$t1" "$hz" "$(cut -d' ' -f1-3 /proc/loadavg)" "$g0" "$g1" \
  "$((b1 - b0))" "$((f1 - f0))" "$WORK/threads0" "$WORK/threads1" "$(($(child_ticks "$WORK/times1") - $(child_ticks "$WORK/times0")))" \
  "$fs0" "$fs1" "$((i1 - i0))" "$((j1 - j0))" <<'PY'
import collections, json, sys
mode, conns, line, t0, t1, hz, load, g0, g1, batches, fsyncs, th0, th1, wrk_ticks, fs0, fs1, idle, total = sys.argv[1:]
s = json.loads(line)
n = max(s['requests'], 1)
cpu = (int(t1) - int(t0)) / int(hz)
pg = (int(g1) - int(g0)) / int(hz)
wrk = int(wrk_ticks) / int(hz)
rows = f"{n / int(batches):.1f}" if int(batches) else "-"
recs = f"{n / int(fsyncs):.1f}" if int(fsyncs) else "-"
fsync_us = f"{(float(fs1) - float(fs0)) * 1e6 / int(fsyncs):.0f}" if int(fsyncs) else "-"
idle_pct = f"{100 * int(idle) / max(int(total), 1):.1f}"
def by_name(path):
    out = collections.Counter()
    for row in open(path):
        name, _, ticks = row.rstrip("\n").rpartition(" ")
        if name and ticks:
            out[name] += int(ticks)
    return out
a, b = by_name(th0), by_name(th1)
per_thread = " ".join(f"{k}={(b[k] - a.get(k, 0)) / int(hz) * 1e6 / n:.2f}" for k in sorted(b)
                      if b[k] - a.get(k, 0) > 0)
print(f"{mode}\t{conns}\trps={s['rps']:.0f}\tnon2xx={s['non2xx']}\tcpu_s={cpu:.2f}\trequests={s['requests']}\t"
      f"cpu_us_per_req={cpu * 1e6 / n:.1f}\tpg_us_per_req={pg * 1e6 / n:.1f}\twrk_us_per_req={wrk * 1e6 / n:.1f}\t"
      f"rows_per_batch={rows}\t"
      f"records_per_fsync={recs}\tfsync_us={fsync_us}\tidle_pct={idle_pct}\tp99_ms={s['p99_us'] / 1000:.2f}\tload={load}\tthreads_us_per_req: {per_thread}")
PY
