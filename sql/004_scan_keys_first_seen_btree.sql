-- The de-duplication horizon (--retention, issue 22) deletes rows older than it in bounded slices, oldest
-- first (storage/horizon/expiry.h): `... WHERE first_seen < now() - R ORDER BY first_seen LIMIT n`. That needs an
-- index that stays selective while the heap reuses the space of deleted rows. The BRIN index (002) cannot:
-- a reused block range mixes old and new first_seen, its summary widens to cover both, and the expiry then
-- reads nearly every range at every pass. A btree on first_seen is appended at its right edge (first_seen is
-- now() of the inserting transaction) and finds the oldest rows in a few page reads, and min(first_seen) (the
-- oldest row's age, a metric) in one descent. Its cost per row and the design comparison: bench/RESULTS.md
-- "Issue 22". Built once at the first start of this version; on a large existing table that takes a while
-- (the start waits for it, up to warm_statement_timeout).
CREATE INDEX scan_keys_first_seen ON scan_keys (first_seen);
