#!/usr/bin/env bash
# bench/layout/close_under_load.sh — issue 54's design evidence at the SQL level (no scangate in the loop): what the
# close of a full epoch costs the writes going on into the next one, second by second, in a PostgreSQL held to a
# memory cgroup. Ways to close, against a control with no close:
#   rewrite  the rows copied sorted by digest into a new table with commit_xid NULL (bench/layout/closed_epoch.sql's
#            form: 90.8 B per key with its summary), primary key built at fillfactor 100, VACUUM (FREEZE, ANALYZE),
#            the summary built from it (bench/storage/epoch_summary_size), the full table dropped
#   reindex  the table kept: its other indexes dropped, the primary key rebuilt at fillfactor 100 (REINDEX
#            CONCURRENTLY), VACUUM (FREEZE, ANALYZE), the summary built (heap rows keep commit_xid: ~99 B per key)
#   copy     as rewrite, but the rows copied in heap order (no sort of the rows: the primary key's build sorts the
#            keys; probes are index-only scans of a frozen table, so the heap's order does not matter to them)
#   paced    as copy, in 16 slices of the heap (TID ranges), each its own transaction, --pace-seconds P (default 1)
#            of pause after each: the writers get the CPU back between slices
#   none     the same load, no close: how much the seconds' p99 moves by itself
#   bench/layout/close_under_load.sh [--epoch-keys E] [--cgroup-mib M] [--seconds S] [--warmup-seconds W]
#                                    [--close-at T] [--clients C] [--batch B] [--variants LIST] [--pace-seconds P]
#                                    [--out DIR]
#     --epoch-keys E   keys in the epoch that closes (default 1500000), inserted in random digest order into a table
#                      with the open epoch's full index set (sql/013's: primary key, BRIN, the expiry btrees, the
#                      commit_xid index, the stamp trigger), as the open epoch holds them when it reaches its bound
#     --cgroup-mib M   the cgroup v1 memory limit PostgreSQL runs in (default 256); shared_buffers M/4
#     --seconds S      measured seconds per variant (default 60), after W (default 10) of warm-up; the close starts
#                      T seconds into the measured run (default 10)
#     --clients C      pgbench clients (default 16; 2 threads), batches of B (default 64) fresh random digests into
#                      the new open epoch (the writers' statement shape, as bench/layout/epochs_sql.sh's B-none)
#     --variants LIST  default none,rewrite,reindex (copy and paced on request)
#     --out DIR        seconds.csv (per variant and second: transactions, p99, max), summary.txt, run.log
#                      (default bench/out/close-<UTC time>)
# The close runs in one backend (no parallel maintenance workers), so its CPU is that backend's (read from /proc:
# psql and PostgreSQL on this host). Per variant: the close's wall time and CPU, PostgreSQL's CPU over the run, the
# p99 of every second of the run, "steady" (the seconds before the close; the median of their p99s) and the worst
# second from the close's start to 2 s after its end, as a ratio to steady (issue 54's target: ≤ 1.5x), and the rate
# in those seconds against steady; then, with the control in the run, each close's seconds against the control's
# same seconds (the open epoch grows through a run, and p99 with it).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
EPOCH_KEYS=1500000; CG_MIB=256; SECS=60; WARM_S=10; CLOSE_AT=10; CLIENTS=16; BATCH=64
VARIANTS="none rewrite reindex"; OUT=""; LOCK=""; PACE_S=1
SUMMARY_TOOL=${EPOCH_SUMMARY_SIZE:-$ROOT/build/release/bench/storage/epoch_summary_size}
while [[ $# -gt 0 ]]; do
  case "$1" in
    --epoch-keys) EPOCH_KEYS=${2:?}; shift 2 ;;
    --cgroup-mib) CG_MIB=${2:?}; shift 2 ;;
    --seconds) SECS=${2:?}; shift 2 ;;
    --warmup-seconds) WARM_S=${2:?}; shift 2 ;;
    --close-at) CLOSE_AT=${2:?}; shift 2 ;;
    --clients) CLIENTS=${2:?}; shift 2 ;;
    --batch) BATCH=${2:?}; shift 2 ;;
    --variants) VARIANTS=${2//,/ }; shift 2 ;;
    --pace-seconds) PACE_S=${2:?}; shift 2 ;;
    --out) OUT=${2:?}; shift 2 ;;
    *) echo "close_under_load.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
source "$ROOT/bench/layout/lib.sh"
cgroup_bench_begin close
command -v pgbench >/dev/null || { log "pgbench not found (Debian: postgresql-client-15)"; exit 2; }
[[ -x $SUMMARY_TOOL ]] || { log "no $SUMMARY_TOOL (build target epoch_summary_size, or set EPOCH_SUMMARY_SIZE)"; exit 2; }
URL=$("$ROOT/scripts/pg.sh" url "$PGDATA_" "$PG_PORT")
sql() { psql -qAtX -v ON_ERROR_STOP=1 "$URL" "$@"; }

# An epoch table with the open epoch's full set of indexes and triggers (sql/013's scan_keys_next, by name).
open_epoch_ddl() {
  local t=$1
  cat <<SQL
CREATE TABLE $t (LIKE scan_keys INCLUDING DEFAULTS) WITH (autovacuum_vacuum_scale_factor = 0.02,
  autovacuum_vacuum_insert_scale_factor = 0.02, autovacuum_vacuum_cost_delay = 0);
ALTER TABLE $t ADD CONSTRAINT ${t}_pkey PRIMARY KEY (digest);
CREATE INDEX ${t}_first_seen_brin ON $t USING brin (first_seen) WITH (pages_per_range = 32, autosummarize = off);
CREATE INDEX ${t}_first_seen_unpinned ON $t (date_trunc('second', first_seen AT TIME ZONE 'UTC'), commit_xid)
  WHERE keep_until IS NULL;
CREATE INDEX ${t}_keep_until ON $t (keep_until) WHERE keep_until IS NOT NULL;
CREATE INDEX ${t}_commit_xid ON $t (commit_xid) WHERE commit_xid IS NOT NULL;
CREATE TRIGGER ${t}_stamp_commit_xid BEFORE UPDATE OF first_seen ON $t
  FOR EACH ROW WHEN (OLD.first_seen IS DISTINCT FROM NEW.first_seen) EXECUTE FUNCTION scangate_stamp_commit_xid();
SQL
}

# ---- setup, without the limit ---------------------------------------------------------------------------------------
PG_SHARED_MB=$((CG_MIB / 4)) "$ROOT/scripts/pg.sh" start "$PGDATA_" "$PG_PORT" >/dev/null
sql -c "ALTER SYSTEM SET wal_buffers = '4MB'"
MIGRATIONS=()
for f in "$ROOT"/sql/[0-9]*.sql; do MIGRATIONS+=(-f "$f"); done
psql -qX -1 -v ON_ERROR_STOP=1 "${MIGRATIONS[@]}" "$URL" >"$WORK/migrate.log" 2>&1 ||
  { log "migrations failed:"; tail -5 "$WORK/migrate.log" >&2; exit 1; }
open_epoch_ddl e_open | sql
T=$(date +%s)
for v in $VARIANTS; do
  [[ $v == none ]] && continue
  open_epoch_ddl "e_full_$v" | sql
  for ((a = 1; a <= EPOCH_KEYS; a += 500000)); do  # random digest order: the open epoch's random inserts
    b=$((a + 499999 < EPOCH_KEYS ? a + 499999 : EPOCH_KEYS))
    sql -c "INSERT INTO e_full_$v (digest, seen_by, first_seen)
      SELECT scangate_stored_digest(sha256(int8send(g))), 'till-07', now() - interval '1 hour'
      FROM generate_series($a::int8, $b::int8) g"
  done
  sql -c "VACUUM ANALYZE e_full_$v"
done
log "setup: $EPOCH_KEYS keys in a full open epoch per close variant in $(( $(date +%s) - T )) s;"\
  "$(sql -c "SELECT pg_size_pretty(pg_total_relation_size(oid)) FROM pg_class WHERE relname LIKE 'e_full_%' AND relkind = 'r' LIMIT 1") each"
{ echo "BEGIN;"; echo "SELECT pg_advisory_xact_lock_shared(54);"
  cat <<SQL
WITH b AS (SELECT array_agg(gen_random_uuid()) AS a FROM generate_series(1, $BATCH)),
ins AS (
  INSERT INTO e_open AS k (digest, seen_by, first_seen)
  SELECT d, 'till-07', now() FROM unnest((SELECT a FROM b)) AS u(d)
  ORDER BY d
  ON CONFLICT (digest) DO NOTHING
  RETURNING digest
)
SELECT encode(uuid_send(digest), 'hex'), NULL::int8, NULL::int8 FROM ins
UNION ALL
SELECT NULL, txid_current_if_assigned()::int8, (extract(epoch FROM now()) * 1000000)::int8;
COMMIT;
SQL
} >"$WORK/insert.sql"
sql -c "CHECKPOINT"
"$ROOT/scripts/pg.sh" stop "$PGDATA_"

# ---- the variants, inside the cgroup ----------------------------------------------------------------------------------
PM=$(cgroup_open "$CG" "$CG_MIB" "$PGDATA_" "$PG_PORT")
log "PostgreSQL $PG_PORT (postmaster $PM) in $CG (${CG_MIB} MiB), shared_buffers $(sql -c 'SHOW shared_buffers');"\
  "pgbench -M prepared -c $CLIENTS -j 2, batches of $BATCH; ${WARM_S} s warm-up, ${SECS} s measured, close at +${CLOSE_AT} s"
hz=$(getconf CLK_TCK)
echo "variant,second,txns,p99_ms,max_ms" >"$OUT/seconds.csv"
echo "variant,run_start,close_start,close_end" >"$OUT/closes.csv"
echo "variant,second,pg_read_bytes,cgroup_cache_bytes" >"$OUT/io.csv"
close_sql() {  # VARIANT: the close's statements, between reads of its backend's CPU ticks (psql runs on this host)
  local t=e_full_$1
  echo "SELECT pg_backend_pid() AS pid \\gset"
  echo "\\setenv CLOSE_PID :pid"
  echo "\\! awk '{print \$14 + \$15}' /proc/\$CLOSE_PID/stat > $WORK/close-ticks-0"
  close_body "$1"
  echo "\\! awk '{print \$14 + \$15}' /proc/\$CLOSE_PID/stat > $WORK/close-ticks-1"
}
close_body() {  # VARIANT
  local t=e_full_$1
  case $1 in
    rewrite | copy | paced)
      local c=e_closed_$1 order="" blocks slices=1 i
      [[ $1 == rewrite ]] && order=" ORDER BY digest"
      [[ $1 == paced ]] && slices=16
      blocks=$(sql -c "SELECT pg_relation_size('$t') / current_setting('block_size')::int8")
      echo "SET maintenance_work_mem = '64MB';"
      echo "SET max_parallel_maintenance_workers = 0;"
      echo "CREATE TABLE $c (LIKE scan_keys);"
      for ((i = 0; i < slices; i++)); do
        local range=""
        ((slices > 1)) && range=" WHERE ctid >= '($((blocks * i / slices)),0)'::tid"
        ((slices > 1 && i + 1 < slices)) && range+=" AND ctid < '($((blocks * (i + 1) / slices)),0)'::tid"
        echo "INSERT INTO $c (first_seen, keep_until, digest, lot, request, expiry, seen_by)"
        echo "  SELECT first_seen, keep_until, digest, lot, request, expiry, seen_by FROM $t$range$order;"
        [[ $1 == paced ]] && echo "SELECT pg_sleep($PACE_S);"
      done
      echo "ALTER TABLE $c ADD PRIMARY KEY (digest) WITH (fillfactor = 100);"
      echo "VACUUM (FREEZE, ANALYZE) $c;"
      ;;
    reindex) cat <<SQL
SET maintenance_work_mem = '64MB';
SET max_parallel_maintenance_workers = 0;
DROP INDEX ${t}_first_seen_brin, ${t}_first_seen_unpinned, ${t}_keep_until, ${t}_commit_xid;
ALTER INDEX ${t}_pkey SET (fillfactor = 100);
REINDEX INDEX CONCURRENTLY ${t}_pkey;
VACUUM (FREEZE, ANALYZE) $t;
SQL
      ;;
  esac
}
closed_rel() { case $1 in rewrite | copy | paced) echo "e_closed_$1" ;; *) echo "e_full_$1" ;; esac; }
for v in $VARIANTS; do
  sql -c "TRUNCATE e_open"
  PGOPTIONS="-c scangate.digest_scheme=5ca96a7e0054" pgbench -n -M prepared -c "$CLIENTS" -j 2 -T "$WARM_S" \
    -f "$WORK/insert.sql" -h 127.0.0.1 -p "$PG_PORT" -U postgres scangate >/dev/null 2>&1
  rm -f "$WORK"/lat.*
  g0=$(pg_ticks "$PM"); t_run=$(date +%s.%N)
  PGOPTIONS="-c scangate.digest_scheme=5ca96a7e0054" pgbench -n -M prepared -c "$CLIENTS" -j 2 -T "$SECS" \
    -f "$WORK/insert.sql" -h 127.0.0.1 -p "$PG_PORT" -U postgres -l --log-prefix "$WORK/lat" scangate \
    >"$WORK/pgbench.out" 2>&1 &
  PGB=$!
  # Every second while pgbench runs: PostgreSQL's bytes read from the storage layer (page-cache misses of its
  # process tree, lib.sh pg_read_bytes) and the cgroup's page cache, to OUT/io.csv.
  ( while kill -0 "$PGB" 2>/dev/null; do
      echo "$v,$(date +%s),$(pg_read_bytes "$PM"),$(awk '$1 == "cache" {print $2}' "$CG/memory.stat")"
      sleep 1
    done ) >>"$OUT/io.csv" 2>/dev/null &
  SAMPLER=$!
  c0=0; c1=0
  if [[ $v != none ]]; then
    sleep "$CLOSE_AT"
    c0=$(date +%s.%N)
    # The close, as one session would run it (REINDEX CONCURRENTLY cannot run inside a transaction block).
    close_sql "$v" | psql -qX -v ON_ERROR_STOP=1 "$URL" >"$WORK/close-$v.log" 2>&1 ||
      { log "the $v close failed:"; tail -5 "$WORK/close-$v.log" >&2; exit 1; }
    close_cpu=$(awk -v hz="$hz" 'NR == 1 {a = $1} NR == 2 {printf "%.1f", ($1 - a) / hz}' \
      "$WORK/close-ticks-0" "$WORK/close-ticks-1")
    "$SUMMARY_TOOL" "$URL" "$(closed_rel "$v")" >"$OUT/summary-$v.json"
    log "$v: the close's backend used $close_cpu s of CPU (its SQL; the summary's build is in summary-$v.json)"
    [[ $(closed_rel "$v") != "e_full_$v" ]] && sql -c "DROP TABLE e_full_$v"
    c1=$(date +%s.%N)
  fi
  wait "$PGB" || { log "pgbench failed:"; tail -5 "$WORK/pgbench.out" >&2; exit 1; }
  wait "$SAMPLER" || true
  sleep 1  # pgbench's backends exit and are reaped: their CPU is counted
  g1=$(pg_ticks "$PM")
  # Per second of the run (pgbench -l: client txn latency_us script epoch_s epoch_us): transactions, p99, max.
  cat "$WORK"/lat.* | awk '{print $5, $3}' | sort -k1,1n -k2,2n |
    awk -v v="$v" 'function flush() { if (n) { k = int(n * 0.99); if (k < 1) k = 1; printf "%s,%d,%d,%.1f,%.1f\n", v, s, n, l[k] / 1000, l[n] / 1000 } }
                   $1 != s { flush(); s = $1; n = 0 } { l[++n] = $2 } END { flush() }' >"$WORK/sec.csv"
  cat "$WORK/sec.csv" >>"$OUT/seconds.csv"
  echo "$v,$t_run,$c0,$c1" >>"$OUT/closes.csv"
  # steady: the whole seconds before the close (or the whole run for none), the first and last second dropped;
  # around: from the close's start to 2 s after its end.
  awk -F, -v c0="$c0" -v c1="$c1" -v v="$v" -v g=$((g1 - g0)) -v hz="$hz" -v cg="$(cat "$CG/memory.usage_in_bytes")" \
      -v rows="$(( $(grep -c . "$WORK"/lat.* | awk -F: '{s += $2} END {print s}') * BATCH ))" '
    { sec[NR] = $2; tx[NR] = $3; p[NR] = $4 }
    END {
      first = sec[1]; last = sec[NR]
      for (i = 2; i < NR; i++) {
        if (c0 == 0 || sec[i] + 1 <= c0) { ns++; sp[ns] = p[i]; stx += tx[i] }
        else if (sec[i] <= c1 + 2) { na++; if (p[i] > worst) worst = p[i]; atx += tx[i] }
      }
      for (i = 2; i <= ns; i++) { x = sp[i]; for (j = i - 1; j >= 1 && sp[j] > x; j--) sp[j + 1] = sp[j]; sp[j + 1] = x }
      steady = sp[int((ns + 1) / 2)]
      printf "%-8s close %5.1f s  steady p99 %6.1f ms (median of %d s)  worst second around it %6.1f ms = %4.2fx  rate there %4.2fx steady  PostgreSQL %5.1f CPU-µs/row  cgroup %d MiB\n",
             v, c1 - c0, steady, ns, worst, (steady > 0 ? worst / steady : 0), ((ns && na) ? (atx / na) / (stx / ns) : 0),
             g * 1e6 / hz / rows, cg / 1048576
    }' "$WORK/sec.csv" | tee -a "$OUT/summary.txt" >&2
  [[ -s $OUT/summary-$v.json ]] 2>/dev/null && cat "$OUT/summary-$v.json" >&2
  [[ $v != none ]] && sql -c "SELECT '$v: closed ' || pg_size_pretty(pg_total_relation_size('$(closed_rel "$v")')) ||
    ' = ' || round(pg_total_relation_size('$(closed_rel "$v")') / $EPOCH_KEYS::numeric, 1) || ' B per key (heap + primary key)'" |
    tee -a "$OUT/summary.txt" >&2
  log "variant $v done; load average $(cut -d' ' -f1-3 /proc/loadavg)"
done
# Against the control: the open epoch grows through a run (and p99 with it), so each close's seconds are compared
# with the same seconds (counted from the run's start) of the run without a close.
python3 - "$OUT" <<'PY' | tee -a "$OUT/summary.txt" >&2
import csv, sys
out = sys.argv[1]
sec = {}
for r in csv.DictReader(open(f"{out}/seconds.csv")):
    sec.setdefault(r["variant"], []).append((int(r["second"]), int(r["txns"]), float(r["p99_ms"])))
runs = {r["variant"]: r for r in csv.DictReader(open(f"{out}/closes.csv"))}
if "none" not in sec:
    sys.exit(0)
base = {s - sec["none"][0][0]: (t, p) for s, t, p in sec["none"]}
for v, rows in sec.items():
    if v == "none":
        continue
    c0, c1, s0 = float(runs[v]["close_start"]), float(runs[v]["close_end"]), rows[0][0]
    around = [(s - s0, t, p) for s, t, p in rows if s + 1 > c0 and s <= c1 + 2 and (s - s0) in base and s - s0 > 0]
    if not around:
        continue
    worst = max(p / base[k][1] for k, t, p in around)
    p99_close, p99_none = max(p for _, _, p in around), max(base[k][1] for k, _, _ in around)
    rate = sum(t for _, t, _ in around) / sum(base[k][0] for k, _, _ in around)
    print(f"{v:8s} against none's same seconds (+{around[0][0]}..+{around[-1][0]} s): worst p99 {p99_close:.1f} ms"
          f" vs {p99_none:.1f} ms; worst second-by-second ratio {worst:.2f}x; transactions {rate:.2f}x")
    io = {}
    for r in csv.DictReader(open(f"{out}/io.csv")):
        io.setdefault(r["variant"], []).append((int(r["second"]), int(r["pg_read_bytes"]), int(r["cgroup_cache_bytes"])))
    def read_in(var, lo, hi):  # MiB PostgreSQL read per second between run-relative seconds lo and hi
        rows = io.get(var, [])
        if len(rows) < 2:
            return float("nan")
        t0 = rows[0][0]
        pts = [(t - t0, b) for t, b, _ in rows if lo <= t - t0 <= hi + 1]
        return (pts[-1][1] - pts[0][1]) / max(1, pts[-1][0] - pts[0][0]) / 2**20 if len(pts) > 1 else float("nan")
    lo, hi = around[0][0], around[-1][0]
    print(f"{v:8s} PostgreSQL read {read_in(v, lo, hi):.1f} MiB/s in those seconds, the control {read_in('none', lo, hi):.1f}")
PY
