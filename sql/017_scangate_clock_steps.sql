-- The forward steps of PostgreSQL's clock (issue 55; docs/design.md "A step of PostgreSQL's clock"). The horizon is
-- judged by now() against each row's first_seen (the take-over, the expiry, /lookup, the warm start, a journal's
-- recovery). When the clock steps FORWARD by S — an NTP step, a VM resumed from suspend, a failover onto a host whose
-- clock is ahead — every row written before the step looks S older than it is, and a key seen again within the
-- horizon but within S of its end would be `new` a second time. So each step an instance measures is recorded here,
-- and a row's age is its clock age minus the forward steps recorded after its first_seen:
--   expired  <=>  first_seen + R + scangate_clock_ahead(first_seen) < now()
-- Every statement keeps the plain test first (`first_seen < now() - R AND ...`): a row within the plain horizon is
-- never expired, and only a row past it pays for the function (a probe of this small table).
-- A step back (rows look younger than they are) is recorded but not subtracted: they are kept longer, a duplicate
-- for up to S past the horizon, never a second `new` before it.
-- Who measures: every instance's clock reader (storage/clock/pg_clock_reader.h) compares each reading with its bounds
-- of the clock since its last one, while PostgreSQL runs and across a restart or a failover (its bounds of the old
-- server's clock against the first reading of the new one): a step is the difference beyond the bounds' width. Not
-- measured: a step no instance saw across (every instance restarted with the server), and one within the bounds'
-- width (5 ms plus 1 ms per second of outage, 500 ppm): that much early, at most.
CREATE TABLE scangate_clock_steps (
  epoch bigint PRIMARY KEY,         -- the clock epoch (sql/016) whose clock the step led to
  before timestamptz NOT NULL,      -- the new clock's reading at the record minus the step: every row written before
                                    -- the step has a first_seen earlier than this
  step interval NOT NULL,           -- the new clock minus the old one (negative: back)
  recorded_at timestamptz NOT NULL DEFAULT now()
);

-- How much a row with first_seen `f` is older by the clock than it is: the forward steps recorded after it.
CREATE FUNCTION scangate_clock_ahead(f timestamptz) RETURNS interval
LANGUAGE sql STABLE PARALLEL SAFE
AS $$
  SELECT coalesce(sum(s.step), interval '0') FROM scangate_clock_steps s WHERE s.step > interval '0' AND s.before > f
$$;

-- Every forward step recorded: the most any row's age is corrected by. The statements that take a cut-off for a whole
-- range (the expiry's deletes, the warm start) subtract this, so they keep (or load) a row rather than judge it early.
CREATE FUNCTION scangate_clock_ahead_total() RETURNS interval
LANGUAGE sql STABLE PARALLEL SAFE
AS $$ SELECT coalesce(sum(step), interval '0') FROM scangate_clock_steps WHERE step > interval '0' $$;

-- An instance measured a step of `step_us` between its bounds of epoch `seen` and a reading of epoch `now_epoch`:
-- recorded for `now_epoch` unless an instance already did, less what is already recorded for the epochs between (an
-- instance that saw the clock across two epochs reports their sum). `before` is read on the new clock now, so a row
-- stamped on the old clock since the step (an instance's bounds lag by a reading) counts as before it: kept longer.
CREATE FUNCTION scangate_clock_record_step(seen bigint, now_epoch bigint, step_us int8) RETURNS void
LANGUAGE plpgsql VOLATILE
AS $f$
DECLARE
  counted int8;
  rest int8;
BEGIN
  IF EXISTS (SELECT 1 FROM scangate_clock_steps WHERE epoch = now_epoch) THEN RETURN; END IF;
  SELECT coalesce(sum((extract(epoch FROM step) * 1000000)::int8), 0) INTO counted
    FROM scangate_clock_steps WHERE epoch > seen AND epoch < now_epoch;
  rest := step_us - counted;
  INSERT INTO scangate_clock_steps (epoch, before, step)
  VALUES (now_epoch, clock_timestamp() - greatest(rest, 0) * interval '1 microsecond', rest * interval '1 microsecond')
  ON CONFLICT (epoch) DO NOTHING;
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
