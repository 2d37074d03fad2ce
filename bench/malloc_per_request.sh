#!/usr/bin/env bash
# bench/malloc_per_request.sh — heap allocations per answered request of one server process under wrk (issue 44):
# a uprobe on libc's malloc, counted by `perf stat` over one wrk cell.
#   bench/malloc_per_request.sh BIN MODE [SECONDS] [CALLERS_DATA]
#     BIN   a scangate binary, or bench/http's ceiling_server (MODE ceiling: it takes no database);
#     MODE  commit | filter (ack=filter, journal on) | ceiling;  SECONDS the counted cell (default 3);
#     env REPEAT: share of repeated keys (observe.lua; default 0); env BENCH_IDEMPOTENCY=1: the header on every
#     request (observe.lua);
#     CALLERS_DATA  optional: also `perf record -e probe_libc:malloc -g` 1 s of the cell into this file (who
#           allocates: `perf report -i FILE --no-children`).
# Needs root (uprobes) and, for scangate, a running PostgreSQL at $SG_URL whose scan_keys it empties first
# (scripts/pg.sh start DIR PORT). Adds the uprobe when missing and removes it again if it added it.
# The count is of calls, not time: the machine's load moves it only through the writers' batch sizes (their
# allocations are per batch), unlike CPU per request, which it moves by ±20 % here.
# Prints one line: mode requests mallocs mallocs_per_request.
set -euo pipefail
BIN=${1:?BIN}; MODE=${2:?MODE}; DUR=${3:-3}; CALLERS=${4:-}
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
WORK=$(mktemp -d /tmp/scangate-malloc.XXXXXX)
PORT=$((20000 + RANDOM % 20000))
command -v perf >/dev/null || { echo "needs perf: apt-get install linux-perf" >&2; exit 2; }
LIBC=$(ldd "$BIN" | awk '/libc\.so/ {print $3}')
[[ -n $LIBC ]] || { echo "no libc in $(ldd "$BIN")" >&2; exit 1; }
case "$MODE" in
  commit) ARGS=(--ack commit) ;;
  filter) ARGS=(--ack filter --journal-dir "$WORK/journal") ;;
  ceiling) ARGS=() ;;
  *) echo "MODE: commit | filter | ceiling" >&2; exit 2 ;;
esac
added_probe=0
if ! perf probe -l 2>/dev/null | grep -q 'probe_libc:malloc'; then
  perf probe -q -x "$LIBC" -a malloc
  added_probe=1
fi
cleanup() {
  kill "${PID:-0}" 2>/dev/null || true
  wait "${PID:-0}" 2>/dev/null || true
  if [[ $added_probe == 1 ]]; then perf probe -q -d probe_libc:malloc || true; fi
  rm -rf "$WORK"
}
trap cleanup EXIT
if [[ $MODE == ceiling ]]; then
  "$BIN" --port "$PORT" --threads 2 >"$WORK/server.log" 2>&1 &
  PID=$!
  ready_path=/observe
else
  : "${SG_URL:?set SG_URL to the PostgreSQL URL}"
  psql -qX "$SG_URL" -c "TRUNCATE scan_keys" >/dev/null
  "$BIN" --port "$PORT" --threads 2 --database-url "$SG_URL" "${ARGS[@]}" >"$WORK/server.log" 2>&1 &
  PID=$!
  ready_path=/readyz
fi
for _ in $(seq 300); do
  curl -fs -o /dev/null -X "$([[ $MODE == ceiling ]] && echo POST || echo GET)" "http://127.0.0.1:$PORT$ready_path" \
    2>/dev/null && break
  sleep 0.1
done
wrk_cell() {
  BENCH_COUNT_STATUS=0 wrk -t2 -c256 -d"${1}s" --timeout 5s -s "$ROOT/bench/observe.lua" \
    "http://127.0.0.1:$PORT" -- "${REPEAT:-0}" 0 | grep '^BENCH_SUMMARY ' | sed 's/^BENCH_SUMMARY //'
}
wrk_cell 2 >/dev/null  # warm-up: pools, caches, the recent set's first growth
# The cell runs DUR seconds; perf counts the DUR - 1 seconds from 0.5 s in (wrk connected, not yet stopping), and
# the requests of that window are wrk's mean rate times its length.
wrk_cell "$DUR" >"$WORK/summary" &
WRK=$!
sleep 0.5
REC=0
if [[ -n $CALLERS ]]; then
  perf record -q -e probe_libc:malloc -g -p "$PID" -o "$CALLERS" -- sleep 1 >/dev/null 2>&1 &
  REC=$!
fi
perf stat -x, -e probe_libc:malloc -p "$PID" -o "$WORK/stat" -- sleep "$((DUR - 1))"
wait "$WRK"
if [[ $REC != 0 ]]; then wait "$REC"; fi
summary=$(cat "$WORK/summary")
mallocs=$(awk -F, '/probe_libc:malloc/ {print $1}' "$WORK/stat")
python3 - "$MODE" "$summary" "$mallocs" "$((DUR - 1))" <<'EOF'
import json, sys
mode, summary, mallocs, window = sys.argv[1], json.loads(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
requests = summary["rps"] * window  # the requests of perf's window, at wrk's mean rate over the cell
print(f"{mode} requests={requests:.0f} mallocs={mallocs} mallocs_per_request={mallocs / requests:.1f}")
EOF
