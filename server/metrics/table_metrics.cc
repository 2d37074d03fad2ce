#include "server/metrics/table_metrics.h"

#include <cstdint>

namespace scangate::server {

namespace json = boost::json;

void WriteTableMetrics(PromWriter& w, const MetricsSnapshot& s) {
  w.Header("scangate_retention_seconds", "gauge",
           "The de-duplication horizon (--retention): records older than this count as absent. 0 = off.");
  w.Sample("scangate_retention_seconds", "", static_cast<std::uint64_t>(s.retention_seconds));
  if (s.expiry) {
    const storage::ExpiryStats& e = *s.expiry;
    w.Header("scangate_expiry_rows_total", "counter",
             "Rows of scan_keys older than the horizon deleted by this instance's expiry (storage/horizon/expiry.h).");
    w.Sample("scangate_expiry_rows_total", "", e.rows_expired);
    w.Header("scangate_expiry_pack_rows_total", "counter",
             "--keys=gs1: of scangate_expiry_rows_total, rows deleted past their own horizon (a pack's expiry month "
             "plus --expiry-grace).");
    w.Sample("scangate_expiry_pack_rows_total", "", e.rows_expired_keep_until);
    w.Header("scangate_expiry_passes_total", "counter", "Expiry passes completed (slices and vital signs).");
    w.Sample("scangate_expiry_passes_total", "", e.passes);
    w.Header("scangate_expiry_failures_total", "counter",
             "Expiry passes that failed (connection, timeout, any error); retried every pass, verdicts unaffected.");
    w.Sample("scangate_expiry_failures_total", "", e.failures);
    w.Header("scangate_expiry_behind_total", "counter",
             "Episodes of the oldest row older than 1.5x the horizon (each also logged as expiry_behind).");
    w.Sample("scangate_expiry_behind_total", "", e.behind_events);
    w.Header("scangate_expiry_behind", "gauge", "1 while the oldest row is older than 1.5x the horizon.");
    w.Sample("scangate_expiry_behind", "", std::uint64_t{e.behind ? 1u : 0u});
    w.Header("scangate_expiry_lag_seconds", "gauge",
             "How far the oldest row is past the horizon at the last pass (0 within it, or retention off).");
    w.Sample("scangate_expiry_lag_seconds", "", e.lag_seconds);
    if (e.earliest_keep_until_in_seconds) {
      w.Header("scangate_scan_keys_earliest_pack_horizon_seconds", "gauge",
               "--keys=gs1: seconds until the earliest own horizon (keep_until) of a row, at the last expiry pass; "
               "negative when overdue (absent while no row has one).");
      w.Sample("scangate_scan_keys_earliest_pack_horizon_seconds", "", *e.earliest_keep_until_in_seconds);
    }
    if (e.oldest_age_seconds) {
      w.Header("scangate_scan_keys_oldest_row_age_seconds", "gauge",
               "Age of the oldest row of scan_keys at the last expiry pass (absent while the table is empty).");
      w.Sample("scangate_scan_keys_oldest_row_age_seconds", "", *e.oldest_age_seconds);
    }
    if (e.table_bytes >= 0) {
      w.Header("scangate_scan_keys_table_bytes", "gauge", "pg_table_size('scan_keys') at the last expiry pass.");
      w.Sample("scangate_scan_keys_table_bytes", "", static_cast<std::uint64_t>(e.table_bytes));
      w.Header("scangate_scan_keys_index_bytes", "gauge", "pg_indexes_size('scan_keys') at the last expiry pass.");
      w.Sample("scangate_scan_keys_index_bytes", "", static_cast<std::uint64_t>(e.index_bytes));
      w.Header("scangate_scan_keys_dead_tuples", "gauge",
               "pg_stat_user_tables.n_dead_tup of scan_keys at the last expiry pass (an estimate).");
      w.Sample("scangate_scan_keys_dead_tuples", "", static_cast<std::uint64_t>(e.dead_tuples));
      w.Header("scangate_scan_keys_live_tuples", "gauge",
               "pg_stat_user_tables.n_live_tup of scan_keys at the last expiry pass (an estimate).");
      w.Sample("scangate_scan_keys_live_tuples", "", static_cast<std::uint64_t>(e.live_tuples));
    }
  }
  if (s.brin) {
    w.Header("scangate_brin_summarized_ranges_total", "counter",
             "Block ranges of the first_seen BRIN index summarized by scangate (storage/horizon/brin_summarizer.h).");
    w.Sample("scangate_brin_summarized_ranges_total", "", s.brin->ranges);
    w.Header("scangate_brin_summarize_failures_total", "counter",
             "BRIN summarize passes that failed (connection, lock timeout behind a VACUUM, any error).");
    w.Sample("scangate_brin_summarize_failures_total", "", s.brin->failures);
    w.Header("scangate_brin_summarize_stopped", "gauge",
             "1 when the BRIN summarizer gave up for good (not the index owner, or no such index).");
    w.Sample("scangate_brin_summarize_stopped", "", std::uint64_t{s.brin->stopped ? 1u : 0u});
  }
  if (s.epochs) {
    const storage::EpochSwitcherStats& e = *s.epochs;
    w.Header("scangate_epoch_switches_total", "counter",
             "Open epochs of the exact store this instance closed, opening the next (--epoch-keys, --epoch-max-age).");
    w.Sample("scangate_epoch_switches_total", "", e.switches);
    w.Header("scangate_epoch_switch_lock_timeouts_total", "counter",
             "Switch attempts that gave up at their lock_timeout (a reader or writer held scan_keys); retried.");
    w.Sample("scangate_epoch_switch_lock_timeouts_total", "", e.lock_timeouts);
    w.Header("scangate_epoch_closes_total", "counter",
             "Closing epochs this instance made compact and summarized (sql/020), swapped into the catalog.");
    w.Sample("scangate_epoch_closes_total", "", e.closes);
    w.Header("scangate_epoch_close_postponed_total", "counter",
             "Closes whose swap did not get its locks within lock_timeout (a reader held the closing epoch); retried.");
    w.Sample("scangate_epoch_close_postponed_total", "", e.closes_postponed);
    w.Header("scangate_epoch_merges_total", "counter",
             "Merges of two closed epochs into one of their rows that may still be live, made by this instance.");
    w.Sample("scangate_epoch_merges_total", "", e.merges);
    w.Header("scangate_epoch_drops_total", "counter",
             "Closed epochs this instance dropped whole, every row past the horizon (sql/020: no DELETE).");
    w.Sample("scangate_epoch_drops_total", "", e.drops);
    w.Header("scangate_epoch_dropped_keys_total", "counter", "Rows of the epochs this instance dropped.");
    w.Sample("scangate_epoch_dropped_keys_total", "", e.dropped_keys);
    w.Header("scangate_epoch_switcher_failures_total", "counter",
             "Epoch switcher passes that failed (connection, any error); retried every pass, verdicts unaffected.");
    w.Sample("scangate_epoch_switcher_failures_total", "", e.failures);
    if (e.open_keys >= 0) {
      w.Header("scangate_epoch_open_keys", "gauge",
               "Live rows of the open epoch at the switcher's last pass (PostgreSQL's count, seconds behind).");
      w.Sample("scangate_epoch_open_keys", "", static_cast<std::uint64_t>(e.open_keys));
      w.Header("scangate_epoch_open_age_seconds", "gauge", "Age of the open epoch at the switcher's last pass.");
      w.Sample("scangate_epoch_open_age_seconds", "", e.open_age_seconds);
      w.Header("scangate_epochs_not_open", "gauge",
               "Epochs of the exact store that are not open (closing or closed): each one a writer may look keys up "
               "in.");
      w.Sample("scangate_epochs_not_open", "", static_cast<std::uint64_t>(e.closed_epochs));
    }
  }
}

void AddTableStats(json::object& o, const MetricsSnapshot& s) {
  o["retention_seconds"] = s.retention_seconds;
  if (s.expiry) {
    const storage::ExpiryStats& e = *s.expiry;
    json::object x{{"rows_expired", e.rows_expired},
                   {"rows_expired_pack_horizon", e.rows_expired_keep_until},
                   {"passes", e.passes},
                   {"failures", e.failures},
                   {"behind", e.behind},
                   {"behind_events", e.behind_events},
                   {"lag_seconds", e.lag_seconds},
                   {"table_bytes", e.table_bytes},
                   {"index_bytes", e.index_bytes},
                   {"dead_tuples", e.dead_tuples},
                   {"live_tuples", e.live_tuples}};
    if (e.oldest_age_seconds) {
      x["oldest_row_age_seconds"] = *e.oldest_age_seconds;
    } else {
      x["oldest_row_age_seconds"] = nullptr;
    }
    if (e.earliest_keep_until_in_seconds) {
      x["earliest_pack_horizon_in_seconds"] = *e.earliest_keep_until_in_seconds;
    } else {
      x["earliest_pack_horizon_in_seconds"] = nullptr;
    }
    o["expiry"] = std::move(x);
  }
  if (s.brin) {
    o["brin"] = json::object{{"passes", s.brin->passes},
                             {"ranges", s.brin->ranges},
                             {"failures", s.brin->failures},
                             {"stopped", s.brin->stopped}};
  }
  if (s.epochs) {
    const storage::EpochSwitcherStats& e = *s.epochs;
    o["epochs"] = json::object{{"passes", e.passes},
                               {"failures", e.failures},
                               {"switches", e.switches},
                               {"lock_timeouts", e.lock_timeouts},
                               {"closes", e.closes},
                               {"closes_postponed", e.closes_postponed},
                               {"merges", e.merges},
                               {"merges_postponed", e.merges_postponed},
                               {"drops", e.drops},
                               {"dropped_keys", e.dropped_keys},
                               {"last_close_seconds", e.last_close_seconds},
                               {"open_keys", e.open_keys},
                               {"open_age_seconds", e.open_age_seconds},
                               {"not_open", e.closed_epochs},
                               {"last_switch_seconds", e.last_switch_seconds}};
  }
}

}  // namespace scangate::server
