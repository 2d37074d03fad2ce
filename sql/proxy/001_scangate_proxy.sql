-- The proxy database of a partitioned scangate (issue 23): PL/Proxy functions with the names and signatures of
-- the partition-side functions of sql/007_partition_functions.sql, each running its namesake on the partition
-- database(s) a digest's hash names. NOT a scangate migration (scangate never applies it): deploy/partitions.sh
-- applies it to the proxy database `scangate_proxy`; an operator does the same with
--   psql -v ON_ERROR_STOP=1 -d scangate_proxy -f sql/proxy/001_scangate_proxy.sql
-- It is idempotent (CREATE OR REPLACE), so it can be applied again after an upgrade.
--
-- The cluster. The functions name the PL/Proxy cluster 'scangate' (fixed here; scangate's
-- --partition-cluster must name the same foreign server). It is configured with SQL/MED, outside this file,
-- because it is the partition MAP, which the operator changes:
--   CREATE SERVER scangate FOREIGN DATA WRAPPER plproxy OPTIONS (
--     connection_lifetime '1800',
--     p0 'host=10.0.0.11 port=5432 dbname=scangate_p0 user=scangate',
--     p1 'host=10.0.0.12 port=5432 dbname=scangate_p1 user=scangate', ...);   -- p0..p(2^k - 1), all present
--   CREATE USER MAPPING FOR PUBLIC SERVER scangate;
--   ALTER SERVER scangate OPTIONS (SET p1 'host=... dbname=scangate_p1 ...');  -- moving a partition
-- The pN strings are libpq connection strings without passwords: libpq's ~/.pgpass (of the proxy cluster's
-- postgres user) or PGPASSWORD supply them, for PL/Proxy as for scangate, which reads the same map.
-- Partition count: a power of two. PL/Proxy's RUN ON <int4> sends a call to partition `hash & (count - 1)`,
-- exactly storage/partitions/partition_map.h's PartitionOf.
-- Digests are given and answered in full (32 bytes) whatever layout a partition's scan_keys has: the old one, or
-- sql/013's 16-byte one, whose partition functions look a digest up by its stored form. Partitions move to the new
-- layout one at a time (storage/README.md "Moving a database to the 16-byte layout"); nothing here changes.
--
-- Writes through the proxy: scangate_observe here splits one batch by partition and runs the parts in
-- parallel, each as ONE AUTOCOMMITTED call on its partition. A caller that loses its connection mid-call
-- cannot learn which partitions committed (there is no transaction id to settle by, and the parts commit
-- independently). That is why scangate's own writers do not use this path: they send each batch to its
-- partition directly and settle an in-doubt COMMIT by that partition's xid. These functions are the
-- operators' path (lookup of one key, counts over all partitions, a manual insert) and the measured
-- alternative (bench/partitions/).

CREATE EXTENSION IF NOT EXISTS plproxy;

-- The partition hash of a digest: bytes 4..7 as a big-endian int4. Identical to sql/007's (the proxy and
-- the partitions must agree bit for bit; the partitions' copy lets an operator check placement there).
CREATE OR REPLACE FUNCTION scangate_partition_hash(d bytea) RETURNS int4
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
AS $$ SELECT (get_byte(d, 4) << 24) | (get_byte(d, 5) << 16) | (get_byte(d, 6) << 8) | get_byte(d, 7) $$;

-- Insert-if-absent of a batch: the arrays are split element-wise by the partition of each digest, and every
-- partition that gets a part runs sql/007's scangate_observe on it (in parallel; each part commits on its
-- own). One row per distinct input digest.
CREATE OR REPLACE FUNCTION scangate_observe(digests bytea[], sources text[], seen_us int8[], retention_us int8)
RETURNS TABLE (digest bytea, inserted bool, first_seen_us int8)
LANGUAGE plproxy
AS $$
  CLUSTER 'scangate';
  SPLIT digests, sources, seen_us;
  RUN ON scangate_partition_hash(digests);
$$;

-- One key's row as stored on its partition (no row: absent).
CREATE OR REPLACE FUNCTION scangate_lookup(d bytea)
RETURNS TABLE (digest bytea, first_seen_us int8, source text, keep_until_us int8)
LANGUAGE plproxy STRICT
AS $$
  CLUSTER 'scangate';
  RUN ON scangate_partition_hash(d);
$$;

-- One row per partition: its database name and its row count.
CREATE OR REPLACE FUNCTION scangate_count()
RETURNS TABLE (db text, keys int8)
LANGUAGE plproxy
AS $$
  CLUSTER 'scangate';
  RUN ON ALL;
$$;
