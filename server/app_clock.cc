// App's PostgreSQL clocks (issue 42, item 4; storage/clock/pg_clock.h): one reader per database — one per partition
// with --partitions — read every second, so that the first_seen of the keys this instance answers new and the
// horizon of what it remembers follow PostgreSQL's clock, not this host's. Apart from app.cc, which owns start-up
// order.
#include <string>

#include "server/app.h"
#include "server/verdict/service.h"
#include "storage/partitions/partition_map.h"

namespace scangate::server {

void App::StartClocks() {
  const unsigned n = static_cast<unsigned>(store_->partitions());
  clocks_ = std::make_unique<storage::PgClocks>(n);
  {
    // Under the retarget listener's mutex, as the followers (app_follow.cc): a move after a string was read here is
    // retargeted by the listener once this publishes the readers.
    MutexLock lock(&followers_mu_);
    for (unsigned p = 0; p < n; ++p) {
      storage::PgClockReaderOptions o;
      o.conninfo = store_->conninfo(p);
      o.label = config_.partitioned() ? storage::PartitionLabel(p) : "";
      o.connection.tcp_user_timeout = store_options_.tcp_user_timeout;
      o.log = store_options_.log;
      clock_readers_.push_back(std::make_unique<storage::PgClockReader>(clocks_->at(p), std::move(o)));
    }
    clocks_retargetable_ = true;
  }
  // A partition whose first reading fails (it is down) decides its new keys in PostgreSQL until one succeeds.
  for (auto& r : clock_readers_) r->Start();
  store_->AttachClocks(*clocks_);  // the take-over's guard (sql/017)
}

void App::FillClockStats(MetricsSnapshot& s) const {
  if (clocks_ == nullptr) return;
  for (std::size_t p = 0; p < clocks_->size(); ++p) {
    const std::string label = config_.partitioned() ? storage::PartitionLabel(p) : "";
    s.pg_clock_steps.emplace_back(label, clocks_->at(p).steps());
    s.pg_clock_ahead_seconds.emplace_back(label, static_cast<double>(clocks_->at(p).AheadUs()) * 1e-6);
    s.pg_clock_behind_seconds.emplace_back(label, static_cast<double>(clocks_->at(p).BehindUs()) * 1e-6);
  }
}

void App::StopClocks() {
  {
    MutexLock lock(&followers_mu_);
    clocks_retargetable_ = false;
  }
  for (auto& r : clock_readers_) r->Stop();  // the clocks stay (the Service and the journal may still read them)
}

}  // namespace scangate::server
