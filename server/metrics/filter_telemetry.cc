#include "server/metrics/filter_telemetry.h"

namespace scangate::server {

FilterTelemetry::FilterTelemetry(const ShardedFilter& filter) : filter_(filter) { Refresh(); }

void FilterTelemetry::Refresh() {
  auto sample = std::make_shared<Sample>();
  sample->shards = filter_.Stats();  // the scan runs outside the lock: readers never wait for it
  sample->taken = std::chrono::steady_clock::now();
  const MutexLock lock(&mu_);
  latest_ = std::move(sample);
}

std::shared_ptr<const FilterTelemetry::Sample> FilterTelemetry::Latest() const {
  const MutexLock lock(&mu_);
  return latest_;
}

}  // namespace scangate::server
