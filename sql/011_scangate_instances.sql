-- The peers' commit watermark (issue 42, storage/peers/peer_view.h owns the argument): every --ack=filter instance
-- with a journal ("journal owner") keeps one row per database it writes to (per logical partition with
-- --partitions) saying, in PostgreSQL's clock, up to when every key it answered `new` from its journal is
-- committed (`covered_until`). Every other instance reads the rows of its database in the same snapshot as the
-- keys its follower applies (or, --ack=commit, before its inserts) and decides a key `new` only while every
-- running journal owner's `covered_until` is recent enough; otherwise the key waits or gets 503.
-- A tiny table updated every ~50 ms by each journal owner: fillfactor 50 keeps the updates HOT (no index entry
-- per update; the pages prune themselves).
CREATE TABLE scangate_instances (
  instance_id uuid NOT NULL,             -- the journal's `instance` file: a restart with the same journal is the same instance
  partition integer NOT NULL,            -- the logical partition (0 without --partitions)
  state text NOT NULL CHECK (state IN ('running', 'stopped', 'retired')),
  covered_until timestamptz NOT NULL,    -- every key the instance answered `new` before this is committed here
  heartbeat_at timestamptz NOT NULL,     -- now() of its last update
  started_at timestamptz NOT NULL,       -- now() of its registration by the running process
  host text,                             -- for operators: where it runs
  pid integer,
  uncommitted bigint NOT NULL DEFAULT 0, -- keys answered `new` and not yet committed, at heartbeat_at
  retired_at timestamptz,                -- set by scangate_retire_instance
  PRIMARY KEY (instance_id, partition)
) WITH (fillfactor = 50);

-- An operator's explicit decision that a journal owner is gone for good (its host lost with its journal): the
-- other instances stop waiting for it. What its journal held and PostgreSQL had not committed — at most
-- `uncommitted` keys answered `new` after `covered_until` — may then be answered `new` a second time: a counted,
-- logged loss window (README "Several instances", deploy/README.md). `scangate --retire-instance=<id>` calls it on
-- every database (partition) of the configuration. Returns the rows it retired.
CREATE FUNCTION scangate_retire_instance(id uuid)
RETURNS TABLE (partition integer, covered_until timestamptz, heartbeat_at timestamptz, uncommitted bigint)
LANGUAGE sql
AS $$
  UPDATE scangate_instances AS i SET state = 'retired', retired_at = now()
   WHERE i.instance_id = id AND i.state = 'running'
  RETURNING i.partition, i.covered_until, i.heartbeat_at, i.uncommitted
$$;
