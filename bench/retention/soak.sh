#!/usr/bin/env bash
# bench/retention/soak.sh — issue 22 items 4 and 5: a soak under constant load (is scan_keys bounded, does the
# rate hold?) and the memory cliff (PostgreSQL inside a cgroup v1 memory limit smaller than the primary key
# would grow to without retention).
#   bench/retention/soak.sh BIN [--cgroup-mib N] [--retention R] [--minutes M] [--out DIR]
#                               [--cell-seconds 30] [--empty-seconds 20] [--shared-buffers-mib S]
#                               [--pg-set NAME=VALUE ...]
#     BIN        scangate binary
#     --retention R   none (default): scangate gets no --retention flag at all (its own default; for binaries
#                     that predate the flag); anything else (off, 60s, 30d, ...) is passed as --retention=R
#     --cgroup-mib N  start PostgreSQL inside a fresh cgroup v1 memory cgroup limited to N MiB (initdb and the
#                     postmaster, so every backend, its page cache and its shared memory are charged there);
#                     scangate, wrk, psql stay outside. Needs /sys/fs/cgroup/memory (root); without it the run
#                     says so and goes on unlimited. shared_buffers is then set to N/4 MiB (pg.sh's own rule,
#                     "a quarter of the RAM", applied to the cgroup: there is no swap here, so shared memory
#                     beyond the limit could not be reclaimed and the cgroup would OOM-kill a backend) unless
#                     --shared-buffers-mib says otherwise. The cgroup's memory.max_usage_in_bytes is reported.
#     --pg-set NAME=VALUE  a PostgreSQL setting (ALTER SYSTEM SET, reloaded before the run); repeatable. For
#                     time compression, e.g. autovacuum_naptime=1s: a horizon of seconds against the default
#                     60 s nap lets a table carry a whole horizon of dead rows between vacuums, which a real
#                     horizon (hours, days) against 60 s never does
#     --minutes M     length of the soak (default 10), run as back-to-back --cell-seconds wrk cells
#     --out DIR       where the CSVs and the summary go (default bench/out/soak-<UTC time>, git-ignored)
#   env SG_EXTRA: more scangate flags (word-split), e.g. SG_EXTRA="--writers 2"
# What it does: a fresh PostgreSQL (scripts/pg.sh, data dir under /tmp, own port), one scangate
# (--threads 2 --ack commit), then one "empty table" cell of --empty-seconds, then the soak: wrk -t1 -c256,
# every key new (bench/observe.lua, REPEAT 0), back to back. A sampler records every 10 s (psql, PGOPTIONS
# statement_timeout 5 s): pg_table_size / pg_indexes_size of scan_keys, n_live_tup / n_dead_tup /
# autovacuum_count (pg_stat_user_tables), the age of the oldest row (min(first_seen); only when a btree index
# leads with first_seen, else a full scan every 10 s would load the server: then empty), the WAL position,
# the cgroup's memory usage, and scangate's /metrics lines matching scangate_expiry|scangate_scan_keys.
# Per cell: 2xx/s (wrk's requests minus non-2xx, over its duration), p50/p99, and CPU-µs per request of
# scangate (utime+stime of its process) and of PostgreSQL (postmaster utime+stime+cutime+cstime, so exited
# children such as autovacuum workers count, plus the live children's utime+stime), as bench/cpu_per_request.sh.
# Output in DIR: cells.csv, samples.csv, metrics.csv (t_s,name,value), summary.txt (bench/retention/
# soak_summary.py, which can be re-run on DIR), scangate.log, postgresql.log (tail), cgroup.txt.
# Everything it started (scangate, wrk, the sampler, PostgreSQL, the cgroup, the data dir) is stopped and
# removed on any exit, including Ctrl-C.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BIN=$(realpath "${1:?usage: soak.sh BIN [--cgroup-mib N] [--retention R] [--minutes M] [--out DIR]}"); shift
CG_MIB=""; RETENTION=none; MINUTES=10; OUT=""; CELL_S=30; EMPTY_S=20; SB_MIB=""; PG_SETS=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --cgroup-mib) CG_MIB=${2:?}; shift 2 ;;
    --retention) RETENTION=${2:?}; shift 2 ;;
    --minutes) MINUTES=${2:?}; shift 2 ;;
    --out) OUT=${2:?}; shift 2 ;;
    --cell-seconds) CELL_S=${2:?}; shift 2 ;;
    --empty-seconds) EMPTY_S=${2:?}; shift 2 ;;
    --shared-buffers-mib) SB_MIB=${2:?}; shift 2 ;;
    --pg-set) PG_SETS+=("${2:?}"); shift 2 ;;
    *) echo "soak.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
[[ -x $BIN ]] || { echo "soak.sh: $BIN is not executable" >&2; exit 2; }
OUT=${OUT:-$ROOT/bench/out/soak-$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$OUT"; OUT=$(realpath "$OUT")
log() { echo "[soak $(date -u +%H:%M:%S)] $*" | tee -a "$OUT/run.log" >&2; }

WORK=$(mktemp -d /tmp/scangate-soak.XXXXXX)
chmod 755 "$WORK"  # the postgres user must reach $WORK/pg (pg.sh checks)
PGDATA_=$WORK/pg
PG_PORT=$((40000 + RANDOM % 10000))
SG_PORT=$((20000 + RANDOM % 10000))
URL=$("$ROOT/scripts/pg.sh" url "$PGDATA_" "$PG_PORT")
CG=""; SG_PID=""; SAMPLER_PID=""; WRK_PID=""

cleanup() {
  local rc=$?
  set +e
  trap - EXIT INT TERM
  [[ -n $WRK_PID ]] && kill "$WRK_PID" 2>/dev/null
  [[ -n $SAMPLER_PID ]] && kill "$SAMPLER_PID" 2>/dev/null
  if [[ -n $SG_PID ]]; then
    kill "$SG_PID" 2>/dev/null; wait "$SG_PID" 2>/dev/null
    cp "$WORK/scangate.log" "$OUT/scangate.log" 2>/dev/null
  fi
  wait 2>/dev/null
  if [[ -f $PGDATA_/postmaster.pid ]]; then
    "$ROOT/scripts/pg.sh" stop "$PGDATA_" >/dev/null 2>&1 || "$ROOT/scripts/pg.sh" kill "$PGDATA_" >/dev/null 2>&1
  fi
  tail -n 300 "$PGDATA_/server.log" >"$OUT/postgresql.log" 2>/dev/null
  if [[ -n $CG && -d $CG ]]; then
    { echo "limit_bytes $(cat "$CG/memory.limit_in_bytes")"
      echo "max_usage_bytes $(cat "$CG/memory.max_usage_in_bytes")"
      echo "failcnt $(cat "$CG/memory.failcnt")"
      sed 's/^/oom_control /' "$CG/memory.oom_control"
      sed 's/^/stat /' "$CG/memory.stat"; } >"$OUT/cgroup.txt" 2>/dev/null
    for _ in $(seq 50); do [[ -s $CG/cgroup.procs ]] || break; sleep 0.2; done
    rmdir "$CG" 2>/dev/null || echo "soak.sh: could not remove $CG (processes left: $(cat "$CG/cgroup.procs" | tr '\n' ' '))" >&2
  fi
  rm -rf "$WORK"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# ---- PostgreSQL, optionally inside the memory cgroup --------------------------------------------------------
if [[ -n $CG_MIB ]]; then
  if [[ -d /sys/fs/cgroup/memory && -w /sys/fs/cgroup/memory ]]; then
    CG=/sys/fs/cgroup/memory/scangate-soak-$$
    mkdir "$CG"
    echo $((CG_MIB * 1024 * 1024)) >"$CG/memory.limit_in_bytes"
    SB_MIB=${SB_MIB:-$((CG_MIB / 4))}
  else
    log "no writable cgroup v1 memory controller at /sys/fs/cgroup/memory: running WITHOUT the ${CG_MIB} MiB limit"
    CG_MIB=""
  fi
fi
sync; echo 3 >/proc/sys/vm/drop_caches 2>/dev/null || log "could not drop the page cache (not root?)"
pg_start() {  # in a subshell that first moves itself (BASHPID: $$ would be this script) into the cgroup
  ( if [[ -n $CG ]]; then echo "$BASHPID" >"$CG/cgroup.procs"; fi
    "$ROOT/scripts/pg.sh" start "$PGDATA_" "$PG_PORT" )
}
pg_start
if [[ -n $SB_MIB ]]; then
  psql -qX "$URL" -c "ALTER SYSTEM SET shared_buffers = '${SB_MIB}MB'" >/dev/null
  "$ROOT/scripts/pg.sh" stop "$PGDATA_"
  sync; echo 3 >/proc/sys/vm/drop_caches 2>/dev/null || true
  pg_start
fi
for kv in "${PG_SETS[@]}"; do  # e.g. autovacuum_naptime=1s: ALTER SYSTEM SET + reload
  psql -qX "$URL" -c "ALTER SYSTEM SET ${kv%%=*} = '${kv#*=}'" >/dev/null
done
if ((${#PG_SETS[@]})); then psql -qAtX "$URL" -c "SELECT pg_reload_conf()" >/dev/null; fi
[[ -n $CG ]] && echo 0 >"$CG/memory.max_usage_in_bytes"  # from here on: the run, not initdb
PM=$(head -1 "$PGDATA_/postmaster.pid")
log "PostgreSQL $PG_PORT (postmaster $PM), shared_buffers $(psql -AtX "$URL" -c 'SHOW shared_buffers'),"\
" cgroup: ${CG:-none}${CG_MIB:+ (${CG_MIB} MiB)}"

# ---- scangate ----------------------------------------------------------------------------------------------
SG_ARGS=(--port "$SG_PORT" --threads 2 --database-url "$URL" --ack commit)
[[ $RETENTION != none ]] && SG_ARGS+=("--retention=$RETENTION")
# shellcheck disable=SC2206
SG_ARGS+=(${SG_EXTRA:-})
"$BIN" "${SG_ARGS[@]}" >"$WORK/scangate.log" 2>&1 &
SG_PID=$!
for _ in $(seq 600); do
  curl -fs "http://127.0.0.1:$SG_PORT/readyz" >/dev/null 2>&1 && break
  kill -0 "$SG_PID" 2>/dev/null || break
  sleep 0.1
done
curl -fs "http://127.0.0.1:$SG_PORT/readyz" >/dev/null 2>&1 ||
  { log "scangate did not become ready:"; tail -5 "$WORK/scangate.log" >&2; exit 1; }
log "scangate $SG_PORT (pid $SG_PID): $(basename "$BIN") ${SG_ARGS[*]:4}"
{ echo "bin=$BIN"; echo "args=${SG_ARGS[*]}"; echo "retention=$RETENTION"; echo "cgroup_mib=${CG_MIB:-none}"
  echo "shared_buffers=$(psql -AtX "$URL" -c 'SHOW shared_buffers')"; echo "minutes=$MINUTES"
  echo "cell_s=$CELL_S"; echo "empty_s=$EMPTY_S"; echo "started=$(date -u +%FT%TZ)"
  echo "version=$("$BIN" --version 2>&1 | head -1)"; } >"$OUT/run.txt"

# The oldest row's age costs an index probe only if a btree index leads with first_seen.
AGE_SQL="NULL"
if [[ $(psql -AtX "$URL" -c "SELECT count(*) FROM pg_indexes WHERE tablename = 'scan_keys'
      AND indexdef ~* 'USING btree \\(first_seen'") != 0 ]]; then
  AGE_SQL="(SELECT extract(epoch FROM now() - min(first_seen)) FROM scan_keys)"
else
  log "no btree index on scan_keys(first_seen): oldest_age_s left empty (min() would scan the table)"
fi

# ---- sampler ----------------------------------------------------------------------------------------------
T0=$(date +%s.%N)
since() { awk -v a="$T0" -v b="$(date +%s.%N)" 'BEGIN {printf "%.1f", b - a}'; }
echo "t_s,table_bytes,index_bytes,total_bytes,n_live_tup,n_dead_tup,autovacuum_count,wal_bytes,oldest_age_s,cgroup_usage_bytes" >"$OUT/samples.csv"
echo "t_s,name,value" >"$OUT/metrics.csv"
sampler() {
  set +e
  export PGOPTIONS="-c statement_timeout=5s"
  while :; do
    local t row cg=""
    t=$(since)
    row=$(psql -AtX -F, "$URL" -c "SELECT pg_table_size('scan_keys'), pg_indexes_size('scan_keys'),
        pg_table_size('scan_keys') + pg_indexes_size('scan_keys'), s.n_live_tup, s.n_dead_tup,
        s.autovacuum_count, pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0'), round(($AGE_SQL)::numeric, 1)
      FROM pg_stat_user_tables s WHERE s.relname = 'scan_keys'" 2>/dev/null) || row=",,,,,,,"
    [[ -n $CG ]] && cg=$(cat "$CG/memory.usage_in_bytes" 2>/dev/null)
    echo "$t,$row,$cg" >>"$OUT/samples.csv"
    curl -fs --max-time 5 "http://127.0.0.1:$SG_PORT/metrics" 2>/dev/null |
      awk -v t="$t" '/^scangate_(expiry|scan_keys)/ {printf "%s,%s,%s\n", t, $1, $2}' >>"$OUT/metrics.csv" || true
    sleep 10
  done
}
sampler &
SAMPLER_PID=$!

# ---- cells -------------------------------------------------------------------------------------------------
hz=$(getconf CLK_TCK)
sg_ticks() { awk '{print $14 + $15}' "/proc/$SG_PID/stat"; }
pg_ticks() {  # postmaster incl. its reaped children, plus the live children
  local sum p
  sum=$(awk '{print $14 + $15 + $16 + $17}' "/proc/$PM/stat" 2>/dev/null || echo 0)
  for p in $(pgrep -P "$PM"); do sum=$((sum + $(awk '{print $14 + $15}' "/proc/$p/stat" 2>/dev/null || echo 0))); done
  echo "$sum"
}
echo "cell,phase,start_s,duration_s,requests,non2xx,socket_errors,rate_2xx,p50_ms,p99_ms,sg_cpu_us_per_req,pg_cpu_us_per_req,cgroup_usage_bytes,load1" >"$OUT/cells.csv"
run_cell() {  # CELL PHASE SECONDS
  local start s0 g0 s1 g1 line cg=""
  start=$(since); s0=$(sg_ticks); g0=$(pg_ticks)
  BENCH_COUNT_STATUS=0 wrk -t1 -c256 -d"${3}s" --timeout 5s -s "$ROOT/bench/observe.lua" \
    "http://127.0.0.1:$SG_PORT" -- 0 0 >"$WORK/wrk.out" 2>&1 &
  WRK_PID=$!
  wait "$WRK_PID" || true
  WRK_PID=""
  s1=$(sg_ticks); g1=$(pg_ticks)
  [[ -n $CG ]] && cg=$(cat "$CG/memory.usage_in_bytes")
  line=$(grep '^BENCH_SUMMARY ' "$WORK/wrk.out" | sed 's/^BENCH_SUMMARY //') ||
    { log "cell $1: wrk printed no summary:"; tail -3 "$WORK/wrk.out" >&2; line='{}'; }
  python3 - "$1" "$2" "$start" "$line" "$((s1 - s0))" "$((g1 - g0))" "$hz" "$cg" "$(cut -d' ' -f1 /proc/loadavg)" \
    >>"$OUT/cells.csv" <<'PY'
import json, sys
cell, phase, start, line, sg, pg, hz, cg, load = sys.argv[1:]
s = json.loads(line)
n = s.get('requests', 0); d = s.get('duration_s', 0) or 1
non2xx = s.get('non2xx', 0)
sock = sum(s.get(k, 0) for k in ('err_connect', 'err_read', 'err_write', 'err_timeout'))
per = lambda ticks: f"{int(ticks) / int(hz) * 1e6 / n:.1f}" if n else ""
print(f"{cell},{phase},{start},{d:.2f},{n},{non2xx},{sock},{(n - non2xx) / d:.0f},"
      f"{s.get('p50_us', 0) / 1000:.2f},{s.get('p99_us', 0) / 1000:.2f},{per(sg)},{per(pg)},{cg},{load}")
PY
  log "cell $1 ($2): $(tail -1 "$OUT/cells.csv" | cut -d, -f8) 2xx/s, non2xx $(tail -1 "$OUT/cells.csv" | cut -d, -f6)"
  kill -0 "$SG_PID" 2>/dev/null || { log "scangate exited:"; tail -5 "$WORK/scangate.log" >&2; exit 1; }
}
run_cell 0 empty "$EMPTY_S"
CELLS=$(((MINUTES * 60 + CELL_S - 1) / CELL_S))
for i in $(seq 1 "$CELLS"); do run_cell "$i" soak "$CELL_S"; done
kill "$SAMPLER_PID" 2>/dev/null; wait "$SAMPLER_PID" 2>/dev/null || true; SAMPLER_PID=""
# one last sample after the load
psql -AtX "$URL" -c "SELECT 'after load: rows ' || count(*) || ', table ' || pg_size_pretty(pg_table_size('scan_keys'))
  || ', indexes ' || pg_size_pretty(pg_indexes_size('scan_keys')) FROM scan_keys" | tee -a "$OUT/run.log" >&2
curl -fs "http://127.0.0.1:$SG_PORT/metrics" | grep -E '^scangate_(expiry|scan_keys)' >"$OUT/metrics_final.txt" || true
if [[ -n $CG ]]; then  # while PostgreSQL still runs (its shared memory is gone after the stop)
  echo "max_usage_bytes $(cat "$CG/memory.max_usage_in_bytes")" >"$OUT/cgroup_max.txt"
  cp "$CG/memory.stat" "$OUT/cgroup_stat_end.txt"
fi
python3 "$ROOT/bench/retention/soak_summary.py" "$OUT" | tee "$OUT/summary.txt"
