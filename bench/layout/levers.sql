-- bench/layout/levers.sql — issue 45: the layout levers side by side at the SQL level, on one database:
--   psql -X -v n=500000 -d DB -f bench/layout/levers.sql      (then bench/layout/churn.sh for "a day's worth")
-- Tables lab_*, each filled with the same :n rows in random digest order (sha256 of 1..n: the primary key is the one
-- random inserts make, page splits and all), first_seen and commit_xid shared by runs of 60 rows (as a batch of
-- ack=commit writes them), source 'till-07'; then VACUUM and the bytes per row of the heap and of each index.
--   lab_v1         the table of sql/001..010 (digest bytea, source, commit_xid last)
--   lab_v2         sql/013's column order and types (digest, lot, request uuid; no padding) with today's indexes
--   lab_v2id       lab_v2 with the source as an int4 id (a terminals table) instead of text
--   lab_v2nox      lab_v2 without commit_xid and its index (no poll follower)
--   lab_min        digest uuid and first_seen only, the primary key only: the floor
--   lab_v2ff100    the uuid primary key alone, fillfactor 100
--   lab_v2nodedup  the uuid primary key alone, deduplicate_items off
\set ON_ERROR_STOP 1
DROP TABLE IF EXISTS lab_v1, lab_v2, lab_v2id, lab_v2nox, lab_min, lab_v2ff100, lab_v2nodedup;
CREATE TABLE lab_v1 (digest bytea PRIMARY KEY CHECK (octet_length(digest) = 32), first_seen timestamptz NOT NULL DEFAULT now(),
  source text, lot bytea, expiry date, keep_until timestamptz, request bytea, commit_xid xid8);
CREATE INDEX ON lab_v1 (first_seen) WHERE keep_until IS NULL;
CREATE INDEX ON lab_v1 (commit_xid) WHERE commit_xid IS NOT NULL;
CREATE TABLE lab_v2 (first_seen timestamptz NOT NULL, commit_xid xid8, keep_until timestamptz, digest uuid PRIMARY KEY,
  lot uuid, request uuid, expiry date, seen_by text);
CREATE INDEX ON lab_v2 (first_seen) WHERE keep_until IS NULL;
CREATE INDEX ON lab_v2 (commit_xid) WHERE commit_xid IS NOT NULL;
CREATE TABLE lab_v2id (first_seen timestamptz NOT NULL, commit_xid xid8, keep_until timestamptz, digest uuid PRIMARY KEY,
  lot uuid, request uuid, expiry date, source_id int4);
CREATE INDEX ON lab_v2id (first_seen) WHERE keep_until IS NULL;
CREATE INDEX ON lab_v2id (commit_xid) WHERE commit_xid IS NOT NULL;
CREATE TABLE lab_v2nox (first_seen timestamptz NOT NULL, keep_until timestamptz, digest uuid PRIMARY KEY, lot uuid,
  request uuid, expiry date, seen_by text);
CREATE INDEX ON lab_v2nox (first_seen) WHERE keep_until IS NULL;
CREATE TABLE lab_min (first_seen timestamptz NOT NULL, digest uuid PRIMARY KEY);
CREATE TABLE lab_v2ff100 (digest uuid PRIMARY KEY WITH (fillfactor = 100));
CREATE TABLE lab_v2nodedup (digest uuid PRIMARY KEY WITH (deduplicate_items = off));
INSERT INTO lab_v1 (digest, first_seen, source, commit_xid)
  SELECT sha256(int8send(i)), timestamptz '2026-12-01' + (i / 60) * interval '1 ms', 'till-07', (1000 + i / 60)::text::xid8
  FROM generate_series(1, :n) i;
INSERT INTO lab_v2 (digest, first_seen, seen_by, commit_xid)
  SELECT encode(substring(digest FROM 1 FOR 16), 'hex')::uuid, first_seen, source, commit_xid FROM lab_v1;
INSERT INTO lab_v2id (digest, first_seen, source_id, commit_xid) SELECT digest, first_seen, 7, commit_xid FROM lab_v2;
INSERT INTO lab_v2nox (digest, first_seen, seen_by) SELECT digest, first_seen, seen_by FROM lab_v2;
INSERT INTO lab_min (digest, first_seen) SELECT digest, first_seen FROM lab_v2;
INSERT INTO lab_v2ff100 SELECT digest FROM lab_v2;
INSERT INTO lab_v2nodedup SELECT digest FROM lab_v2;
VACUUM lab_v1, lab_v2, lab_v2id, lab_v2nox, lab_min, lab_v2ff100, lab_v2nodedup;
SELECT c.relname AS "table", coalesce(i.relname, 'heap') AS rel,
       round(pg_relation_size(coalesce(i.oid, c.oid)) / c.reltuples::numeric, 1) AS bytes_per_row
FROM pg_class c LEFT JOIN pg_index x ON x.indrelid = c.oid LEFT JOIN pg_class i ON i.oid = x.indexrelid
WHERE c.relname LIKE 'lab\_%' AND c.relkind = 'r'
UNION ALL
SELECT c.relname, 'heap', round(pg_relation_size(c.oid) / c.reltuples::numeric, 1)
FROM pg_class c WHERE c.relname LIKE 'lab\_%' AND c.relkind = 'r'
UNION ALL
SELECT c.relname, 'all', round(pg_total_relation_size(c.oid) / c.reltuples::numeric, 1)
FROM pg_class c WHERE c.relname LIKE 'lab\_%' AND c.relkind = 'r'
ORDER BY 1, 2;
