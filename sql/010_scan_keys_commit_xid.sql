-- The polling follower (issue 32, --follow=poll, storage/follow/follower.h): every row carries the top-level
-- transaction id (xid8) of the transaction that inserted it — or took it over past its horizon — so that a
-- follower can read, every poll, exactly the rows whose transactions became visible since its previous snapshot
-- (pg_current_snapshot(); out-of-order commits included), through the index below.
-- Added without a rewrite: a nullable column without a default is a catalog change; the default then applies to
-- new rows only. Rows older than this migration keep NULL (the warm start and the follower's reload read them by
-- first_seen, not by this column), and the index leaves them out.
ALTER TABLE scan_keys ADD COLUMN commit_xid xid8;
ALTER TABLE scan_keys ALTER COLUMN commit_xid SET DEFAULT pg_current_xact_id();
-- One entry per row; all the rows of one write-behind batch share their transaction's xid, which B-tree
-- deduplication stores once per leaf page. Its cost on the write path: bench/RESULTS.md "Issue 32: logical
-- decoding or polling".
CREATE INDEX scan_keys_commit_xid ON scan_keys (commit_xid) WHERE commit_xid IS NOT NULL;
-- A take-over (ON CONFLICT DO UPDATE of an expired row: storage/pg/batch_statement.cc, sql/007's
-- scangate_observe) is a new observation that other instances must learn: it is stamped too. One trigger for
-- every update path, at the cost of the updates alone (inserts take the default; COPY keeps its multi-insert).
CREATE FUNCTION scangate_stamp_commit_xid() RETURNS trigger
LANGUAGE plpgsql
AS $$
BEGIN
  NEW.commit_xid := pg_current_xact_id();
  RETURN NEW;
END
$$;
CREATE TRIGGER scan_keys_stamp_commit_xid BEFORE UPDATE OF first_seen ON scan_keys
  FOR EACH ROW WHEN (OLD.first_seen IS DISTINCT FROM NEW.first_seen) EXECUTE FUNCTION scangate_stamp_commit_xid();
