-- With a horizon (--retention) rows are deleted all the time; their space must be reused, or the table grows
-- though it holds a bounded number of live rows. The default autovacuum trigger (20 % of the table dead)
-- lets a table at steady state carry a fifth of dead rows and its indexes their dead entries between
-- vacuums; 2 % keeps the table near its live size (bench/RESULTS.md "Issue 22: soak"). cost_delay 0: the
-- vacuum of this table is not throttled (a throttled one fell behind the deletes). Inserts trigger a vacuum
-- too (insert_scale_factor) so the visibility map stays current for index-only scans of the expiry.
ALTER TABLE scan_keys SET (
  autovacuum_vacuum_scale_factor = 0.02,
  autovacuum_vacuum_insert_scale_factor = 0.05,
  autovacuum_vacuum_cost_delay = 0
);
