-- Bytes per live key of scan_keys and of each of its indexes (issue 45): the main fork's size (heap or index pages,
-- what caching and I/O are about) divided by the live rows counted exactly; "all" is table + FSM + VM + every index.
-- Run after VACUUM (dead tuples would be counted as live bytes otherwise). psql -X -f bench/layout/sizes.sql URL
-- Another relation of the same shape (bench/layout/closed_epoch.sql's): psql -X -v rel=NAME -f ... URL
\if :{?rel}
\else
\set rel scan_keys
\endif
WITH live AS (SELECT count(*)::numeric AS n FROM :"rel"),
rels AS (
  SELECT 'heap' AS rel, pg_relation_size(:'rel'::regclass) AS bytes, 0 AS o
  UNION ALL
  SELECT c.relname, pg_relation_size(c.oid), 1 FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
  WHERE i.indrelid = :'rel'::regclass
  UNION ALL
  SELECT 'all (table + fsm + vm + indexes)', pg_total_relation_size(:'rel'::regclass), 2
)
SELECT rel, pg_size_pretty(bytes) AS size, round(bytes / nullif((SELECT n FROM live), 0), 1) AS bytes_per_key,
       (SELECT n FROM live)::int8 AS live_keys
FROM rels ORDER BY o, rel;
