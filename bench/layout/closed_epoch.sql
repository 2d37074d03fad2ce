-- The rows of scan_keys rewritten as a closed epoch holds them (issue 54): the same columns (an epoch is a table of
-- its own, no epoch column), sorted by digest, commit_xid NULL (only the open epoch's poll follower reads it), no
-- index but the primary key at fillfactor 100, frozen. For bench/layout/bytes_per_key.sh's closed-epoch figure:
--   psql -X -f bench/layout/closed_epoch.sql URL   then   psql -X -v rel=scan_keys_closed -f bench/layout/sizes.sql URL
SET client_min_messages = warning;
DROP TABLE IF EXISTS scan_keys_closed;
CREATE TABLE scan_keys_closed (LIKE scan_keys);  -- columns and NOT NULLs; no defaults (commit_xid stays NULL)
INSERT INTO scan_keys_closed (first_seen, keep_until, digest, lot, request, expiry, seen_by)
  SELECT first_seen, keep_until, digest, lot, request, expiry, seen_by FROM scan_keys ORDER BY digest;
ALTER TABLE scan_keys_closed ADD PRIMARY KEY (digest) WITH (fillfactor = 100);
VACUUM (FREEZE, ANALYZE) scan_keys_closed;
