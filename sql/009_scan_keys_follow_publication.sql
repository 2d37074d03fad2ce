-- The follower (issue 32, storage/follow/follower.h): every scangate instance follows the digests committed to
-- scan_keys — by any instance, its own write-behind, a restore, a batch — by logical decoding (pgoutput over a
-- replication connection with a TEMPORARY slot), and sets them in its filter, so that a key new at one instance
-- is a duplicate at the others (--ack=filter). This publication is what the slot decodes: the digest column
-- alone (a column list: the other columns never leave the server), of inserts and of updates (a row past its
-- horizon taken over is a new observation); deletes (the expiry) are not followed: the filter forgets by window.
-- A publication costs nothing without a subscriber; it needs wal_level=logical only to be decoded (the
-- follower checks that at start and names the setting, README "Several instances behind a load balancer").
CREATE PUBLICATION scangate_follow FOR TABLE scan_keys (digest) WITH (publish = 'insert, update');
