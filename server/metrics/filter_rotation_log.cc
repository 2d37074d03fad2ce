#include "server/metrics/filter_rotation_log.h"

#include <chrono>
#include <cstdio>
#include <ctime>
#include <string>

#include "core/time_format.h"
#include "server/log.h"

namespace scangate::server {
namespace {

// A steady_clock deadline as an RFC 3339 UTC wall-clock time (via the current offset between the clocks).
std::string WallTime(std::chrono::steady_clock::time_point t) {
  using std::chrono::system_clock;
  const auto wall =
      system_clock::now() + std::chrono::duration_cast<system_clock::duration>(t - std::chrono::steady_clock::now());
  return Rfc3339Micros(wall);
}

}  // namespace

FilterRotationLog::FilterRotationLog(const ShardedFilter& filter) : filter_(filter) {
  const std::uint32_t shards = filter_.geometry().shards;
  seen_capacity_.resize(shards);
  for (std::uint32_t s = 0; s < shards; ++s) seen_capacity_[s] = filter_.RotationsOf(s).capacity;
}

void FilterRotationLog::Poll() {
  for (std::uint32_t s = 0; s < seen_capacity_.size(); ++s) {
    const ShardRotations r = filter_.RotationsOf(s);
    if (r.capacity == seen_capacity_[s]) continue;
    boost::json::object fields{{"shard", s},
                               {"cause", "capacity"},
                               {"rotations", r.capacity - seen_capacity_[s]},
                               {"capacity_rotations_total", r.capacity}};
    // null: the rotation cleared a generation that was never active (the shard's first), nothing forgotten.
    if (r.distrust_until == std::chrono::steady_clock::time_point{}) {
      fields["distrust_until"] = nullptr;
    } else {
      fields["distrust_until"] = WallTime(r.distrust_until);
    }
    Log(LogLevel::kWarn, "filter_rotation", std::move(fields));
    seen_capacity_[s] = r.capacity;
  }
}

}  // namespace scangate::server
