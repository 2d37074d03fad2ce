#!/usr/bin/env bash
# bench/cpu_per_request.sh — CPU-µs per answered request of one scangate process under wrk (issue 8, item 4).
#   bench/cpu_per_request.sh BIN MODE CONNS SECONDS [PERF_DATA]
#     BIN   scangate binary;  MODE commit | filter (ack=filter, journal on) | filternj (ack=filter
#           --journal=off);  CONNS wrk connections;  env SG_EXTRA: more scangate flags (e.g. --queue-wait=0ms);
#           env REPEAT: share of repeated keys (observe.lua; default 0 = all new)
#     PERF_DATA  optional: also `perf record -e cpu-clock -g` the server during the cell into this file
# Needs a running PostgreSQL at $SG_URL (scripts/pg.sh start DIR PORT; scripts/pg.sh url DIR PORT).
# Prints one line: mode conns rps non2xx cpu_s requests cpu_us_per_request loadavg. The server's CPU is
# utime+stime from /proc/<pid>/stat over the measured cell (after a 2 s warm-up), divided by the requests
# wrk counted (bench/observe.lua's BENCH_SUMMARY; all-new keys, status counting off).
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
"$BIN" --port "$PORT" --threads 2 --database-url "$SG_URL" "${ARGS[@]}" >"$WORK/server.log" 2>&1 &
PID=$!
trap 'kill $PID 2>/dev/null; wait $PID 2>/dev/null; rm -rf "$WORK"' EXIT
for _ in $(seq 300); do
  curl -fs "http://127.0.0.1:$PORT/readyz" >/dev/null 2>&1 && break
  sleep 0.1
done
curl -fs "http://127.0.0.1:$PORT/readyz" >/dev/null || { echo "scangate did not become ready:" >&2; tail -3 "$WORK/server.log" >&2; exit 1; }
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
wrk_cell() {
  BENCH_COUNT_STATUS=0 wrk -t2 -c"$CONNS" -d"${1}s" --timeout 5s -s "$ROOT/bench/observe.lua" \
    "http://127.0.0.1:$PORT" -- "${REPEAT:-0}" 0 | grep '^BENCH_SUMMARY ' | sed 's/^BENCH_SUMMARY //'
}
wrk_cell 2 >/dev/null
t0=$(ticks $PID)
if [[ -n $PERF_DATA ]]; then
  perf record -q -e cpu-clock -g -p "$PID" -o "$PERF_DATA" -- sleep "$DUR" >/dev/null 2>&1 &
  PERF_PID=$!
fi
line=$(wrk_cell "$DUR")
t1=$(ticks $PID)
[[ -n $PERF_DATA ]] && wait "$PERF_PID"
hz=$(getconf CLK_TCK)
python3 - "$MODE" "$CONNS" "$line" "$t0" "$t1" "$hz" "$(cut -d' ' -f1-3 /proc/loadavg)" <<'PY'
import json, sys
mode, conns, line, t0, t1, hz, load = sys.argv[1:]
s = json.loads(line)
cpu = (int(t1) - int(t0)) / int(hz)
print(f"{mode}\t{conns}\trps={s['rps']:.0f}\tnon2xx={s['non2xx']}\tcpu_s={cpu:.2f}\trequests={s['requests']}\t"
      f"cpu_us_per_req={cpu * 1e6 / max(s['requests'], 1):.1f}\tload={load}")
PY
