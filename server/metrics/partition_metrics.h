// Partition metrics (issue 23, --partitions): the state of every logical partition of the exact store — up or
// down, its write queue, what its writers recorded, its table's vital signs from its own expiry — for /metrics
// (`scangate_partition_*{partition="p3"}`), /stats ("partitions") and the dashboards. Invariant: one sample per
// partition, labelled by its index only (never its connection string, which may name hosts and users).
// Without --partitions the store is one partition and nothing partition-labelled is written.
// Use: App fills MetricsSnapshot::partitions through Service::AttachPartitions; RenderPrometheus and
// RenderStatsJson call these.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <boost/json/object.hpp>

#include "server/metrics/prom_writer.h"

namespace scangate::server {

struct MetricsSnapshot;

struct PartitionSample {
  std::string label;  // "p3"
  std::string where;  // host:port/dbname (storage::DescribeConninfo), for /stats only
  bool up = false;
  std::uint64_t queue_depth = 0;
  std::uint64_t inserted = 0, duplicates = 0, unavailable = 0;
  std::uint64_t batches = 0, batch_failures = 0;
  std::uint64_t in_doubt = 0;  // COMMITs whose answer was lost (every resolution)
  // Its table, from its expiry's last pass (empty before the first one).
  std::optional<std::int64_t> live_rows;
  std::optional<std::int64_t> table_bytes;
  std::optional<double> expiry_lag_seconds;
};

// Appends the scangate_partition_* families (nothing when the snapshot has fewer than two partitions).
void WritePartitionMetrics(PromWriter& w, const MetricsSnapshot& s);
// Adds "partitions" (an array, one object per partition) to a /stats object, when there are two or more.
void AddPartitionStats(boost::json::object& o, const MetricsSnapshot& s);

}  // namespace scangate::server
