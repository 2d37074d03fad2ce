-- The steps of PostgreSQL's clock (issue 55; docs/design.md "A step of PostgreSQL's clock"). The horizon is judged by
-- now() against each row's first_seen (the take-over, the expiry, /lookup, the warm start, a journal's recovery).
-- When the clock steps FORWARD by S — an NTP step, a VM resumed from suspend, a failover onto a host whose clock is
-- ahead — every row written before the step looks S older than it is, and a key seen again within the horizon but
-- within S of its end would be `new` a second time; a step BACK makes rows look younger, and PostgreSQL would keep a
-- row past the horizon that an --ack=filter instance's filter has already forgotten (that instance answers the key
-- `new`, and whoever takes the row over later answers it `new` again). So each step an instance measures is recorded
-- here, and a row's age is its clock age less the steps recorded after its first_seen:
--   expired  <=>  first_seen + R + scangate_clock_ahead(first_seen) < now()
-- Every statement tests a cheap bound first (`first_seen < now() - R + <the steps back since now() - R>`, an
-- InitPlan evaluated once per statement): a row within it is never expired, and only a row near or past the horizon
-- pays for the function (a probe of this small table).
-- Which rows a step applies to: those whose first_seen is below `before` (storage/clock/pg_clock.h PgClockStep).
-- For a step forward, the old clock's most at the reading that saw it (a row the new clock stamped in the second
-- before that reading counts as before the step: kept up to that much longer); for a step back, the new clock's
-- least at the last moment the old clock was seen (no row of the new clock is below it; the old clock's rows of the
-- last seconds before the step, up to the step's size, are above it and kept that much longer).
-- Who measures: every instance's clock reader (storage/clock/pg_clock_reader.h) compares each reading with its bounds
-- of the clock since its last one, while PostgreSQL runs and across a restart or a failover (its bounds of the old
-- server's clock against the first reading of the new one): a step is the difference beyond the bounds' width. Not
-- measured: a step no instance saw across (every instance restarted with the server), and one within the bounds'
-- width (5 ms plus 1 ms per second of outage, 500 ppm).
CREATE TABLE scangate_clock_steps (
  epoch bigint PRIMARY KEY,         -- the clock epoch (sql/016) whose clock the step led to
  before timestamptz NOT NULL,      -- rows with a first_seen below it were written before the step (above)
  step interval NOT NULL,           -- the new clock minus the old one (negative: back)
  recorded_at timestamptz NOT NULL DEFAULT now()
);

-- How much older by the clock than it is a row with first_seen `f` is: the steps recorded after it (negative: it is
-- older than the clock says).
CREATE FUNCTION scangate_clock_ahead(f timestamptz) RETURNS interval
LANGUAGE sql STABLE PARALLEL SAFE
AS $$ SELECT coalesce(sum(s.step), interval '0') FROM scangate_clock_steps s WHERE s.before > f $$;

-- Every forward step recorded: the most any row's age is lowered by. The statements that take a cut-off for a whole
-- range (the expiry's deletes, the warm start, a journal's recovery) subtract this, so they keep (or load) a row
-- rather than judge it early; a step back only makes them keep a row longer than needed.
CREATE FUNCTION scangate_clock_ahead_total() RETURNS interval
LANGUAGE sql STABLE PARALLEL SAFE
AS $$ SELECT coalesce(sum(step), interval '0') FROM scangate_clock_steps WHERE step > interval '0' $$;

-- The steps back recorded after `since` (NULL: all), as a positive interval: a row first seen after `since` is at
-- most this much older than the clock says. The cheap bound of every statement that judges a row's age.
CREATE FUNCTION scangate_clock_behind(since timestamptz) RETURNS interval
LANGUAGE sql STABLE PARALLEL SAFE
AS $$
  SELECT coalesce(-sum(step), interval '0') FROM scangate_clock_steps
   WHERE step < interval '0' AND (since IS NULL OR before > since)
$$;

-- An instance measured a step of `step_us` between its bounds of epoch `seen` and a reading of epoch `now_epoch`,
-- dividing the rows at `before_us` (µs since the epoch; PgClockStep::before_us): recorded for `now_epoch` unless an
-- instance already did, less what is already recorded for the epochs between (an instance that saw the clock across
-- two epochs reports their sum). Concurrent recorders of one epoch: the first one's account stands.
CREATE FUNCTION scangate_clock_record_step(seen bigint, now_epoch bigint, step_us int8, before_us int8) RETURNS void
LANGUAGE plpgsql VOLATILE
AS $f$
DECLARE
  counted int8;
BEGIN
  IF EXISTS (SELECT 1 FROM scangate_clock_steps WHERE epoch = now_epoch) THEN RETURN; END IF;
  SELECT coalesce(sum((extract(epoch FROM step) * 1000000)::int8), 0) INTO counted
    FROM scangate_clock_steps WHERE epoch > seen AND epoch < now_epoch;
  IF step_us - counted = 0 THEN RETURN; END IF;
  INSERT INTO scangate_clock_steps (epoch, before, step)
  VALUES (now_epoch, timestamptz 'epoch' + before_us * interval '1 microsecond',
          (step_us - counted) * interval '1 microsecond')
  ON CONFLICT (epoch) DO NOTHING;
END
$f$;

-- The guard of a writer's take-over (storage/pg/batch_statement.cc Guard()) and of the expiry: a step is recorded
-- by the first instance to read the clock after it (within a second; after a restart, within a second of its
-- reconnection), and until then PostgreSQL's now() is past what the writer's bounds of the clock allow. A row is
-- then never taken over: the statement fails with 55000 (an outage to the writer: its rows stay queued and are
-- retried, or its requests get 503) rather than judge the row by a clock that makes it look older than it is.
CREATE FUNCTION scangate_clock_unrecorded_step() RETURNS bool
LANGUAGE plpgsql VOLATILE
AS $f$
BEGIN
  RAISE EXCEPTION 'scangate clock guard: PostgreSQL''s clock reads past this instance''s bounds of it (a step forward not recorded yet): retried once the step is recorded'
    USING ERRCODE = '55000';
END
$f$;

-- The partition functions (sql/007, and sql/013's over the uuid layout) take over an expired row by the same rule
-- (and, as the writers do since sql/008, drop the previous observer's idempotency record with it).
CREATE OR REPLACE FUNCTION scangate_observe(digests bytea[], sources text[], seen_us int8[], retention_us int8)
RETURNS TABLE (digest bytea, inserted bool, first_seen_us int8)
LANGUAGE plpgsql
AS $$
#variable_conflict use_column
DECLARE
  taken bytea[];  -- the digests this call inserted (or took over)
BEGIN
  IF retention_us > 0 THEN
    WITH ins AS (
      INSERT INTO scan_keys AS k (digest, source, first_seen)
      SELECT DISTINCT ON (u.d) u.d, u.s, CASE WHEN u.us = 0 THEN now() ELSE timestamptz 'epoch' + u.us * interval '1 microsecond' END
      FROM unnest(digests, sources, seen_us) AS u(d, s, us)
      ORDER BY u.d
      ON CONFLICT (digest) DO UPDATE SET first_seen = EXCLUDED.first_seen, source = EXCLUDED.source, request = NULL
        WHERE k.first_seen < now() - retention_us * interval '1 microsecond'
                             + (SELECT scangate_clock_behind(now() - retention_us * interval '1 microsecond'))
          AND k.first_seen < now() - retention_us * interval '1 microsecond' - scangate_clock_ahead(k.first_seen)
      RETURNING k.digest
    )
    SELECT coalesce(array_agg(ins.digest), '{}') INTO taken FROM ins;
  ELSE
    WITH ins AS (
      INSERT INTO scan_keys AS k (digest, source, first_seen)
      SELECT DISTINCT ON (u.d) u.d, u.s, CASE WHEN u.us = 0 THEN now() ELSE timestamptz 'epoch' + u.us * interval '1 microsecond' END
      FROM unnest(digests, sources, seen_us) AS u(d, s, us)
      ORDER BY u.d
      ON CONFLICT (digest) DO NOTHING
      RETURNING k.digest
    )
    SELECT coalesce(array_agg(ins.digest), '{}') INTO taken FROM ins;
  END IF;
  RETURN QUERY
  SELECT k.digest, t.d IS NOT NULL, (extract(epoch FROM k.first_seen) * 1000000)::int8
  FROM (SELECT DISTINCT u.d FROM unnest(digests) AS u(d)) AS q
  JOIN scan_keys k ON k.digest = q.d
  LEFT JOIN unnest(taken) AS t(d) ON t.d = q.d;
END
$$;

CREATE OR REPLACE FUNCTION scangate_layout_functions() RETURNS void
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
                             + (SELECT scangate_clock_behind(now() - retention_us * interval '1 microsecond'))
          AND k.first_seen < now() - retention_us * interval '1 microsecond' - scangate_clock_ahead(k.first_seen)
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

-- A database already on the uuid layout gets its form of the function back (the bytea form above replaced it).
DO $$
BEGIN
  IF scangate_layout() = 2 THEN PERFORM scangate_layout_functions(); END IF;
END
$$;
