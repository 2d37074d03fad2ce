-- The epochs' switch (issue 54; the catalog and the write order: sql/018): how the open epoch closes and the next
-- opens, and how the poll follower reads the rows an epoch received before its switch.
--
-- * scangate_epoch_prepare() creates the next epoch ahead of time: scan_keys_upcoming, a copy of scan_keys' shape
--   (columns, defaults, constraints, storage parameters, every index, every trigger, its publications, its grants),
--   empty. It is read from the open table itself, not written out here, so a later migration that changes
--   scan_keys changes the epochs after it too. Idempotent; outside the write order (nobody writes the upcoming table).
-- * scangate_epoch_switch() then only flips names and the catalog, in the caller's transaction: under the write
--   order's exclusive side (so after every writer in flight, and before every later one: sql/018), scan_keys is
--   renamed scan_keys_e<its id in hex> with its indexes, scan_keys_upcoming becomes scan_keys with canonical index
--   names (storage/horizon/brin_summarizer.cc names one), and the catalog says the old epoch is `closing` (probed
--   row by row until its summary commits) and records the switch's own xid. The caller sets a short lock_timeout
--   and retries on SQLSTATE 55P03: the switch waits for the advisory lock (writers) and for scan_keys' own lock
--   (readers: a look-up, a follower's poll, a warm load's snapshot), and every writer waits while it does.
-- * Why the switch's xid: every transaction that wrote into the old epoch took the order's shared side before the
--   switch took its exclusive one, so it got its xid before the switch got its own and committed before the switch
--   did. A poll follower whose previous snapshot did not see the switch and whose new one does reads the old epoch's
--   rows its previous snapshot did not see, once (scangate_follow_switched); after that nothing is written there.
--   The logical follower needs nothing more: the upcoming table is in the publication before it opens.

ALTER TABLE scangate_epochs ADD COLUMN switched_xid xid8;  -- the switch that closed it (NULL: open, or by hand)

-- The names of the tables the switch moves. A closed epoch's: scan_keys_e + 16 hex digits of its id (27 characters:
-- its indexes' names, scan_keys' with this prefix, stay within PostgreSQL's 63).
CREATE FUNCTION scangate_epoch_relation(id int8) RETURNS name
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT ('scan_keys_e' || lpad(to_hex(id), 16, '0'))::name $$;

CREATE FUNCTION scangate_epoch_prepare() RETURNS bool
LANGUAGE plpgsql
AS $f$
DECLARE
  r record;
  opts text[];
  suffix text;
BEGIN
  -- One at a time (instances beside each other prepare too), and read after the lock: a lock on a relation (unlike an
  -- advisory one) makes the session take in the catalog changes committed meanwhile, so a table another session
  -- prepared while this one waited is seen. SHARE UPDATE EXCLUSIVE conflicts with itself, not with the switch's
  -- UPDATE nor with the writers' reads.
  LOCK TABLE scangate_epochs IN SHARE UPDATE EXCLUSIVE MODE;
  IF to_regclass('scan_keys_upcoming') IS NOT NULL THEN
    RETURN false;  -- prepared already
  END IF;
  CREATE TABLE scan_keys_upcoming (LIKE scan_keys INCLUDING ALL EXCLUDING INDEXES);
  SELECT c.reloptions INTO opts FROM pg_class c WHERE c.oid = 'scan_keys'::regclass;
  IF opts IS NOT NULL THEN
    EXECUTE format('ALTER TABLE scan_keys_upcoming SET (%s)', array_to_string(opts, ', '));
  END IF;
  -- Every index under its canonical name's suffix (scan_keys_pkey -> scan_keys_upcoming_pkey); a constraint's index
  -- as that constraint.
  FOR r IN
    SELECT i.indexrelid, ic.relname AS name, con.oid AS con
      FROM pg_index i JOIN pg_class ic ON ic.oid = i.indexrelid
      LEFT JOIN pg_constraint con ON con.conindid = i.indexrelid AND con.conrelid = i.indrelid
     WHERE i.indrelid = 'scan_keys'::regclass
     ORDER BY ic.relname
  LOOP
    IF left(r.name, 10) <> 'scan_keys_' THEN
      RAISE EXCEPTION 'scangate epochs: scan_keys has an index that is not scangate''s (%): drop or rename it', r.name
        USING ERRCODE = 'SGE02';
    END IF;
    suffix := substr(r.name, 10);
    IF r.con IS NOT NULL THEN
      EXECUTE format('ALTER TABLE scan_keys_upcoming ADD CONSTRAINT %I %s', 'scan_keys_upcoming' || suffix,
                     pg_get_constraintdef(r.con));
    ELSE
      EXECUTE regexp_replace(pg_get_indexdef(r.indexrelid), '^CREATE (UNIQUE )?INDEX \S+ ON \S+ ',
                             'CREATE \1INDEX ' || quote_ident('scan_keys_upcoming' || suffix) ||
                             ' ON scan_keys_upcoming ');
    END IF;
  END LOOP;
  FOR r IN SELECT t.oid FROM pg_trigger t WHERE t.tgrelid = 'scan_keys'::regclass AND NOT t.tgisinternal LOOP
    EXECUTE regexp_replace(pg_get_triggerdef(r.oid), ' ON \S+ ', ' ON scan_keys_upcoming ');
  END LOOP;
  FOR r IN SELECT p.pubname, p.attnames, p.rowfilter FROM pg_publication_tables p
            WHERE p.schemaname = current_schema() AND p.tablename = 'scan_keys' LOOP
    EXECUTE format('ALTER PUBLICATION %I ADD TABLE scan_keys_upcoming (%s)%s', r.pubname,
                   (SELECT string_agg(quote_ident(a), ', ') FROM unnest(r.attnames) AS a),
                   CASE WHEN r.rowfilter IS NOT NULL THEN ' WHERE (' || r.rowfilter || ')' ELSE '' END);
  END LOOP;
  FOR r IN SELECT a.grantee, a.privilege_type, a.is_grantable
             FROM pg_class c, aclexplode(c.relacl) AS a
            WHERE c.oid = 'scan_keys'::regclass AND a.grantee <> c.relowner LOOP
    EXECUTE format('GRANT %s ON scan_keys_upcoming TO %s%s', r.privilege_type,
                   CASE WHEN r.grantee = 0 THEN 'PUBLIC' ELSE quote_ident(r.grantee::regrole::text) END,
                   CASE WHEN r.is_grantable THEN ' WITH GRANT OPTION' ELSE '' END);
  END LOOP;
  RETURN true;
END
$f$;

-- Closes the open epoch and opens the prepared one, in the caller's transaction; returns the closed epoch's id.
-- `expected` (an open epoch's id; NULL: whichever is open): when another epoch is open by now — an instance beside
-- this one switched first, on the same size bound — nothing changes and it returns NULL. `min_keys` (NULL: none):
-- nothing changes either (NULL) unless the open table, read once its lock is held, holds at least that many live
-- rows by PostgreSQL's statistics — a caller that read an epoch's id and a table's size in one statement may have
-- seen the size of the table a switch had just closed beside the id of the one it opened.
-- SQLSTATE SGE02: nothing prepared, or the table is in sql/001's layout. 55P03 (lock_timeout): try again.
CREATE FUNCTION scangate_epoch_switch(expected int8 DEFAULT NULL, min_keys int8 DEFAULT NULL) RETURNS int8
LANGUAGE plpgsql
AS $f$
DECLARE
  closing_id int8;
  closed name;
  r record;
BEGIN
  PERFORM pg_advisory_xact_lock(scangate_epoch_lock_key());  -- after every writer in flight, before every later one
  IF scangate_layout() <> 2 THEN  -- sql/013's move rebuilds scan_keys alone: it would leave the closed epochs behind
    RAISE EXCEPTION 'scangate epochs: switch only in the 16-byte layout (CALL scangate_layout_migrate() first)'
      USING ERRCODE = 'SGE02';
  END IF;
  SELECT id INTO STRICT closing_id FROM scangate_epochs WHERE state = 'open' FOR UPDATE;
  IF expected IS NOT NULL AND closing_id <> expected THEN
    RETURN NULL;  -- switched already
  END IF;
  -- scan_keys' lock first: it makes the session take in the catalog changes committed while it waited (an advisory
  -- lock does not), so a table prepared meanwhile is seen.
  LOCK TABLE scan_keys IN ACCESS EXCLUSIVE MODE;
  IF min_keys IS NOT NULL AND coalesce((SELECT s.n_live_tup FROM pg_stat_user_tables s
                                         WHERE s.relid = to_regclass('scan_keys')), 0) < min_keys THEN
    RETURN NULL;  -- not past the size bound
  END IF;
  IF to_regclass('scan_keys_upcoming') IS NULL THEN
    RAISE EXCEPTION 'scangate epochs: no upcoming epoch to switch to (SELECT scangate_epoch_prepare() first)'
      USING ERRCODE = 'SGE02';
  END IF;
  closed := scangate_epoch_relation(closing_id);
  LOCK TABLE scan_keys_upcoming IN ACCESS EXCLUSIVE MODE;
  ALTER TABLE scan_keys RENAME TO scan_keys_switch_closing;
  FOR r IN SELECT ic.relname AS name FROM pg_index i JOIN pg_class ic ON ic.oid = i.indexrelid
            WHERE i.indrelid = 'scan_keys_switch_closing'::regclass AND left(ic.relname, 10) = 'scan_keys_' LOOP
    EXECUTE format('ALTER INDEX %I RENAME TO %I', r.name, closed || substr(r.name, 10));
  END LOOP;
  EXECUTE format('ALTER TABLE scan_keys_switch_closing RENAME TO %I', closed);
  ALTER TABLE scan_keys_upcoming RENAME TO scan_keys;
  FOR r IN SELECT ic.relname AS name FROM pg_index i JOIN pg_class ic ON ic.oid = i.indexrelid
            WHERE i.indrelid = 'scan_keys'::regclass AND left(ic.relname, 19) = 'scan_keys_upcoming_' LOOP
    EXECUTE format('ALTER INDEX %I RENAME TO %I', r.name, 'scan_keys' || substr(r.name, 19));
  END LOOP;
  UPDATE scangate_epochs
     SET relation = closed, state = 'closing', closed_at = now(), switched_xid = pg_current_xact_id()
   WHERE id = closing_id;
  INSERT INTO scangate_epochs (relation, state) VALUES ('scan_keys', 'open');
  RETURN closing_id;
END
$f$;

-- The poll follower's reading of the epochs switched between its previous snapshot `p` and the calling statement's
-- own (a STABLE function reads with its caller's snapshot): each one's rows that `p` did not see (an index scan of
-- the commit-xid index, or the whole epoch when it no longer has the column). `like`: a value of scan_keys' digest
-- type, which the digests come back as; `seen`: return a raw key's row's first_seen (storage/follow/follower_poll.cc
-- kSeen), else NULL.
CREATE FUNCTION scangate_follow_switched(p pg_snapshot, seen bool, "like" anyelement)
RETURNS TABLE (digest anyelement, first_seen timestamptz)
LANGUAGE plpgsql STABLE
AS $f$
DECLARE
  rel name;
  by_xid bool;
BEGIN
  FOR rel IN SELECT e.relation FROM scangate_epochs e
              WHERE e.switched_xid IS NOT NULL AND NOT pg_visible_in_snapshot(e.switched_xid, p) LOOP
    SELECT EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = rel::regclass AND attname = 'commit_xid'
                                               AND NOT attisdropped) INTO by_xid;
    RETURN QUERY EXECUTE format(
      'SELECT k.digest, CASE WHEN $2 AND k.lot IS NULL AND k.expiry IS NULL THEN k.first_seen END FROM %I AS k %s',
      rel, CASE WHEN by_xid THEN
        'WHERE k.commit_xid >= pg_snapshot_xmax($1) OR k.commit_xid = ANY (ARRAY(SELECT pg_snapshot_xip($1)))'
      ELSE '' END)
      USING p, seen;
  END LOOP;
END
$f$;

-- The partition function scangate_lookup (sql/007; the uuid form: sql/013, sql/017) over every epoch: the row of the
-- digest in the open epoch or any closed one, the newest if several (a key past the horizon in an old epoch and
-- recorded again since: the new row is the live one). Epochs exist only in the uuid layout (the switch refuses the
-- other), so only that form is made epoch-aware; scangate_layout_functions (the layout move's last step) re-creates
-- the uuid form and then this.
CREATE FUNCTION scangate_lookup_take_epochs() RETURNS void
LANGUAGE plpgsql
AS $f$
BEGIN
  CREATE OR REPLACE FUNCTION scangate_lookup(d bytea)
  RETURNS TABLE (digest bytea, first_seen_us int8, source text, keep_until_us int8)
  LANGUAGE plpgsql STABLE STRICT
  AS $$
  DECLARE
    q text;
  BEGIN
    SELECT string_agg(format('SELECT first_seen, seen_by, keep_until FROM %I WHERE digest = scangate_stored_digest($1)',
                             e.relation), ' UNION ALL ' ORDER BY e.opened_at, e.id)
      INTO q FROM scangate_epochs e;
    RETURN QUERY EXECUTE
      'SELECT $1, (extract(epoch FROM x.first_seen) * 1000000)::int8, x.seen_by, '
      '(extract(epoch FROM x.keep_until) * 1000000)::int8 FROM (' || q || ') AS x ORDER BY x.first_seen DESC LIMIT 1'
      USING d;
  END
  $$;
END
$f$;
DO $$
BEGIN
  IF scangate_layout() = 2 THEN PERFORM scangate_lookup_take_epochs(); END IF;
END
$$;

ALTER FUNCTION scangate_layout_functions() RENAME TO scangate_layout_functions_018;
CREATE FUNCTION scangate_layout_functions() RETURNS void
LANGUAGE plpgsql
AS $f$
BEGIN
  PERFORM scangate_layout_functions_018();
  PERFORM scangate_lookup_take_epochs();
END
$f$;

-- A scangate older than the epochs (sql/018) writes into scan_keys without checking the closed epochs: a key of a
-- closed epoch would be new a second time. Its writers say who they are (sql/014's scangate.digest_scheme, in their
-- connection's options) but not that they check the epochs (scangate.epochs, storage/epochs/catalog.h
-- kEpochWriterOption): their inserts are refused, clearly and as an outage to them (55000, as sql/014's fence: their
-- rows stay queued, they answer 503), never written beside the epochs. A session that says neither (an operator's
-- psql, the partition functions' callers) is not a scangate writer and is not checked. One check per INSERT or COPY
-- statement; the switch's upcoming table copies the trigger (scangate_epoch_prepare).
CREATE FUNCTION scangate_epoch_writer_guard() RETURNS trigger
LANGUAGE plpgsql
AS $f$
BEGIN
  IF coalesce(current_setting('scangate.digest_scheme', true), '') <> ''
     AND coalesce(current_setting('scangate.epochs', true), '') <> 'checked' THEN
    RAISE EXCEPTION 'scangate epochs: this scangate writer does not check the closed epochs of the exact store '
                    '(a version older than sql/018): upgrade it'
      USING ERRCODE = '55000';
  END IF;
  RETURN NULL;
END
$f$;
CREATE TRIGGER scan_keys_epoch_writer_guard BEFORE INSERT ON scan_keys
  FOR EACH STATEMENT EXECUTE FUNCTION scangate_epoch_writer_guard();
