-- The 16-byte table layout (issue 45): half the bytes per live key, so one PostgreSQL holds twice the keys before
-- every insert pays a random read of the primary key. scan_keys keeps the first 16 bytes of each digest (the stored
-- form, core/digest.h StoredDigest) as a uuid — a fixed-width type without a varlena header, so a primary-key entry
-- is 8 + 16 = 24 bytes (a bytea of 32: 8 + 33 = 41, MAXALIGNed to 48) — and its columns in alignment order (8-byte
-- ones first, then the uuids, then the 4-byte date, then the text), so a raw row has no padding: 24 (header and null
-- bitmap) + 8 first_seen + 8 commit_xid + 16 digest + the source ("till-07": 8) = 64 bytes, against 88 before.
-- lot (a digest, sql/006) and request (16 bytes, sql/008) are uuids too. The expiry's btree (sql/006) indexes the
-- second of first_seen and the writing transaction (commit_xid) instead of the instant: the rows of one batch share
-- one entry (B-tree deduplication) in both ack modes, where --ack=filter's rows, each with its own journal time, took
-- one entry each (30 bytes per key measured, now 7.5). The arithmetic and the measurements:
-- bench/RESULTS.md "Issue 45"; the layout and what a 16-byte collision would mean: storage/README.md "Table layout".
-- The source column is `seen_by` here: a scangate older than this migration names `source` in every statement, so
-- against the new table its writes fail before any row (42703, an outage to it: its write-behind rows stay queued)
-- instead of sending 32-byte digests into a uuid column (22P03, a data error it would dead-letter).
--
-- Applied to a database, this migration changes the table only when it is empty (a new deployment, a test): then
-- the new layout replaces the old one at once, within this migration's transaction. A table that holds rows keeps
-- the old layout — scangate reads and writes both (storage/pg/table_layout.h) — until an operator moves it online,
-- one database (PL/Proxy partition) at a time, with
--   psql -d scangate_pK -c 'CALL scangate_layout_migrate()'
-- which mirrors every write into the new table (statement triggers), copies the existing rows over in slices that
-- each commit (resumable: CALL it again after an interruption), and swaps the tables in one short transaction.
-- storage/README.md "Moving a database to the 16-byte layout" has the procedure and its guarantees.

-- The stored form of a digest given in full (or already 16 bytes): its first 16 bytes as a uuid. For the operators'
-- SQL and the partition functions: `WHERE digest = scangate_stored_digest(decode('<64 hex>', 'hex'))`. The other way
-- round, uuid_send(digest) is a row's stored digest as bytea: `scangate_partition_hash(uuid_send(digest))` is its
-- partition (sql/007: bytes 4..7, which the stored form keeps).
CREATE FUNCTION scangate_stored_digest(d bytea) RETURNS uuid
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
AS $$ SELECT encode(substring(d FROM 1 FOR 16), 'hex')::uuid $$;

-- 1 = the layout of sql/001..010 (digest bytea, 32 bytes), 2 = this one (digest uuid).
CREATE FUNCTION scangate_layout() RETURNS int
LANGUAGE sql STABLE
AS $$
  SELECT CASE format_type(atttypid, NULL) WHEN 'uuid' THEN 2 ELSE 1 END
  FROM pg_attribute WHERE attrelid = 'scan_keys'::regclass AND attname = 'digest' AND NOT attisdropped
$$;

-- The online move's state: one row while it runs and after it ended. end_block: the old heap's size when the mirror
-- started (every row committed before it lies below; every later write is mirrored); next_block: the backfill's
-- progress (blocks below it are copied; a slice's copy and this marker commit together).
CREATE TABLE scangate_layout_migration (
  id int PRIMARY KEY DEFAULT 1 CHECK (id = 1),
  state text NOT NULL CHECK (state IN ('mirroring', 'swapped')),
  end_block int8 NOT NULL,
  next_block int8 NOT NULL DEFAULT 0,
  rows_copied int8 NOT NULL DEFAULT 0,
  started_at timestamptz NOT NULL DEFAULT now(),
  swapped_at timestamptz
);

-- The new table, empty, under the name scan_keys_next (renamed scan_keys by the swap), with sql/002..010's indexes,
-- settings and trigger in their new form.
CREATE FUNCTION scangate_layout_create_next() RETURNS void
LANGUAGE plpgsql
AS $f$
BEGIN
  CREATE TABLE scan_keys_next (
    first_seen timestamptz NOT NULL DEFAULT now(),
    commit_xid xid8 DEFAULT pg_current_xact_id(),
    keep_until timestamptz,
    digest     uuid NOT NULL,
    lot        uuid,
    request    uuid,
    expiry     date,
    seen_by    text,
    CONSTRAINT scan_keys_next_pkey PRIMARY KEY (digest)
  ) WITH (autovacuum_vacuum_scale_factor = 0.02, autovacuum_vacuum_insert_scale_factor = 0.02,
          autovacuum_vacuum_cost_delay = 0);
  CREATE INDEX scan_keys_next_first_seen_brin ON scan_keys_next USING brin (first_seen)
    WITH (pages_per_range = 32, autosummarize = off);
  CREATE INDEX scan_keys_next_first_seen_unpinned
    ON scan_keys_next (date_trunc('second', first_seen AT TIME ZONE 'UTC'), commit_xid) WHERE keep_until IS NULL;
  CREATE INDEX scan_keys_next_keep_until ON scan_keys_next (keep_until) WHERE keep_until IS NOT NULL;
  CREATE INDEX scan_keys_next_commit_xid ON scan_keys_next (commit_xid) WHERE commit_xid IS NOT NULL;
  CREATE TRIGGER scan_keys_next_stamp_commit_xid BEFORE UPDATE OF first_seen ON scan_keys_next
    FOR EACH ROW WHEN (OLD.first_seen IS DISTINCT FROM NEW.first_seen) EXECUTE FUNCTION scangate_stamp_commit_xid();
END
$f$;

-- The mirror (statement triggers on the old table, in the writing transaction: a write and its copy commit
-- together). Rows inserted or updated (a take-over) are upserted whole, deleted rows (the expiry) deleted, a TRUNCATE
-- truncates. DISTINCT ON: two digests with one stored form (a 16-byte collision) become one row, as the new table
-- would make them.
CREATE FUNCTION scangate_layout_mirror_rows() RETURNS trigger
LANGUAGE plpgsql
AS $f$
BEGIN
  INSERT INTO scan_keys_next (first_seen, commit_xid, keep_until, digest, lot, request, expiry, seen_by)
  SELECT DISTINCT ON (c.k) c.first_seen, c.commit_xid, c.keep_until, c.k, scangate_stored_digest(c.lot),
         scangate_stored_digest(c.request), c.expiry, c.source
  FROM (SELECT r.*, scangate_stored_digest(r.digest) AS k FROM scangate_changed r) c
  ORDER BY c.k
  ON CONFLICT (digest) DO UPDATE SET first_seen = EXCLUDED.first_seen, commit_xid = EXCLUDED.commit_xid,
    keep_until = EXCLUDED.keep_until, lot = EXCLUDED.lot, request = EXCLUDED.request, expiry = EXCLUDED.expiry,
    seen_by = EXCLUDED.seen_by;
  RETURN NULL;
END
$f$;

CREATE FUNCTION scangate_layout_mirror_delete() RETURNS trigger
LANGUAGE plpgsql
AS $f$
BEGIN
  DELETE FROM scan_keys_next n USING scangate_changed c WHERE n.digest = scangate_stored_digest(c.digest);
  RETURN NULL;
END
$f$;

CREATE FUNCTION scangate_layout_mirror_truncate() RETURNS trigger
LANGUAGE plpgsql
AS $f$
BEGIN
  TRUNCATE scan_keys_next;
  RETURN NULL;
END
$f$;

-- Step 1: the new table and the mirror, in one transaction. Its lock (SHARE ROW EXCLUSIVE, which CREATE TRIGGER
-- takes anyway) waits for the writes in flight and holds new ones off until it commits, so every row is either
-- committed before it — below end_block, copied by the backfill — or written with the mirror in place.
CREATE FUNCTION scangate_layout_start() RETURNS text
LANGUAGE plpgsql
AS $f$
BEGIN
  IF scangate_layout() = 2 THEN RETURN 'already in the 16-byte layout'; END IF;
  IF EXISTS (SELECT 1 FROM scangate_layout_migration) THEN RETURN 'mirror in place: resuming'; END IF;
  LOCK TABLE scan_keys IN SHARE ROW EXCLUSIVE MODE;
  PERFORM scangate_layout_create_next();
  CREATE TRIGGER scan_keys_mirror_insert AFTER INSERT ON scan_keys REFERENCING NEW TABLE AS scangate_changed
    FOR EACH STATEMENT EXECUTE FUNCTION scangate_layout_mirror_rows();
  CREATE TRIGGER scan_keys_mirror_update AFTER UPDATE ON scan_keys REFERENCING NEW TABLE AS scangate_changed
    FOR EACH STATEMENT EXECUTE FUNCTION scangate_layout_mirror_rows();
  CREATE TRIGGER scan_keys_mirror_delete AFTER DELETE ON scan_keys REFERENCING OLD TABLE AS scangate_changed
    FOR EACH STATEMENT EXECUTE FUNCTION scangate_layout_mirror_delete();
  CREATE TRIGGER scan_keys_mirror_truncate AFTER TRUNCATE ON scan_keys
    FOR EACH STATEMENT EXECUTE FUNCTION scangate_layout_mirror_truncate();
  INSERT INTO scangate_layout_migration (state, end_block)
  VALUES ('mirroring', pg_relation_size('scan_keys') / current_setting('block_size')::int8);
  RETURN 'mirror in place';
END
$f$;

-- Step 2, one slice: the old rows of heap blocks [from_block, to_block) copied (a Tid Range Scan; sorted by digest,
-- the order the writers lock keys in), the marker moved on; the caller commits both together. A row the mirror
-- wrote meanwhile is newer and stays (DO NOTHING); a row the backfill copies first is overwritten by a later mirror
-- upsert. A row deleted (expired) after this slice's snapshot may be copied after the mirror deleted it: such a
-- row is past its horizon, which every reader and writer judges by its first_seen / keep_until, and the expiry
-- deletes it again.
CREATE FUNCTION scangate_layout_backfill(from_block int8, to_block int8) RETURNS int8
LANGUAGE plpgsql
AS $f$
DECLARE
  copied int8;
BEGIN
  INSERT INTO scan_keys_next (first_seen, commit_xid, keep_until, digest, lot, request, expiry, seen_by)
  SELECT DISTINCT ON (c.k) c.first_seen, c.commit_xid, c.keep_until, c.k, scangate_stored_digest(c.lot),
         scangate_stored_digest(c.request), c.expiry, c.source
  FROM (SELECT r.*, scangate_stored_digest(r.digest) AS k FROM scan_keys r
        WHERE r.ctid >= format('(%s,0)', from_block)::tid AND r.ctid < format('(%s,0)', to_block)::tid) c
  ORDER BY c.k
  ON CONFLICT (digest) DO NOTHING;
  GET DIAGNOSTICS copied = ROW_COUNT;
  UPDATE scangate_layout_migration SET next_block = to_block, rows_copied = rows_copied + copied;
  RETURN copied;
END
$f$;

-- The partition functions (sql/007) over the new table: the same names, arguments and results (a proxy and its
-- partitions may be on either layout while they are moved one at a time); digests are given and answered in full,
-- and looked up by their stored form.
CREATE FUNCTION scangate_layout_functions() RETURNS void
LANGUAGE plpgsql
AS $f$
BEGIN
  EXECUTE $q$
CREATE OR REPLACE FUNCTION scangate_observe(digests bytea[], sources text[], seen_us int8[], retention_us int8)
RETURNS TABLE (digest bytea, inserted bool, first_seen_us int8)
LANGUAGE plpgsql
AS $$
#variable_conflict use_column
DECLARE
  taken uuid[];  -- the stored digests this call inserted (or took over)
BEGIN
  IF retention_us > 0 THEN
    WITH ins AS (
      INSERT INTO scan_keys AS k (digest, seen_by, first_seen)
      SELECT DISTINCT ON (u.k) u.k, u.s, CASE WHEN u.us = 0 THEN now() ELSE timestamptz 'epoch' + u.us * interval '1 microsecond' END
      FROM (SELECT scangate_stored_digest(x.d) AS k, x.s, x.us FROM unnest(digests, sources, seen_us) AS x(d, s, us)) AS u
      ORDER BY u.k
      ON CONFLICT (digest) DO UPDATE SET first_seen = EXCLUDED.first_seen, seen_by = EXCLUDED.seen_by, request = NULL
        WHERE k.first_seen < now() - retention_us * interval '1 microsecond'
      RETURNING k.digest
    )
    SELECT coalesce(array_agg(ins.digest), '{}') INTO taken FROM ins;
  ELSE
    WITH ins AS (
      INSERT INTO scan_keys AS k (digest, seen_by, first_seen)
      SELECT DISTINCT ON (u.k) u.k, u.s, CASE WHEN u.us = 0 THEN now() ELSE timestamptz 'epoch' + u.us * interval '1 microsecond' END
      FROM (SELECT scangate_stored_digest(x.d) AS k, x.s, x.us FROM unnest(digests, sources, seen_us) AS x(d, s, us)) AS u
      ORDER BY u.k
      ON CONFLICT (digest) DO NOTHING
      RETURNING k.digest
    )
    SELECT coalesce(array_agg(ins.digest), '{}') INTO taken FROM ins;
  END IF;
  RETURN QUERY
  SELECT q.d, t.tk IS NOT NULL, (extract(epoch FROM k.first_seen) * 1000000)::int8
  FROM (SELECT DISTINCT u.d, scangate_stored_digest(u.d) AS sk FROM unnest(digests) AS u(d)) AS q
  JOIN scan_keys k ON k.digest = q.sk
  LEFT JOIN unnest(taken) AS t(tk) ON t.tk = q.sk;
END
$$
$q$;
  EXECUTE $q$
CREATE OR REPLACE FUNCTION scangate_lookup(d bytea)
RETURNS TABLE (digest bytea, first_seen_us int8, source text, keep_until_us int8)
LANGUAGE sql STABLE STRICT
AS $$
  SELECT d, (extract(epoch FROM k.first_seen) * 1000000)::int8, k.seen_by,
         (extract(epoch FROM k.keep_until) * 1000000)::int8
  FROM scan_keys k WHERE k.digest = scangate_stored_digest(d)
$$
$q$;
END
$f$;

-- Step 3, the swap, in the caller's transaction under an ACCESS EXCLUSIVE lock (writes wait for it; the caller sets
-- lock_timeout and retries): the mirror dropped, the old table and its indexes renamed away (kept as scan_keys_v1
-- when keep_v1, else dropped), the new one and its indexes take the names, the follow publication (sql/009) and the
-- partition functions move to it. A writer whose statements name the old table's columns fails once at its next
-- statement (42703 / 42804 / 42883: never a data error) and prepares the new ones (storage/write/batch_runner.cc).
CREATE FUNCTION scangate_layout_swap(keep_v1 bool) RETURNS void
LANGUAGE plpgsql
AS $f$
DECLARE
  st scangate_layout_migration;
  trig name;
BEGIN
  SELECT * INTO st FROM scangate_layout_migration;
  IF NOT FOUND OR st.state <> 'mirroring' OR st.next_block < st.end_block THEN
    RAISE EXCEPTION 'scangate_layout_swap: the new table is not complete (state %, block % of %)',
      st.state, st.next_block, st.end_block;
  END IF;
  LOCK TABLE scan_keys IN ACCESS EXCLUSIVE MODE;
  FOR trig IN SELECT tgname FROM pg_trigger WHERE tgrelid = 'scan_keys'::regclass AND tgname LIKE 'scan\_keys\_mirror\_%' LOOP
    EXECUTE format('DROP TRIGGER %I ON scan_keys', trig);
  END LOOP;
  ALTER TABLE scan_keys RENAME TO scan_keys_v1;
  ALTER TABLE scan_keys_v1 RENAME CONSTRAINT scan_keys_pkey TO scan_keys_v1_pkey;
  ALTER INDEX scan_keys_first_seen_brin RENAME TO scan_keys_v1_first_seen_brin;
  ALTER INDEX scan_keys_first_seen_unpinned RENAME TO scan_keys_v1_first_seen_unpinned;
  ALTER INDEX scan_keys_keep_until RENAME TO scan_keys_v1_keep_until;
  ALTER INDEX scan_keys_commit_xid RENAME TO scan_keys_v1_commit_xid;
  ALTER TABLE scan_keys_next RENAME TO scan_keys;
  ALTER TABLE scan_keys RENAME CONSTRAINT scan_keys_next_pkey TO scan_keys_pkey;
  ALTER INDEX scan_keys_next_first_seen_brin RENAME TO scan_keys_first_seen_brin;
  ALTER INDEX scan_keys_next_first_seen_unpinned RENAME TO scan_keys_first_seen_unpinned;
  ALTER INDEX scan_keys_next_keep_until RENAME TO scan_keys_keep_until;
  ALTER INDEX scan_keys_next_commit_xid RENAME TO scan_keys_commit_xid;
  ALTER TRIGGER scan_keys_next_stamp_commit_xid ON scan_keys RENAME TO scan_keys_stamp_commit_xid;
  IF EXISTS (SELECT 1 FROM pg_publication WHERE pubname = 'scangate_follow') THEN
    ALTER PUBLICATION scangate_follow SET TABLE scan_keys (digest);
  END IF;
  PERFORM scangate_layout_functions();
  UPDATE scangate_layout_migration SET state = 'swapped', swapped_at = now();
  IF NOT keep_v1 THEN DROP TABLE scan_keys_v1; END IF;
END
$f$;

-- One step that takes the table's lock (`step`: a SELECT of scangate_layout_start() or scangate_layout_swap(...)),
-- retried when the lock does not come within lock_timeout_ms: writes queue behind a waiting lock, so a step waits
-- briefly, lets them pass (0.5 s) and tries again, up to 30 times; then it fails (CALL the move again later). Its
-- answer is a NOTICE. A procedure (each try commits); called by scangate_layout_migrate.
CREATE PROCEDURE scangate_layout_locked(step text, lock_timeout_ms int)
LANGUAGE plpgsql
AS $p$
DECLARE
  tries int := 0;
  said text;
BEGIN
  LOOP
    BEGIN
      PERFORM set_config('lock_timeout', lock_timeout_ms || 'ms', true);
      EXECUTE 'SELECT ' || step INTO said;
      EXIT;
    EXCEPTION WHEN lock_not_available THEN
      tries := tries + 1;
      IF tries >= 30 THEN RAISE; END IF;
      RAISE NOTICE 'scangate_layout_migrate: scan_keys busy, % retried (%)', step, tries;
    END;
    PERFORM pg_sleep(0.5);
    COMMIT;
  END LOOP;
  COMMIT;
  IF said <> '' THEN RAISE NOTICE 'scangate_layout_migrate: %', said; END IF;
END
$p$;

-- The whole move of one database, online: CALL scangate_layout_migrate() (not inside a transaction block: each step
-- and each slice commits). Resumable: after an interruption (a cancel, a lost connection, a restart) CALL it again;
-- it goes on from the last slice committed. slice_blocks: heap blocks copied per transaction (64 blocks ≈ 5 600 rows
-- of the old layout: each slice holds its rows' keys for well under a second, so a writer taking over one of them
-- waits at most that long); pause_ms: a pause between slices; lock_timeout_ms: how long a step waits for the
-- table's lock before it lets the writes pass and tries again (scangate_layout_locked); keep_v1: keep the old table
-- as scan_keys_v1 (drop it yourself) instead of dropping it after the swap.
CREATE PROCEDURE scangate_layout_migrate(slice_blocks int DEFAULT 64, pause_ms int DEFAULT 0,
                                         lock_timeout_ms int DEFAULT 2000, keep_v1 bool DEFAULT false)
LANGUAGE plpgsql
AS $p$
DECLARE
  st scangate_layout_migration;
  upto int8;
BEGIN
  IF scangate_layout() = 2 THEN
    RAISE NOTICE 'scangate_layout_migrate: scan_keys is already in the 16-byte layout%',
      CASE WHEN to_regclass('scan_keys_v1') IS NOT NULL
           THEN '; the old table is kept as scan_keys_v1 (keep_v1, or an interrupted drop): DROP TABLE scan_keys_v1 '
                'once it is no longer wanted' ELSE '' END;
    RETURN;
  END IF;
  CALL scangate_layout_locked('scangate_layout_start()', lock_timeout_ms);
  LOOP
    SELECT * INTO st FROM scangate_layout_migration;
    EXIT WHEN st.next_block >= st.end_block;
    upto := least(st.next_block + slice_blocks, st.end_block);
    PERFORM scangate_layout_backfill(st.next_block, upto);
    COMMIT;
    IF upto / slice_blocks % 100 = 0 OR upto = st.end_block THEN
      RAISE NOTICE 'scangate_layout_migrate: block % of % copied', upto, st.end_block;
    END IF;
    IF pause_ms > 0 THEN PERFORM pg_sleep(pause_ms / 1000.0); END IF;
  END LOOP;
  CALL scangate_layout_locked('scangate_layout_swap(true)::text', lock_timeout_ms);
  RAISE NOTICE 'scangate_layout_migrate: swapped; scan_keys is in the 16-byte layout';
  IF NOT keep_v1 THEN
    DROP TABLE scan_keys_v1;
    COMMIT;
  END IF;
END
$p$;

-- A table without rows (a new deployment) takes the new layout now. Looked at without a lock first, so a busy table
-- (a rolling upgrade) is not locked at all; an empty-looking one is locked and looked at again.
DO $$
BEGIN
  IF NOT EXISTS (SELECT 1 FROM scan_keys) THEN
    LOCK TABLE scan_keys IN ACCESS EXCLUSIVE MODE;
    IF NOT EXISTS (SELECT 1 FROM scan_keys) THEN
      PERFORM scangate_layout_create_next();
      INSERT INTO scangate_layout_migration (state, end_block) VALUES ('mirroring', 0);
      PERFORM scangate_layout_swap(false);
    END IF;
  END IF;
END
$$;
