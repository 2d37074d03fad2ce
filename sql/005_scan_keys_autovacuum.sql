-- With a horizon (--retention) rows are deleted all the time; their space must be reused, or the table grows
-- though it holds a bounded number of live rows. Vacuum scan_keys once 2 % of it is dead (default 20 %) or
-- 2 % of it was inserted since the last vacuum (default 20 %), unthrottled (cost_delay 0; default 2 ms).
-- Measured at steady state (bench/RESULTS.md "Issue 22: expiry designs", R = 24 s, 12 k rows/s): table +
-- indexes flat within ±1 %, 0-25 k dead tuples (~2 s of inserts); with the defaults also flat but 16 % larger
-- and ~50 k dead tuples, for ~1 CPU-µs per row less (within that run's noise). Rows are small and the
-- table is bounded, so an unthrottled vacuum of it is short; a deployment whose disks cannot take that sets
-- its own autovacuum_vacuum_cost_delay on the table. Without a horizon nothing is deleted, and these
-- settings only make the (insert-driven) vacuums that keep the visibility map current more frequent.
ALTER TABLE scan_keys SET (
  autovacuum_vacuum_scale_factor = 0.02,
  autovacuum_vacuum_insert_scale_factor = 0.02,
  autovacuum_vacuum_cost_delay = 0
);
