-- bench/layout/epoch_columns.sql — issue 54: what the epoch column costs a closed epoch's row, at the SQL level:
--   psql -X -v n=300000 -d DB -f bench/layout/epoch_columns.sql      (needs pageinspect: contrib, created here)
-- Three tables of the same :n closed-epoch rows (digest in order, commit_xid and the pack columns NULL, "till-07"),
-- each with its primary key at fillfactor 100 and no other index, as bench/layout/epochs_sql.sh's closed epochs:
--   ep_c9   scan_keys's eight columns plus `epoch int4`: nine columns, so a 2-byte null bitmap and a 32-byte header
--   ep_c8   `epoch` in place of `expiry`: eight columns, a 24-byte header
--   ep_c8x  scan_keys's eight columns, no `epoch` (the partition key would have to be one of them)
-- Prints bytes per row of the heap, the primary key and everything, with a row's length and header (t_hoff).
\set ON_ERROR_STOP 1
CREATE EXTENSION IF NOT EXISTS pageinspect;
DROP TABLE IF EXISTS ep_c9, ep_c8, ep_c8x;
SET maintenance_work_mem = '256MB';
SET work_mem = '256MB';
CREATE TABLE ep_c9 (first_seen timestamptz NOT NULL, commit_xid xid8, keep_until timestamptz, digest uuid NOT NULL,
  lot uuid, request uuid, expiry date, epoch int4 NOT NULL, seen_by text);
CREATE TABLE ep_c8 (first_seen timestamptz NOT NULL, commit_xid xid8, keep_until timestamptz, digest uuid NOT NULL,
  lot uuid, request uuid, epoch int4 NOT NULL, seen_by text);
CREATE TABLE ep_c8x (first_seen timestamptz NOT NULL, commit_xid xid8, keep_until timestamptz, digest uuid NOT NULL,
  lot uuid, request uuid, expiry date, seen_by text);
INSERT INTO ep_c9 (first_seen, digest, epoch, seen_by)
  SELECT now() - g * interval '1 ms', encode(substring(sha256(int8send(g)) FROM 1 FOR 16), 'hex')::uuid, 1, 'till-07'
  FROM generate_series(1, :n) g ORDER BY 2;
INSERT INTO ep_c8 (first_seen, digest, epoch, seen_by) SELECT first_seen, digest, epoch, seen_by FROM ep_c9 ORDER BY digest;
INSERT INTO ep_c8x (first_seen, digest, seen_by) SELECT first_seen, digest, seen_by FROM ep_c9 ORDER BY digest;
ALTER TABLE ep_c9 ADD PRIMARY KEY (digest) WITH (fillfactor = 100);
ALTER TABLE ep_c8 ADD PRIMARY KEY (digest) WITH (fillfactor = 100);
ALTER TABLE ep_c8x ADD PRIMARY KEY (digest) WITH (fillfactor = 100);
VACUUM (FREEZE, ANALYZE) ep_c9, ep_c8, ep_c8x;
SELECT c.relname AS "table", c.reltuples::int8 AS rows,
       round(pg_relation_size(c.oid) / c.reltuples::numeric, 1) AS heap_b,
       round(pg_relation_size((c.relname || '_pkey')::regclass) / c.reltuples::numeric, 1) AS pk_b,
       round(pg_total_relation_size(c.oid) / c.reltuples::numeric, 1) AS all_b,
       t.lp_len AS row_len, t.t_hoff AS header
FROM pg_class c, LATERAL (SELECT lp_len, t_hoff FROM heap_page_items(get_raw_page(c.relname::text, 0)) LIMIT 1) t
WHERE c.relname IN ('ep_c9', 'ep_c8', 'ep_c8x') ORDER BY heap_b DESC;
