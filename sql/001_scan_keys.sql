-- scan_keys: the exact authority. One row per distinct digest (SHA-256 or HMAC-SHA256 of a scan key);
-- raw keys never reach the database. Insert-only: rows are never updated, so the heap keeps the
-- default fillfactor 100 (no room needed for HOT updates).
CREATE TABLE scan_keys (
  digest     bytea       PRIMARY KEY CHECK (octet_length(digest) = 32),
  first_seen timestamptz NOT NULL DEFAULT now(),
  source     text
);
