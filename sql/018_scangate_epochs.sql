-- The exact store's epochs (issue 54): the catalog, and the order every writing transaction takes against a change
-- of it. The layout this leads to (docs/design.md "Epochs of the exact store"): the store is a series of epochs, one table each, exactly
-- one of them *open* for inserts under the name scan_keys; a switch closes it (renamed away, made compact, given a
-- membership summary) and opens the next. PostgreSQL keeps a key unique only inside one table, so every writer must
-- check the closed epochs too — and must know which epochs are closed at the moment it writes. So:
--
-- * scangate_epochs lists the epochs; scangate_epoch_catalog holds one row whose `generation` is a new RANDOM id at
--   every change of that list (a trigger: no writer of the list can forget it). Random, not a counter: a failover
--   that loses the WAL tail of a change must not let a later, different change reuse its number (a writer that read
--   the lost one would take the new one for it).
-- * Every writing transaction calls scangate_write_order(<the generation it read>) as its FIRST statement. It takes
--   the shared side of a transaction-scoped advisory lock and then reads the generation — in a statement of its own,
--   so with a snapshot taken after the lock (READ COMMITTED). A change of the catalog takes the lock's exclusive side
--   (scangate_epoch_lock_key(); with a short lock_timeout, retried), so it waits for every writing transaction in
--   flight and every later one sees it. A writer whose generation is not the catalog's fails with SQLSTATE SGE01
--   before it wrote anything; it reads the catalog again on a new connection and runs the batch again
--   (storage/write/batch_runner.cc; a writer also reads the catalog on every connect: a failover's new primary may
--   hold another one).
-- * This migration creates the catalog with one epoch, the open one (scan_keys), and nothing closes it yet: a scangate
--   of this version refuses a database whose catalog holds an epoch that is not open (storage/epochs/catalog.h) —
--   at start (a clear error, exit) and on every writer connect — because it does not check closed epochs; a
--   scangate older than this migration refuses this schema (it is newer than the scangate: storage/start/migrations.h).
-- The partition function scangate_observe (the operators' path, sql/007) takes the order too (no generation: it
-- reads the epochs itself after the lock) and checks the closed epochs.

-- The lock every writer takes shared and a change of the catalog exclusive (pg_advisory_xact_lock(<this>)).
CREATE FUNCTION scangate_epoch_lock_key() RETURNS int8
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT int8 '101882705870932' $$;  -- 0x5ca9_6a7e_0054: scangate's advisory keys (migrations: ..._0001)

-- A random positive 63-bit id (epochs, catalog generations).
CREATE FUNCTION scangate_random_id() RETURNS int8
LANGUAGE sql VOLATILE PARALLEL SAFE
AS $$ SELECT ('x' || substr(md5(gen_random_uuid()::text), 1, 16))::bit(64)::int8 & int8 '9223372036854775807' $$;

CREATE TABLE scangate_epochs (
  id int8 PRIMARY KEY DEFAULT scangate_random_id(),
  relation name NOT NULL UNIQUE,  -- the epoch's table (the open one: scan_keys)
  state text NOT NULL CHECK (state IN ('open', 'closing', 'closed')),
  opened_at timestamptz NOT NULL DEFAULT now(),
  closed_at timestamptz,
  -- A closed epoch's membership summary (core/epoch_summary.h's bytes; NULL: none yet — every digest is looked up
  -- there). Read by every writer when it reads the catalog; kept out of line, uncompressed (random bits).
  summary bytea
);
ALTER TABLE scangate_epochs ALTER COLUMN summary SET STORAGE EXTERNAL;
-- Exactly one open epoch (at most one here; the migration below creates it).
CREATE UNIQUE INDEX scangate_epochs_one_open ON scangate_epochs ((true)) WHERE state = 'open';

CREATE TABLE scangate_epoch_catalog (
  one bool PRIMARY KEY DEFAULT true CHECK (one),
  generation int8 NOT NULL,
  changed_at timestamptz NOT NULL DEFAULT now()
);

-- Any change of scangate_epochs is a new generation, in the same transaction.
CREATE FUNCTION scangate_epochs_changed() RETURNS trigger
LANGUAGE plpgsql
AS $$
BEGIN
  UPDATE scangate_epoch_catalog SET generation = scangate_random_id(), changed_at = now();
  RETURN NULL;
END
$$;
CREATE TRIGGER scangate_epochs_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON scangate_epochs
  FOR EACH STATEMENT EXECUTE FUNCTION scangate_epochs_changed();

INSERT INTO scangate_epoch_catalog (generation) VALUES (scangate_random_id());
INSERT INTO scangate_epochs (relation, state) VALUES ('scan_keys', 'open');

-- The first statement of every writing transaction (above). `expected`: the generation the writer read (NULL: the
-- caller holds no catalog — it reads the epochs itself in its next statements, which see every change before the
-- lock: scangate_observe).
CREATE FUNCTION scangate_write_order(expected int8) RETURNS void
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
  g int8;
BEGIN
  PERFORM pg_advisory_xact_lock_shared(scangate_epoch_lock_key());
  SELECT generation INTO g FROM scangate_epoch_catalog;  -- a snapshot after the lock: this statement's own
  IF expected IS NOT NULL AND g IS DISTINCT FROM expected THEN
    RAISE EXCEPTION 'scangate epochs: the catalog changed (generation % is now %): read it again', expected, g
      USING ERRCODE = 'SGE01';
  END IF;
END
$$;

-- The latest keep_until of any epoch's rows (a pinned row, a GS1 pack), for a digest-secret rotation's bound on the
-- previous secret (storage/scheme/scheme_record.cc): scan_keys' by its keep_until index, each closed epoch's by its
-- own (a rotation is rare; an epoch without the index is read whole).
CREATE FUNCTION scangate_max_keep_until() RETURNS timestamptz
LANGUAGE plpgsql STABLE
AS $$
DECLARE
  rel name;
  m timestamptz;
  best timestamptz;
BEGIN
  SELECT max(keep_until) INTO best FROM scan_keys;
  FOR rel IN SELECT relation FROM scangate_epochs WHERE state <> 'open' LOOP
    EXECUTE format('SELECT max(keep_until) FROM %I', rel) INTO m;
    best := greatest(best, m);
  END LOOP;
  RETURN best;
END
$$;

-- scangate_observe (sql/007, sql/013's uuid form, sql/017) becomes scangate_observe_open_epoch, and scangate_observe
-- takes the order, looks the digests up in the closed epochs (a digest live in one is answered from that row, not
-- inserted: the writers' rule, storage/pg/batch_statement.cc kClosedProbeBranch, without the clock guard the
-- partition functions' take-over has neither) and passes the others to it. scangate_layout_functions (sql/013's move
-- to the uuid layout) re-creates scangate_observe in the uuid form: it then wraps that one the same way.
CREATE FUNCTION scangate_observe_take_order() RETURNS void
LANGUAGE plpgsql
AS $f$
BEGIN
  DROP FUNCTION IF EXISTS scangate_observe_open_epoch(bytea[], text[], int8[], int8);
  ALTER FUNCTION scangate_observe(bytea[], text[], int8[], int8) RENAME TO scangate_observe_open_epoch;
  CREATE FUNCTION scangate_observe(digests bytea[], sources text[], seen_us int8[], retention_us int8)
  RETURNS TABLE (digest bytea, inserted bool, first_seen_us int8)
  LANGUAGE plpgsql
  AS $$
  #variable_conflict use_column
  DECLARE
    rel name;
    found_d bytea[] := '{}';   -- digests live in a closed epoch, and their rows' first_seen (µs)
    found_f int8[] := '{}';
    d bytea[];
    f int8[];
    rest_d bytea[];
    rest_s text[];
    rest_u int8[];
  BEGIN
    PERFORM scangate_write_order(NULL);
    FOR rel IN SELECT relation FROM scangate_epochs WHERE state <> 'open' ORDER BY opened_at, id LOOP
      EXECUTE format(
        'SELECT coalesce(array_agg(u.d), ''{}''), coalesce(array_agg((extract(epoch FROM k.first_seen) * 1000000)::int8), ''{}'')'
        ' FROM (SELECT DISTINCT x.d FROM unnest($1) AS x(d)) AS u JOIN %I AS k ON k.digest = %s'
        ' WHERE NOT coalesce(coalesce(k.keep_until, CASE WHEN $2 > 0 THEN k.first_seen + $2 * interval ''1 microsecond'' END)'
        '                    < now() - scangate_clock_ahead(k.first_seen), false)',
        rel, CASE WHEN scangate_layout() = 2 THEN 'scangate_stored_digest(u.d)' ELSE 'u.d' END)
      INTO d, f USING digests, retention_us;
      found_d := found_d || d;
      found_f := found_f || f;
    END LOOP;
    IF cardinality(found_d) = 0 THEN
      RETURN QUERY SELECT * FROM scangate_observe_open_epoch(digests, sources, seen_us, retention_us);
      RETURN;
    END IF;
    RETURN QUERY SELECT DISTINCT ON (x.d) x.d, false, x.f FROM unnest(found_d, found_f) AS x(d, f) ORDER BY x.d, x.f DESC;
    SELECT array_agg(u.d ORDER BY u.o), array_agg(u.s ORDER BY u.o), array_agg(u.us ORDER BY u.o)
      INTO rest_d, rest_s, rest_u
      FROM unnest(digests, sources, seen_us) WITH ORDINALITY AS u(d, s, us, o) WHERE NOT (u.d = ANY (found_d));
    IF rest_d IS NOT NULL THEN
      RETURN QUERY SELECT * FROM scangate_observe_open_epoch(rest_d, rest_s, rest_u, retention_us);
    END IF;
  END
  $$;
END
$f$;
SELECT scangate_observe_take_order();

ALTER FUNCTION scangate_layout_functions() RENAME TO scangate_layout_functions_017;
CREATE FUNCTION scangate_layout_functions() RETURNS void
LANGUAGE plpgsql
AS $f$
BEGIN
  PERFORM scangate_layout_functions_017();
  PERFORM scangate_observe_take_order();
END
$f$;
