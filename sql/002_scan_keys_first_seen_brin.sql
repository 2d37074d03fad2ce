-- Warm start reads `WHERE first_seen > now() - window`. first_seen is append-ordered (now() of the
-- inserting transaction), so a BRIN index (a few pages per GB of heap) lets that scan skip old blocks
-- at almost no insert cost, unlike a btree on first_seen. Measured figures: see storage/README.md.
CREATE INDEX scan_keys_first_seen_brin ON scan_keys USING brin (first_seen) WITH (pages_per_range = 32);
