-- bench/clock_step: the row the beat statements update (statements.sh).
INSERT INTO scangate_instances (instance_id, partition, state, covered_until, heartbeat_at, started_at, host, pid, uncommitted, incarnation, clock_epoch)
VALUES ('00000000-0000-4000-8000-000000000001', 0, 'running', now(), now(), now(), 'h', 1, 0, '00000000-0000-4000-8000-0000000000a1', scangate_clock_epoch())
ON CONFLICT DO NOTHING;
