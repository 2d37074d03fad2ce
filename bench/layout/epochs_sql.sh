#!/usr/bin/env bash
# bench/layout/epochs_sql.sh — issue 54's design evidence at the SQL level (no scangate in the loop): does an exact
# store split into insert-time epochs keep the write rate when millions of keys are live, and what does it cost when
# a batch has to probe the closed epochs (no membership summary, or a summary's false positives)? Today's single
# table and an epoch layout side by side, in one PostgreSQL held to a memory cgroup, with pgbench.
#   bench/layout/epochs_sql.sh [--keys N] [--epoch-keys E] [--cgroup-mib M] [--cell-seconds S] [--warmup-seconds W]
#                              [--clients C] [--batch B] [--cells LIST] [--reps R]
#                              [--pg-set NAME=VALUE] [--lock FILE] [--out DIR]
#     --keys N         live keys preloaded into each layout (default 6000000): the first 16 bytes of sha256 of 1..N
#                      (the stored form, sql/013), first_seen rising over the last 20 h in that order, "till-07"
#     --epoch-keys E   keys per closed epoch (default 1500000): the epoch layout holds ceil(N / E) closed epochs
#     --cgroup-mib M   the cgroup v1 memory limit PostgreSQL runs in for the cells (default 256); shared_buffers M/4
#     --cell-seconds S measured seconds per cell (default 20), after --warmup-seconds W (default 10) of the same load
#     --clients C      pgbench clients (default 16; 2 threads), each committing batches of --batch B (default 64)
#                      fresh random digests (gen_random_uuid(): uniform in the key space, as digests are)
#     --cells LIST     the cells of a round, in order (default A0,A,B-none,B-fp0.01,B-all; B-fpP for any fraction P)
#     --reps R         rounds of the cells (default 1); round r runs them rotated by r - 1 places (A0 first in the first
#                      round, last in the second, ...), so no cell always runs right after the same one
#     --pg-set N=V     more settings (ALTER SYSTEM, in force from the restart into the cgroup); default wal_buffers=4MB
#                      as in bench/layout/cliff.sh's issue-45 runs (pg.sh's 64 MB is a quarter of the cgroup)
#     --lock FILE      flock FILE shared while preloading, exclusive while the cells run (none by default)
#     --out DIR        cells.csv, summary.txt, sizes.txt, plans.txt, schema.txt, cgroup.txt, run.log
#                      (default bench/out/epochs-<UTC time>)
#
# The layouts, one database each in one cluster (scripts/pg.sh, data under /tmp):
#   A  database `scangate`: today's table, made by applying the product's migrations (sql/[0-9]*.sql, in order, in
#      one transaction, as storage/start/migrations.cc does), so scan_keys is exactly what scangate creates (the
#      16-byte layout: uuid primary key, BRIN and expiry btrees, commit_xid index, triggers); N keys inserted with SQL
#      in random digest order, 500 000 rows per statement (the primary key random inserts make, page splits and all,
#      as bench/layout/cliff.sh does), VACUUM ANALYZE.
#   A0 database `empty`: the same migrations, the table truncated before each of its cells.
#   B  database `epochs`: the same migrations (for their functions), plus `scan_keys_e`, scan_keys's columns and an
#      int4 `epoch`, PARTITION BY LIST (epoch). Closed epochs scan_keys_e_1..K (E keys each, the last one the rest):
#      rows written in digest order into a fresh partition (what a close's rewrite leaves), commit_xid NULL (only the
#      poll follower needs it, and only for the open epoch), then PRIMARY KEY (digest) WITH (fillfactor = 100) and
#      no other index, VACUUM (FREEZE, ANALYZE). The open epoch scan_keys_e_open (epoch K + 1) has the product's full
#      set: primary key (default fillfactor), the BRIN and expiry btrees, the commit_xid index, the commit_xid stamp
#      and digest-scheme triggers, scan_keys's autovacuum settings; it is truncated before each B cell (it starts
#      empty, as A0 does, and holds what the cell's warm-up and measured seconds wrote at its end). There is no index
#      on the parent (a unique index there would have to include `epoch`): each epoch's primary key is its own, and
#      the writers name the open epoch (read after the switch lock, issue 54), so batches insert into
#      scan_keys_e_open directly.
# Then PostgreSQL is restarted inside a fresh memory cgroup with the page cache dropped (as cliff.sh does) and each
# cell runs pgbench -M prepared -c C -j 2 with a custom script, -T W, then -T S measured (PGOPTIONS sets
# scangate.digest_scheme, as scangate's writers do, so sql/014's insert guard does its work). Every transaction is
# the writers' shape (storage/pg/batch_statement.cc: BEGIN; one INSERT ... SELECT FROM unnest(array) ORDER BY digest
# ON CONFLICT (digest) DO NOTHING RETURNING, answering the inserted digests and the transaction id; COMMIT), a batch
# of B fresh digests generated inside the statement:
#   A0, A    into scan_keys (empty / N keys)
#   B-none   BEGIN; pg_advisory_xact_lock_shared (the order against a switch); the INSERT into the open epoch only:
#            what every summary answering "absent" buys
#   B-fpP    the same, the INSERT first probing each closed epoch's primary key for a random fraction P of the batch's
#            digests (each epoch its own draw: a summary with a false-positive rate P per epoch), skipping those found
#   B-all    the same, probing each closed epoch for all of the batch's digests (digest = ANY(array), an index-only
#            scan of the primary key): what no summary costs
#   A-repR   into scan_keys (N keys), a fraction R of each batch repeats of the preloaded keys (uniform over all N, so
#            spread over every closed epoch of B), the rest fresh
#   B-repR   the same batches into the epoch layout: each closed epoch probed for the batch's repeats it holds (what
#            its summary answers "maybe" for) and a 0.1 % draw of the other digests (the summaries' false positives),
#            those found skipped, the rest inserted into the open epoch. In the rep cells "rows" counts the digests
#            answered (batches x B: a repeat inserts nothing), so their rate is digests per second
# Per cell: rows inserted per second (the target's n_tup_ins over the measured run / pgbench's time), the ratio to
# the A0 cell of its round, p99 and mean transaction latency, CPU-µs per inserted row of PostgreSQL (utime+stime of
# the postmaster's process tree, reaped children included: lib.sh pg_ticks), bytes PostgreSQL read from the storage
# layer per row (/proc/PID/io read_bytes of the same tree: page-cache misses), the cgroup's usage at the cell's end,
# the target's rows at the start and at the end and its primary key's size at the end. Everything it started is
# stopped and removed on exit.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
KEYS=6000000; EPOCH_KEYS=1500000; CG_MIB=256; CELL_S=20; WARM_S=10; CLIENTS=16; BATCH=64
CELLS="A0 A B-none B-fp0.01 B-all"; REPS=1; LOCK=""; OUT=""; PG_SETS=(wal_buffers=4MB)
while [[ $# -gt 0 ]]; do
  case "$1" in
    --keys) KEYS=${2:?}; shift 2 ;;
    --epoch-keys) EPOCH_KEYS=${2:?}; shift 2 ;;
    --cgroup-mib) CG_MIB=${2:?}; shift 2 ;;
    --cell-seconds) CELL_S=${2:?}; shift 2 ;;
    --warmup-seconds) WARM_S=${2:?}; shift 2 ;;
    --clients) CLIENTS=${2:?}; shift 2 ;;
    --batch) BATCH=${2:?}; shift 2 ;;
    --cells) CELLS=${2//,/ }; shift 2 ;;
    --reps) REPS=${2:?}; shift 2 ;;
    --pg-set) PG_SETS+=("${2:?}"); shift 2 ;;
    --lock) LOCK=${2:?}; shift 2 ;;
    --out) OUT=${2:?}; shift 2 ;;
    *) echo "epochs_sql.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
source "$ROOT/bench/layout/lib.sh"
cgroup_bench_begin epochs
command -v pgbench >/dev/null || { log "pgbench not found (Debian: postgresql-client-15)"; exit 2; }
URL_A=$("$ROOT/scripts/pg.sh" url "$PGDATA_" "$PG_PORT")  # database "scangate"
url_of() { echo "${URL_A/\/scangate\?//$1?}"; }
sql() { psql -qAtX -v ON_ERROR_STOP=1 "$(url_of "$1")" "${@:2}"; }  # DB psql-args...

CLOSED=$(( (KEYS + EPOCH_KEYS - 1) / EPOCH_KEYS ))
OPEN_EPOCH=$((CLOSED + 1))
DIGEST="scangate_stored_digest(sha256(int8send(g)))"
FIRST_SEEN="now() - interval '20 hours' + (g::float8 / $KEYS) * interval '20 hours'"

# ---- the statements (one pgbench script per cell kind) ------------------------------------------------------------
# The batch: B fresh digests. A CTE referenced more than once is computed once (materialized).
BATCH_CTE="b AS (SELECT array_agg(gen_random_uuid()) AS a FROM generate_series(1, $BATCH))"
# A batch with a fraction R of repeats: a = the digests, ep = the closed epoch each repeat lies in (NULL: fresh).
rep_cte() {
  echo "b AS (SELECT array_agg(d) AS a, array_agg(e) AS ep FROM (
  SELECT CASE WHEN i <= $1 * $BATCH THEN $DIGEST ELSE gen_random_uuid() END AS d,
         CASE WHEN i <= $1 * $BATCH THEN (g - 1) / $EPOCH_KEYS + 1 END AS e
  FROM (SELECT i, 1 + floor(random() * $KEYS)::int8 AS g FROM generate_series(1, $BATCH) i) x) y)"
}
# The answer, as storage/pg/batch_statement.cc's kInsertTail.
ANSWER="SELECT encode(uuid_send(digest), 'hex'), NULL::int8, NULL::int8 FROM ins
UNION ALL
SELECT NULL, txid_current_if_assigned()::int8, (extract(epoch FROM now()) * 1000000)::int8"
insert_single() {  # [R]: a fraction R of repeats
  local cte=$BATCH_CTE
  [[ -n ${1:-} ]] && cte=$(rep_cte "$1")
  cat <<SQL
WITH $cte,
ins AS (
  INSERT INTO scan_keys AS k (digest, seen_by, first_seen)
  SELECT d, 'till-07', now() FROM unnest((SELECT a FROM b)) AS u(d)
  ORDER BY d
  ON CONFLICT (digest) DO NOTHING
  RETURNING digest
)
$ANSWER
SQL
}
# PROBE: none | all | a fraction — which of the batch's digests each closed epoch's primary key is probed for.
insert_epochs() {  # PROBE [R]: with R, a fraction R of repeats, each probed in its own epoch (PROBE: the others' rate)
  local probe=$1 rep=${2:-} e sep="" seen="" filter="" cte=$BATCH_CTE
  [[ -n $rep ]] && cte=$(rep_cte "$rep")
  if [[ $probe != none ]]; then
    local arg="(SELECT a FROM b)::uuid[]"  # the cast: ANY of an array, not ANY (subquery)
    [[ $probe != all ]] && arg="ARRAY(SELECT x FROM unnest((SELECT a FROM b)) AS v(x) WHERE random() < $probe)"
    for ((e = 1; e <= CLOSED; e++)); do
      [[ -n $rep ]] &&
        arg="ARRAY(SELECT x FROM unnest((SELECT a FROM b), (SELECT ep FROM b)) AS v(x, ep) WHERE ep = $e OR random() < $probe)"
      seen+="$sep  SELECT digest FROM scan_keys_e_$e WHERE digest = ANY($arg)"$'\n'
      sep="  UNION ALL"$'\n'
    done
    seen="seen AS (
$seen),
"
    filter="  WHERE d NOT IN (SELECT digest FROM seen)"$'\n'
  fi
  cat <<SQL
WITH $cte,
${seen}ins AS (
  INSERT INTO scan_keys_e_open AS k (epoch, digest, seen_by, first_seen)
  SELECT $OPEN_EPOCH, d, 'till-07', now() FROM unnest((SELECT a FROM b)) AS u(d)
${filter}  ORDER BY d
  ON CONFLICT (digest) DO NOTHING
  RETURNING digest
)
$ANSWER
SQL
}
statement_of() {  # CELL: the cell's INSERT statement (no trailing semicolon)
  case $1 in
    A0 | A) insert_single ;;
    B-none) insert_epochs none ;;
    B-fp[0-9]*) insert_epochs "${1#B-fp}" ;;
    B-all) insert_epochs all ;;
    A-rep[0-9]*) insert_single "${1#A-rep}" ;;
    B-rep[0-9]*) insert_epochs 0.001 "${1#B-rep}" ;;
    *) log "unknown cell $1"; exit 2 ;;
  esac
}
db_of() { case $1 in A0) echo empty ;; A | A-rep*) echo scangate ;; *) echo epochs ;; esac; }
target_of() { case $1 in A0 | A | A-rep*) echo scan_keys ;; *) echo scan_keys_e_open ;; esac; }
for c in $CELLS; do
  { echo "BEGIN;"
    [[ $c == B-* ]] && echo "SELECT pg_advisory_xact_lock_shared(54);"
    statement_of "$c"; echo ";"
    echo "COMMIT;"; } >"$WORK/$c.sql"
done

# ---- preload, without the limit --------------------------------------------------------------------------------
lock shared
PG_SHARED_MB=$((CG_MIB / 4)) "$ROOT/scripts/pg.sh" start "$PGDATA_" "$PG_PORT" >/dev/null
for kv in "${PG_SETS[@]}"; do  # ALTER SYSTEM: in force from the restart into the cgroup on
  sql postgres -c "ALTER SYSTEM SET ${kv%%=*} = '${kv#*=}'"
done
sql postgres -c "CREATE DATABASE empty" -c "CREATE DATABASE epochs"
MIGRATIONS=()
for f in "$ROOT"/sql/[0-9]*.sql; do MIGRATIONS+=(-f "$f"); done
for db in scangate empty epochs; do  # the product's migrations, in order, in one transaction
  psql -qX -1 -v ON_ERROR_STOP=1 "${MIGRATIONS[@]}" "$(url_of "$db")" >"$WORK/migrate-$db.log" 2>&1 ||
    { log "migrations failed on $db:"; tail -5 "$WORK/migrate-$db.log" >&2; exit 1; }
done
[[ $(sql scangate -c "SELECT scangate_layout()") == 2 ]] || { log "scan_keys is not in the 16-byte layout"; exit 1; }
log "PostgreSQL $(sql postgres -c 'SHOW server_version'); $KEYS keys per layout, $CLOSED closed epochs of ≤ $EPOCH_KEYS"
log "generating a digest in the statement: $(sql postgres -c "EXPLAIN (ANALYZE, FORMAT JSON)
  SELECT array_agg(gen_random_uuid()) FROM generate_series(1, 1000000)" |
  jq -r '.[0]."Execution Time" / 1000 | "\(. * 1000 | round / 1000) µs per digest (1 M, outside the cgroup)"')"

T=$(date +%s)
for ((a = 1; a <= KEYS; a += 500000)); do
  b=$((a + 499999 < KEYS ? a + 499999 : KEYS))
  sql scangate -c "INSERT INTO scan_keys (digest, seen_by, first_seen)
    SELECT $DIGEST, 'till-07', $FIRST_SEEN FROM generate_series($a::int8, $b::int8) g"
done
sql scangate -c "VACUUM ANALYZE scan_keys"
log "A: $KEYS keys in random digest order in $(( $(date +%s) - T )) s"

T=$(date +%s)
sql epochs <<SQL
CREATE TABLE scan_keys_e (
  first_seen timestamptz NOT NULL DEFAULT now(),
  commit_xid xid8 DEFAULT pg_current_xact_id(),
  keep_until timestamptz,
  digest     uuid NOT NULL,
  lot        uuid,
  request    uuid,
  expiry     date,
  epoch      int4 NOT NULL,
  seen_by    text
) PARTITION BY LIST (epoch);
SQL
for ((e = 1; e <= CLOSED; e++)); do
  lo=$(( (e - 1) * EPOCH_KEYS + 1 )); hi=$(( e * EPOCH_KEYS < KEYS ? e * EPOCH_KEYS : KEYS ))
  sql epochs <<SQL
SET maintenance_work_mem = '512MB';
SET work_mem = '512MB';
CREATE TABLE scan_keys_e_$e PARTITION OF scan_keys_e FOR VALUES IN ($e);
INSERT INTO scan_keys_e_$e (first_seen, commit_xid, digest, epoch, seen_by)
  SELECT $FIRST_SEEN, NULL, $DIGEST, $e, 'till-07' FROM generate_series($lo::int8, $hi::int8) g ORDER BY 3;
ALTER TABLE scan_keys_e_$e ADD CONSTRAINT scan_keys_e_${e}_pkey PRIMARY KEY (digest) WITH (fillfactor = 100);
VACUUM (FREEZE, ANALYZE) scan_keys_e_$e;
SQL
done
sql epochs <<SQL
CREATE TABLE scan_keys_e_open PARTITION OF scan_keys_e FOR VALUES IN ($OPEN_EPOCH)
  WITH (autovacuum_vacuum_scale_factor = 0.02, autovacuum_vacuum_insert_scale_factor = 0.02,
        autovacuum_vacuum_cost_delay = 0);
ALTER TABLE scan_keys_e_open ALTER COLUMN commit_xid SET DEFAULT pg_current_xact_id();
ALTER TABLE scan_keys_e_open ADD CONSTRAINT scan_keys_e_open_pkey PRIMARY KEY (digest);
CREATE INDEX scan_keys_e_open_first_seen_brin ON scan_keys_e_open USING brin (first_seen)
  WITH (pages_per_range = 32, autosummarize = off);
CREATE INDEX scan_keys_e_open_first_seen_unpinned
  ON scan_keys_e_open (date_trunc('second', first_seen AT TIME ZONE 'UTC'), commit_xid) WHERE keep_until IS NULL;
CREATE INDEX scan_keys_e_open_keep_until ON scan_keys_e_open (keep_until) WHERE keep_until IS NOT NULL;
CREATE INDEX scan_keys_e_open_commit_xid ON scan_keys_e_open (commit_xid) WHERE commit_xid IS NOT NULL;
CREATE TRIGGER scan_keys_e_open_stamp_commit_xid BEFORE UPDATE OF first_seen ON scan_keys_e_open
  FOR EACH ROW WHEN (OLD.first_seen IS DISTINCT FROM NEW.first_seen) EXECUTE FUNCTION scangate_stamp_commit_xid();
CREATE TRIGGER scan_keys_e_open_digest_scheme_guard BEFORE INSERT ON scan_keys_e_open
  FOR EACH STATEMENT EXECUTE FUNCTION scangate_digest_scheme_guard();
ANALYZE scan_keys_e;
SQL
log "B: $KEYS keys in $CLOSED closed epochs in $(( $(date +%s) - T )) s"

{ echo "== A, today's layout (database scangate; A0 is the same table, empty, in database empty)"
  psql -X "$(url_of scangate)" -c '\d scan_keys'
  echo "== B, the epoch layout (database epochs)"
  psql -X "$(url_of epochs)" -c '\d+ scan_keys_e' -c '\d scan_keys_e_1' -c '\d scan_keys_e_open'; } >"$OUT/schema.txt"
{ echo "== A: bench/layout/sizes.sql"
  psql -X "$(url_of scangate)" -f "$ROOT/bench/layout/sizes.sql"
  echo "== B: per epoch (heap, primary key, every index; bytes per row; rows counted by VACUUM)"
  psql -X "$(url_of epochs)" -c "
    SELECT c.relname AS epoch, c.reltuples::int8 AS rows,
           pg_size_pretty(pg_relation_size(c.oid)) AS heap,
           pg_size_pretty(pg_relation_size((c.relname || '_pkey')::regclass)) AS primary_key,
           pg_size_pretty(pg_total_relation_size(c.oid)) AS all_,
           round(pg_relation_size(c.oid) / nullif(c.reltuples, 0)::numeric, 1) AS heap_b,
           round(pg_relation_size((c.relname || '_pkey')::regclass) / nullif(c.reltuples, 0)::numeric, 1) AS pk_b,
           round(pg_total_relation_size(c.oid) / nullif(c.reltuples, 0)::numeric, 1) AS all_b
    FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
    WHERE i.inhparent = 'scan_keys_e'::regclass ORDER BY c.oid"; } | tee "$OUT/sizes.txt" >&2
for c in $CELLS; do  # the plans the cells run (not executed)
  echo "== $c ($(db_of "$c"))"
  psql -X "$(url_of "$(db_of "$c")")" -c "EXPLAIN $(statement_of "$c")"
done >"$OUT/plans.txt"
cp "$WORK"/*.sql "$OUT/"
sql postgres -c "CHECKPOINT"
"$ROOT/scripts/pg.sh" stop "$PGDATA_"

# ---- the cells, inside the cgroup ---------------------------------------------------------------------------------
lock exclusive
PM=$(cgroup_open "$CG" "$CG_MIB" "$PGDATA_" "$PG_PORT")
log "PostgreSQL $PG_PORT (postmaster $PM) in $CG (${CG_MIB} MiB), shared_buffers $(sql postgres -c 'SHOW shared_buffers'),"\
  "wal_buffers $(sql postgres -c 'SHOW wal_buffers'); pgbench -M prepared -c $CLIENTS -j 2, batches of $BATCH,"\
  "${WARM_S} s warm-up + ${CELL_S} s per cell"
hz=$(getconf CLK_TCK)
echo "rep,cell,closed_keys,rows_start,rows,seconds,rows_per_s,ratio_to_A0,p99_ms,mean_ms,pg_cpu_us_per_row,read_kib_per_row,cgroup_mib,rows_end,pk_mib_end" \
  >"$OUT/cells.csv"
inserted() {  # DB TABLE: rows inserted into TABLE so far (cumulative statistics; a backend flushes them at exit)
  sql "$1" -c "SELECT n_tup_ins FROM pg_stat_user_tables WHERE relid = '$2'::regclass"
}
pgbench_run() {  # DB SCRIPT SECONDS LOGPREFIX|"": pgbench's output on stdout; exits the script when pgbench fails
  local args=(-n -M prepared -c "$CLIENTS" -j 2 -T "$3" -f "$2" -h 127.0.0.1 -p "$PG_PORT" -U postgres)
  [[ -n $4 ]] && args+=(-l --log-prefix "$4")
  if ! PGOPTIONS="-c scangate.digest_scheme=5ca96a7e0054" pgbench "${args[@]}" "$1" >"$WORK/pgbench.out" 2>&1 ||
     ! grep -q '^tps = ' "$WORK/pgbench.out"; then
    log "pgbench failed on $1 with $2:"; tail -5 "$WORK/pgbench.out" >&2; exit 1
  fi
  cat "$WORK/pgbench.out"
}
cell() {  # REP CELL
  local rep=$1 c=$2 db target closed=0 rows0 ins0 ins1 g0 g1 r0 r1 out txns tps mean p99 rows_end pk
  db=$(db_of "$c"); target=$(target_of "$c")
  [[ $c == B-* ]] && closed=$KEYS
  [[ $c == A0 ]] && sql "$db" -c "TRUNCATE scan_keys"
  [[ $c == B-* ]] && sql "$db" -c "TRUNCATE scan_keys_e_open"
  pgbench_run "$db" "$WORK/$c.sql" "$WARM_S" "" >/dev/null
  sleep 1  # the warm-up's backends exit and flush their statistics
  rows0=$(sql "$db" -c "SELECT n_live_tup FROM pg_stat_user_tables WHERE relid = '$target'::regclass")
  ins0=$(inserted "$db" "$target"); g0=$(pg_ticks "$PM"); r0=$(pg_read_bytes "$PM")
  rm -f "$WORK"/lat.*
  out=$(pgbench_run "$db" "$WORK/$c.sql" "$CELL_S" "$WORK/lat")
  sleep 1
  g1=$(pg_ticks "$PM"); r1=$(pg_read_bytes "$PM"); ins1=$(inserted "$db" "$target")
  txns=$(awk -F': ' '/^number of transactions actually processed/ {print $2}' <<<"$out")
  tps=$(awk '/^tps = / {print $3}' <<<"$out")
  mean=$(awk '/^latency average = / {print $4}' <<<"$out")
  p99=$(cat "$WORK"/lat.* | awk '{print $3}' | sort -n | awk '{v[NR] = $1} END {i = int(NR * 0.99); if (i < 1) i = 1; printf "%.1f", v[i] / 1000}')
  rows_end=$(sql "$db" -c "SELECT n_live_tup FROM pg_stat_user_tables WHERE relid = '$target'::regclass")
  pk=$(sql "$db" -c "SELECT pg_relation_size('${target}_pkey')")
  awk -v rep="$rep" -v c="$c" -v closed="$closed" -v rows0="$rows0" -v n=$(if [[ $c == ?-rep* ]]; then echo $((txns * BATCH)); else echo $((ins1 - ins0)); fi) -v t="$txns" -v tps="$tps" \
      -v p99="$p99" -v mean="$mean" -v g=$((g1 - g0)) -v hz="$hz" -v rb=$((r1 - r0)) \
      -v cg="$(cat "$CG/memory.usage_in_bytes")" -v rows_end="$rows_end" -v pk="$pk" \
      'BEGIN { s = t / tps; rate = n / s
               printf "%s,%s,%d,%d,%d,%.1f,%.0f,,%s,%.1f,%.1f,%.2f,%.0f,%d,%.0f\n", rep, c, closed, rows0, n, s, rate, p99, mean, g * 1e6 / hz / n, rb / 1024 / n, cg / 1048576,
                 rows_end, pk / 1048576 }' | tee -a "$OUT/cells.csv" >&2
  [[ $c == ?-rep* ]] || (( ins1 - ins0 == txns * BATCH )) || log "note: $((ins1 - ins0)) rows inserted by $txns batches of $BATCH"
  log "cell $rep $c done; load average $(cut -d' ' -f1-3 /proc/loadavg)"
}
read -ra ORDER <<<"$CELLS"
for ((rep = 1; rep <= REPS; rep++)); do
  k=$(( (rep - 1) % ${#ORDER[@]} ))
  for c in "${ORDER[@]:k}" "${ORDER[@]:0:k}"; do cell "$rep" "$c"; done
done
lock none
# The ratio to the A0 cell of the same round.
awk -F, -v OFS=, 'NR == FNR { if (FNR > 1 && $2 == "A0") a0[$1] = $7; next }
  FNR == 1 { print; next } { $8 = a0[$1] > 0 ? sprintf("%.2f", $7 / a0[$1]) : ""; print }' \
  "$OUT/cells.csv" "$OUT/cells.csv" >"$WORK/cells.csv" && cp "$WORK/cells.csv" "$OUT/cells.csv"
{ echo "PostgreSQL $(sql postgres -c 'SHOW server_version'), $KEYS keys per layout (B: $CLOSED closed epochs of ≤ $EPOCH_KEYS),"\
    "${CG_MIB} MiB cgroup, shared_buffers $(sql postgres -c 'SHOW shared_buffers'), wal_buffers $(sql postgres -c 'SHOW wal_buffers'),"\
    "pgbench -c $CLIENTS, batches of $BATCH, cells ${CELL_S} s after ${WARM_S} s"
  awk -F, 'NR > 1 { printf "rep %s %-7s %9s rows/s  %5sx A0  p99 %6s ms  PostgreSQL %5s CPU-µs/row  %6s KiB read/row  cgroup %s MiB\n",
                     $1, $2, $7, $8, $9, $11, $12, $13
                     n[$2]++; r[$2] += $7; x[$2] += $8; p[$2] += $9; u[$2] += $11; b[$2] += $12 }
    END { if (n["A0"] < 2) exit
          for (c in n) printf "mean of %d %-7s %9.0f rows/s  %5.2fx A0  p99 %6.1f ms  PostgreSQL %5.1f CPU-µs/row  %6.2f KiB read/row\n",
                              n[c], c, r[c] / n[c], x[c] / n[c], p[c] / n[c], u[c] / n[c], b[c] / n[c] }' "$OUT/cells.csv"
} | tee "$OUT/summary.txt" >&2
