#include "server/metrics/partition_metrics.h"

#include <boost/json/array.hpp>

#include "server/metrics/metrics.h"

namespace scangate::server {
namespace {

std::string Label(const PartitionSample& p) { return "partition=\"" + p.label + "\""; }

}  // namespace

void WritePartitionMetrics(PromWriter& w, const MetricsSnapshot& s) {
  if (s.partitions.size() < 2) return;
  w.Header("scangate_partitions", "gauge", "Logical partitions of the exact store (--partitions).");
  w.Sample("scangate_partitions", "", std::uint64_t{s.partitions.size()});
  w.Header("scangate_partition_up", "gauge",
           "1 while every writer of the partition is connected and its last transaction succeeded; 0 = its keys "
           "get 503 (the other partitions are answered).");
  for (const auto& p : s.partitions) w.Sample("scangate_partition_up", Label(p), std::uint64_t{p.up ? 1u : 0u});
  w.Header("scangate_partition_queue_depth", "gauge", "Accepted, unfinished items of the partition's writers.");
  for (const auto& p : s.partitions) w.Sample("scangate_partition_queue_depth", Label(p), p.queue_depth);
  w.Header("scangate_partition_outcomes_total", "counter",
           "Outcomes the partition's writers delivered: inserted, duplicate, unavailable (kUnknown included).");
  for (const auto& p : s.partitions) {
    w.Sample("scangate_partition_outcomes_total", Label(p) + ",outcome=\"inserted\"", p.inserted);
    w.Sample("scangate_partition_outcomes_total", Label(p) + ",outcome=\"duplicate\"", p.duplicates);
    w.Sample("scangate_partition_outcomes_total", Label(p) + ",outcome=\"unavailable\"", p.unavailable);
  }
  w.Header("scangate_partition_batches_total", "counter", "Committed batch transactions of the partition.");
  for (const auto& p : s.partitions) w.Sample("scangate_partition_batches_total", Label(p), p.batches);
  w.Header("scangate_partition_batch_failures_total", "counter",
           "Failed batch transactions of the partition (each marks a writer down).");
  for (const auto& p : s.partitions) w.Sample("scangate_partition_batch_failures_total", Label(p), p.batch_failures);
  w.Header("scangate_partition_commit_in_doubt_total", "counter",
           "COMMITs of the partition whose answer was lost (settled by its own txid_status).");
  for (const auto& p : s.partitions) w.Sample("scangate_partition_commit_in_doubt_total", Label(p), p.in_doubt);
  bool any_rows = false, any_lag = false;
  for (const auto& p : s.partitions) {
    any_rows = any_rows || p.live_rows.has_value();
    any_lag = any_lag || p.expiry_lag_seconds.has_value();
  }
  if (any_rows) {
    w.Header("scangate_partition_live_rows", "gauge",
             "pg_stat_user_tables.n_live_tup of the partition's scan_keys at its expiry's last pass (an estimate).");
    for (const auto& p : s.partitions) {
      if (p.live_rows) w.Sample("scangate_partition_live_rows", Label(p), static_cast<std::uint64_t>(*p.live_rows));
    }
    w.Header("scangate_partition_table_bytes", "gauge", "pg_table_size('scan_keys') of the partition.");
    for (const auto& p : s.partitions) {
      if (p.table_bytes) {
        w.Sample("scangate_partition_table_bytes", Label(p), static_cast<std::uint64_t>(*p.table_bytes));
      }
    }
  }
  if (any_lag) {
    w.Header("scangate_partition_expiry_lag_seconds", "gauge",
             "How far the partition's oldest unpinned row is past the horizon (0 within it) at its expiry's last "
             "pass.");
    for (const auto& p : s.partitions) {
      if (p.expiry_lag_seconds) w.Sample("scangate_partition_expiry_lag_seconds", Label(p), *p.expiry_lag_seconds);
    }
  }
}

void AddPartitionStats(boost::json::object& o, const MetricsSnapshot& s) {
  if (s.partitions.size() < 2) return;
  boost::json::array a;
  for (const auto& p : s.partitions) {
    boost::json::object e{{"partition", p.label},
                          {"where", p.where},
                          {"up", p.up},
                          {"queue_depth", p.queue_depth},
                          {"inserted", p.inserted},
                          {"duplicates", p.duplicates},
                          {"unavailable", p.unavailable},
                          {"batches", p.batches},
                          {"batch_failures", p.batch_failures},
                          {"in_doubt", p.in_doubt}};
    if (p.live_rows) e["live_rows"] = *p.live_rows;
    if (p.table_bytes) e["table_bytes"] = *p.table_bytes;
    if (p.expiry_lag_seconds) e["expiry_lag_seconds"] = *p.expiry_lag_seconds;
    a.push_back(std::move(e));
  }
  o["partitions"] = std::move(a);
}

}  // namespace scangate::server
