BEGIN;
WITH b AS (SELECT array_agg(gen_random_uuid()) AS a FROM generate_series(1, 64)),
ins AS (
  INSERT INTO scan_keys AS k (digest, seen_by, first_seen)
  SELECT d, 'till-07', now() FROM unnest((SELECT a FROM b)) AS u(d)
  ORDER BY d
  ON CONFLICT (digest) DO NOTHING
  RETURNING digest
)
SELECT encode(uuid_send(digest), 'hex'), NULL::int8, NULL::int8 FROM ins
UNION ALL
SELECT NULL, txid_current_if_assigned()::int8, (extract(epoch FROM now()) * 1000000)::int8
;
COMMIT;
