-- Partitions (issue 23): the functions a partition database answers for the PL/Proxy path (sql/proxy/: the
-- proxy database's functions of the same names run them on the partition a digest's hash names). scangate's
-- own writers do not call them: they send their batch statements to the partition directly
-- (storage/partitions/partitioned_store.h). Applied to every database scangate writes to, the single one included
-- (where they are simply unused), so every partition answers the operators' path with the writers' semantics.

-- The partition of a digest: its bytes 4..7 as a big-endian int4, which PL/Proxy's `RUN ON` reduces with
-- `& (partition count - 1)`. storage/partitions/partition_map.h's PartitionOf is the same function (a test compares
-- them). Bytes 4..7, not 0..3: the writers' route within a partition (server/verdict RouteOfDigest) uses 0..3.
-- `<<` on int4 does not check overflow, so a byte >= 128 at position 4 gives a negative hash, as intended.
CREATE FUNCTION scangate_partition_hash(d bytea) RETURNS int4
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
AS $$ SELECT (get_byte(d, 4) << 24) | (get_byte(d, 5) << 16) | (get_byte(d, 6) << 8) | get_byte(d, 7) $$;

-- Insert-if-absent of a batch, with the writers' raw semantics (storage/pg/batch_statement.cc): rows inserted in
-- digest order (no deadlock between concurrent batches), a digest given twice counts once, `seen_us` 0 = now(),
-- and with a horizon of `retention_us` > 0 a present row older than it is taken over (first_seen and source
-- replaced) and answered as inserted. One row per distinct input digest: inserted or not, and the row's
-- first_seen in µs since the epoch. Two statements in the caller's transaction (PL/Proxy: one autocommitted
-- call per partition).
CREATE FUNCTION scangate_observe(digests bytea[], sources text[], seen_us int8[], retention_us int8)
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
      ON CONFLICT (digest) DO UPDATE SET first_seen = EXCLUDED.first_seen, source = EXCLUDED.source
        WHERE k.first_seen < now() - retention_us * interval '1 microsecond'
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
  -- A new statement (a new snapshot): it sees this call's rows, the rows present before it, and rows another
  -- transaction committed after the INSERT's snapshot (ON CONFLICT waited for and skipped them).
  RETURN QUERY
  SELECT k.digest, t.d IS NOT NULL, (extract(epoch FROM k.first_seen) * 1000000)::int8
  FROM (SELECT DISTINCT u.d FROM unnest(digests) AS u(d)) AS q
  JOIN scan_keys k ON k.digest = q.d
  LEFT JOIN unnest(taken) AS t(d) ON t.d = q.d;
END
$$;

-- One key's row as stored (no row: absent). The caller judges the horizon (first_seen, keep_until).
CREATE FUNCTION scangate_lookup(d bytea)
RETURNS TABLE (digest bytea, first_seen_us int8, source text, keep_until_us int8)
LANGUAGE sql STABLE STRICT
AS $$
  SELECT k.digest, (extract(epoch FROM k.first_seen) * 1000000)::int8, k.source,
         (extract(epoch FROM k.keep_until) * 1000000)::int8
  FROM scan_keys k WHERE k.digest = d
$$;

-- This partition's database and its row count (the proxy's RUN ON ALL collects one row per partition).
CREATE FUNCTION scangate_count()
RETURNS TABLE (db text, keys int8)
LANGUAGE sql STABLE
AS $$ SELECT current_database()::text, count(*) FROM scan_keys $$;
