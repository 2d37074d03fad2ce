-- bench/clock_step/statements.sh: as on main before the clock epoch — old_clock.
SELECT (extract(epoch FROM clock_timestamp()) * 1000000)::int8;
