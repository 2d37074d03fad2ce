#!/usr/bin/env bash
# bench/layout/cliff.sh — issue 45's cliff: the write rate with millions of live keys (all inside the horizon) in a
# PostgreSQL held to a memory cgroup, against the empty table's rate in the same run, both ack modes.
#   bench/layout/cliff.sh BIN [--keys N] [--cgroup-mib M] [--cell-seconds S] [--warmup-seconds W] [--reps R]
#                             [--epochs E] [--lock FILE] [--out DIR]
#     BIN              scangate binary; its migrations make the table (today's layout for a binary before issue 45)
#     --keys N         live keys preloaded (default 6000000): sha256 of 1..N, first_seen rising over the last 20 h
#                      in insertion order (as a day of traffic writes them), source "till-07" — written with SQL in
#                      random digest order (so the primary key is the one random inserts make, page splits and
#                      all), 500 000 rows per statement, then VACUUM ANALYZE
#     --epochs E       the exact store in epochs of E keys (issue 54): the preload is written as closed epochs of E
#                      keys each, in order (as a horizon of traffic leaves them: switched with sql/019, then closed
#                      — compact, summarized — by a scangate's switcher before the cells), and every cell's scangate
#                      runs with --epoch-keys E (a switch and close inside a cell is part of its rate). Default 0:
#                      one table (today's layout without a bound)
#     --cgroup-mib M   the cgroup v1 memory limit PostgreSQL runs in for the cells (default 256); shared_buffers is
#                      M/4 (pg.sh's "a quarter of the RAM", as bench/retention/soak.sh) unless --shared-buffers-mib S
#                      says otherwise; --pg-set NAME=VALUE (repeatable): more settings (ALTER SYSTEM), e.g.
#                      wal_buffers=4MB (pg.sh's 64MB is a quarter of the cgroup, touched in turn, never reclaimed,
#                      since shared memory cannot be swapped out here). The preload runs before,
#                      without the limit (it only has to make the table), then PostgreSQL is restarted inside the
#                      cgroup with the page cache dropped, so every cached page of the cells is charged there
#     --cell-seconds S measured seconds per cell (default 30), after --warmup-seconds W (default 10) of the same load
#     --reps R         rounds of the four cells (default 1)
#     --modes LIST     the ack modes of the cells (default commit,filter)
#     --lock FILE      flock FILE shared while preloading and exclusive while the cells run (the machine's benchmark
#                      lock, e.g. /work/machine.lock); none by default
#     --out DIR        cells.csv, summary.txt, sizes.txt, cgroup.txt (default bench/out/cliff-<UTC time>)
# The cells, each a fresh scangate (--threads 2 --retention 24h --capacity 16000000, so the filter holds the preload
# and its window covers it) on database `full` (the preload) or `empty` (truncated before each cell), ack=commit and
# ack=filter (journal on, the follower on as by default): wrk -t1 -c256, all-new keys (bench/observe.lua, source
# "till-07"). Per cell: 2xx/s, p99, CPU-µs per request of scangate (utime+stime of its process) and of PostgreSQL
# (the postmaster's process tree, reaped children included), the cgroup's usage at the end, the live keys at the
# cell's start, and (--epochs) the epochs closed during the cell, warm-up included. The summary gives full / empty per mode. Everything it started is stopped and removed on exit.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BIN=$(realpath "${1:?usage: cliff.sh BIN [--keys N] [--cgroup-mib M] ...}"); shift
KEYS=6000000; EPOCHS=0; CG_MIB=256; CELL_S=30; WARM_S=10; REPS=1; LOCK=""; OUT=""; SB_MIB=""; PG_SETS=(); MODES="commit filter"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --keys) KEYS=${2:?}; shift 2 ;;
    --epochs) EPOCHS=${2:?}; shift 2 ;;
    --cgroup-mib) CG_MIB=${2:?}; shift 2 ;;
    --cell-seconds) CELL_S=${2:?}; shift 2 ;;
    --warmup-seconds) WARM_S=${2:?}; shift 2 ;;
    --reps) REPS=${2:?}; shift 2 ;;
    --lock) LOCK=${2:?}; shift 2 ;;
    --shared-buffers-mib) SB_MIB=${2:?}; shift 2 ;;
    --pg-set) PG_SETS+=("${2:?}"); shift 2 ;;
    --modes) MODES=${2//,/ }; shift 2 ;;
    --out) OUT=${2:?}; shift 2 ;;
    *) echo "cliff.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
source "$ROOT/bench/layout/lib.sh"
cgroup_bench_begin cliff
SG_PORT=$((20000 + RANDOM % 10000))
URL_FULL=$("$ROOT/scripts/pg.sh" url "$PGDATA_" "$PG_PORT")  # database "scangate"
URL_EMPTY=${URL_FULL/\/scangate\?//empty?}
start_mode() {  # URL MODE: a scangate on URL in MODE (commit | filter), ready
  local args=(--threads 2 --database-url "$1" --retention 24h --capacity 16000000)
  if ((EPOCHS > 0)); then args+=(--epoch-keys "$EPOCHS"); fi
  if [[ $2 == filter ]]; then rm -rf "$WORK/journal"; args+=(--ack filter --journal-dir "$WORK/journal"); else args+=(--ack commit); fi
  start_sg "$BIN" "$WORK/scangate.log" "${args[@]}"
}

# ---- preload, without the limit ------------------------------------------------------------------------------
lock shared
PG_SHARED_MB=${SB_MIB:-$((CG_MIB / 4))} "$ROOT/scripts/pg.sh" start "$PGDATA_" "$PG_PORT" >/dev/null
for kv in "${PG_SETS[@]}"; do  # ALTER SYSTEM: in force from the restart into the cgroup on
  psql -qX "$URL_FULL" -c "ALTER SYSTEM SET ${kv%%=*} = '${kv#*=}'" >/dev/null
done
psql -qX "$URL_FULL" -c "CREATE DATABASE empty"
for url in "$URL_FULL" "$URL_EMPTY"; do start_mode "$url" commit; stop_sg; done  # the binary's migrations
LAYOUT=$(psql -AtX "$URL_FULL" -c "SELECT CASE format_type(atttypid, NULL) WHEN 'uuid' THEN 2 ELSE 1 END
  FROM pg_attribute WHERE attrelid = 'scan_keys'::regclass AND attname = 'digest'")
if [[ $LAYOUT == 2 ]]; then DIGEST="scangate_stored_digest(sha256(int8send(g)))"; SOURCE=seen_by
else DIGEST="sha256(int8send(g))"; SOURCE=source; fi
log "$("$BIN" --version | head -1): layout $LAYOUT; preloading $KEYS keys"
T=$(date +%s)
CHUNK=$((EPOCHS > 0 && EPOCHS < 500000 ? EPOCHS : 500000))
for ((a = 1; a <= KEYS; a += CHUNK)); do
  b=$((a + CHUNK - 1 < KEYS ? a + CHUNK - 1 : KEYS))
  psql -qX "$URL_FULL" -c "INSERT INTO scan_keys (digest, $SOURCE, first_seen) SELECT $DIGEST, 'till-07',
    now() - interval '20 hours' + (g::float8 / $KEYS) * interval '20 hours' FROM generate_series($a::int8, $b::int8) g"
  if ((EPOCHS > 0 && (b % EPOCHS == 0 || b == KEYS))); then  # an epoch's keys written: switched
    psql -qX "$URL_FULL" -c "SELECT scangate_epoch_prepare()" -c "SELECT scangate_epoch_switch()" >/dev/null
  fi
done
if ((EPOCHS > 0)); then  # closed by a scangate's switcher, as in production
  start_mode "$URL_FULL" commit
  while [[ $(psql -AtX "$URL_FULL" -c "SELECT count(*) FROM scangate_epochs WHERE state = 'closing'") != 0 ]]; do
    sleep 2
  done
  stop_sg
  psql -qX "$URL_FULL" -c "VACUUM ANALYZE"
  # Everything a closed epoch costs: its table (heap, FSM, VM), its primary key, its summary.
  psql -AtX "$URL_FULL" -c "SELECT count(*) || ' closed epochs, ' || sum(keys) || ' keys, ' ||
    round(sum(pg_total_relation_size(relation::regclass) + length(summary))::numeric / sum(keys), 1) ||
    ' bytes per key (table, primary key, summary: ' || round(sum(length(summary))::numeric / sum(keys), 2) || ')'
    FROM scangate_epochs WHERE state = 'closed'" | while read -r l; do log "$l"; done
else
  psql -qX "$URL_FULL" -c "VACUUM ANALYZE scan_keys"
fi
log "preloaded in $(( $(date +%s) - T )) s"
psql -X "$URL_FULL" -f "$ROOT/bench/layout/sizes.sql" | tee "$OUT/sizes.txt" >&2
"$ROOT/scripts/pg.sh" stop "$PGDATA_"

# ---- the cells, inside the cgroup (settings as of here: ALTER SYSTEM above takes effect at this start) ------------------------------------------------------------------------------
lock exclusive
PM=$(cgroup_open "$CG" "$CG_MIB" "$PGDATA_" "$PG_PORT")
log "PostgreSQL $PG_PORT (postmaster $PM) in $CG (${CG_MIB} MiB), shared_buffers $(psql -AtX "$URL_FULL" -c 'SHOW shared_buffers')"
hz=$(getconf CLK_TCK)
echo "rep,mode,db,live_keys,rate_2xx,p99_ms,sg_cpu_us_per_req,pg_cpu_us_per_req,cgroup_usage_mib,closes" >"$OUT/cells.csv"
cell() {  # REP MODE DB
  local url=$URL_FULL live s0 g0 s1 g1 line req non2xx dur p99
  if [[ $3 == empty ]]; then
    url=$URL_EMPTY
    psql -qX "$url" -c "TRUNCATE scan_keys" -c "DO \$\$ DECLARE r record; BEGIN
      FOR r IN SELECT relation FROM scangate_epochs WHERE state <> 'open' LOOP EXECUTE format('DROP TABLE %I', r.relation);
      END LOOP; DELETE FROM scangate_epochs WHERE state <> 'open'; END \$\$" 2>/dev/null || true
  fi
  live=$(psql -AtX "$url" -c "SELECT (SELECT count(*) FROM scan_keys) + coalesce((SELECT sum(keys) FROM scangate_epochs
    WHERE state <> 'open'), 0)" 2>/dev/null || psql -AtX "$url" -c "SELECT count(*) FROM scan_keys")
  closed0=$(psql -AtX "$url" -c "SELECT count(*) FROM scangate_epochs WHERE state = 'closed'" 2>/dev/null || echo 0)
  start_mode "$url" "$2"
  BENCH_COUNT_STATUS=0 BENCH_SOURCE=till-07 wrk -t1 -c256 -d"${WARM_S}s" -s "$ROOT/bench/observe.lua" \
    "http://127.0.0.1:$SG_PORT" -- 0 0 >/dev/null
  s0=$(sg_ticks); g0=$(pg_ticks "$PM")
  line=$(BENCH_COUNT_STATUS=0 BENCH_SOURCE=till-07 wrk -t1 -c256 -d"${CELL_S}s" -s "$ROOT/bench/observe.lua" \
    "http://127.0.0.1:$SG_PORT" -- 0 0 | grep '^BENCH_SUMMARY' | cut -d' ' -f2-)
  s1=$(sg_ticks); g1=$(pg_ticks "$PM")
  stop_sg
  closed1=$(psql -AtX "$url" -c "SELECT count(*) FROM scangate_epochs WHERE state = 'closed'" 2>/dev/null || echo 0)
  req=$(jq -r .requests <<<"$line"); non2xx=$(jq -r .non2xx <<<"$line"); dur=$(jq -r .duration_s <<<"$line")
  p99=$(jq -r '.p99_us / 1000' <<<"$line")
  awk -v r="$1" -v m="$2" -v d="$3" -v live="$live" -v req="$req" -v bad="$non2xx" -v dur="$dur" -v p99="$p99" \
      -v sg=$((s1 - s0)) -v pg=$((g1 - g0)) -v hz="$hz" -v cg="$(cat "$CG/memory.usage_in_bytes")" \
      -v closes=$((closed1 - closed0)) \
      'BEGIN { ok = req - bad; printf "%s,%s,%s,%d,%.0f,%.1f,%.1f,%.1f,%.0f,%d\n", r, m, d, live, ok / dur, p99,
               sg * 1e6 / hz / req, pg * 1e6 / hz / req, cg / 1048576, closes }' | tee -a "$OUT/cells.csv" >&2
}
for ((rep = 1; rep <= REPS; rep++)); do
  for mode in $MODES; do
    cell "$rep" "$mode" empty
    cell "$rep" "$mode" full
  done
done
lock none
{ echo "$("$BIN" --version | head -1), layout $LAYOUT, epochs of ${EPOCHS} keys (0: one table), $KEYS keys preloaded, ${CG_MIB} MiB cgroup, cells ${CELL_S} s,"\
    "shared_buffers $(psql -AtX "$URL_FULL" -c 'SHOW shared_buffers'), wal_buffers $(psql -AtX "$URL_FULL" -c 'SHOW wal_buffers')"
  awk -F, 'NR > 1 { k = $1 "," $2; if ($3 == "empty") e[k] = $5; else { f[k] = $5; live[k] = $4 } }
    END { for (k in f) printf "rep,mode %s: full %d keys %.0f 2xx/s, empty %.0f 2xx/s: %.2fx\n", k, live[k], f[k], e[k], f[k] / e[k] }' \
    "$OUT/cells.csv" | sort; } | tee "$OUT/summary.txt" >&2
