-- PostgreSQL's clock regime (issue 55; storage/peers/watermark_publisher.h "THE CLOCK EPOCH" owns the argument).
-- A journal owner's covered_until (sql/011) is a time of PostgreSQL's clock, and the other instances judge it
-- against their own statement's now(): both must be read off ONE continuous clock. A clock that steps — a restart
-- or a failover onto a host whose clock is behind or ahead, an NTP step, a VM resumed from suspend — starts a new
-- regime, and a covered_until written under the old one says nothing in the new one (60 s back: it claims a minute
-- of keys nobody committed). So the database numbers its regimes: `epoch` grows by one
--  - when the server that answers is not the one whose start opened the current epoch (pg_postmaster_start_time()
--    differs: a restart, a failover to a standby) — the first writer to notice opens the next one
--    (scangate_clock_epoch()), readers (scangate_clock_epoch_now()) see NULL until then: nothing current;
--  - when an instance sees PostgreSQL's now() outside what its boot clock allows since its last reading
--    (a step while the server runs): scangate_clock_step(seen).
-- Every row of scangate_instances says under which epoch its covered_until was computed (clock_epoch); a reader
-- trusts a row only while that is the current epoch: otherwise the peer covers nothing until it republishes.
CREATE TABLE scangate_clock (
  id int PRIMARY KEY DEFAULT 1 CHECK (id = 1),
  epoch bigint NOT NULL,
  postmaster_started_at timestamptz NOT NULL,  -- pg_postmaster_start_time() of the server that opened the epoch
  changed_at timestamptz NOT NULL DEFAULT now(),
  reason text NOT NULL                         -- why the epoch was opened: first | server started | clock stepped
);

-- NULL: a row written before this migration (never trusted by a reader of this version).
ALTER TABLE scangate_instances ADD COLUMN clock_epoch bigint;

-- The current epoch for a reader: NULL while the answering server's start has not opened an epoch yet. Reads only
-- (a follower's poll may run on a read-only transaction).
CREATE FUNCTION scangate_clock_epoch_now() RETURNS bigint
LANGUAGE sql STABLE
AS $$
  SELECT epoch FROM scangate_clock WHERE id = 1 AND postmaster_started_at = pg_postmaster_start_time()
$$;

-- The current epoch for a writer (a journal owner's publisher, an instance's clock reader): opens the next one
-- when the answering server started since the current one was opened. Concurrent callers open it once: the
-- conditional upsert serialises on the row, and the loser reads the winner's epoch (a fresh snapshot per statement:
-- VOLATILE, READ COMMITTED).
CREATE FUNCTION scangate_clock_epoch() RETURNS bigint
LANGUAGE plpgsql VOLATILE
AS $f$
DECLARE
  e bigint;
BEGIN
  SELECT c.epoch INTO e FROM scangate_clock c WHERE c.id = 1 AND c.postmaster_started_at = pg_postmaster_start_time();
  IF FOUND THEN RETURN e; END IF;
  INSERT INTO scangate_clock AS c (id, epoch, postmaster_started_at, reason)
  VALUES (1, 1, pg_postmaster_start_time(), 'first')
  ON CONFLICT (id) DO UPDATE
    SET epoch = c.epoch + 1, postmaster_started_at = excluded.postmaster_started_at, changed_at = now(),
        reason = 'server started'
    WHERE c.postmaster_started_at IS DISTINCT FROM excluded.postmaster_started_at
  RETURNING c.epoch INTO e;
  IF e IS NULL THEN
    SELECT c.epoch INTO e FROM scangate_clock c WHERE c.id = 1;
  END IF;
  RETURN e;
END
$f$;

-- An instance saw the clock step while the server ran: opens the next epoch, unless another instance already did
-- since `seen` (then that one is current). Returns the current epoch.
CREATE FUNCTION scangate_clock_step(seen bigint) RETURNS bigint
LANGUAGE plpgsql VOLATILE
AS $f$
BEGIN
  UPDATE scangate_clock SET epoch = epoch + 1, changed_at = now(), reason = 'clock stepped'
   WHERE id = 1 AND epoch = seen AND postmaster_started_at = pg_postmaster_start_time();
  RETURN scangate_clock_epoch();
END
$f$;
