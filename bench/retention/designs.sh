#!/usr/bin/env bash
# bench/retention/designs.sh — issue 22, item 2: expiry designs for scan_keys at steady state, SQL level only
# (no scangate). For each design, pgbench inserts unique random 32-byte digests in batches of 200 per
# transaction (scangate's batch shape, rows in digest order) at a fixed rate, while the design's expiry runs in
# its own session every second (psql \watch 1). Over the steady-state window [W0, T) it reports, per inserted
# row: PostgreSQL CPU-µs (utime+stime of the postmaster and all its children from /proc, exited children
# through the postmaster's cutime+cstime) and WAL bytes (pg_current_wal_lsn deltas); at T: table and index
# bytes, live and dead tuples, and whether the table+index bytes sampled every 10 s stay within ±15 % of their
# mean over the last third of the run. (For `off`, which grows without end, that check says nothing: read its sizes.txt.) For the A designs, an EXPLAIN (ANALYZE, BUFFERS) of one expiry slice
# at T shows the pages a pass touches.
#   bench/retention/designs.sh                      defaults below; env overrides, e.g. R=30 T=120 ROUNDS=1
# Designs:
#   off     sql/001..003 (PK on digest, BRIN on first_seen), no expiry (scangate's BRIN summarizer only).
#   A       + btree on first_seen, autovacuum on scan_keys tuned (AV_SF scale factors, cost_delay 0),
#           insert ON CONFLICT (digest) DO UPDATE ... WHERE first_seen < now() - R (rebirth), expiry: DELETE
#           slices of SLICE rows, oldest first, FOR UPDATE SKIP LOCKED, repeated while a slice is full.
#   A-av0   A with the table's autovacuum settings left at the defaults (0.2 / 0.2 / 2 ms).
#   A-brin  A without the btree: the expiry slice can only use the BRIN index.
#   A-nolock  A with the slice's SELECT without FOR UPDATE SKIP LOCKED (one expiry runner per table only).
#   B       parent partitioned by RANGE (first_seen), partitions of R/4 created ahead and dropped whole once
#           entirely older than R; PK (digest, first_seen): NOT exact across partitions (cost lower bound).
#   B2      B + a NOT EXISTS probe of the live partitions in the insert (closer to exact, still racy); OFFSET 0
#           keeps it a per-digest index probe (pulled up, the planner picks a hash anti join over every live row).
# The cluster (scripts/pg.sh's settings + autovacuum_naptime, see NAPTIME) lives in DIR and is stopped at
# the end; each cell runs in a freshly created database after a CHECKPOINT. Output: OUT/cells.tsv (one line
# per cell), OUT/summary.txt (medians per design), per-cell logs in OUT/<round>-<design>/.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."

R=${R:-24}                    # horizon, seconds (24: 7 designs x 2 rounds in ~25 min)
T=${T:-96}                    # run length per cell, seconds (>= 4 R)
W0=${W0:-$((2 * R))}          # steady-state window starts here (s after the load starts) and ends at T
RATE=${RATE:-12000}           # rows/s, the same for every design (pgbench -R, batches of 200)
CLIENTS=${CLIENTS:-4}
SLICE=${SLICE:-5000}          # rows per DELETE slice
AV_SF=${AV_SF:-0.02}          # design A's autovacuum_vacuum_scale_factor and _insert_scale_factor
NAPTIME=${NAPTIME:-1s}        # autovacuum_naptime, cluster-wide (time compression: see RESULTS.md)
DESIGNS=${DESIGNS:-"off A A-av0 A-brin A-nolock B B2"}
ROUNDS=${ROUNDS:-2}
DIR=${DIR:-/tmp/retbench-pg}
PORT=${PORT:-55722}
OUT=${OUT:-/tmp/retbench-out}
PGBIN=/usr/lib/postgresql/15/bin
DB=retbench
URL="postgresql://postgres@127.0.0.1:$PORT/$DB?connect_timeout=3"
ADMIN="postgresql://postgres@127.0.0.1:$PORT/postgres?connect_timeout=3"
BATCH=200

q() { "$PGBIN/psql" -X -qAt -v ON_ERROR_STOP=1 "$URL" -c "$1"; }
qa() { "$PGBIN/psql" -X -qAt -v ON_ERROR_STOP=1 "$ADMIN" -c "$1"; }

# CPU ticks of the postmaster and every process whose parent it is; a child that exited was reaped by the
# postmaster, so its ticks moved into the postmaster's cutime+cstime (fields 16, 17): the sum is continuous.
pg_ticks() {
  local pm; pm=$(head -1 "$DIR/postmaster.pid")
  awk -v pm="$pm" '{ pid = FILENAME; sub(/^\/proc\//, "", pid); sub(/\/stat$/, "", pid)
      s = $0; sub(/^.*\) /, "", s); split(s, f, " ")
      if (pid == pm) t += f[12] + f[13] + f[14] + f[15]; else if (f[2] == pm) t += f[12] + f[13] }
      END { print t }' /proc/[0-9]*/stat 2>/dev/null
}
HZ=$(getconf CLK_TCK)

# Sizes summed over scan_keys and its partitions: table bytes, index bytes, live, dead.
SIZES_SQL="SELECT coalesce(sum(pg_table_size(t.relid)), 0), coalesce(sum(pg_indexes_size(t.relid)), 0),
  coalesce(sum(s.n_live_tup), 0), coalesce(sum(s.n_dead_tup), 0)
  FROM (SELECT oid AS relid FROM pg_class WHERE oid = 'scan_keys'::regclass AND relkind = 'r'
        UNION ALL SELECT inhrelid FROM pg_inherits WHERE inhparent = 'scan_keys'::regclass) t
  LEFT JOIN pg_stat_user_tables s ON s.relid = t.relid"

schema() {  # $1 design
  local d=$1
  case $d in
    off|A|A-av0|A-brin|A-nolock)
      for f in sql/001_*.sql sql/002_*.sql sql/003_*.sql; do
        "$PGBIN/psql" -X -q -v ON_ERROR_STOP=1 "$URL" -f "$f" >/dev/null
      done ;;
  esac
  case $d in A|A-av0|A-nolock) q "CREATE INDEX scan_keys_first_seen ON scan_keys (first_seen)" ;; esac
  case $d in A|A-brin|A-nolock)
    q "ALTER TABLE scan_keys SET (autovacuum_vacuum_scale_factor = $AV_SF,
         autovacuum_vacuum_insert_scale_factor = $AV_SF, autovacuum_vacuum_cost_delay = 0)" ;;
  esac
  local lock="FOR UPDATE SKIP LOCKED"; [[ $d == A-nolock ]] && lock=""
  case $d in
    off) q "CREATE PROCEDURE bench_expire() LANGUAGE plpgsql AS \$\$ BEGIN
              PERFORM brin_summarize_new_values('scan_keys_first_seen_brin'); END \$\$" ;;
    A*) q "CREATE PROCEDURE bench_expire() LANGUAGE plpgsql AS \$\$
          DECLARE k bigint; t0 timestamptz;
          BEGIN
            LOOP
              t0 := clock_timestamp();
              DELETE FROM scan_keys WHERE ctid = ANY(ARRAY(SELECT ctid FROM scan_keys
                WHERE first_seen < now() - interval '$R s' ORDER BY first_seen LIMIT $SLICE $lock));
              GET DIAGNOSTICS k = ROW_COUNT;
              COMMIT;
              RAISE NOTICE 'slice % rows % ms', k, round(extract(epoch FROM clock_timestamp() - t0) * 1000, 1);
              EXIT WHEN k < $SLICE;
            END LOOP;
            PERFORM brin_summarize_new_values('scan_keys_first_seen_brin');
          END \$\$" ;;
    B|B2)
      q "CREATE TABLE scan_keys (
           digest bytea NOT NULL CHECK (octet_length(digest) = 32),
           first_seen timestamptz NOT NULL DEFAULT now(),
           source text,
           PRIMARY KEY (digest, first_seen)) PARTITION BY RANGE (first_seen)"
      # Partition b holds [b*P, (b+1)*P) in epoch seconds, P = R/4; the current one and two ahead exist.
      q "CREATE PROCEDURE bench_expire() LANGUAGE plpgsql AS \$\$
         DECLARE p numeric := $R / 4.0; nb bigint := floor(extract(epoch FROM now()) / p); b bigint; n text;
         BEGIN
           FOR b IN nb .. nb + 2 LOOP
             IF to_regclass('scan_keys_p' || b) IS NULL THEN
               EXECUTE format('CREATE TABLE %I PARTITION OF scan_keys FOR VALUES FROM (%L) TO (%L)',
                 'scan_keys_p' || b, to_timestamp(b * p), to_timestamp((b + 1) * p));
             END IF;
           END LOOP;
           FOR n IN SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
                    WHERE i.inhparent = 'scan_keys'::regclass LOOP
             IF to_timestamp((substr(n, 12)::bigint + 1) * p) <= now() - interval '$R s' THEN
               EXECUTE format('DROP TABLE %I', n);
               RAISE NOTICE 'dropped %', n;
             END IF;
           END LOOP;
         END \$\$"
      q "CALL bench_expire()" ;;
  esac
  local gen="SELECT sha256(random()::text::bytea) AS d FROM generate_series(1, $BATCH)"
  case $d in
    off) echo "INSERT INTO scan_keys (digest, source, first_seen) SELECT d, 'bench', now() FROM ($gen) g
      ORDER BY d ON CONFLICT (digest) DO NOTHING;" ;;
    A*) echo "INSERT INTO scan_keys (digest, source, first_seen) SELECT d, 'bench', now() FROM ($gen) g
      ORDER BY d ON CONFLICT (digest) DO UPDATE SET first_seen = EXCLUDED.first_seen, source = EXCLUDED.source
      WHERE scan_keys.first_seen < now() - interval '$R s';" ;;
    B) echo "INSERT INTO scan_keys (digest, source, first_seen) SELECT d, 'bench', now() FROM ($gen) g
      ORDER BY d ON CONFLICT DO NOTHING;" ;;
    B2) echo "INSERT INTO scan_keys (digest, source, first_seen) SELECT d, 'bench', now() FROM ($gen) g
      WHERE NOT EXISTS (SELECT 1 FROM scan_keys k WHERE k.digest = g.d AND k.first_seen >= now() - interval '$R s' OFFSET 0)
      ORDER BY d ON CONFLICT DO NOTHING;" ;;
  esac | tr '\n' ' ' >"$cell/insert.sql"
  echo >>"$cell/insert.sql"
}

# Waits until the next whole epoch second (pgbench aggregates its log by whole seconds), prints it.
at_second() { local n; n=$(date +%s.%N); sleep "$(echo "1 - ($n - ${n%.*})" | bc -l)"; date +%s; }

run_cell() {  # $1 round, $2 design
  local round=$1 d=$2
  cell="$OUT/$round-$d"; rm -rf "$cell"; mkdir -p "$cell"
  qa "DROP DATABASE IF EXISTS $DB" >/dev/null; qa "CREATE DATABASE $DB" >/dev/null
  schema "$d"
  if [[ $d == B2 ]]; then  # the probe's plan, once, for the record
    q "EXPLAIN (COSTS OFF) $(sed 's/;.*//' "$cell/insert.sql")" >"$cell/insert-plan.txt"
  fi
  qa "CHECKPOINT"
  "$PGBIN/psql" -X -q "$URL" >"$cell/expiry.out" 2>"$cell/expiry.log" <<<"CALL bench_expire() \\watch 1" &
  local exp_pid=$!
  local start; start=$(at_second)
  (cd "$cell" && exec "$PGBIN/pgbench" -n -M prepared -c "$CLIENTS" -j 2 -R "$((RATE / BATCH))" -T "$((T + 4))" \
     -f insert.sql --log --aggregate-interval=1 --log-prefix=agg -h 127.0.0.1 -p "$PORT" -U postgres "$DB" \
     >pgbench.out 2>&1) &
  local bench_pid=$!
  local t0="" c0 w0 t1 c1 w1 now
  for ((s = 0; s <= T; s += 10)); do
    now=$(date +%s); (( start + s > now )) && sleep $((start + s - now))
    if (( s >= W0 )) && [[ -z $t0 ]]; then t0=$(at_second); c0=$(pg_ticks); w0=$(q "SELECT pg_current_wal_lsn()"); fi
    echo "$s $(q "$SIZES_SQL" | tr '|' ' ')" >>"$cell/sizes.txt"
  done
  now=$(date +%s); (( start + T - 1 > now )) && sleep $((start + T - now - 1))
  t1=$(at_second); c1=$(pg_ticks); w1=$(q "SELECT pg_current_wal_lsn()")
  local final; final=$(q "$SIZES_SQL" | tr '|' ' ')
  if [[ $d == A* ]]; then
    "$PGBIN/psql" -X -qAt "$URL" >"$cell/slice-explain.txt" 2>&1 <<SQL
BEGIN;
EXPLAIN (ANALYZE, BUFFERS, COSTS OFF, TIMING OFF) SELECT ctid FROM scan_keys
  WHERE first_seen < now() - interval '$R s' ORDER BY first_seen LIMIT $SLICE $( [[ $d == A-nolock ]] || echo FOR UPDATE SKIP LOCKED);
ROLLBACK;
SELECT 'heap_pages ' || pg_relation_size('scan_keys') / 8192;
SQL
  fi
  wait "$bench_pid" || { echo "pgbench failed:"; cat "$cell/pgbench.out"; exit 1; }
  kill -INT "$exp_pid"; wait "$exp_pid" || true  # after pgbench: design B's inserts need its partitions
  local rows; rows=$(cat "$cell"/agg* | awk -v a="$t0" -v b="$t1" -v n="$BATCH" '$1 >= a && $1 < b { x += $2 } END { print x * n }')
  local wal; wal=$(q "SELECT pg_wal_lsn_diff('$w1', '$w0')")
  # Plateau: table+index bytes of the samples in the last third of the run within ±15 % of their mean.
  local plateau; plateau=$(awk -v t="$T" '$1 >= 2 * t / 3 { v = $2 + $3; s += v; n++; if (!mn || v < mn) mn = v; if (v > mx) mx = v }
      END { m = s / n; if (m == 0) m = 1; printf "%s(%+.0f%%/%+.0f%%)", ((mx - m) / m <= 0.15 && (m - mn) / m <= 0.15) ? "yes" : "no", 100 * (mn - m) / m, 100 * (mx - m) / m }' "$cell/sizes.txt")
  local maxdead; maxdead=$(awk -v t="$T" '$1 >= 2 * t / 3 && $5 > m { m = $5 } END { print m + 0 }' "$cell/sizes.txt")
  local slices; slices=$(grep -o 'slice [0-9]* rows [0-9.]* ms' "$cell/expiry.log" | awk '$2 == '"$SLICE"' { print $4 }' | sort -n | awk '{ v[NR] = $1 } END { print (NR ? v[int((NR + 1) / 2)] : "-") }' || true)
  # Buffers of the slice's scan node (the index scan, or the bitmap heap scan over the BRIN), of heap pages.
  local bufs; bufs=$(awk '/(Index|Heap|Seq) Scan (using .* )?on scan_keys \(/ { f = 1 } f && /Buffers:/ { sub(/.*shared /, ""); gsub(/ /, ","); b = $0; f = 0 }
      /^heap_pages/ { print b "/" $2 }' "$cell/slice-explain.txt" 2>/dev/null || true)
  read -r tb ib live dead <<<"$final"
  printf '%s\t%s\t%d\t%.2f\t%.0f\t%d\t%d\t%d\t%d\t%d\t%.0f\t%s\t%s\t%s\n' "$round" "$d" "$rows" \
    "$(echo "($c1 - $c0) / $HZ * 1000000 / $rows" | bc -l)" "$(echo "$wal / $rows" | bc -l)" \
    "$tb" "$ib" "$live" "$dead" "$maxdead" "$(echo "($tb + $ib) / ($live + 1)" | bc -l)" "$plateau" \
    "$slices" "${bufs:--}" | tee -a "$OUT/cells.tsv"
}

mkdir -p "$OUT"
scripts/pg.sh start "$DIR" "$PORT" >/dev/null
trap 'scripts/pg.sh stop "$DIR"' EXIT
qa "ALTER SYSTEM SET autovacuum_naptime = '$NAPTIME'" >/dev/null; qa "SELECT pg_reload_conf()" >/dev/null
printf 'round\tdesign\trows\tcpu_us_per_row\twal_B_per_row\ttable_B\tindex_B\tlive\tdead\tmax_dead_last3rd\tB_per_live_row\tplateau_last3rd\tslice_ms_median\tslice_scan_buffers/heap_pages\n' \
  | tee -a "$OUT/cells.tsv"
echo "# $(date -u +%FT%TZ) R=${R}s T=${T}s window=[$W0,$T) rate=$RATE rows/s clients=$CLIENTS slice=$SLICE av_sf=$AV_SF naptime=$NAPTIME $(git rev-parse --short HEAD)" | tee -a "$OUT/cells.tsv"
for ((round = 1; round <= ROUNDS; round++)); do
  for d in $DESIGNS; do run_cell "$round" "$d"; done
done
# Medians per design (of the rounds; with 2 rounds, the mean of the two).
awk -F'\t' 'NR > 1 && $1 !~ /^#/ && $1 != "round" { k = $2; n[k]++; c[k, n[k]] = $4; w[k, n[k]] = $5; b[k, n[k]] = $6 + $7
    if (!(k in o)) { o[k] = ++m; nm[m] = k } }
  function med(a, k, j, i, t, v) { for (i = 1; i <= n[k]; i++) v[i] = a[k, i]
    for (i = 1; i <= n[k]; i++) for (j = i + 1; j <= n[k]; j++) if (v[j] < v[i]) { t = v[i]; v[i] = v[j]; v[j] = t }
    return n[k] % 2 ? v[(n[k] + 1) / 2] : (v[n[k] / 2] + v[n[k] / 2 + 1]) / 2 }
  END { printf "design\truns\tcpu_us_per_row\twal_B_per_row\ttable+index_MB\n"
    for (i = 1; i <= m; i++) { k = nm[i]; printf "%s\t%d\t%.2f\t%.0f\t%.1f\n", k, n[k], med(c, k), med(w, k), med(b, k) / 1048576 } }' \
  "$OUT/cells.tsv" | tee "$OUT/summary.txt"
