-- bench/clock_step/statements.sh: with the clock epoch (sql/016) — new_clock.
SELECT (extract(epoch FROM clock_timestamp()) * 1000000)::int8, scangate_clock_epoch();
