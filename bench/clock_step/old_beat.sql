-- bench/clock_step/statements.sh: as on main before the clock epoch — old_beat.
UPDATE scangate_instances
   SET covered_until = greatest(covered_until, 'epoch'::timestamptz + (extract(epoch FROM now()) * 1000000)::int8 * interval '1 microsecond'),
       heartbeat_at = now(), uncommitted = 0
 WHERE instance_id = '00000000-0000-4000-8000-000000000001'::uuid AND partition = 0 AND state = 'running' AND incarnation = '00000000-0000-4000-8000-0000000000a1'::uuid
RETURNING (extract(epoch FROM now()) * 1000000)::int8, (extract(epoch FROM now() - covered_until) * 1000000)::int8;
