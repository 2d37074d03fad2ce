// FilterRotationLog: reports the filter's capacity rotations in the log. core/ does not log, so the server
// polls the filter's per-shard rotation counters (ShardedFilter::RotationsOf) from its 1 s maintenance timer
// and writes one `filter_rotation` line per shard that rotated for capacity since the previous poll, with
// the number of such rotations and until when that shard's negatives are distrusted (core/filter.h, "Trust
// after a shortened window"). Capacity rotations mean --capacity is too small for the traffic
// (docs/operations.md "Sizing").
#pragma once

#include <cstdint>
#include <vector>

#include "core/filter.h"

namespace scangate::server {

class FilterRotationLog {
 public:
  // Takes the filter's current counts as the baseline. The filter must outlive this object.
  explicit FilterRotationLog(const ShardedFilter& filter);
  // Logs the capacity rotations since the last call. Threading: one thread at a time (the maintenance timer).
  void Poll();

 private:
  const ShardedFilter& filter_;
  std::vector<std::uint64_t> seen_capacity_;  // per shard: capacity rotations already logged
};

}  // namespace scangate::server
