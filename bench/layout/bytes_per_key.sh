#!/usr/bin/env bash
# bench/layout/bytes_per_key.sh — issue 45: bytes per live key of scan_keys as a scangate binary writes it.
#   bench/layout/bytes_per_key.sh BIN MODE SECONDS [RETENTION]
#     BIN        scangate binary (its migrations make the table: today's layout for a binary before issue 45)
#     MODE       commit | filter (ack=filter, journal on)
#     SECONDS    how long wrk writes all-new keys (-t1 -c256, bench/observe.lua, "source":"till-07")
#     RETENTION  optional --retention (e.g. 60s): run SECONDS >= 3 x RETENTION for "a day's worth of random
#                inserts" at steady state (keys inserted, expired and deleted by scangate's expiry, their space
#                reused, page splits and all), time-compressed; autovacuum_naptime is then 1 s (as the horizon's
#                scale needs: bench/RESULTS.md "Issue 22: the cliff and the soak ... (E, F)")
# What it does: a fresh PostgreSQL (scripts/pg.sh, shared_buffers 1 GB, data dir under /tmp), the binary with
# --threads 2, wrk for SECONDS, the server stopped, VACUUM, then bench/layout/sizes.sql (the main fork of the
# heap and of each index, and the table's whole footprint, per live key counted exactly). Everything it started
# is stopped and removed on exit.
# The closed-epoch figure (issue 54), when the release tree's bench/storage/epoch_summary_size sits beside BIN's
# tree (BIN = <tree>/server/scangate; or EPOCH_SUMMARY_SIZE=<path>): the same rows rewritten as a closed epoch holds
# them (bench/layout/closed_epoch.sql: sorted, commit_xid NULL, primary key only at fillfactor 100), its sizes, and
# its membership summary built from it as the close does (bytes per key, estimated FP rate, build time). Per key
# closed = that table's "all" + the summary's bytes_per_key.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BIN=$(realpath "${1:?usage: bytes_per_key.sh BIN MODE SECONDS [RETENTION]}"); MODE=${2:?MODE}; SECS=${3:?SECONDS}
RET=${4:-}
WORK=$(mktemp -d /tmp/scangate-bpk.XXXXXX); chmod 755 "$WORK"
PG_PORT=$((40000 + RANDOM % 10000)); SG_PORT=$((20000 + RANDOM % 10000))
URL=$("$ROOT/scripts/pg.sh" url "$WORK/pg" "$PG_PORT")
SG_PID=""
cleanup() {
  set +e
  [[ -n $SG_PID ]] && { kill "$SG_PID" 2>/dev/null; wait "$SG_PID" 2>/dev/null; }
  "$ROOT/scripts/pg.sh" stop "$WORK/pg" >/dev/null 2>&1
  rm -rf "$WORK"
}
trap cleanup EXIT INT TERM
PG_SHARED_MB=1024 "$ROOT/scripts/pg.sh" start "$WORK/pg" "$PG_PORT" >/dev/null
ARGS=(--port "$SG_PORT" --threads 2 --database-url "$URL")
case $MODE in
  commit) ARGS+=(--ack commit) ;;
  filter) ARGS+=(--ack filter --journal-dir "$WORK/journal") ;;
  *) echo "MODE: commit | filter" >&2; exit 2 ;;
esac
if [[ -n $RET ]]; then
  ARGS+=(--retention "$RET")
  psql -qX "$URL" -c "ALTER SYSTEM SET autovacuum_naptime = '1s'" -c "SELECT pg_reload_conf()" >/dev/null
fi
"$BIN" "${ARGS[@]}" >"$WORK/scangate.log" 2>&1 &
SG_PID=$!
for _ in $(seq 300); do curl -fs "http://127.0.0.1:$SG_PORT/readyz" >/dev/null 2>&1 && break; sleep 0.1; done
echo "$("$BIN" --version 2>/dev/null | head -1) mode=$MODE seconds=$SECS retention=${RET:-none}"
BENCH_SOURCE=till-07 BENCH_COUNT_STATUS=0 wrk -t1 -c256 -d"${SECS}s" -s "$ROOT/bench/observe.lua" \
  "http://127.0.0.1:$SG_PORT" -- 0 0 | grep -o '"rps":[0-9.]*'
kill "$SG_PID"; wait "$SG_PID" 2>/dev/null || true; SG_PID=""
psql -qX "$URL" -c "VACUUM scan_keys"
psql -X "$URL" -f "$ROOT/bench/layout/sizes.sql"
SUMMARY_TOOL=${EPOCH_SUMMARY_SIZE:-$(dirname "$BIN")/../bench/storage/epoch_summary_size}
if [[ -x $SUMMARY_TOOL ]]; then
  echo "closed epoch (bench/layout/closed_epoch.sql):"
  psql -qX "$URL" -f "$ROOT/bench/layout/closed_epoch.sql"
  psql -X -v rel=scan_keys_closed "$URL" -f "$ROOT/bench/layout/sizes.sql"
  "$SUMMARY_TOOL" "$URL" scan_keys_closed
fi
