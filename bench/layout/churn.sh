#!/usr/bin/env bash
# bench/layout/churn.sh — issue 45: "a day's worth of random inserts" at steady state, at the SQL level, on a table of
# bench/layout/levers.sql (lab_v1 or lab_v2): ROUNDS rounds, each inserting N / ROUNDS new random keys (first_seen and
# commit_xid shared by runs of 60 rows, as ack=commit batches) and deleting as many of the oldest (the expiry's
# slice), then a VACUUM (what autovacuum does between); N inserts in all, so every key of the table is replaced once.
# Then the bytes per live row of the heap and each index.
#   bench/layout/churn.sh URL lab_v1|lab_v2 N ROUNDS
set -euo pipefail
URL=${1:?URL}; T=${2:?table}; N=${3:?N}; R=${4:?ROUNDS}; PER=$((N / R))
case $T in
  lab_v1) DIGEST="sha256(int8send(g))"; SOURCE=source ;;
  lab_v2) DIGEST="encode(substring(sha256(int8send(g)) FROM 1 FOR 16), 'hex')::uuid"; SOURCE=seen_by ;;
  *) echo "table: lab_v1 | lab_v2" >&2; exit 2 ;;
esac
for r in $(seq 1 "$R"); do
  a=$((100000000 + r * PER)); b=$((a + PER - 1))
  psql -qX -v ON_ERROR_STOP=1 "$URL" \
    -c "INSERT INTO $T (digest, first_seen, $SOURCE, commit_xid) SELECT $DIGEST, timestamptz '2026-12-02' + (g / 60) * interval '1 ms',
          'till-07', (5000000 + g / 60)::text::xid8 FROM generate_series($a::int8, $b::int8) g" \
    -c "DELETE FROM $T WHERE ctid IN (SELECT ctid FROM $T WHERE keep_until IS NULL ORDER BY first_seen LIMIT $PER)" \
    -c "VACUUM $T"
done
psql -qX "$URL" -c "VACUUM ANALYZE $T"
psql -X "$URL" -c "SELECT coalesce(i.relname, 'heap') AS rel, round(pg_relation_size(coalesce(i.oid, c.oid)) /
    (SELECT count(*) FROM $T)::numeric, 1) AS bytes_per_live_row
  FROM pg_class c LEFT JOIN pg_index x ON x.indrelid = c.oid LEFT JOIN pg_class i ON i.oid = x.indexrelid
  WHERE c.relname = '$T' UNION ALL SELECT 'heap', round(pg_relation_size('$T') / (SELECT count(*) FROM $T)::numeric, 1)
  UNION ALL SELECT 'all', round(pg_total_relation_size('$T') / (SELECT count(*) FROM $T)::numeric, 1) ORDER BY 1"
