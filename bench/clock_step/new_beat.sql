-- bench/clock_step/statements.sh: with the clock epoch (sql/016) — new_beat.
WITH e AS (SELECT scangate_clock_epoch() AS epoch)
UPDATE scangate_instances AS i
   SET covered_until = CASE
         WHEN 1::int8 IS DISTINCT FROM e.epoch OR now() < 'epoch'::timestamptz + 0::int8 * interval '1 microsecond'
           THEN 'epoch'::timestamptz
         WHEN i.clock_epoch IS DISTINCT FROM e.epoch
           THEN coalesce('epoch'::timestamptz + (extract(epoch FROM now()) * 1000000)::int8 * interval '1 microsecond', 'epoch'::timestamptz)
         ELSE greatest(i.covered_until, 'epoch'::timestamptz + (extract(epoch FROM now()) * 1000000)::int8 * interval '1 microsecond') END,
       clock_epoch = e.epoch, heartbeat_at = now(), uncommitted = 0
  FROM e
 WHERE i.instance_id = '00000000-0000-4000-8000-000000000001'::uuid AND i.partition = 0 AND i.state = 'running' AND i.incarnation = '00000000-0000-4000-8000-0000000000a1'::uuid
RETURNING (extract(epoch FROM now()) * 1000000)::int8, (extract(epoch FROM now() - i.covered_until) * 1000000)::int8, e.epoch;
