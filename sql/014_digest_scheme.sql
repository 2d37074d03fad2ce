-- The digest scheme is the database's (issue 55). Every key's row is keyed by its digest, and the digest depends on
-- the digest secret (or none), --keys and the stored form (core/digest_scheme.h): an instance with another scheme
-- finds none of the rows of the horizon and answers every key `new` again. The first instance records its scheme's
-- keyed fingerprint here (never the secret: HMAC-SHA256(secret, a fixed public tag)); every later one compares its
-- own at start and is refused (exit 2, log event digest_scheme_mismatch) when a component differs
-- (storage/scheme/scheme_record.h has the decision table). A rotation (--digest-secret-previous-file) records the
-- new fingerprint as current and the old one as previous; rows recorded under the previous secret stay found until
-- previous_needed_until (the rotation's start + the horizon, or the latest keep_until of a row then held: pins and
-- GS1 packs).
CREATE TABLE scangate_digest_scheme (
  id int PRIMARY KEY DEFAULT 1 CHECK (id = 1),
  fingerprint bytea NOT NULL,           -- the current scheme's: new keys are recorded under it
  keyed bool NOT NULL,                  -- a secret is set (fingerprint = HMAC), else SHA-256 of the tag
  keys text NOT NULL,                   -- --keys: raw | gs1
  stored text NOT NULL,                 -- the stored form (core/digest_scheme.h kStoredForm)
  previous_fingerprint bytea,           -- while a rotation keeps the previous secret's rows found
  previous_keyed bool,
  rotation_started_at timestamptz,
  previous_needed_until timestamptz,    -- 'infinity' with --retention=off
  recorded_at timestamptz NOT NULL DEFAULT now()
);

-- The fence of running instances (issue 55, the argument: storage/scheme/scheme_record.h "Concurrent instances"):
-- a writer's connection carries its scheme's fingerprint (options -c scangate.digest_scheme=<hex>); before any row
-- of an INSERT (or COPY) statement, this takes the scheme's advisory lock SHARED for the transaction and compares
-- it with the recorded one, read after the lock (a fresh snapshot: a VOLATILE function's statement in READ
-- COMMITTED). A rotation takes the same lock EXCLUSIVE to change the row: it waits for every writing transaction
-- that passed this check to end, and every one after it reads the new row. So a writer whose scheme is no longer
-- the database's current one inserts nothing after the rotation commits (55000: an outage to it — its rows stay
-- queued, it answers 503 — never a data error it would dead-letter). A session without the setting (an operator's
-- psql, the layout move's backfill) is not checked.
CREATE FUNCTION scangate_digest_scheme_guard() RETURNS trigger
LANGUAGE plpgsql
AS $f$
DECLARE
  mine text := current_setting('scangate.digest_scheme', true);
  recorded bytea;
BEGIN
  IF mine IS NULL OR mine = '' THEN RETURN NULL; END IF;
  PERFORM pg_advisory_xact_lock_shared(101882705870868);  -- 0x5ca96a7e0014 (storage/scheme/scheme_record.cc)
  SELECT s.fingerprint INTO recorded FROM scangate_digest_scheme s WHERE s.id = 1;
  IF FOUND AND encode(recorded, 'hex') <> mine THEN
    RAISE EXCEPTION 'scangate digest scheme fence: this instance''s digest scheme (fingerprint %...) is no longer the database''s (%...): restart it with the database''s --digest-secret-file and --digest-secret-previous-file',
      left(mine, 12), left(encode(recorded, 'hex'), 12)
      USING ERRCODE = '55000';
  END IF;
  RETURN NULL;
END
$f$;

CREATE TRIGGER scan_keys_digest_scheme_guard BEFORE INSERT ON scan_keys
  FOR EACH STATEMENT EXECUTE FUNCTION scangate_digest_scheme_guard();

-- The online layout move (sql/013) builds scan_keys_next with the same guard, so the table it swaps in keeps it.
CREATE OR REPLACE FUNCTION scangate_layout_create_next() RETURNS void
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
  CREATE TRIGGER scan_keys_digest_scheme_guard BEFORE INSERT ON scan_keys_next
    FOR EACH STATEMENT EXECUTE FUNCTION scangate_digest_scheme_guard();
END
$f$;
