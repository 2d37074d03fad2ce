-- Packs (--keys=gs1, issue 24): a row of a GS1 pack holds, beside its identity digest (GTIN + serial), what
-- describes the pack: `lot` — the digest of its AI 10 (the keys' Digester over "10" + lot; never the raw lot),
-- `expiry` — its AI 17 date, and `keep_until` — its own de-duplication horizon (end of the expiry month plus
-- --expiry-grace, never before first_seen + --retention). All three are NULL for raw keys and for packs without
-- them; nullable columns without a default are added to the catalog only, so an existing table is not rewritten.
-- The lot's CHECK is added NOT VALID: it holds for every row written from now on, and validating it would only
-- scan an existing table to prove that its lots — all NULL — pass.
-- A row expires at its keep_until when it has one, else by --retention (storage/pg/batch_statement.cc).
ALTER TABLE scan_keys
  ADD COLUMN lot bytea,
  ADD COLUMN expiry date,
  ADD COLUMN keep_until timestamptz,
  ADD CONSTRAINT scan_keys_lot_check CHECK (octet_length(lot) = 32) NOT VALID;
-- The expiry's second slice (storage/horizon/expiry.h): `... WHERE keep_until < now() ORDER BY keep_until LIMIT n`, and
-- the earliest keep_until (a vital sign) in one descent. Partial: raw rows (NULL) take no entry and no cost.
CREATE INDEX scan_keys_keep_until ON scan_keys (keep_until) WHERE keep_until IS NOT NULL;
-- The first_seen slice deletes `WHERE keep_until IS NULL AND first_seen < now() - R ORDER BY first_seen`. On 004's
-- btree over every row it would step, pass after pass, over the pinned rows (packs kept for months or years past
-- their first sighting) that sit at the old end of first_seen order before reaching one it may delete — with
-- gs1 keys most rows are pinned. A partial btree over the unpinned rows alone replaces it: for raw keys (every
-- row unpinned) it is the same index with the same cost per row; a pinned row has one entry (in
-- scan_keys_keep_until above) instead of two. The oldest-row vital sign reads min(first_seen) of the unpinned
-- rows through it (one descent, as before); the pinned rows' lag is read from the earliest keep_until.
-- Built once at the first start of this version (the start waits for it, up to warm_statement_timeout).
CREATE INDEX scan_keys_first_seen_unpinned ON scan_keys (first_seen) WHERE keep_until IS NULL;
DROP INDEX scan_keys_first_seen;
