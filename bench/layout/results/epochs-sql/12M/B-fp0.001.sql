BEGIN;
SELECT pg_advisory_xact_lock_shared(54);
WITH b AS (SELECT array_agg(gen_random_uuid()) AS a FROM generate_series(1, 64)),
seen AS (
  SELECT digest FROM scan_keys_e_1 WHERE digest = ANY(ARRAY(SELECT x FROM unnest((SELECT a FROM b)) AS v(x) WHERE random() < 0.001))
  UNION ALL
  SELECT digest FROM scan_keys_e_2 WHERE digest = ANY(ARRAY(SELECT x FROM unnest((SELECT a FROM b)) AS v(x) WHERE random() < 0.001))
  UNION ALL
  SELECT digest FROM scan_keys_e_3 WHERE digest = ANY(ARRAY(SELECT x FROM unnest((SELECT a FROM b)) AS v(x) WHERE random() < 0.001))
  UNION ALL
  SELECT digest FROM scan_keys_e_4 WHERE digest = ANY(ARRAY(SELECT x FROM unnest((SELECT a FROM b)) AS v(x) WHERE random() < 0.001))
  UNION ALL
  SELECT digest FROM scan_keys_e_5 WHERE digest = ANY(ARRAY(SELECT x FROM unnest((SELECT a FROM b)) AS v(x) WHERE random() < 0.001))
  UNION ALL
  SELECT digest FROM scan_keys_e_6 WHERE digest = ANY(ARRAY(SELECT x FROM unnest((SELECT a FROM b)) AS v(x) WHERE random() < 0.001))
  UNION ALL
  SELECT digest FROM scan_keys_e_7 WHERE digest = ANY(ARRAY(SELECT x FROM unnest((SELECT a FROM b)) AS v(x) WHERE random() < 0.001))
  UNION ALL
  SELECT digest FROM scan_keys_e_8 WHERE digest = ANY(ARRAY(SELECT x FROM unnest((SELECT a FROM b)) AS v(x) WHERE random() < 0.001))
),
ins AS (
  INSERT INTO scan_keys_e_open AS k (epoch, digest, seen_by, first_seen)
  SELECT 9, d, 'till-07', now() FROM unnest((SELECT a FROM b)) AS u(d)
  WHERE d NOT IN (SELECT digest FROM seen)
  ORDER BY d
  ON CONFLICT (digest) DO NOTHING
  RETURNING digest
)
SELECT encode(uuid_send(digest), 'hex'), NULL::int8, NULL::int8 FROM ins
UNION ALL
SELECT NULL, txid_current_if_assigned()::int8, (extract(epoch FROM now()) * 1000000)::int8
;
COMMIT;
