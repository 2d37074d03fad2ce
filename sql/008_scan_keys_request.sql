-- Idempotency-Key (issue 34): `request` — the idempotency record of the request that recorded the row: 16 bytes
-- of the keys' Digester over the caller's scope (its terminal, else the source, else the client address) and the
-- request's Idempotency-Key header (server/verdict/scan_key.h RequestIdOf); never the header itself. A retry of
-- that request (the same scope and header, the same scan key) finds its own record here and is answered its
-- first verdict again, `new`; any other observer of the key finds another record, or none, and is answered
-- `duplicate`. Only `new` is recorded: a duplicate stays a duplicate for as long as the row lives, so a retry
-- of a duplicate needs no record. The record lives and expires with its row (--retention, a pack's keep_until);
-- a row taken over past its horizon takes the new observer's record, or none.
-- Kept in the key's own row rather than a side table keyed by the request: no second index and no second row
-- per recorded key (bench/RESULTS.md "Issue 34"); the cost is that a reused header with another scan key is
-- not detected (it is decided as the scan key it carries). NULL for rows recorded without the header: a
-- nullable column without a default is added to the catalog only (no rewrite of an existing table), and its
-- CHECK is NOT VALID for the same reason as 006's (every existing row is NULL).
ALTER TABLE scan_keys
  ADD COLUMN request bytea,
  ADD CONSTRAINT scan_keys_request_check CHECK (octet_length(request) = 16) NOT VALID;
