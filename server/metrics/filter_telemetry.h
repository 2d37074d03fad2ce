// FilterTelemetry: the filter's per-shard figures (ShardedFilter::Stats(): fill and FP from a word sample,
// keys with the per-thread pending counts folded in), sampled by the server's 1 s maintenance timer and
// cached, so a scrape (/metrics, /stats, the dashboard's poll) copies a vector instead of scanning
// O(shards x 4096) words on an I/O thread. Invariant: a reader gets the latest complete sample and its age;
// the age stays below kRefreshPeriod plus one Stats() scan while the timer runs.
// Threading: Refresh() from one thread at a time (the maintenance timer); Latest() from any thread.
#pragma once

#include <chrono>
#include <memory>
#include <vector>

#include <absl/base/thread_annotations.h>

#include "core/filter.h"
#include "core/mutex.h"

namespace scangate::server {

class FilterTelemetry {
 public:
  // The maintenance timer's period (server/main.cc) and so the staleness bound of every sample.
  static constexpr std::chrono::seconds kRefreshPeriod{1};

  struct Sample {
    std::vector<ShardStats> shards;
    std::chrono::steady_clock::time_point taken;  // when Stats() returned
  };

  // Takes a first sample, so Latest() never returns null. `filter` must outlive this object.
  explicit FilterTelemetry(const ShardedFilter& filter);
  // Samples the filter now (O(shards x (kStatsSampleWords + threads))) and publishes the result.
  void Refresh();
  std::shared_ptr<const Sample> Latest() const;

 private:
  const ShardedFilter& filter_;
  mutable Mutex mu_;
  std::shared_ptr<const Sample> latest_ ABSL_GUARDED_BY(mu_);
};

}  // namespace scangate::server
