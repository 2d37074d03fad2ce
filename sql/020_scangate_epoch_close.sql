-- The epochs' close and their expiry (issue 54; the switch: sql/019). The close: a `closing` epoch — the table a
-- switch renamed, still in the open epoch's shape with every index the open epoch needs — becomes a compact `closed`
-- one with its membership summary. The expiry: a closed epoch past the horizon is dropped whole.
--
-- * scangate_epoch_compact(epoch) writes the epoch's rows once more, sorted by digest, into scan_keys_c<id in hex>:
--   only the columns a closed epoch's readers use (the writers' look-up, /lookup, the warm start; no commit_xid: the
--   poll follower reads an epoch without it whole), its primary key at fillfactor 100 and no other index. One
--   transaction, so an interrupted one leaves nothing; a compact table that exists is whole, and is used as it is.
--   The closing table is immutable (every writer of it committed before its switch: sql/019), so nothing is locked
--   but what a read locks.
-- * The caller reads the compact table's digests into the summary (storage/epochs/summary_build.h).
-- * scangate_epoch_close(epoch, summary) swaps them in the caller's transaction, under the write order's exclusive
--   side (every writer re-reads the catalog: the relation and the summary change): the catalog row names the compact
--   table, is `closed`, and holds the summary and the epoch's bounds (keys, latest first_seen and keep_until: what an
--   expiry by dropping the epoch will read); the closing table is dropped. The caller sets a short lock_timeout and
--   retries on 55P03 (the drop waits for readers of the closing table).
-- Each step can be run again after an interruption at any point: compact returns the whole table an earlier run
-- committed, close does nothing for an epoch that is closed already.

ALTER TABLE scangate_epochs ADD COLUMN keys int8, ADD COLUMN max_first_seen timestamptz,
  ADD COLUMN max_keep_until timestamptz;

-- A compact epoch's table: scan_keys_c + 16 hex digits of its id.
CREATE FUNCTION scangate_epoch_compact_relation(id int8) RETURNS name
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT ('scan_keys_c' || lpad(to_hex(id), 16, '0'))::name $$;

CREATE FUNCTION scangate_epoch_compact(epoch int8) RETURNS name
LANGUAGE plpgsql
AS $f$
DECLARE
  rel name;
  compact name := scangate_epoch_compact_relation(epoch);
BEGIN
  SELECT e.relation INTO rel FROM scangate_epochs e WHERE e.id = epoch AND e.state = 'closing';
  IF NOT FOUND THEN
    RAISE EXCEPTION 'scangate epochs: epoch % is not closing', epoch USING ERRCODE = 'SGE02';
  END IF;
  IF to_regclass(compact) IS NOT NULL THEN
    RETURN compact;  -- an earlier run's: committed whole
  END IF;
  EXECUTE format('CREATE TABLE %I (first_seen timestamptz NOT NULL, keep_until timestamptz, digest uuid NOT NULL, '
                 'lot uuid, request uuid, expiry date, seen_by text) WITH (fillfactor = 100)', compact);
  EXECUTE format('INSERT INTO %I SELECT first_seen, keep_until, digest, lot, request, expiry, seen_by FROM %I '
                 'ORDER BY digest', compact, rel);
  EXECUTE format('ALTER TABLE %I ADD CONSTRAINT %I PRIMARY KEY (digest) WITH (fillfactor = 100)', compact,
                 compact || '_pkey');
  RETURN compact;
END
$f$;

CREATE FUNCTION scangate_epoch_close(epoch int8, summary bytea) RETURNS bool
LANGUAGE plpgsql
AS $f$
DECLARE
  rel name;
  compact name := scangate_epoch_compact_relation(epoch);
  n int8;
  mf timestamptz;
  mk timestamptz;
BEGIN
  IF to_regclass(compact) IS NULL THEN
    RAISE EXCEPTION 'scangate epochs: epoch % has no compact table (scangate_epoch_compact first)', epoch
      USING ERRCODE = 'SGE02';
  END IF;
  -- Read before the order's lock: writers do not wait for it.
  EXECUTE format('SELECT count(*), max(first_seen), max(keep_until) FROM %I', compact) INTO n, mf, mk;
  PERFORM pg_advisory_xact_lock(scangate_epoch_lock_key());
  SELECT e.relation INTO rel FROM scangate_epochs e WHERE e.id = epoch AND e.state = 'closing' FOR UPDATE;
  IF NOT FOUND THEN
    RETURN false;  -- closed already (another instance, or an earlier run)
  END IF;
  EXECUTE format('LOCK TABLE %I IN ACCESS EXCLUSIVE MODE', rel);
  UPDATE scangate_epochs SET relation = compact, state = 'closed', summary = scangate_epoch_close.summary, keys = n,
         max_first_seen = mf, max_keep_until = mk
   WHERE id = epoch;
  EXECUTE format('DROP TABLE %I', rel);
  RETURN true;
END
$f$;

-- Expiry by dropping whole epochs: each closed epoch every row of which is past the horizon — its latest
-- keep_until and its latest first_seen + `retention_us` both before now(), less every forward step of the clock
-- recorded (sql/017: a row is never judged before it expired, whatever steps came after it) — or that holds no row,
-- is dropped (its catalog row and its table: no DELETE, no dead rows), under the write order's exclusive side (the
-- writers read the catalog again). `guard_us` (µs since the epoch; NULL: none): nothing is dropped while now() is
-- past it (an instance's bound of the clock: a forward step not recorded yet, storage/clock/pg_clock.h). Returns
-- the epochs dropped. The caller sets a short lock_timeout (a DROP waits for the epoch's readers) and tries again
-- later on 55P03. A closed epoch with a pinned row (a GS1 pack's keep_until) stays until that row's horizon.
CREATE FUNCTION scangate_epoch_drop_expired(retention_us int8, guard_us int8)
RETURNS TABLE (epoch int8, relation name, keys int8)
LANGUAGE plpgsql
AS $f$
DECLARE
  r record;
BEGIN
  IF guard_us IS NOT NULL AND now() > 'epoch'::timestamptz + guard_us * interval '1 microsecond' THEN
    RETURN;
  END IF;
  IF NOT EXISTS (
      SELECT 1 FROM scangate_epochs e
       WHERE e.state = 'closed'
         AND (e.keys = 0
              OR (retention_us > 0 AND e.max_first_seen IS NOT NULL
                  AND greatest(e.max_keep_until, e.max_first_seen + retention_us * interval '1 microsecond')
                      < now() - scangate_clock_ahead_total()))) THEN
    RETURN;  -- nothing to drop: no lock taken
  END IF;
  PERFORM pg_advisory_xact_lock(scangate_epoch_lock_key());
  FOR r IN SELECT e.id, e.relation, e.keys FROM scangate_epochs e
            WHERE e.state = 'closed'
              AND (e.keys = 0
                   OR (retention_us > 0 AND e.max_first_seen IS NOT NULL
                       AND greatest(e.max_keep_until, e.max_first_seen + retention_us * interval '1 microsecond')
                           < now() - scangate_clock_ahead_total()))
            ORDER BY e.opened_at, e.id FOR UPDATE LOOP
    EXECUTE format('DROP TABLE %I', r.relation);
    DELETE FROM scangate_epochs WHERE id = r.id;
    epoch := r.id;
    relation := r.relation;
    keys := r.keys;
    RETURN NEXT;
  END LOOP;
END
$f$;

-- The merge: closed epochs rewritten as one, keeping only their rows that may still be live, so that a pinned row
-- (a GS1 pack's keep_until, years ahead) does not keep a whole epoch of expired rows alive, and the count of closed
-- epochs a key can be checked against stays bounded (storage/epochs/closer.h decides which). Like the close, three
-- steps, each of which can be run again after an interruption:
-- * scangate_epoch_merge_build(epochs, retention_us) writes the rows of the given closed epochs into a new compact
--   table scan_keys_c<a new id>, sorted by digest, leaving out each row past its horizon for certain (its keep_until,
--   else first_seen + the horizon, before now() less every clock step recorded either way) and keeping the newest row
--   of a digest held twice; one transaction. A table an interrupted merge left (a compact name no epoch of the
--   catalog has) is dropped first.
-- * The caller builds the summary of the new table.
-- * scangate_epoch_merge_swap(new_id, epochs, summary) names it in the catalog as one closed epoch (opened when the
--   oldest of them opened), and drops the merged epochs, under the write order's exclusive side; false (nothing
--   done) when one of them is no longer a closed epoch of the catalog (another instance merged or dropped it).
CREATE FUNCTION scangate_epoch_merge_build(epochs int8[], retention_us int8) RETURNS name
LANGUAGE plpgsql
AS $f$
DECLARE
  rel name;
  target name := scangate_epoch_compact_relation(scangate_random_id());
  rels text := '';
  orphan name;
BEGIN
  FOR orphan IN SELECT c.relname FROM pg_class c
                 WHERE c.relkind = 'r' AND c.relnamespace = current_schema()::regnamespace
                   AND c.relname ~ '^scan_keys_c[0-9a-f]{16}$'
                   AND NOT EXISTS (SELECT 1 FROM scangate_epochs e
                                    WHERE scangate_epoch_compact_relation(e.id) = c.relname) LOOP
    EXECUTE format('DROP TABLE %I', orphan);
  END LOOP;
  FOR rel IN SELECT e.relation FROM unnest(epochs) AS u(id) JOIN scangate_epochs e ON e.id = u.id AND e.state = 'closed'
  LOOP
    rels := rels || CASE WHEN rels = '' THEN '' ELSE ' UNION ALL ' END ||
            format('SELECT first_seen, keep_until, digest, lot, request, expiry, seen_by FROM %I', rel);
  END LOOP;
  IF rels = ''
     OR (SELECT count(*) FROM scangate_epochs WHERE id = ANY (epochs) AND state = 'closed') <> cardinality(epochs) THEN
    RAISE EXCEPTION 'scangate epochs: not every epoch of % is closed', epochs USING ERRCODE = 'SGE02';
  END IF;
  EXECUTE format('CREATE TABLE %I (first_seen timestamptz NOT NULL, keep_until timestamptz, digest uuid NOT NULL, '
                 'lot uuid, request uuid, expiry date, seen_by text) WITH (fillfactor = 100)', target);
  EXECUTE format(
    'INSERT INTO %I SELECT DISTINCT ON (digest) first_seen, keep_until, digest, lot, request, expiry, seen_by '
    'FROM (%s) AS r '
    'WHERE NOT coalesce(coalesce(keep_until, CASE WHEN $1 > 0 THEN first_seen + $1 * interval ''1 microsecond'' END) '
    '  < now() - scangate_clock_ahead_total() - scangate_clock_behind(NULL), false) '
    'ORDER BY digest, first_seen DESC', target, rels)
    USING retention_us;
  EXECUTE format('ALTER TABLE %I ADD CONSTRAINT %I PRIMARY KEY (digest) WITH (fillfactor = 100)', target,
                 target || '_pkey');
  RETURN target;
END
$f$;

CREATE FUNCTION scangate_epoch_merge_swap(target name, epochs int8[], summary bytea) RETURNS bool
LANGUAGE plpgsql
AS $f$
DECLARE
  new_id int8 := ('x' || right(target, 16))::bit(64)::int8;
  r record;
  n int8;
  mf timestamptz;
  mk timestamptz;
  opened timestamptz;
BEGIN
  IF target !~ '^scan_keys_c[0-9a-f]{16}$' OR to_regclass(target) IS NULL THEN
    RAISE EXCEPTION 'scangate epochs: no merged table %', target USING ERRCODE = 'SGE02';
  END IF;
  -- Read before the order's lock: writers do not wait for it.
  EXECUTE format('SELECT count(*), max(first_seen), max(keep_until) FROM %I', target) INTO n, mf, mk;
  PERFORM pg_advisory_xact_lock(scangate_epoch_lock_key());
  PERFORM 1 FROM scangate_epochs WHERE id = ANY (epochs) AND state = 'closed' FOR UPDATE;
  IF (SELECT count(*) FROM scangate_epochs WHERE id = ANY (epochs) AND state = 'closed') <> cardinality(epochs) THEN
    RETURN false;  -- the table stays for the next merge to drop, unless a swap of it committed (then it is an epoch)
  END IF;
  SELECT min(opened_at) INTO opened FROM scangate_epochs WHERE id = ANY (epochs);
  FOR r IN SELECT e.relation FROM scangate_epochs e WHERE e.id = ANY (epochs) LOOP
    EXECUTE format('DROP TABLE %I', r.relation);  -- waits for its readers (the caller's lock_timeout)
  END LOOP;
  DELETE FROM scangate_epochs WHERE id = ANY (epochs);
  INSERT INTO scangate_epochs (id, relation, state, opened_at, closed_at, summary, keys, max_first_seen, max_keep_until)
  VALUES (new_id, target, 'closed', opened, now(), summary, n, mf, mk);
  RETURN true;
END
$f$;
