#!/usr/bin/env bash
# bench/layout/migrate_online.sh — issue 45: a database written by a scangate before sql/013 (today's layout) moved to
# the 16-byte layout online, under load, end to end over HTTP; what the move costs the writes, and whether any answer
# changed.
#   bench/layout/migrate_online.sh OLD_BIN NEW_BIN [--keys N] [--mode commit|filter] [--lock FILE] [--out DIR]
#     OLD_BIN   a scangate before issue 45 (e.g. main's build): it makes the old schema and records the first keys
#     NEW_BIN   this version
#     --keys N  old-layout rows added with SQL after OLD_BIN's (default 2000000), so the backfill has a table to copy
#     --mode    the new binary's --ack (default commit)
#     --lock F  flock F shared while preparing, exclusive while the new binary serves the load (the figures)
#     --out DIR cells.csv, summary.txt, migrate.log (default bench/out/migrate-<UTC time>)
# What it does: a fresh PostgreSQL (scripts/pg.sh, data dir under /tmp); OLD_BIN (--retention 24h) serves wrk for
# 10 s (BENCH_RUN_ID fixed: those keys can be sent again) and stops; N more rows in the old layout by SQL; NEW_BIN
# starts on the same database (sql/013 keeps the old layout: the table holds rows) and serves back-to-back 5-s wrk
# cells (-t1 -c256, 20 % repeats of the cell's own keys) while, after 15 s, `CALL scangate_layout_migrate()` runs;
# 15 s after the swap the load stops. Then the keys OLD_BIN recorded are sent again for 3 s: every answer must be
# 200 (duplicate) — a 201 would be a key recorded before the move that the new table lost. Per cell: its phase
# (before / moving / after), 2xx/s, non-2xx (503s would be the swap's lock wait turned into errors: there must be
# none), p99, CPU-µs per request of scangate and of PostgreSQL.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
OLD_BIN=$(realpath "${1:?usage: migrate_online.sh OLD_BIN NEW_BIN [options]}"); NEW_BIN=$(realpath "${2:?NEW_BIN}"); shift 2
KEYS=2000000; MODE=commit; LOCK=""; OUT=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --keys) KEYS=${2:?}; shift 2 ;;
    --mode) MODE=${2:?}; shift 2 ;;
    --lock) LOCK=${2:?}; shift 2 ;;
    --out) OUT=${2:?}; shift 2 ;;
    *) echo "migrate_online.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
OUT=${OUT:-$ROOT/bench/out/migrate-$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$OUT"; OUT=$(realpath "$OUT")
log() { echo "[migrate $(date -u +%H:%M:%S)] $*" | tee -a "$OUT/run.log" >&2; }
WORK=$(mktemp -d /tmp/scangate-migrate.XXXXXX); chmod 755 "$WORK"
PG_PORT=$((40000 + RANDOM % 10000)); SG_PORT=$((20000 + RANDOM % 10000))
URL=$("$ROOT/scripts/pg.sh" url "$WORK/pg" "$PG_PORT")
LOAD_PID=""; RUN_ID=migrate-$$-$RANDOM
source "$ROOT/bench/layout/lib.sh"
cleanup() {
  local rc=$?
  set +e
  trap - EXIT INT TERM
  [[ -n $LOAD_PID ]] && { touch "$WORK/stop"; wait "$LOAD_PID" 2>/dev/null; }
  stop_sg
  "$ROOT/scripts/pg.sh" stop "$WORK/pg" >/dev/null 2>&1
  cp "$WORK"/scangate-*.log "$OUT/" 2>/dev/null
  rm -rf "$WORK"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
start_bin() {  # BIN ACK NAME
  local args=(--threads 2 --database-url "$URL" --retention 24h --ack "$2")
  [[ $2 == filter ]] && args+=(--journal-dir "$WORK/journal-$3")
  start_sg "$1" "$WORK/scangate-$3.log" "${args[@]}"
}
wrk_json() {  # SECONDS REPEAT [env...]: one wrk cell's BENCH_SUMMARY json
  local secs=$1 rep=$2; shift 2
  env BENCH_SOURCE=till-07 "$@" wrk -t1 -c256 -d"${secs}s" -s "$ROOT/bench/observe.lua" "http://127.0.0.1:$SG_PORT" \
    -- "$rep" 1 | grep '^BENCH_SUMMARY' | cut -d' ' -f2-
}

lock shared
PG_SHARED_MB=1024 "$ROOT/scripts/pg.sh" start "$WORK/pg" "$PG_PORT" >/dev/null
start_bin "$OLD_BIN" commit old
OLD=$(wrk_json 10 0 BENCH_RUN_ID="$RUN_ID")
stop_sg
log "$("$OLD_BIN" --version | head -1) recorded $(jq -r '.status["201"] // 0' <<<"$OLD") keys"
psql -qX "$URL" -c "INSERT INTO scan_keys (digest, source, first_seen) SELECT sha256(int8send(g)), 'till-07',
  now() - random() * interval '20 hours' FROM generate_series(1::int8, ${KEYS}::int8) g" -c "VACUUM ANALYZE scan_keys"
log "old layout: $(psql -AtX "$URL" -c "SELECT count(*) FROM scan_keys") rows, heap $(psql -AtX "$URL" -c \
  "SELECT pg_size_pretty(pg_relation_size('scan_keys'))")"

lock exclusive
start_bin "$NEW_BIN" "$MODE" new
log "$("$NEW_BIN" --version | head -1) (--ack $MODE) serves it; layout $(psql -AtX "$URL" -c "SELECT scangate_layout()")"
PM=$(head -1 "$WORK/pg/postmaster.pid")
hz=$(getconf CLK_TCK)
echo "t_s,phase,rate_2xx,non2xx,p99_ms,sg_cpu_us_per_req,pg_cpu_us_per_req" >"$OUT/cells.csv"
T0=$(date +%s.%N)
load() {  # back-to-back 5-s cells until $WORK/stop
  local s0 g0 s1 g1 line t phase
  while [[ ! -e $WORK/stop ]]; do
    t=$(awk -v a="$T0" -v b="$(date +%s.%N)" 'BEGIN {printf "%.0f", b - a}')
    s0=$(sg_ticks); g0=$(pg_ticks "$PM")
    line=$(wrk_json 5 0.2)
    s1=$(sg_ticks); g1=$(pg_ticks "$PM")
    phase=$(cat "$WORK/phase" 2>/dev/null || echo before)
    jq -r --arg t "$t" --arg ph "$phase" --argjson sg $((s1 - s0)) --argjson pg $((g1 - g0)) --argjson hz "$hz" \
      '[$t, $ph, ((.requests - .non2xx) / .duration_s | floor), .non2xx, (.p99_us / 1000),
        ($sg * 1e6 / $hz / .requests | . * 10 | floor / 10), ($pg * 1e6 / $hz / .requests | . * 10 | floor / 10)] | @csv' \
      <<<"$line" | tr -d '"' | tee -a "$OUT/cells.csv" >&2
  done
}
load &
LOAD_PID=$!
sleep 15
echo moving >"$WORK/phase"
T=$(date +%s.%N)
psql -X "$URL" -c "CALL scangate_layout_migrate()" >"$OUT/migrate.log" 2>&1
echo after >"$WORK/phase"
log "moved in $(awk -v a="$T" -v b="$(date +%s.%N)" 'BEGIN {printf "%.1f", b - a}') s; layout $(psql -AtX "$URL" -c "SELECT scangate_layout()")"
sleep 15
touch "$WORK/stop"; wait "$LOAD_PID"; LOAD_PID=""
AGAIN=$(wrk_json 3 0 BENCH_RUN_ID="$RUN_ID")
stop_sg
lock none
psql -X "$URL" -f "$ROOT/bench/layout/sizes.sql" >"$OUT/sizes.txt"
{ echo "$("$NEW_BIN" --version | head -1) --ack $MODE; moved $(psql -AtX "$URL" -c "SELECT rows_copied FROM scangate_layout_migration") rows online"
  awk -F, 'NR > 1 { n[$2]++; r[$2] += $3; bad += $4; if ($5 > p[$2]) p[$2] = $5; sg[$2] += $6; pg[$2] += $7 }
    END { for (ph in n) printf "%s: %d cells, %.0f 2xx/s, worst p99 %.0f ms, CPU-us/req scangate %.1f PostgreSQL %.1f\n",
            ph, n[ph], r[ph] / n[ph], p[ph], sg[ph] / n[ph], pg[ph] / n[ph]; printf "non-2xx during the load: %d\n", bad }' \
    "$OUT/cells.csv" | sort
  echo "keys the old binary recorded, sent again after the move: $(jq -c .status <<<"$AGAIN") (201 would be a lost key)"
} | tee "$OUT/summary.txt" >&2
[[ $(jq -r '.status["201"] // 0' <<<"$AGAIN") == 0 ]] || { log "FAIL: a key recorded before the move was answered new"; exit 1; }
